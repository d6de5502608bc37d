//! An action enka has no native code for: the name Ansible resolves and
//! the worker runs.

use std::sync::{Arc, OnceLock};

/// A task action that Ansible runs.
#[derive(Debug)]
pub struct AnsibleAction {
    /// The action as the task wrote it (`command`, `ansible.builtin.file`,
    /// `community.general.ini_file`).
    pub name: Arc<str>,
    /// The `collections` search list in force for the task.
    pub collections: Arc<[String]>,
    /// What Ansible resolved the name to (`ansible.builtin.stat`), once the
    /// loader has asked it.
    pub resolved: OnceLock<String>,
    /// Whether Ansible's action for it takes free-form words
    /// (`supports_raw_params`), once the loader has asked.
    pub raw_params: OnceLock<bool>,
}

impl AnsibleAction {
    /// An action as a task names it, with the task's collection search list.
    pub fn new(name: &str, collections: Arc<[String]>) -> Self {
        AnsibleAction {
            name: Arc::from(name),
            collections,
            resolved: OnceLock::new(),
            raw_params: OnceLock::new(),
        }
    }

    /// The fully qualified name when resolved, else the name as written.
    pub fn qualified_name(&self) -> &str {
        self.resolved.get().map_or(&self.name, String::as_str)
    }

    /// Whether this is ansible-core's own `short` action.
    pub fn is_builtin(&self, short: &str) -> bool {
        match self.resolved.get() {
            Some(fqcn) => {
                *fqcn == format!("ansible.builtin.{short}")
                    || *fqcn == format!("ansible.legacy.{short}")
            }
            None => self.name.rsplit('.').next() == Some(short),
        }
    }
}
