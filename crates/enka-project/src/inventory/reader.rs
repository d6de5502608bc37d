//! Inventories enka reads itself, as ansible-core's `InventoryManager`
//! and its plugins read them: host lists (`-i localhost,`), INI and YAML
//! files, no inventory at all, with `group_vars/` and `host_vars/` beside
//! the sources and the playbook. A play over them starts no Python.
//!
//! The answer has the shape of the worker's `inventory` answer (what
//! `role::inventory_from_answer` reads), so one reader takes both.
//! Anything else (a directory, a script or a plugin's configuration, a
//! source Ansible cannot parse or only warns of, Vault data, a setting
//! that changes which plugins load an inventory or its variables) is
//! Ansible's to read: the reader declines, and the worker loads it.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value as Json, json};

use super::data::{Data, Declined};
use super::vars_dirs::{Entity, VarsDirs, combine};

/// What Ansible reads when no source is named and no setting names one.
const DEFAULT_SOURCE: &str = "/etc/ansible/hosts";

/// Settings (in `ansible.cfg`, and their environment variables) that
/// change which plugins read an inventory or add variables to it.
const SETTINGS: [(&str, &str); 9] = [
    ("enable_plugins", "ANSIBLE_INVENTORY_ENABLED"),
    ("ignore_extensions", "ANSIBLE_INVENTORY_IGNORE"),
    ("ignore_patterns", "ANSIBLE_INVENTORY_IGNORE_REGEX"),
    ("vars_plugins_enabled", "ANSIBLE_VARS_ENABLED"),
    ("vars_plugins", "ANSIBLE_VARS_PLUGINS"),
    ("precedence", "ANSIBLE_PRECEDENCE"),
    ("hash_behaviour", "ANSIBLE_HASH_BEHAVIOUR"),
    ("yaml_valid_extensions", "ANSIBLE_YAML_FILENAME_EXT"),
    (
        "force_valid_group_names",
        "ANSIBLE_TRANSFORM_INVALID_GROUP_CHARS",
    ),
];

/// Settings that name the sources when `-i` names none.
const SOURCE_SETTINGS: [(&str, &str); 2] = [
    ("inventory", "ANSIBLE_INVENTORY"),
    ("hostfile", "ANSIBLE_HOSTS"),
];

/// Names the worker's answer leaves out of a host's variables.
const MAGIC: [&str; 3] = [
    "inventory_hostname",
    "inventory_hostname_short",
    "group_names",
];

/// Where the inventory is read from, and what it must know.
pub struct Sources<'a> {
    /// The `-i` sources as given.
    pub sources: &'a [String],
    /// The first playbook's directory, whose `group_vars/` and
    /// `host_vars/` apply.
    pub basedir: Option<&'a Path>,
    /// The project's directory: Ansible's working directory, where it
    /// finds `ansible.cfg` and relative sources.
    pub project_dir: &'a Path,
    /// Directories whose `vars_plugins/` Ansible would load.
    pub plugin_dirs: &'a [PathBuf],
    /// The controller's Python: the implicit localhost's interpreter.
    pub python: &'a str,
}

/// The inventory as the worker's `inventory` answer has it, when enka can
/// read every source as Ansible does; `None` leaves it to Ansible.
pub fn read(sources: &Sources<'_>) -> Option<Json> {
    if any_set(sources.project_dir, &SETTINGS)
        || (sources.sources.is_empty() && any_set(sources.project_dir, &SOURCE_SETTINGS))
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
    let mut data = Data::new();
    let mut source_dirs = Vec::new();
    for source in sources.sources {
        if source.contains(',') && !sources.project_dir.join(source).exists() {
            data.current_source = Some(source.clone());
            super::host_list::read(&mut data, source);
            continue;
        }
        let path = unfrack(sources.project_dir, source);
        if path.is_dir() {
            read_directory(&mut data, &path).ok()?;
            source_dirs.push(path);
            continue;
        }
        if !path.is_file() {
            return None;
        }
        data.current_source = Some(path.to_string_lossy().into_owned());
        read_file(&mut data, &path).ok()?;
        source_dirs.push(path.parent()?.to_path_buf());
    }
    data.current_source = None;
    data.reconcile().ok()?;
    let play_dir = sources.basedir.unwrap_or(sources.project_dir).to_path_buf();
    let mut vars = VarsDirs::new(source_dirs, play_dir);
    answer(&data, &mut vars, named, sources.python).ok()
}

/// A directory source: each entry in name order, itself a source (a
/// directory read in turn), but those InventoryManager ignores: hidden
/// ones, `host_vars`, `group_vars`, `vars_plugins`, and the extensions of
/// `INVENTORY_IGNORE_EXTS`. 2.18 ignores `.ini` files there and 2.19 reads
/// them: a directory that holds one is Ansible's to read.
fn read_directory(data: &mut Data, dir: &Path) -> Result<(), Declined> {
    const IGNORED_EXTENSIONS: [&str; 12] = [
        ".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg",
        ".retry",
    ];
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|_| Declined)?
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let ignored = name.starts_with('.')
            || matches!(name.as_str(), "host_vars" | "group_vars" | "vars_plugins")
            || IGNORED_EXTENSIONS.iter().any(|ext| name.ends_with(ext));
        if ignored {
            continue;
        }
        if name.ends_with(".ini") {
            return Err(Declined);
        }
        let path = dir.join(&name);
        if path.is_dir() {
            read_directory(data, &path)?;
        } else {
            data.current_source = Some(path.to_string_lossy().into_owned());
            read_file(data, &path)?;
        }
    }
    Ok(())
}

/// A file source, by the first plugin that reads it: a script or a
/// plugin's configuration declines; YAML where it parses as an inventory,
/// else INI.
fn read_file(data: &mut Data, path: &Path) -> Result<(), Declined> {
    use std::os::unix::fs::PermissionsExt;
    let executable = std::fs::metadata(path)
        .map_err(|_| Declined)?
        .permissions()
        .mode()
        & 0o111
        != 0;
    let text = std::fs::read_to_string(path).map_err(|_| Declined)?;
    let extension = path.extension().map(|e| e.to_string_lossy().into_owned());
    if executable || text.starts_with("#!") || extension.as_deref() == Some("toml") {
        return Err(Declined);
    }
    let yaml_extension = matches!(extension.as_deref(), None | Some("yaml" | "yml" | "json"));
    if yaml_extension && matches!(super::yaml::read(data, &text)?, super::yaml::Parsed::Read) {
        return Ok(());
    }
    super::ini::read(data, &text)
}

/// `unfrackpath(source, follow=False)`: absolute, `.` and `..` resolved
/// by the text, symbolic links kept.
fn unfrack(base: &Path, source: &str) -> PathBuf {
    let mut path = PathBuf::new();
    for component in base.join(source).components() {
        match component {
            Component::ParentDir => {
                path.pop();
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    path
}

/// Whether the configuration Ansible reads sets any of `settings`.
fn any_set(project_dir: &Path, settings: &[(&str, &str)]) -> bool {
    settings
        .iter()
        .any(|(key, variable)| crate::ansible_config::setting(project_dir, variable, key).is_some())
}

/// Whether Ansible parses no source at all (`-i` names none, no setting
/// names one, and its default file is not there): it warns so.
pub fn nothing_parsed(sources: &[String], project_dir: &Path) -> bool {
    sources.is_empty()
        && !any_set(project_dir, &SOURCE_SETTINGS)
        && !Path::new(DEFAULT_SOURCE).exists()
}

/// The worker's answer: groups with their hosts, parents, order and
/// variables; each host with its variables as `VariableManager` combines
/// them, and its own.
fn answer(
    data: &Data,
    vars: &mut VarsDirs,
    sources: Vec<String>,
    python: &str,
) -> Result<Json, Declined> {
    let listed = data.group_hosts("all");
    let mut hosts = Map::new();
    for name in &listed {
        hosts.insert(name.clone(), host_answer(data, vars, name, false, python)?);
    }
    if !data.has_localhost() {
        hosts.insert(
            "localhost".into(),
            host_answer(data, vars, "localhost", true, python)?,
        );
    }
    let mut groups = Map::new();
    let mut parents = Map::new();
    let mut sort = Map::new();
    let mut group_vars = Map::new();
    for (name, group) in &data.groups {
        groups.insert(name.clone(), json!(data.group_hosts(name)));
        parents.insert(name.clone(), json!(group.parents));
        sort.insert(name.clone(), json!([data.depth(name), group.priority]));
        let plugins = vars.all_vars(Entity::Group, std::slice::from_ref(name))?;
        group_vars.insert(
            name.clone(),
            json!({"inventory": group.vars, "plugins": plugins}),
        );
    }
    // A group made while the playbook runs (`group_by`) gets its
    // `group_vars/` too.
    for name in vars.named(Entity::Group) {
        if !group_vars.contains_key(&name) {
            let plugins = vars.all_vars(Entity::Group, std::slice::from_ref(&name))?;
            group_vars.insert(name, json!({"inventory": {}, "plugins": plugins}));
        }
    }
    let mut orphans = Map::new();
    for name in vars.named(Entity::Host) {
        let listed_as_itself = data.hosts.contains_key(&name);
        let implicit = !data.has_localhost() && super::data::LOCALHOST.contains(&name.as_str());
        if !listed_as_itself || implicit {
            let found = vars.all_vars(Entity::Host, std::slice::from_ref(&name))?;
            if !found.is_empty() {
                orphans.insert(name, Json::Object(found));
            }
        }
    }
    Ok(json!({
        "groups": groups,
        "group_parents": parents,
        "hosts": hosts,
        "group_sort": sort,
        "group_vars": group_vars,
        "orphan_host_vars": orphans,
        "sources": sources,
        "warnings": data.warnings,
    }))
}

/// One host: `vars` as `VariableManager.get_vars` combines the default
/// precedence (`all`'s, its groups', then the vars plugins' for `all` and
/// its groups beside the inventory and the playbook, then its own), and
/// `own` (its own and its `host_vars/`).
fn host_answer(
    data: &Data,
    vars: &mut VarsDirs,
    name: &str,
    implicit: bool,
    python: &str,
) -> Result<Json, Declined> {
    let all_vars = data
        .groups
        .get("all")
        .map(|g| g.vars.clone())
        .unwrap_or_default();
    let (own_inventory, groups) = match implicit {
        true => {
            let mut own = Map::new();
            own.insert("ansible_python_interpreter".into(), json!(python));
            own.insert("ansible_connection".into(), json!("local"));
            (own, Vec::new())
        }
        false => {
            let host = data.hosts.get(name).ok_or(Declined)?;
            let groups: Vec<String> = data
                .host_groups(name)
                .into_iter()
                .filter(|g| g != "all")
                .collect();
            (host.vars.clone(), data.sorted_groups(groups))
        }
    };
    let all = ["all".to_owned()];
    let names = [name.to_owned()];
    let mut combined = all_vars;
    for group in &groups {
        combine(
            &mut combined,
            data.groups
                .get(group)
                .map(|g| g.vars.clone())
                .unwrap_or_default(),
        );
    }
    combine(&mut combined, vars.inventory_vars(Entity::Group, &all)?);
    combine(&mut combined, vars.play_vars(Entity::Group, &all)?);
    combine(&mut combined, vars.inventory_vars(Entity::Group, &groups)?);
    combine(&mut combined, vars.play_vars(Entity::Group, &groups)?);
    let mut own = own_inventory;
    combine(&mut own, vars.all_vars(Entity::Host, &names)?);
    for magic in MAGIC {
        own.remove(magic);
    }
    combine(&mut combined, own.clone());
    let mut member_of: Vec<String> = groups.into_iter().filter(|g| g != "ungrouped").collect();
    member_of.sort();
    Ok(json!({"vars": combined, "own": own, "groups": member_of, "implicit": implicit}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forty levels of two groups, each a child of both above it: Ansible
    /// reads it at once, and so must enka (depths are computed once).
    #[test]
    fn a_deep_lattice_of_groups_reads_at_once() {
        let dir = std::env::temp_dir().join(format!("enka-lattice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let mut text = String::from("[g0a]\nh0\n[g0b]\n");
        for level in 1..40 {
            for side in ["a", "b"] {
                text.push_str(&format!(
                    "[g{}{side}:children]\ng{level}a\ng{level}b\n",
                    level - 1
                ));
            }
        }
        text.push_str("[g39a]\nleaf\n[g39b]\n");
        std::fs::write(dir.join("hosts"), text).expect("writing");
        let sources = ["hosts".to_owned()];
        let started = std::time::Instant::now();
        let answer = read(&Sources {
            sources: &sources,
            basedir: None,
            project_dir: &dir,
            plugin_dirs: &[],
            python: "python3",
        });
        let _ = std::fs::remove_dir_all(&dir);
        let answer = answer.expect("enka reads it");
        assert_eq!(answer["group_sort"]["g39a"], json!([40, 1]));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
