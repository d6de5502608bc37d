//! Loading roles and playbooks: YAML with positions in, validated tasks with
//! every template compiled out.
//!
//! A [`Project`] is loaded once per change of its files. Loading reports
//! *all* problems at once as [`Diagnostic`]s (for `enka check`), and a
//! project with errors is never run.

mod ansible;
mod diagnostic;
mod excerpt;
pub mod keywords;
mod loader;
mod module_defaults;
mod plugin_filters;
mod resolve;
mod task;
pub mod walk;

pub use ansible::reload_inventory;
pub use walk::files_under;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::Value;

pub use diagnostic::{Diagnostic, Diagnostics, Location, Severity, display_path};
pub use excerpt::{ansible_excerpt, origin_excerpt};
pub use keywords::{Setting, Settings};
pub use loader::{InventoryLoad, LoadOptions, Target};
pub use module_defaults::ModuleDefaults;
pub use resolve::{RolePaths, resolve_role};
pub use task::{NOT_A_TASK_LIST, TEMPLATED_ARGS, VARIABLE_PARAMS, resolve_task_file};

use enka_modules::catalogue::ModuleRef;
use enka_template::{Templar, Var};

/// Variables as loaded: names in file order, values kept raw (templated on
/// use).
pub type VarList = Arc<[(Arc<str>, Var)]>;

/// A loaded, validated project: roles, playbooks and the compiled templates.
#[derive(Debug)]
pub struct Project {
    /// Every template of every file, compiled.
    pub templar: Arc<Templar>,
    /// Roles by resolved directory.
    pub roles: HashMap<PathBuf, Arc<Role>>,
    /// Playbooks by path.
    pub playbooks: HashMap<PathBuf, Arc<Playbook>>,
    /// Every parsed task file, by path (for dynamic `include_tasks`).
    pub task_files: HashMap<PathBuf, Arc<[Task]>>,
    /// The project's base directory (the watches file's).
    pub base_dir: PathBuf,
    /// Where roles are looked up.
    pub role_paths: RolePaths,
    /// The worker that runs what enka has no native code for; `None` when
    /// every task is native (then no Python ever starts).
    pub ansible: Option<Arc<enka_worker::AnsibleWorker>>,
    /// Filters, tests and lookups the templates name that Ansible runs, with
    /// the first place that names each.
    pub python_plugins: Vec<(Location, enka_template::scan::PluginKind, String)>,
    /// The inventory, when the project has one (`ANSIBLE_INVENTORY`,
    /// `inventory =` in ansible.cfg) or a play names hosts other than
    /// localhost: loaded by Ansible once.
    pub inventory: Option<Arc<Inventory>>,
    /// Task files that nothing includes by name and that do not load, with
    /// their first problem: reported if a run-time include names one.
    pub unloadable_task_files: HashMap<PathBuf, Diagnostic>,
    /// What the `module_defaults` keys of every play, block and task
    /// resolved to.
    pub module_defaults: Arc<ModuleDefaults>,
}

impl Project {
    /// Loads what `targets` need, reporting every problem found.
    pub fn load(options: &LoadOptions, targets: &[Target]) -> (Option<Arc<Project>>, Diagnostics) {
        loader::load(options, targets)
    }

    /// The role at `path`, if loaded.
    pub fn role(&self, path: &Path) -> Option<&Arc<Role>> {
        self.roles.get(path)
    }
}

pub use crate::inventory::Inventory;

/// A role: its tasks, defaults and vars.
#[derive(Debug)]
pub struct Role {
    /// The name it was referred to by.
    pub name: String,
    /// Its directory.
    pub path: PathBuf,
    /// `defaults/<file>.yml`, by file name without extension.
    pub defaults: HashMap<String, VarList>,
    /// `vars/<file>.yml`, by file name without extension.
    pub vars: HashMap<String, VarList>,
    /// Every task file under `tasks/`, by path relative to it without
    /// extension (`main`, `sub/other`).
    pub task_files: HashMap<String, Arc<[Task]>>,
    /// `meta/main.yml` `dependencies`: roles that run before this one.
    pub dependencies: Vec<RoleRef>,
    /// `handlers/main.yml`.
    pub handlers: Arc<[Task]>,
    /// `meta/main.yml` `allow_duplicates`: as a dependency it runs each
    /// time it is reached, not once per play and parameters.
    pub allow_duplicates: bool,
}

impl Role {
    /// The tasks of `tasks/<name>.yml`.
    pub fn tasks(&self, name: &str) -> Option<&Arc<[Task]>> {
        let name = name.trim_end_matches(".yml").trim_end_matches(".yaml");
        self.task_files.get(name)
    }

    /// `defaults/<name>.yml`, empty when absent.
    pub fn defaults(&self, name: &str) -> VarList {
        self.defaults
            .get(name)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// `vars/<name>.yml`, empty when absent.
    pub fn vars(&self, name: &str) -> VarList {
        self.vars
            .get(name)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
}

/// A playbook: one or more plays.
#[derive(Debug)]
pub struct Playbook {
    /// Its file.
    pub path: PathBuf,
    /// The plays, in order.
    pub plays: Vec<Play>,
}

/// One play of a playbook.
#[derive(Debug)]
pub struct Play {
    /// Its name, if any.
    pub name: Option<String>,
    /// `hosts`: the inventory pattern(s) it runs on, possibly a template
    /// (`localhost` when absent).
    pub hosts: Value,
    /// `order`: the order of the hosts it runs on.
    pub order: Option<Value>,
    /// `serial`: batches of hosts, run one after the other.
    pub serial: Option<Value>,
    /// `strategy`: how the hosts take turns (linear when absent).
    pub strategy: Option<Value>,
    /// `max_fail_percentage`: past this share of a batch's hosts failed,
    /// the playbook stops.
    pub max_fail_percentage: Option<Value>,
    /// `tags` of the whole play.
    pub tags: Vec<String>,
    /// Its settings (`ignore_errors`, `no_log`, `throttle`, …), as written.
    pub settings: Settings,
    /// Play `vars`, with the `vars_files` merged in when none names a
    /// variable.
    pub vars: VarList,
    /// `vars_files` in order, when one names a variable and so is found per
    /// host as the play starts (empty otherwise: they are in `vars`).
    pub vars_files: Arc<[VarsFile]>,
    /// `vars_prompt`: variables set as the play starts, by the prompt's
    /// default (enka never has a terminal to ask on).
    pub vars_prompt: Arc<[VarsPrompt]>,
    /// `pre_tasks`.
    pub pre_tasks: Arc<[Task]>,
    /// `roles`, in order.
    pub roles: Vec<RoleRef>,
    /// `tasks`.
    pub tasks: Arc<[Task]>,
    /// `post_tasks`.
    pub post_tasks: Arc<[Task]>,
    /// `handlers`.
    pub handlers: Arc<[Task]>,
}

/// One `vars_prompt` entry of a play.
#[derive(Debug, Clone)]
pub struct VarsPrompt {
    /// The variable it sets.
    pub name: Arc<str>,
    /// `default`, templated with the play's variables as the play starts.
    pub default: Option<Value>,
    /// `unsafe`: the answer is never templated.
    pub unsafe_answer: bool,
}

/// One `vars_files` entry of a play.
#[derive(Debug, Clone)]
pub enum VarsFile {
    /// Read when the project loaded.
    Loaded(VarList),
    /// Names templated with the host's variables when the play starts: the
    /// first that exists is read (Ansible's fallback list).
    Templated {
        /// The names left to try, in order.
        candidates: Arc<[Value]>,
        /// Where the entry is written.
        location: Location,
    },
}

/// A role named in a play's `roles`, with its parameters.
#[derive(Debug, Clone)]
pub struct RoleRef {
    /// The loaded role.
    pub role: Arc<Role>,
    /// `vars:` and other parameters given to the role.
    pub params: VarList,
    /// Conditions on the role entry.
    pub when: Arc<[Value]>,
    /// `tags` of the role entry: every task of the role has them.
    pub tags: Vec<String>,
}

/// Positions of a module's written string arguments: per argument, one
/// per string (a list's items each, `None` for an item that is no string).
pub type ArgPositions = Arc<[(Arc<str>, Arc<[Option<enka_yaml::Pos>]>)]>;

/// A task, validated, with its templates compiled.
#[derive(Debug)]
pub struct Task {
    /// `name`, possibly a template.
    pub name: Option<Arc<str>>,
    /// Where the task starts.
    pub location: Location,
    /// The role whose tasks file holds it (its directory's name), for
    /// metrics and traces; `None` for a playbook's own tasks.
    pub role: Option<Arc<str>>,
    /// What it does.
    pub action: Action,
    /// `when`, as raw conditions (all must hold).
    pub when: Arc<[Value]>,
    /// Where each of `when`'s conditions is written, for a string one
    /// (Ansible's strings carry their position; a `when: 1` does not).
    pub when_positions: Arc<[Option<enka_yaml::Pos>]>,
    /// Where each string of the module's written arguments is, by
    /// argument (a list's items each): a failing `assert` condition points
    /// there, as Ansible's strings carry their position.
    pub arg_positions: ArgPositions,
    /// Where each string condition of `until`, `changed_when` and
    /// `failed_when` is written, by keyword.
    pub condition_positions: ArgPositions,
    /// `register`.
    pub register: Option<Arc<str>>,
    /// Task (or block) `vars`.
    pub vars: VarList,
    /// `loop` / `with_*`.
    pub looping: Option<Loop>,
    /// `loop_control`.
    pub loop_control: LoopControl,
    /// `until`.
    pub until: Option<Arc<[Value]>>,
    /// Its settings (`ignore_errors`, `no_log`, `throttle`, …), as written.
    pub settings: Settings,
    /// `changed_when`.
    pub changed_when: Option<Arc<[Value]>>,
    /// `failed_when`.
    pub failed_when: Option<Arc<[Value]>>,
    /// `tags`.
    pub tags: Vec<String>,
    /// `notify`: handlers to run, by name or `listen` topic, when the task
    /// changed something.
    pub notify: Vec<String>,
    /// `listen`: topics a handler also answers to.
    pub listen: Vec<String>,
}

impl Task {
    /// Whether it is the fact gathering the loader puts before a play's
    /// tasks (PlayIterator's setup task).
    pub fn is_implicit_fact_gathering(&self) -> bool {
        matches!(&self.action, Action::Module { module, .. } if module.name() == "ansible.builtin.gather_facts")
            && self.name.as_deref() == Some("Gathering Facts")
    }

    /// The task's title in Ansible's output (Task.get_name): `role :
    /// name` for a task of a role.
    pub fn title(&self) -> String {
        match &self.role {
            Some(role) => format!("{role} : {}", self.display_name()),
            None => self.display_name(),
        }
    }

    /// The task's name as written, or the module name, for messages.
    pub fn display_name(&self) -> String {
        match (&self.name, &self.action) {
            (Some(name), _) => name.to_string(),
            (None, Action::Module { module, .. }) => module.name().to_owned(),
            (None, Action::Block { .. }) => "block".to_owned(),
            (None, Action::IncludeTasks { .. }) => "include_tasks".to_owned(),
            // IncludeRole.get_name: the action and the role's name.
            (None, Action::IncludeRole(include)) => match include.name.as_str() {
                Some(name) => format!("include_role : {name}"),
                None => "include_role".to_owned(),
            },
            (None, Action::ImportRole { role, .. }) => format!("import_role {}", role.name),
        }
    }
}

/// What a task does.
#[derive(Debug)]
pub enum Action {
    /// Run a module with these raw (not yet templated) arguments.
    Module {
        /// The module: native, or run by Ansible.
        module: ModuleRef,
        /// Its arguments, a mapping.
        args: Value,
    },
    /// `block`/`rescue`/`always`; also what `import_tasks` becomes.
    Block {
        /// The tasks.
        block: Arc<[Task]>,
        /// Run when a task of `block` fails.
        rescue: Arc<[Task]>,
        /// Run in every case.
        always: Arc<[Task]>,
    },
    /// `include_tasks` (and the old `include`): resolved at run time.
    IncludeTasks {
        /// The file, possibly a template.
        file: Value,
        /// The role whose `tasks/` it is relative to, if any.
        role: Option<PathBuf>,
        /// The directory of the including file.
        dir: PathBuf,
        /// `apply`: keywords for the included tasks, as a block around
        /// them (an `Action::Block` task with no tasks of its own).
        apply: Option<Arc<Task>>,
    },
    /// `include_role`: resolved at run time.
    IncludeRole(RoleInclude),
    /// `import_role`: resolved when loading.
    ImportRole {
        /// The role.
        role: Arc<Role>,
        /// `tasks_from`, `defaults_from`, `vars_from`.
        from: RoleFrom,
    },
}

/// `include_role` arguments.
#[derive(Debug)]
pub struct RoleInclude {
    /// `name`, possibly a template.
    pub name: Value,
    /// The role as loaded, when `name` is not a template.
    pub role: Option<Arc<Role>>,
    /// Which files to use.
    pub from: RoleFrom,
    /// `public`: whether its vars stay visible after it.
    pub public: bool,
    /// `apply`: keywords the role's tasks take, as from a block around
    /// them.
    pub apply: Option<Arc<Task>>,
}

/// `tasks_from`, `defaults_from`, `vars_from` (default `main`).
#[derive(Debug, Clone)]
pub struct RoleFrom {
    /// Task file.
    pub tasks: String,
    /// Defaults file.
    pub defaults: String,
    /// Vars file.
    pub vars: String,
}

impl Default for RoleFrom {
    fn default() -> Self {
        RoleFrom {
            tasks: "main".into(),
            defaults: "main".into(),
            vars: "main".into(),
        }
    }
}

/// How a task loops.
#[derive(Debug, Clone)]
pub struct Loop {
    /// Which keyword.
    pub kind: LoopKind,
    /// The raw value (a list or a template).
    pub items: Value,
}

/// The looping keywords.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopKind {
    /// `loop`, `with_list`.
    List,
    /// `with_items`: flattened one level.
    Items,
    /// `with_dict`: `{key, value}` items.
    Dict,
    /// `with_<lookup>`: the lookup's list.
    Lookup(String),
}

/// `loop_control`.
#[derive(Debug, Clone)]
pub struct LoopControl {
    /// Name of the item variable (`item`).
    pub loop_var: Arc<str>,
    /// `loop_var` when it is a template, rendered when the task runs.
    pub loop_var_template: Option<Value>,
    /// Name of the index variable, if any.
    pub index_var: Option<Arc<str>>,
    /// Label shown in logs instead of the item.
    pub label: Option<Value>,
    /// Seconds between items.
    pub pause: Option<Value>,
    /// Whether `ansible_loop` is set.
    pub extended: bool,
    /// Whether `ansible_loop` carries `allitems` (`extended_allitems`).
    pub extended_allitems: bool,
    /// `break_when`: conditions checked after each item (with its result
    /// registered); the loop stops at the first item that meets them.
    pub break_when: Vec<Value>,
}

impl Default for LoopControl {
    fn default() -> Self {
        LoopControl {
            loop_var: Arc::from("item"),
            loop_var_template: None,
            index_var: None,
            label: None,
            pause: None,
            extended: false,
            extended_allitems: true,
            break_when: Vec::new(),
        }
    }
}
