//! `operator_sdk.util.requeue_after`: reconcile this object again later.

use super::{Args, Control, Output};
use crate::catalogue;
use enka_template::time::parse_duration;

pub fn run(args: &Args<'_>) -> Result<Output, crate::ModuleError> {
    let text = args.required_str("time")?;
    let after = parse_duration(&text).ok_or_else(|| {
        format!("requeue_after: invalid duration {text:?} (use Go syntax such as 1s, 500ms, 1m)")
    })?;
    let mut output = Output::changed(false).with("requeue_after", text);
    output.control = Some(Control::Requeue(after));
    Ok(output)
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "requeue_after",
    aliases: &[],
    collections: catalogue::OPERATOR_SDK,
    params: &["time"],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[catalogue::Requirement::OneOf(&["time"])],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(|args, _| run(args)),
};
