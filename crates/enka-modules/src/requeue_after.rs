//! `operator_sdk.util.requeue_after`: reconcile this object again later.

use super::{Args, Control, Output};
use enka_template::time::parse_duration;

pub fn run(args: &Args<'_>) -> Result<Output, String> {
    let text = args.required_str("time")?;
    let after = parse_duration(&text).ok_or_else(|| {
        format!("requeue_after: invalid duration {text:?} (use Go syntax such as 1s, 500ms, 1m)")
    })?;
    let mut output = Output::changed(false).with("requeue_after", text);
    output.control = Some(Control::Requeue(after));
    Ok(output)
}
