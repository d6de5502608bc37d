//! The `yaml` inventory plugin: each top-level key a group, each group a
//! mapping of `hosts` (patterns with their variables), `vars` and
//! `children` (groups in turn). What Ansible only warns of and skips is
//! left to Ansible, so its warning is printed.

use serde_json::{Map, Value as Json};

use super::data::{Data, Declined};
use super::host_list::expand_hostpattern;

/// What the text is to the plugin.
pub(super) enum Parsed {
    /// An inventory, read into the data.
    Read,
    /// Not one for this plugin (not YAML, empty, not a mapping, a plugin's
    /// configuration): Ansible tries the next plugin, with the data as it
    /// was.
    NotYaml,
}

pub(super) fn read(data: &mut Data, text: &str) -> Result<Parsed, Declined> {
    let Ok(Some(node)) = enka_yaml::load_one(text) else {
        return Ok(Parsed::NotYaml);
    };
    if !node.tagged_strings("vault").is_empty() {
        return Err(Declined);
    }
    let Json::Object(groups) = node.to_json() else {
        return Ok(Parsed::NotYaml);
    };
    if groups.is_empty() || groups.get("plugin").is_some_and(is_truthy) {
        return Ok(Parsed::NotYaml);
    }
    for (name, group) in &groups {
        read_group(data, name, group)?;
    }
    Ok(Parsed::Read)
}

fn read_group(data: &mut Data, name: &str, group: &Json) -> Result<(), Declined> {
    let group = match group {
        Json::Null => {
            data.add_group(name);
            return Ok(());
        }
        Json::Object(group) => group,
        _ => return Err(Declined),
    };
    data.add_group(name);
    for (key, section) in group {
        let section = match section {
            Json::Null => continue,
            // A string stands for a mapping of it to nothing.
            Json::String(one) => &Map::from_iter([(one.clone(), Json::Null)]),
            Json::Object(section) => section,
            _ => return Err(Declined),
        };
        match key.as_str() {
            "vars" => {
                for (var, value) in section {
                    data.set_group_variable(name, var, value.clone())?;
                }
            }
            "children" => {
                for (child, body) in section {
                    read_group(data, child, body)?;
                    data.add_child(name, child)?;
                }
            }
            "hosts" => {
                for (pattern, vars) in section {
                    let (hosts, port) = expand_hostpattern(pattern)?;
                    let vars = match vars {
                        Json::Null => Map::new(),
                        Json::Object(vars) => vars.clone(),
                        _ => return Err(Declined),
                    };
                    for host in hosts {
                        data.add_host(&host, Some(name), port);
                        for (var, value) in &vars {
                            data.set_host_variable(&host, var, value.clone())?;
                        }
                    }
                }
            }
            _ => return Err(Declined),
        }
    }
    Ok(())
}

fn is_truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}
