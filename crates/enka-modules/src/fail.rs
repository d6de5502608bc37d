//! `fail`: fails the task with a message.

use minijinja::Value;

use super::{Args, Output};
use crate::catalogue;

pub fn run(args: &Args<'_>) -> Result<Output, crate::ModuleError> {
    let msg = args
        .get("msg")
        .unwrap_or(Value::from("Failed as requested from task"));
    Ok(Output::changed(false).with("failed", true).with("msg", msg))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "fail",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &["msg"],
    any_args: false,
    free_form: catalogue::FreeForm::KeyValue,
    requires: &[],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(|args, _| run(args)),
};
