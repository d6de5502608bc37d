//! `meta`: play control (`end_play`, `end_host`, `noop`, …).

use super::{Args, Control, Output};

pub fn run(args: &Args<'_>) -> Result<Output, String> {
    let action = args.required_str("_raw_params")?;
    let control = match action.trim() {
        "end_play" => Some(Control::EndPlay),
        "end_host" | "end_batch" => Some(Control::EndHost),
        "clear_facts" => Some(Control::ClearFacts),
        "flush_handlers" => Some(Control::FlushHandlers),
        "clear_host_errors" => Some(Control::ClearHostErrors),
        "end_role" => Some(Control::EndRole),
        "noop" | "refresh_inventory" | "reset_connection" => None,
        other => return Err(format!("invalid meta action requested: {other}")),
    };
    let mut output = Output::changed(false);
    output.control = control;
    Ok(output)
}
