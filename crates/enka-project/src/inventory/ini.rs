//! The `ini` inventory plugin: `[group]` sections of host lines (a host
//! pattern, then `key=value` words split as a POSIX shell splits them),
//! `[group:vars]` of `key=value` lines, `[group:children]` of group names;
//! values read as Python literals where they are one.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::data::{Data, Declined};
use super::host_list::expand_hostpattern;

/// A group named before it was declared, and by whom.
struct Pending {
    vars_only: bool,
    parents: Vec<String>,
}

pub(super) fn read(data: &mut Data, text: &str) -> Result<(), Declined> {
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut group = "ungrouped".to_owned();
    let mut state = "hosts".to_owned();
    for line in text.lines() {
        let line = line.trim_matches(super::host_list::is_python_space);
        if line.is_empty() || line.starts_with([';', '#']) {
            continue;
        }
        if let Some((name, kind)) = section(line) {
            (group, state) = (name.to_owned(), kind.unwrap_or("hosts").to_owned());
            if !matches!(state.as_str(), "hosts" | "children" | "vars") {
                return Err(Declined);
            }
            if !data.groups.contains_key(&group) {
                if state == "vars" && !pending.contains_key(&group) {
                    pending.insert(
                        group.clone(),
                        Pending {
                            vars_only: true,
                            parents: Vec::new(),
                        },
                    );
                }
                data.add_group(&group);
            }
            if state != "vars" {
                match pending.get(&group).map(|p| p.vars_only) {
                    Some(false) => add_pending_children(data, &group, &mut pending)?,
                    Some(true) => {
                        pending.remove(&group);
                    }
                    None => {}
                }
            }
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            return Err(Declined);
        }
        match state.as_str() {
            "hosts" => host_line(data, &group, line)?,
            "vars" => {
                let (key, value) = line.split_once('=').ok_or(Declined)?;
                data.set_group_variable(&group, key.trim(), parse_value(value.trim()))?;
            }
            _ => {
                let child = group_name(line).ok_or(Declined)?;
                if data.groups.contains_key(child) {
                    data.add_child(&group, child)?;
                } else {
                    pending
                        .entry(child.to_owned())
                        .or_insert(Pending {
                            vars_only: false,
                            parents: Vec::new(),
                        })
                        .parents
                        .push(group.clone());
                }
            }
        }
    }
    // A group named under `:children` or `:vars` but never declared.
    match pending.is_empty() {
        true => Ok(()),
        false => Err(Declined),
    }
}

fn add_pending_children(
    data: &mut Data,
    group: &str,
    pending: &mut HashMap<String, Pending>,
) -> Result<(), Declined> {
    let parents = pending
        .get(group)
        .map(|p| p.parents.clone())
        .unwrap_or_default();
    for parent in parents {
        data.add_child(&parent, group)?;
        if pending.get(&parent).is_some_and(|p| !p.vars_only) {
            add_pending_children(data, &parent, pending)?;
        }
    }
    pending.remove(group);
    Ok(())
}

/// `[name]` or `[name:kind]`, with trailing space and a `#` comment.
fn section(line: &str) -> Option<(&str, Option<&str>)> {
    let rest = line.strip_prefix('[')?;
    let close = rest.find(']')?;
    let after = rest[close + 1..].trim_start();
    if !(after.is_empty() || after.starts_with('#')) {
        return None;
    }
    let inside = &rest[..close];
    let (name, kind) = match inside.split_once(':') {
        Some((name, kind)) => (name, Some(kind)),
        None => (inside, None),
    };
    let name_ok =
        !name.is_empty() && !name.contains(|c: char| c == ':' || c == ']' || c.is_whitespace());
    let kind_ok =
        kind.is_none_or(|k| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_'));
    (name_ok && kind_ok).then_some((name, kind))
}

/// A group name on a `:children` line.
fn group_name(line: &str) -> Option<&str> {
    let end = line
        .find(|c: char| c == ':' || c == ']' || c.is_whitespace())
        .unwrap_or(line.len());
    let (name, after) = line.split_at(end);
    let after = after.trim_start();
    (!name.is_empty() && (after.is_empty() || after.starts_with('#'))).then_some(name)
}

/// A host line: its pattern, then `key=value` words.
fn host_line(data: &mut Data, group: &str, line: &str) -> Result<(), Declined> {
    let tokens = enka_template::pyshlex::split(line, true).map_err(|_| Declined)?;
    let pattern = tokens.first().ok_or(Declined)?;
    let (hosts, port) = expand_hostpattern(pattern)?;
    if pattern.trim().ends_with(':') && port.is_none() || hosts.iter().any(|h| h.trim() == "---") {
        return Err(Declined);
    }
    let mut variables: Vec<(String, Json)> = Vec::new();
    for token in &tokens[1..] {
        let (key, value) = token.split_once('=').ok_or(Declined)?;
        match variables.iter_mut().find(|(k, _)| k == key) {
            Some(found) => found.1 = parse_value(value),
            None => variables.push((key.to_owned(), parse_value(value))),
        }
    }
    for host in hosts {
        data.add_host(&host, Some(group), port);
        for (key, value) in &variables {
            data.set_host_variable(&host, key, value.clone())?;
        }
    }
    Ok(())
}

/// `_parse_value`: a Python literal's value, else the text itself.
fn parse_value(text: &str) -> Json {
    enka_template::pyliteral::python_literal_eval(text)
        .and_then(|value| enka_template::convert::to_json(&value).ok())
        .unwrap_or_else(|| Json::String(text.to_owned()))
}
