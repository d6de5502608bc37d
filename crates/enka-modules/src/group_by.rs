//! `group_by`: puts the host in a group named by `key` (made if new, a
//! child of `parents`). The module only names the group; the engine
//! changes the inventory, as Ansible's strategy does, and decides whether
//! that changed anything.

use minijinja::Value;

use super::{Args, Output};
use crate::catalogue;

pub fn run(args: &Args<'_>) -> Result<Output, crate::ModuleError> {
    let Some(key) = args.get("key") else {
        return Ok(Output::changed(false)
            .with("failed", true)
            .with("msg", "the 'key' param is required when using group_by"));
    };
    // Spaces cannot be in group names (ActionModule of group_by).
    let group = enka_template::pyrepr::to_text(&key).replace(' ', "-");
    let parents: Vec<Value> = match args.get("parents") {
        None => vec![Value::from("all")],
        Some(_) => args
            .list("parents")?
            .iter()
            .map(|p| Value::from(enka_template::pyrepr::to_text(p).replace(' ', "-")))
            .collect(),
    };
    Ok(Output::changed(false)
        .with("add_group", group)
        .with("parent_groups", Value::from(parents)))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "group_by",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &["key", "parents"],
    any_args: false,
    free_form: catalogue::FreeForm::KeyValue,
    requires: &[],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(|args, _| run(args)),
};
