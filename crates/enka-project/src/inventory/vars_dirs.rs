//! The `host_group_vars` vars plugin: `group_vars/<group>` and
//! `host_vars/<host>` beside an inventory source and beside the playbook,
//! each a YAML or JSON file (`<name>`, `<name>.yml`, `<name>.yaml`,
//! `<name>.json`, the first that exists) or a directory of them read in
//! name order, combined key by key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::data::Declined;

/// `C.YAML_FILENAME_EXTENSIONS`, after the bare name.
const EXTENSIONS: [&str; 4] = ["", ".yml", ".yaml", ".json"];

/// Which vars directories apply, and the files read so far.
pub(super) struct VarsDirs {
    /// The inventory sources' directories, in source order.
    inventory: Vec<PathBuf>,
    /// The playbook's directory.
    play: PathBuf,
    loaded: HashMap<PathBuf, Map<String, Json>>,
    /// Each vars directory's real path, or none.
    folders: HashMap<PathBuf, Option<PathBuf>>,
}

/// Whose variables: a group's (`group_vars/`) or a host's (`host_vars/`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Entity {
    Group,
    Host,
}

impl Entity {
    fn subdir(self) -> &'static str {
        match self {
            Entity::Group => "group_vars",
            Entity::Host => "host_vars",
        }
    }
}

impl VarsDirs {
    pub fn new(inventory: Vec<PathBuf>, play: PathBuf) -> Self {
        VarsDirs {
            inventory,
            play,
            loaded: HashMap::new(),
            folders: HashMap::new(),
        }
    }

    /// What the vars plugin gives `names` from beside the inventory
    /// sources (`get_vars_from_inventory_sources`).
    pub fn inventory_vars(
        &mut self,
        kind: Entity,
        names: &[String],
    ) -> Result<Map<String, Json>, Declined> {
        let mut data = Map::new();
        for dir in self.inventory.clone() {
            combine(&mut data, self.vars_at(&dir, kind, names)?);
        }
        Ok(data)
    }

    /// What it gives them from beside the playbook.
    pub fn play_vars(
        &mut self,
        kind: Entity,
        names: &[String],
    ) -> Result<Map<String, Json>, Declined> {
        let play = self.play.clone();
        self.vars_at(&play, kind, names)
    }

    /// Both, as the worker's answer has each group's and host's.
    pub fn all_vars(
        &mut self,
        kind: Entity,
        names: &[String],
    ) -> Result<Map<String, Json>, Declined> {
        let mut data = self.inventory_vars(kind, names)?;
        combine(&mut data, self.play_vars(kind, names)?);
        Ok(data)
    }

    /// The names `host_vars/` or `group_vars/` files name, in every
    /// directory that applies.
    pub fn named(&self, kind: Entity) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for dir in std::iter::once(&self.play).chain(&self.inventory) {
            let Ok(entries) = std::fs::read_dir(dir.join(kind.subdir())) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let stem = match name.rfind('.') {
                    Some(dot) if dot > 0 => name[..dot].to_owned(),
                    _ => name,
                };
                if !names.contains(&stem) {
                    names.push(stem);
                }
            }
        }
        names.sort();
        names
    }

    fn vars_at(
        &mut self,
        dir: &Path,
        kind: Entity,
        names: &[String],
    ) -> Result<Map<String, Json>, Declined> {
        let mut data = Map::new();
        let Some(folder) = self.folder(dir, kind)? else {
            return Ok(data);
        };
        for name in names.iter().filter(|n| !n.starts_with('/')) {
            for file in find_vars_files(&folder, name) {
                combine(&mut data, self.load(&file)?);
            }
        }
        Ok(data)
    }

    /// `<dir>/group_vars` or `<dir>/host_vars` by its real path, looked up
    /// once per run rather than once per host and group; `None` when there
    /// is none.
    fn folder(&mut self, dir: &Path, kind: Entity) -> Result<Option<PathBuf>, Declined> {
        let folder = dir.join(kind.subdir());
        if let Some(found) = self.folders.get(&folder) {
            return Ok(found.clone());
        }
        let found = match (folder.exists(), folder.is_dir()) {
            (false, _) => None,
            // Ansible warns of it.
            (true, false) => return Err(Declined),
            // Ansible reads the directory's real path.
            (true, true) => Some(folder.canonicalize().map_err(|_| Declined)?),
        };
        self.folders.insert(folder, found.clone());
        Ok(found)
    }

    fn load(&mut self, file: &Path) -> Result<Map<String, Json>, Declined> {
        if let Some(found) = self.loaded.get(file) {
            return Ok(found.clone());
        }
        let text = std::fs::read_to_string(file).map_err(|_| Declined)?;
        if text.trim_start().starts_with("$ANSIBLE_VAULT") {
            return Err(Declined);
        }
        let vars = match enka_yaml::load_one(&text).map_err(|_| Declined)? {
            None => Map::new(),
            Some(node) if !node.tagged_strings("vault").is_empty() => return Err(Declined),
            Some(node) => match node.to_json() {
                Json::Object(map) => map,
                Json::Null => Map::new(),
                // `combine_vars` refuses what is not a mapping.
                _ => return Err(Declined),
            },
        };
        self.loaded.insert(file.to_owned(), vars.clone());
        Ok(vars)
    }
}

/// `find_vars_files`: the first of `<name>`, `<name>.yml`, `<name>.yaml`,
/// `<name>.json` that exists; a directory gives its files.
fn find_vars_files(folder: &Path, name: &str) -> Vec<PathBuf> {
    for extension in EXTENSIONS {
        let path = folder.join(format!("{name}{extension}"));
        if path.is_dir() {
            return dir_vars_files(&path);
        }
        if path.exists() {
            return vec![path];
        }
    }
    Vec::new()
}

/// `_get_dir_vars_files`: in name order, hidden files and backups left
/// out, directories without an extension read in turn, files with a YAML
/// extension or none.
fn dir_vars_files(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut found = Vec::new();
    for name in names {
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        let extension = match name.rfind('.') {
            Some(dot) if dot > 0 => &name[dot..],
            _ => "",
        };
        let path = dir.join(&name);
        if path.is_dir() && extension.is_empty() {
            found.extend(dir_vars_files(&path));
        } else if path.is_file() && EXTENSIONS.contains(&extension) {
            found.push(path);
        }
    }
    found
}

/// `combine_vars` with the default `hash_behaviour`: later keys replace.
pub(super) fn combine(data: &mut Map<String, Json>, more: Map<String, Json>) {
    for (key, value) in more {
        data.insert(key, value);
    }
}
