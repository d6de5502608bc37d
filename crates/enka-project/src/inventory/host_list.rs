//! Inventories enka reads itself: host lists (`-i localhost,`,
//! `-i web1,db:5432`), and no inventory at all, read as ansible-core's
//! `host_list` plugin and `InventoryManager` read them, so a play over the
//! hosts the command line names starts no Python.
//!
//! The answer has the shape of the worker's `inventory` answer (what
//! `role::inventory_from_answer` reads): one reader of both. Anything else
//! (a file or a directory, a source Ansible cannot parse, the playbook's
//! `group_vars/` and `host_vars/`, a setting that changes which plugins
//! load inventories or their variables) is Ansible's to read: the reader
//! declines, and the worker loads it.

use std::path::Path;

use indexmap::IndexMap;
use serde_json::{Map, Value as Json, json};

/// Ansible's `C.LOCALHOST`: names that are the controller.
const LOCALHOST: [&str; 3] = ["127.0.0.1", "localhost", "::1"];

/// What Ansible reads when no source is named and no setting names one.
const DEFAULT_SOURCE: &str = "/etc/ansible/hosts";

/// Settings (in `ansible.cfg`, or their environment variables) that change
/// which plugins read an inventory or add variables to it.
const SETTINGS: [&str; 5] = [
    "enable_plugins",
    "vars_plugins_enabled",
    "vars_plugins",
    "inventory",
    "hostfile",
];
const SETTING_VARIABLES: [&str; 5] = [
    "ANSIBLE_INVENTORY_ENABLED",
    "ANSIBLE_VARS_ENABLED",
    "ANSIBLE_VARS_PLUGINS",
    "ANSIBLE_INVENTORY",
    "ANSIBLE_HOSTS",
];

/// Where the inventory is read from, and what it must know.
pub struct Sources<'a> {
    /// The `-i` sources as given.
    pub sources: &'a [String],
    /// The first playbook's directory, whose `group_vars/` and
    /// `host_vars/` apply.
    pub basedir: Option<&'a Path>,
    /// The project's directory: Ansible's working directory, where it
    /// finds `ansible.cfg`.
    pub project_dir: &'a Path,
    /// Directories whose `vars_plugins/` Ansible would load.
    pub plugin_dirs: &'a [std::path::PathBuf],
    /// The controller's Python: the implicit localhost's interpreter.
    pub python: &'a str,
}

/// The inventory as the worker's `inventory` answer has it, when enka can
/// read every source as Ansible does; `None` leaves it to Ansible.
pub fn read(sources: &Sources<'_>) -> Option<Json> {
    if settings_apply(sources.project_dir)
        || has_vars_directories(sources.basedir)
        || sources
            .plugin_dirs
            .iter()
            .any(|dir| dir.join("vars_plugins").is_dir())
    {
        return None;
    }
    let named: Vec<String> = match sources.sources {
        [] if Path::new(DEFAULT_SOURCE).exists() => return None,
        [] => vec![DEFAULT_SOURCE.to_owned()],
        named => named.to_vec(),
    };
    let mut hosts: IndexMap<String, Map<String, Json>> = IndexMap::new();
    for source in sources.sources {
        // Relative to Ansible's working directory, the project's.
        if sources.project_dir.join(source).exists() || !source.contains(',') {
            return None;
        }
        add_host_list(&mut hosts, source);
    }
    Some(answer(hosts, named, sources.python))
}

/// Whether the configuration Ansible reads sets anything that changes how
/// it loads an inventory.
fn settings_apply(project_dir: &Path) -> bool {
    SETTING_VARIABLES
        .iter()
        .any(|name| std::env::var_os(name).is_some())
        || crate::ansible_config::text(project_dir).is_some_and(|text| {
            text.lines().any(|line| {
                let key = line.split(['=', ':']).next().unwrap_or_default().trim();
                line.contains(['=', ':']) && SETTINGS.contains(&key)
            })
        })
}

fn has_vars_directories(basedir: Option<&Path>) -> bool {
    basedir.is_some_and(|dir| dir.join("group_vars").exists() || dir.join("host_vars").exists())
}

/// The `host_list` plugin: each comma-separated entry is a host with an
/// optional port; one Ansible cannot parse is a host named as written.
fn add_host_list(hosts: &mut IndexMap<String, Map<String, Json>>, source: &str) {
    for entry in source.split(',') {
        let entry = entry.trim_matches(is_python_space);
        if entry.is_empty() {
            continue;
        }
        let (name, port) = parse_address(entry).unwrap_or((entry, None));
        if hosts.contains_key(name) {
            continue;
        }
        let mut vars = Map::new();
        // `Host(name, port)` sets the port when it is not 0.
        if let Some(port) = port.filter(|p| *p != 0) {
            vars.insert("ansible_port".into(), json!(port));
        }
        vars.insert("inventory_file".into(), json!(source));
        // `basedir()` of a source that is not a path: Python's `None`, as text.
        vars.insert("inventory_dir".into(), json!("None"));
        hosts.insert(name.to_owned(), vars);
    }
}

fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Ansible's `parse_address` without ranges: the host and its port, or
/// `None` where Ansible raises (the `host_list` plugin then keeps the entry
/// as written).
fn parse_address(address: &str) -> Option<(&str, Option<u64>)> {
    let mut host = address;
    let mut port = None;
    // Both patterns apply in turn, as Ansible's loop does not stop at the
    // first: `[a:1]:22` is host `a`, port 1.
    if let Some((inner, number)) = bracketed_hostport(host) {
        (host, port) = (inner, Some(number));
    }
    if let Some((inner, number)) = hostport(host) {
        (host, port) = (inner, Some(number));
    }
    let valid = is_hostname(host) || host.parse::<std::net::Ipv6Addr>().is_ok();
    (valid && !host.contains('[')).then_some((host, port))
}

fn port_number(text: &str) -> Option<u64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `[host]:port`.
fn bracketed_hostport(address: &str) -> Option<(&str, u64)> {
    let rest = address.strip_prefix('[')?;
    let (inner, port) = rest.rsplit_once("]:")?;
    (!inner.is_empty()).then_some(())?;
    Some((inner, port_number(port)?))
}

/// `host:port`, where the host has no `:` outside a bracketed range.
fn hostport(address: &str) -> Option<(&str, u64)> {
    let (host, port) = address.rsplit_once(':')?;
    let port = port_number(port)?;
    let mut depth_open = false;
    for c in host.chars() {
        match c {
            '[' if !depth_open => depth_open = true,
            ']' if depth_open => depth_open = false,
            ':' | '[' | ']' if !depth_open => return None,
            ']' => return None,
            _ => {}
        }
    }
    (!depth_open).then_some((host, port))
}

/// Ansible's hostname pattern (without ranges): dot-separated labels of
/// word characters and `-`, each starting with a word character and not
/// ending with `-` or `_`.
fn is_hostname(name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    name.split('.').all(|label| {
        let mut chars = label.chars();
        chars.next().is_some_and(word)
            && label.chars().all(|c| word(c) || c == '-')
            && !label.ends_with(['-', '_'])
    })
}

/// The worker's answer for `hosts`, each in `ungrouped` and `all`, with
/// the implicit localhost when no host is the controller.
fn answer(hosts: IndexMap<String, Map<String, Json>>, sources: Vec<String>, python: &str) -> Json {
    let names: Vec<&String> = hosts.keys().collect();
    let mut listed = Map::new();
    for (name, vars) in &hosts {
        listed.insert(
            name.clone(),
            json!({"vars": vars, "own": vars, "groups": [], "implicit": false}),
        );
    }
    if !names.iter().any(|name| LOCALHOST.contains(&name.as_str())) {
        let vars = json!({"ansible_connection": "local", "ansible_python_interpreter": python});
        listed.insert(
            "localhost".into(),
            json!({"vars": vars, "own": vars, "groups": [], "implicit": true}),
        );
    }
    let no_vars = json!({"inventory": {}, "plugins": {}});
    json!({
        "groups": {"all": names, "ungrouped": names},
        "group_parents": {"all": [], "ungrouped": ["all"]},
        "hosts": listed,
        "group_sort": {"all": [0, 1], "ungrouped": [1, 1]},
        "group_vars": {"all": no_vars, "ungrouped": no_vars},
        "orphan_host_vars": {},
        "sources": sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_as_ansible_splits_them() {
        assert_eq!(parse_address("db:5432"), Some(("db", Some(5432))));
        assert_eq!(parse_address("[::1]:22"), Some(("::1", Some(22))));
        assert_eq!(parse_address("::1"), Some(("::1", None)));
        assert_eq!(parse_address("[a:1]:22"), Some(("a", Some(1))));
        assert_eq!(parse_address("a-:22"), None);
        assert_eq!(parse_address("web[1:2]"), None);
        assert_eq!(parse_address(":22"), None);
    }
}
