//! `meta`: play control (`end_play`, `end_host`, `noop`, …).
//!
//! Ansible's strategy runs meta tasks itself (`_execute_meta`): their
//! `when` decides what the action does rather than skipping a module, and
//! what they report (`msg`, or `skip_reason` when the condition was false)
//! names the action and the host; [`report`] gives that text.

use super::{Args, Control, Output};
use crate::catalogue;

pub fn run(args: &Args<'_>) -> Result<Output, crate::ModuleError> {
    let action = args.required_str("_raw_params")?;
    let control = match action.trim() {
        "end_play" => Some(Control::EndPlay),
        "end_host" | "end_batch" => Some(Control::EndHost),
        "clear_facts" => Some(Control::ClearFacts),
        "flush_handlers" => Some(Control::FlushHandlers),
        "clear_host_errors" => Some(Control::ClearHostErrors),
        "end_role" => Some(Control::EndRole),
        "noop" | "refresh_inventory" | "reset_connection" => None,
        other => return Err(format!("invalid meta action requested: {other}").into()),
    };
    let mut output = Output::changed(false);
    output.control = control;
    Ok(output)
}

/// Whether the action heeds `when` (Ansible warns and runs the others).
pub fn heeds_when(action: &str) -> bool {
    !matches!(
        action.trim(),
        "noop" | "refresh_inventory" | "reset_connection"
    )
}

/// Whether the linear strategy runs the action once for the whole batch
/// (it acts on the play) rather than host by host.
pub fn runs_once_for_batch(action: &str) -> bool {
    !matches!(
        action.trim(),
        "noop" | "reset_connection" | "end_host" | "role_complete" | "flush_handlers" | "end_role"
    )
}

/// What a meta task reports on `host`: its `msg`, and its `skip_reason`
/// when its condition was false (`ran` is false), as ansible-core 2.18's
/// strategy words them.
pub fn report(action: &str, host: &str, role: Option<&str>, ran: bool) -> (String, Option<String>) {
    let action = action.trim();
    let role = role.unwrap_or_default();
    if ran {
        let msg = match action {
            "flush_handlers" => format!("triggered running handlers for {host}"),
            "refresh_inventory" => "inventory successfully refreshed".to_owned(),
            "clear_facts" => "facts cleared".to_owned(),
            "clear_host_errors" => "cleared host errors".to_owned(),
            "end_batch" => "ending batch".to_owned(),
            "end_play" => "ending play".to_owned(),
            "end_host" => format!("ending play for {host}"),
            "end_role" => format!("ending role {role} for {host}"),
            "reset_connection" => "reset connection".to_owned(),
            other => other.to_owned(),
        };
        return (msg, None);
    }
    let condition = format!("{action} conditional evaluated to False");
    let skip_reason = match action {
        "flush_handlers" => format!("{condition}, not running handlers for {host}"),
        "clear_facts" => format!("{condition}, not clearing facts and fact cache for {host}"),
        "clear_host_errors" => format!("{condition}, not clearing host error state for {host}"),
        "end_batch" => format!("{condition}, continuing current batch"),
        "end_play" => format!("{condition}, continuing play"),
        "end_host" => format!("{condition}, continuing execution for {host}"),
        // ansible-core 2.18 joins these without a separator.
        "end_role" => format!("{condition}continuing role {role} for {host}"),
        _ => condition,
    };
    let msg = match action {
        "end_host" => {
            format!("end_host conditional evaluated to false, continuing execution for {host}")
        }
        other => other.to_owned(),
    };
    (msg, Some(skip_reason))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "meta",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &["_raw_params"],
    any_args: false,
    free_form: catalogue::FreeForm::Raw,
    requires: &[catalogue::Requirement::OneOf(&["_raw_params"])],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(|args, _| run(args)),
};

#[cfg(test)]
mod tests {
    use super::report;

    #[test]
    fn reports_name_the_action_and_the_host() {
        assert_eq!(
            report("end_host", "web1", None, true),
            ("ending play for web1".to_owned(), None)
        );
        assert_eq!(
            report("end_host", "web1", None, false).1.as_deref(),
            Some("end_host conditional evaluated to False, continuing execution for web1")
        );
        assert_eq!(
            report("end_play", "web1", None, false).1.as_deref(),
            Some("end_play conditional evaluated to False, continuing play")
        );
        assert_eq!(report("noop", "web1", None, true).0, "noop");
    }
}
