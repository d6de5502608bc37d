//! Finding a role's directory by name, as upstream `ansible-operator` does.

use std::path::{Path, PathBuf};

/// Where roles are searched.
#[derive(Debug, Clone, Default)]
pub struct RolePaths {
    /// `ANSIBLE_ROLES_PATH` (or `--ansible-roles-path`), in order.
    pub roles_path: Vec<PathBuf>,
    /// `ANSIBLE_COLLECTIONS_PATH` (or `--ansible-collections-path`).
    pub collections_path: Vec<PathBuf>,
    /// The directory whose `roles/` is searched last (the project root).
    pub base_dir: PathBuf,
}

impl RolePaths {
    /// Paths from the environment, with upstream's defaults for collections.
    pub fn from_env(base_dir: &Path) -> Self {
        let split = |var: &str| -> Vec<PathBuf> {
            std::env::var(var)
                .map(|v| {
                    // Relative entries are relative to the working directory,
                    // as Ansible's unfrackpath makes them absolute.
                    v.split(':')
                        .filter(|p| !p.is_empty())
                        .map(|p| std::path::absolute(p).unwrap_or_else(|_| PathBuf::from(p)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut collections_path = split("ANSIBLE_COLLECTIONS_PATH");
        if collections_path.is_empty() {
            collections_path.push(PathBuf::from("/usr/share/ansible/collections"));
            if let Some(home) = std::env::var_os("HOME") {
                collections_path.push(PathBuf::from(home).join(".ansible/collections"));
            }
        }
        RolePaths {
            roles_path: split("ANSIBLE_ROLES_PATH"),
            collections_path,
            base_dir: base_dir.to_path_buf(),
        }
    }

    /// Adds a playbook's adjacent `collections/` in front of the configured
    /// collection paths, as ansible-playbook searches it first.
    pub fn with_playbook_dir(mut self, playbook_dir: &Path) -> Self {
        let adjacent = playbook_dir.join("collections");
        let adjacent = std::path::absolute(&adjacent).unwrap_or(adjacent);
        if adjacent.is_dir() && !self.collections_path.contains(&adjacent) {
            self.collections_path.insert(0, adjacent);
        }
        self
    }

    /// Every place `name` may live, in the order they are tried: an
    /// absolute path; `<dir>/<name>` and `<dir>/roles/<name>` for each roles
    /// path; `<base>/roles/<name>`; then, for `namespace.collection.role`,
    /// `<dir>/ansible_collections/<ns>/<coll>/roles/<role>` for each
    /// collections path.
    pub fn candidates(&self, name: &str) -> Vec<PathBuf> {
        let path = Path::new(name);
        if path.is_absolute() {
            return vec![path.to_path_buf()];
        }
        let mut out = Vec::new();
        if name.starts_with("./") || name.starts_with("../") {
            out.push(self.base_dir.join(name));
        }
        for dir in &self.roles_path {
            out.push(dir.join(name));
            out.push(dir.join("roles").join(name));
        }
        out.push(self.base_dir.join("roles").join(name));
        let parts: Vec<&str> = name.split('.').collect();
        if parts.len() == 3 {
            for dir in &self.collections_path {
                out.push(
                    dir.join("ansible_collections")
                        .join(parts[0])
                        .join(parts[1])
                        .join("roles")
                        .join(parts[2]),
                );
            }
        }
        out
    }
}

/// The first existing directory for role `name`, or every place tried.
pub fn resolve_role(paths: &RolePaths, name: &str) -> Result<PathBuf, Vec<PathBuf>> {
    let candidates = paths.candidates(name);
    candidates
        .iter()
        .find(|p| p.is_dir())
        .map(|p| enka_template::normalize_path(p))
        .ok_or(candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order() {
        let paths = RolePaths {
            roles_path: vec![PathBuf::from("/r1")],
            collections_path: vec![PathBuf::from("/c1")],
            base_dir: PathBuf::from("/proj"),
        };
        assert_eq!(
            paths.candidates("/abs/role"),
            vec![PathBuf::from("/abs/role")]
        );
        assert_eq!(
            paths.candidates("ns.coll.role"),
            vec![
                PathBuf::from("/r1/ns.coll.role"),
                PathBuf::from("/r1/roles/ns.coll.role"),
                PathBuf::from("/proj/roles/ns.coll.role"),
                PathBuf::from("/c1/ansible_collections/ns/coll/roles/role"),
            ]
        );
        assert_eq!(
            paths.candidates("hikawa"),
            vec![
                PathBuf::from("/r1/hikawa"),
                PathBuf::from("/r1/roles/hikawa"),
                PathBuf::from("/proj/roles/hikawa")
            ]
        );
    }
}
