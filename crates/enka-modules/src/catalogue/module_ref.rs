//! What a task's action resolved to when its role loaded.

use std::sync::Arc;

use super::AnsibleAction;
use super::modules::ModuleSpec;

/// What runs a task: enka's own code, or Ansible's through the worker.
#[derive(Debug, Clone)]
pub enum ModuleRef {
    /// A module enka implements.
    Native(&'static ModuleSpec),
    /// A module, action plugin or collection module that Ansible runs.
    Ansible(Arc<AnsibleAction>),
}

/// Ansible's action plugins that never connect.
const CONTROLLER_ACTIONS: &[&str] = &[
    "add_host",
    "assert",
    "debug",
    "fail",
    "group_by",
    "include_vars",
    "meta",
    "pause",
    "set_fact",
    "set_stats",
    "validate_argument_spec",
];

impl ModuleRef {
    /// Whether Ansible's play recap counts the task: not `meta`, which
    /// the strategy runs itself.
    pub fn counts_in_recap(&self) -> bool {
        !self.is_meta()
    }

    /// Whether it is `meta`, whose `when` and report the engine handles as
    /// Ansible's strategy does (see `modules::meta::report`).
    pub fn is_meta(&self) -> bool {
        matches!(self, ModuleRef::Native(spec) if spec.name == "meta")
    }

    /// Whether the action runs on the controller alone, never reaching the
    /// task's host (Ansible's action plugins that open no connection): it
    /// runs even for a host that cannot be reached.
    pub fn runs_on_controller(&self) -> bool {
        match self {
            ModuleRef::Native(spec) => !spec.uses_cluster,
            ModuleRef::Ansible(_) => self.is_controller_action(),
        }
    }

    /// Whether this is one of ansible-core's action plugins that never
    /// connect (`debug`, `fail`, `set_fact`, …): what fails in one is an
    /// action's failure, not a module's.
    pub fn is_controller_action(&self) -> bool {
        match self {
            ModuleRef::Native(spec) => CONTROLLER_ACTIONS.contains(&spec.name),
            ModuleRef::Ansible(action) => CONTROLLER_ACTIONS.iter().any(|a| action.is_builtin(a)),
        }
    }

    /// The name to show (the native module's short name, or the name as
    /// the task wrote it).
    pub fn name(&self) -> &str {
        match self {
            ModuleRef::Native(spec) => spec.name,
            ModuleRef::Ansible(action) => &action.name,
        }
    }

    /// The fully qualified name Ansible resolves the action to
    /// (`ansible.builtin.debug`, `kubernetes.core.k8s`), as its messages
    /// name it; the name as written when that is not known.
    /// Whether an action Ansible runs takes free-form words beside its
    /// arguments (`_raw_params`, its plugin's `supports_raw_params`); the
    /// command modules enka runs itself take theirs when the task loads.
    pub fn takes_raw_params(&self) -> bool {
        match self {
            ModuleRef::Native(_) => false,
            ModuleRef::Ansible(action) => action.raw_params.get().copied().unwrap_or(false),
        }
    }

    /// Whether Ansible said its action takes no free-form words.
    pub fn refuses_raw_params(&self) -> bool {
        match self {
            ModuleRef::Native(spec) => spec.free_form != super::FreeForm::Raw,
            ModuleRef::Ansible(action) => action.raw_params.get() == Some(&false),
        }
    }

    pub fn resolved_name(&self) -> String {
        match self {
            ModuleRef::Native(spec) => match spec.collections.first() {
                Some(collection) => format!("{collection}.{}", spec.name),
                None => spec.name.to_owned(),
            },
            ModuleRef::Ansible(action) => action
                .resolved
                .get()
                .cloned()
                .unwrap_or_else(|| action.name.to_string()),
        }
    }

    /// The name module timings are kept under: the native module's, or
    /// `ansible` for everything the worker runs (one label, so a project's
    /// many bridged names cannot grow the metric without bound).
    pub fn timing_name(&self) -> &'static str {
        match self {
            ModuleRef::Native(spec) => spec.name,
            ModuleRef::Ansible(_) => "ansible",
        }
    }

    /// Whether this action runs through the Ansible worker.
    pub fn is_bridged(&self) -> bool {
        matches!(self, ModuleRef::Ansible(_))
    }
}
