//! `group_by`: puts the host in a group named by `key` (made if new, a
//! child of `parents`). The module only names the group; the engine
//! changes the inventory, as Ansible's strategy does, and decides whether
//! that changed anything.

use minijinja::Value;

use super::{Args, Output};

pub fn run(args: &Args<'_>) -> Result<Output, String> {
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
