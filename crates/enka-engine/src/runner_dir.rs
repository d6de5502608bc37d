//! The private data directory upstream's ansible-runner runs each reconcile
//! in, as ansible-operator lays it out: roles read its paths from their magic
//! variables (`inventory_file`, `inventory_dir`, `playbook_dir`,
//! `ansible_inventory_sources`, and `hostvars` of `localhost`), and some
//! derive the custom resource's group, version and kind from them, so an
//! operator run names the same paths. Nothing is written there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::Value;

use enka_project::role::Inventory;
use enka_template::Var;

/// Where ansible-operator keeps its runs' directories.
const RUNNER_ROOT: &str = "/tmp/ansible-operator/runner";

/// One reconcile's directory:
/// `/tmp/ansible-operator/runner/<group>/<version>/<kind>/<namespace>/<name>`,
/// empty parts (the core group, a cluster-scoped object's namespace) left
/// out as Go's `filepath.Join` leaves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerDir {
    private_data_dir: PathBuf,
}

impl RunnerDir {
    /// The directory of the object `namespace`/`name` of a watched kind.
    pub fn for_object(group: &str, version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        let mut dir = PathBuf::from(RUNNER_ROOT);
        for part in [group, version, kind, namespace, name] {
            // A name part cannot climb out of the directory (`..` or `/` in
            // a field the API server would refuse anyway).
            let part = part.replace('/', "_");
            if !part.is_empty() && part != "." && part != ".." {
                dir.push(part);
            }
        }
        RunnerDir {
            private_data_dir: dir,
        }
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.private_data_dir
    }

    /// `inventory/`: the inventory source ansible-runner passes with `-i`.
    pub fn inventory_dir(&self) -> PathBuf {
        self.private_data_dir.join("inventory")
    }

    /// `inventory/hosts`: the file ansible-operator writes localhost into.
    pub fn inventory_file(&self) -> PathBuf {
        self.inventory_dir().join("hosts")
    }

    /// `project/`: where ansible-runner writes the play that runs a role,
    /// so a role's `playbook_dir`.
    pub fn project_dir(&self) -> PathBuf {
        self.private_data_dir.join("project")
    }

    /// `ansible_inventory_sources`.
    pub fn inventory_sources(&self) -> Value {
        Value::from(vec![path_value(&self.inventory_dir())])
    }

    /// The inventory ansible-operator writes: `localhost
    /// ansible_connection=local ansible_python_interpreter=<python>`, with
    /// the variables Ansible's inventory gives each host of a file.
    pub fn inventory(&self, python: &str) -> Inventory {
        let vars: Vec<(Arc<str>, Var)> = vec![
            (
                Arc::from("inventory_file"),
                Var::plain(path_value(&self.inventory_file())),
            ),
            (
                Arc::from("inventory_dir"),
                Var::plain(path_value(&self.inventory_dir())),
            ),
            (
                Arc::from("ansible_connection"),
                Var::plain(Value::from("local")),
            ),
            (
                Arc::from("ansible_python_interpreter"),
                Var::plain(Value::from(python)),
            ),
        ];
        Inventory::localhost(Arc::from(vars))
    }
}

fn path_value(path: &Path) -> Value {
    Value::from(path.to_string_lossy().as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laid_out_as_ansible_operator_joins_it() {
        let dir = RunnerDir::for_object("cache.example.com", "v1alpha1", "Memcached", "ns", "m");
        assert_eq!(
            dir.inventory_file(),
            Path::new(
                "/tmp/ansible-operator/runner/cache.example.com/v1alpha1/Memcached/ns/m/inventory/hosts"
            )
        );
        // The core group and a cluster-scoped object's namespace are left
        // out, as filepath.Join leaves empty parts out.
        let core = RunnerDir::for_object("", "v1", "Secret", "", "s");
        assert_eq!(
            core.path(),
            Path::new("/tmp/ansible-operator/runner/v1/Secret/s")
        );
        let hostile = RunnerDir::for_object("g", "v1", "K", "..", "a/b");
        assert_eq!(
            hostile.path(),
            Path::new("/tmp/ansible-operator/runner/g/v1/K/a_b")
        );
    }
}
