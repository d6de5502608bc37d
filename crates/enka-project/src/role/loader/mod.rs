//! Reads project files, parses them once and compiles their templates.

mod playbook;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::task::{TaskFile, parse_tasks, parse_vars};
use super::{Diagnostic, Diagnostics, Location, Playbook, Project, Role, RolePaths, Task, VarList};
use enka_modules::catalogue::AnsibleAction;
use enka_template::scan::{PluginKind, plugin_uses};
use enka_template::{self as template, TemplarBuilder};
use enka_worker::Config as WorkerConfig;
use enka_yaml::{self as yaml, Node, Pos};

/// Nesting bound for imports and role dependencies.
const MAX_INCLUDE_DEPTH: usize = 32;

/// What to load.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A role, by name or path.
    Role(String),
    /// A playbook file.
    Playbook(PathBuf),
}

/// How to load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Where roles are found.
    pub role_paths: RolePaths,
    /// Options of the compiled templates.
    pub templates: template::Options,
    /// Where each target was named (a watch entry), for error locations.
    pub origins: Vec<(Target, Location)>,
    /// Lookup plugins from other layers (such as `k8s`).
    pub lookups: Vec<(String, std::sync::Arc<dyn template::LookupPlugin>)>,
    /// How to start the Ansible worker for what enka has no native code for
    /// (its directories are filled in by the loader); `None` refuses such
    /// tasks (`enka run --native-only`).
    pub ansible: Option<WorkerConfig>,
    /// When the plays' inventory is loaded.
    pub inventory: InventoryLoad,
}

/// When a project's inventory is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InventoryLoad {
    /// When a play names hosts other than localhost and `all`, or one is
    /// named: otherwise the run's own inventory applies (the one
    /// ansible-operator's runner writes, `localhost` in `all`).
    WhenNamed,
    /// Always, as ansible-playbook loads one: with none named, Ansible's
    /// default (no hosts, the implicit localhost outside `all`).
    Always,
}

impl LoadOptions {}

pub(crate) struct Loader {
    pub(crate) builder: TemplarBuilder,
    pub(crate) diagnostics: Diagnostics,
    role_paths: RolePaths,
    roles: HashMap<PathBuf, Arc<Role>>,
    roles_loading: Vec<PathBuf>,
    /// Directories whose roles were loaded for an `include_role` named by
    /// a template.
    candidate_dirs: HashSet<PathBuf>,
    task_files: HashMap<PathBuf, Arc<[Task]>>,
    files_loading: Vec<PathBuf>,
    playbooks: HashMap<PathBuf, Arc<Playbook>>,
    template_files: HashSet<PathBuf>,
    /// The project and playbook directories already checked for Vault files.
    project_dirs: HashSet<PathBuf>,
    /// The `collections` search list of the tasks being parsed (a play's, or
    /// a role's `meta/main.yml`).
    pub(crate) collections: Arc<[String]>,
    /// Every task that Ansible runs, with where it is, for resolution.
    pub(crate) bridged: Vec<(Location, Arc<AnsibleAction>)>,
    /// Filters and tests the templates use that enka has natively.
    pub(crate) native_plugins: Vec<(PluginKind, String)>,
    /// What the `module_defaults` keys resolved to so far.
    pub(crate) module_defaults: super::ModuleDefaults,
    /// `module_defaults` keys only Ansible can resolve, with where each is
    /// first written.
    pub(crate) module_defaults_foreign: Vec<(Location, String)>,
    /// Directories whose plugin subdirectories Ansible adds (project,
    /// playbooks, roles), in load order.
    plugin_dirs: Vec<PathBuf>,
    /// Filters, tests and lookups enka does not have itself, each with the
    /// first place that names it: Ansible must have them.
    pub(crate) foreign_plugins: Vec<(Location, PluginKind, String)>,
    /// How to start an Ansible worker (`None` with `--native-only`).
    pub(crate) worker_config: Option<WorkerConfig>,
    /// The worker asked while loading (Vault data, plugin filters), once
    /// needed.
    pub(crate) loading_worker: Option<std::sync::Arc<enka_worker::AnsibleWorker>>,
    /// The modules Ansible's plugin filter rejects, once asked.
    pub(crate) rejected_modules: Option<Arc<HashSet<String>>>,
    /// Bridged tasks given free-form text that only the command family
    /// takes: the task's location and the text's.
    pub(crate) extra_params: Vec<(Location, Location)>,
    /// Play `hosts` patterns other than localhost, with where they are:
    /// they need the inventory.
    pub(crate) host_patterns: Vec<(Location, String)>,
    /// Task files in the order they were parsed.
    parsed_order: Vec<PathBuf>,
    /// Task files under a role's `tasks/` that nothing includes statically and
    /// that do not load: the first problem of each.
    pub(crate) unloadable: HashMap<PathBuf, Diagnostic>,
    /// The name of the task being parsed, for findings made after parsing.
    pub(crate) current_task: Option<String>,
    /// Tasks that findings made after parsing belong to, by location.
    pub(crate) task_names: HashMap<Location, String>,
}

pub(crate) fn load(
    options: &LoadOptions,
    targets: &[Target],
) -> (Option<Arc<Project>>, Diagnostics) {
    let mut builder = TemplarBuilder::new(options.templates.clone());
    for (name, plugin) in &options.lookups {
        builder.add_lookup(name, plugin.clone());
    }
    // Each playbook's adjacent `collections/` comes first, as
    // ansible-playbook searches it for roles and modules alike.
    let role_paths = targets
        .iter()
        .filter_map(|target| match target {
            Target::Playbook(path) => path.parent(),
            Target::Role(_) => None,
        })
        .fold(options.role_paths.clone(), |paths, dir| {
            paths.with_playbook_dir(dir)
        });
    let mut loader = Loader::new(builder, role_paths.clone(), options);
    loader.project_dir(&options.role_paths.base_dir);
    for target in targets {
        match target {
            Target::Role(name) => {
                let location = options
                    .origins
                    .iter()
                    .find(|(t, _)| t == target)
                    .map(|(_, l)| l.clone())
                    .unwrap_or_else(|| Location::file(&options.role_paths.base_dir));
                loader.role_by_name(name, location);
            }
            Target::Playbook(path) => {
                loader.playbook(path);
            }
        }
    }
    let playbook_dir = targets.iter().find_map(|target| match target {
        Target::Playbook(path) => path.parent(),
        Target::Role(_) => None,
    });
    let ansible = loader.ansible_worker(
        options.ansible.as_ref(),
        &options.role_paths.base_dir,
        &role_paths.collections_path,
        playbook_dir,
    );
    let inventory = loader.inventory(ansible.as_ref(), options, playbook_dir);
    let Loader {
        builder,
        diagnostics,
        roles,
        playbooks,
        task_files,
        foreign_plugins,
        mut unloadable,
        module_defaults,
        ..
    } = loader;
    if diagnostics.has_errors() {
        return (None, diagnostics);
    }
    // A file parsed again by a static include loaded after all.
    unloadable.retain(|path, _| !task_files.contains_key(path));
    let project = Project {
        templar: builder.build(),
        roles,
        playbooks,
        task_files,
        base_dir: options.role_paths.base_dir.clone(),
        role_paths: options.role_paths.clone(),
        ansible,
        python_plugins: foreign_plugins,
        unloadable_task_files: unloadable,
        inventory: inventory.map(Arc::new),
        module_defaults: Arc::new(module_defaults),
    };
    (Some(Arc::new(project)), diagnostics)
}

impl Loader {
    /// A loader with nothing loaded yet.
    fn new(builder: TemplarBuilder, role_paths: RolePaths, options: &LoadOptions) -> Self {
        Loader {
            builder,
            diagnostics: Diagnostics::default(),
            role_paths,
            roles: HashMap::new(),
            roles_loading: Vec::new(),
            candidate_dirs: HashSet::new(),
            task_files: HashMap::new(),
            files_loading: Vec::new(),
            playbooks: HashMap::new(),
            template_files: HashSet::new(),
            project_dirs: HashSet::new(),
            collections: Arc::from(Vec::new()),
            bridged: Vec::new(),
            module_defaults: super::ModuleDefaults::default(),
            module_defaults_foreign: Vec::new(),
            native_plugins: Vec::new(),
            plugin_dirs: Vec::new(),
            foreign_plugins: Vec::new(),
            current_task: None,
            task_names: HashMap::new(),
            unloadable: HashMap::new(),
            parsed_order: Vec::new(),
            host_patterns: Vec::new(),
            extra_params: Vec::new(),
            worker_config: options.ansible.clone().map(|mut config| {
                config.base_dir = options.role_paths.base_dir.clone();
                config
            }),
            loading_worker: None,
            rejected_modules: None,
        }
    }
}

fn read_yaml(loader: &mut Loader, path: &Path) -> Option<Node> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            loader.error(
                Location::file(path),
                format!("cannot read {}: {err}", path.display()),
            );
            return None;
        }
    };
    let text = if is_vault_encrypted(&text) {
        match loader.decrypt_vault(&text, path) {
            Ok(plain) => plain,
            Err(message) => {
                loader.error(Location::file(path), message);
                return None;
            }
        }
    } else {
        text
    };
    match yaml::load_one(&text) {
        Ok(Some(mut node)) => {
            let duplicates = node.duplicate_keys();
            if !duplicates.is_empty() {
                if !report_duplicate_keys(loader, path, duplicates) {
                    return None;
                }
                node.keep_last_duplicates();
            }
            Some(node)
        }
        Ok(None) => Some(Node {
            value: yaml::Value::Null,
            pos: Pos { line: 1, col: 1 },
            tag: None,
        }),
        Err(err) => {
            let message = match yaml::json_error(&text) {
                Some(json) => format!("YAML syntax error: {}; read as JSON: {json}", err.message),
                None => format!("YAML syntax error: {}", err.message),
            };
            loader.error(Location::new(&Arc::from(path), err.pos), message);
            None
        }
    }
}

/// A role's collection search list as Role._load_role_data makes it: the
/// collection the role lives in (`…/ansible_collections/<ns>/<coll>/roles/
/// <role>`) first, then its meta/main.yml's, then `ansible.builtin` (for a
/// role of a collection) or `ansible.legacy` when the list names neither.
pub(super) fn role_collections(path: &Path, listed: &[String]) -> Arc<[String]> {
    let parts: Vec<&str> = path
        .components()
        .map(|c| c.as_os_str().to_str().unwrap_or_default())
        .collect();
    let own = match parts.as_slice() {
        [.., "ansible_collections", ns, coll, "roles", _] => Some(format!("{ns}.{coll}")),
        _ => None,
    };
    let mut list: Vec<String> = own.iter().cloned().collect();
    list.extend(
        listed
            .iter()
            .filter(|c| !list.contains(c))
            .cloned()
            .collect::<Vec<_>>(),
    );
    if !list.is_empty()
        && !list
            .iter()
            .any(|c| c == "ansible.builtin" || c == "ansible.legacy")
    {
        list.push(
            if own.is_some() {
                "ansible.builtin"
            } else {
                "ansible.legacy"
            }
            .to_owned(),
        );
    }
    list.into()
}

/// Keys a mapping repeats, as Ansible's YAML loader treats them
/// (`ANSIBLE_DUPLICATE_YAML_DICT_KEY`: `warn` by default, `error`,
/// `ignore`); false when they are errors.
fn report_duplicate_keys(
    loader: &mut Loader,
    path: &Path,
    duplicates: Vec<enka_yaml::DuplicateKey>,
) -> bool {
    let mode = std::env::var("ANSIBLE_DUPLICATE_YAML_DICT_KEY")
        .map(|m| m.to_ascii_lowercase())
        .unwrap_or_else(|_| "warn".to_owned());
    if mode == "ignore" {
        return true;
    }
    let file: Arc<Path> = Arc::from(path);
    let strict = loader.builder.options().semantics.native();
    for duplicate in duplicates {
        let (pos, key) = (duplicate.mapping, &duplicate.name);
        let (pos, message) = match (strict, mode == "error") {
            (false, _) => (
                pos,
                format!(
                    "While constructing a mapping from {}, line {}, column {}, found a duplicate dict key ({key}). Using last defined value only.",
                    path.display(),
                    pos.line,
                    pos.col
                ),
            ),
            (true, true) => (
                duplicate.key,
                format!("YAML parsing failed: Found duplicate mapping key '{key}'."),
            ),
            (true, false) => (
                duplicate.key,
                format!("Found duplicate mapping key '{key}'. Using last defined value only."),
            ),
        };
        if mode == "error" {
            loader.error(Location::new(&file, pos), message);
        } else {
            loader.warning(Location::new(&file, pos), message);
        }
    }
    mode != "error"
}

fn is_vault_encrypted(text: &str) -> bool {
    text.starts_with("$ANSIBLE_VAULT;")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    super::walk::files_under(dir)
        .into_iter()
        .filter(|path| {
            matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yml" | "yaml")
            )
        })
        .collect()
}

/// A role's directories whose YAML files are never task lists: Ansible
/// reads each for its own purpose.
const ROLE_DATA_DIRS: &[&str] = &[
    "tasks",
    "handlers",
    "defaults",
    "vars",
    "meta",
    "files",
    "templates",
    "library",
    "module_utils",
    "molecule",
];

fn stem(root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file).with_extension("");
    relative.to_string_lossy().into_owned()
}

impl Loader {
    pub(crate) fn error(&mut self, location: Location, message: String) {
        self.diagnostics.push(Diagnostic::error(location, message));
    }

    /// An error found after parsing, about the task at `location` (named in
    /// the message as parse errors are).
    pub(crate) fn task_error(&mut self, location: Location, message: String) {
        let mut diagnostic = Diagnostic::error(location.clone(), message);
        diagnostic.task = self.task_names.get(&location).cloned();
        self.diagnostics.push(diagnostic);
    }

    /// Remembers that `location` is inside the task being parsed.
    pub(crate) fn remember_task(&mut self, location: &Location) {
        if let Some(name) = &self.current_task {
            self.task_names.insert(location.clone(), name.clone());
        }
    }

    /// An error Ansible meets only when the task runs (a template that does
    /// not compile): the project loads, the task fails then.
    pub(crate) fn when_run(&mut self, location: Location, message: String) {
        let mut diagnostic = Diagnostic::when_run(location.clone(), message);
        diagnostic.task = self.task_names.get(&location).cloned();
        self.diagnostics.push(diagnostic);
    }

    pub(crate) fn warning(&mut self, location: Location, message: String) {
        self.diagnostics
            .push(Diagnostic::warning(location, message));
    }

    /// Parses a task file once; later calls share the result.
    /// Whether `path` is being loaded now (an include of it from itself).
    pub(crate) fn is_loading(&self, path: &Path) -> bool {
        self.files_loading.iter().any(|p| p == path)
    }

    /// Why a task file did not load, when a tentative parse failed.
    pub(crate) fn unloadable_reason(&self, path: &Path) -> Option<String> {
        self.unloadable.get(path).map(ToString::to_string)
    }

    pub(crate) fn task_file(
        &mut self,
        path: &Path,
        role: Option<&Path>,
        from: Option<Location>,
    ) -> Option<Arc<[Task]>> {
        if let Some(tasks) = self.task_files.get(path) {
            return Some(tasks.clone());
        }
        if self.files_loading.iter().any(|p| p == path)
            || self.files_loading.len() >= MAX_INCLUDE_DEPTH
        {
            let chain: Vec<String> = self
                .files_loading
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            self.error(
                from.unwrap_or_else(|| Location::file(path)),
                format!(
                    "recursive import of {} (through {})",
                    path.display(),
                    chain.join(" -> ")
                ),
            );
            return None;
        }
        self.files_loading.push(path.to_path_buf());
        let node = read_yaml(self, path);
        let file: Arc<Path> = Arc::from(path);
        let tasks: Arc<[Task]> = match node {
            Some(node) => parse_tasks(self, &TaskFile { file: &file, role }, &node).into(),
            None => Arc::from(Vec::new()),
        };
        self.files_loading.pop();
        self.task_files.insert(path.to_path_buf(), tasks.clone());
        self.parsed_order.push(path.to_path_buf());
        Some(tasks)
    }

    /// Parses a task file that nothing may ever include: if it does not load,
    /// what went wrong is kept aside (for a run-time include of it, and for a
    /// static include, which parses it again and reports it) instead of
    /// failing the project, as Ansible never reads such a file.
    pub(crate) fn tentative_task_file(
        &mut self,
        path: &Path,
        role: Option<&Path>,
    ) -> Option<Arc<[Task]>> {
        if let Some(tasks) = self.task_files.get(path) {
            return Some(tasks.clone());
        }
        let mark = self.mark();
        let tasks = self.task_file(path, role, None);
        // It and every file it imported go: a static include parses them
        // again, and reports what is wrong.
        let Some(first_error) = self.roll_back_on_error(mark) else {
            return tasks;
        };
        self.unloadable.insert(path.to_path_buf(), first_error);
        None
    }

    /// The YAML files in a role's other directories (`tests/`, `includes/`):
    /// an `include_tasks` may name one by a templated path
    /// (`{{ role_path }}/tests/one.yml`), so each is parsed now and kept if
    /// it is a task list; one that is not is said only when included.
    fn role_extra_task_files(&mut self, role: &Path) {
        let Ok(entries) = std::fs::read_dir(role) else {
            return;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|dir| dir.is_dir())
            .filter(|dir| {
                dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    !ROLE_DATA_DIRS.contains(&n) && !n.ends_with("_plugins") && !n.starts_with('.')
                })
            })
            .collect();
        dirs.sort();
        for file in dirs.iter().flat_map(|dir| yaml_files(dir)) {
            let _ = self.tentative_task_file(&file, Some(role));
        }
    }

    /// Where the loader's records stand, to undo a tentative load.
    fn mark(&self) -> Mark {
        Mark {
            diagnostics: self.diagnostics.0.len(),
            bridged: self.bridged.len(),
            foreign_plugins: self.foreign_plugins.len(),
            extra_params: self.extra_params.len(),
            parsed: self.parsed_order.len(),
            roles: self.roles.keys().cloned().collect(),
        }
    }

    /// Undoes what was loaded since `mark` when it reported an error, and
    /// returns that first error; `None` (nothing undone) when it loaded.
    fn roll_back_on_error(&mut self, mark: Mark) -> Option<Diagnostic> {
        let first_error = self.diagnostics.0[mark.diagnostics..]
            .iter()
            .find(|d| d.is_error())
            .cloned()?;
        self.diagnostics.0.truncate(mark.diagnostics);
        self.bridged.truncate(mark.bridged);
        self.foreign_plugins.truncate(mark.foreign_plugins);
        self.extra_params.truncate(mark.extra_params);
        for parsed in self.parsed_order.split_off(mark.parsed) {
            self.task_files.remove(&parsed);
        }
        self.roles.retain(|role, _| mark.roles.contains(role));
        Some(first_error)
    }

    fn vars_file(&mut self, path: &Path, what: &str) -> VarList {
        let Some(node) = read_yaml(self, path) else {
            return Arc::from(Vec::new());
        };
        let file: Arc<Path> = Arc::from(path);
        parse_vars(
            self,
            &TaskFile {
                file: &file,
                role: None,
            },
            &node,
            what,
        )
    }

    /// Whether role `name` is being loaded now (a role including itself).
    /// Whether `tasks/<file>.yml` of role `name` is being loaded now (an
    /// import of it from inside it would recurse).
    pub(crate) fn role_task_file_is_loading(&self, name: &str, file: &str) -> bool {
        super::resolve_role(&self.role_paths, name).is_ok_and(|path| {
            let tasks = path.join("tasks");
            [
                tasks.join(file),
                tasks.join(format!("{file}.yml")),
                tasks.join(format!("{file}.yaml")),
            ]
            .iter()
            .any(|candidate| self.files_loading.contains(candidate))
        })
    }

    pub(crate) fn role_is_loading(&self, name: &str) -> bool {
        super::resolve_role(&self.role_paths, name)
            .is_ok_and(|path| self.roles_loading.contains(&path))
    }

    /// The roles an `include_role` named by a template may name, as
    /// Ansible finds them only when the include runs: the roles under the
    /// project's `roles/` and the including role's, each loaded
    /// tentatively, so one that does not load is left out and fails only an
    /// include that names it. (Roles elsewhere on ANSIBLE_ROLES_PATH are
    /// not: that can be every role of a machine.)
    pub(crate) fn candidate_roles(&mut self, including_role: Option<&Path>) {
        let mut dirs: Vec<PathBuf> = vec![self.role_paths.base_dir.join("roles")];
        dirs.extend(including_role.map(|role| role.join("roles")));
        for dir in dirs {
            if !self.candidate_dirs.insert(dir.clone()) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut roles: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    ["tasks", "meta", "defaults", "vars"]
                        .iter()
                        .any(|d| p.join(d).is_dir())
                })
                .collect();
            roles.sort();
            for path in roles {
                self.tentative_role(&path);
            }
        }
    }

    fn tentative_role(&mut self, path: &Path) {
        let path = enka_template::normalize_path(path);
        if self.roles.contains_key(&path) || self.roles_loading.contains(&path) {
            return;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mark = self.mark();
        self.role(&name, &path, Location::file(&path));
        self.roll_back_on_error(mark);
    }

    /// Resolves and loads a role; reports where it was looked for when
    /// missing.
    pub(crate) fn role_by_name(&mut self, name: &str, from: Location) -> Option<Arc<Role>> {
        match super::resolve_role(&self.role_paths, name) {
            Ok(path) => self.role(name, &path, from),
            Err(tried) => {
                let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
                self.error(
                    from,
                    format!(
                        "role {name} was not found (looked in: {})",
                        tried.join(", ")
                    ),
                );
                None
            }
        }
    }

    fn role(&mut self, name: &str, path: &Path, from: Location) -> Option<Arc<Role>> {
        if let Some(role) = self.roles.get(path) {
            return Some(role.clone());
        }
        if self.roles_loading.iter().any(|p| p == path)
            || self.roles_loading.len() >= MAX_INCLUDE_DEPTH
        {
            self.error(from, format!("role {name} includes itself"));
            return None;
        }
        self.roles_loading.push(path.to_path_buf());
        self.add_plugin_dir(path);
        let meta = self.role_meta(path);
        // Roles do not inherit a play's `collections`; their own list is in
        // meta/main.yml (Ansible's Role._load_role_data).
        let outer = std::mem::replace(
            &mut self.collections,
            role_collections(path, &meta.collections),
        );
        let tasks_dir = path.join("tasks");
        let mut task_files = HashMap::new();
        // main.yml is what Ansible runs; every other file under tasks/ only
        // when something includes it: parsed now (for includes named at run
        // time), but its problems are reported only when it is included.
        for file in yaml_files(&tasks_dir) {
            let name = stem(&tasks_dir, &file);
            let tasks = if name == "main" {
                self.task_file(&file, Some(path), None)
            } else {
                self.tentative_task_file(&file, Some(path))
            };
            if let Some(tasks) = tasks {
                task_files.insert(name, tasks);
            }
        }
        self.role_extra_task_files(path);
        let handlers_file = ["main.yml", "main.yaml"]
            .iter()
            .map(|f| path.join("handlers").join(f))
            .find(|f| f.is_file());
        let handlers = handlers_file
            .and_then(|file| self.task_file(&file, Some(path), None))
            .unwrap_or_else(|| Arc::from(Vec::new()));
        self.collections = outer;
        let mut defaults = HashMap::new();
        for file in yaml_files(&path.join("defaults")) {
            let vars = self.vars_file(&file, "default");
            defaults.insert(stem(&path.join("defaults"), &file), vars);
        }
        let mut vars = HashMap::new();
        for file in yaml_files(&path.join("vars")) {
            let list = self.vars_file(&file, "var");
            vars.insert(stem(&path.join("vars"), &file), list);
        }
        self.template_dir(&path.join("templates"));
        let dependencies = match &meta.dependencies {
            Some(node) => self.role_dependencies(path, node),
            None => Vec::new(),
        };
        self.roles_loading.pop();
        let role = Arc::new(Role {
            name: name.to_owned(),
            path: path.to_path_buf(),
            defaults,
            vars,
            task_files,
            dependencies,
            handlers,
            allow_duplicates: meta.allow_duplicates,
        });
        self.roles.insert(path.to_path_buf(), role.clone());
        Some(role)
    }

    /// Registers every file under a role's `templates/` for lookups and
    /// includes, compiling each once.
    fn template_dir(&mut self, dir: &Path) {
        for path in super::walk::files_under(dir) {
            if !self.template_files.insert(path.clone()) {
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    let location =
                        Location::new(&Arc::from(path.as_path()), Pos { line: 1, col: 1 });
                    // A template file encrypted with Vault is rendered from
                    // its plain text (Ansible's loader decrypts it).
                    let text = if is_vault_encrypted(&text) {
                        match self.decrypt_vault(&text, &path) {
                            Ok(plain) => plain,
                            Err(message) => {
                                self.when_run(
                                    location,
                                    format!("template {}: {message}", path.display()),
                                );
                                continue;
                            }
                        }
                    } else {
                        text
                    };
                    self.note_plugins(&location, &text, false);
                    if let Err(err) = self.builder.add_file(&path.to_string_lossy(), text) {
                        let line = u32::try_from(err.line().unwrap_or(1)).unwrap_or(1);
                        // It fails the task that renders it, as in Ansible.
                        self.when_run(
                            Location::new(&Arc::from(path.as_path()), Pos { line, col: 1 }),
                            format!("template {}: {err}", path.display()),
                        );
                    }
                }
                Err(err) => self.error(
                    Location::file(&path),
                    format!("cannot read template: {err}"),
                ),
            }
        }
    }

    /// A playbook's or the project's directory: its plugin directories go to
    /// the Ansible worker (which reads its `ansible.cfg` too), its templates
    /// are compiled.
    fn project_dir(&mut self, dir: &Path) {
        if !self.project_dirs.insert(dir.to_path_buf()) {
            return;
        }
        self.add_plugin_dir(dir);
        // Ansible's search path for templates ends at the playbook's own
        // `templates/`: compiled (and decrypted) with the project too.
        self.template_dir(&dir.join("templates"));
    }
}

/// What a role's `meta/main.yml` says that changes how it runs.
struct RoleMeta {
    collections: Arc<[String]>,
    dependencies: Option<Node>,
    allow_duplicates: bool,
}

impl Loader {
    /// Notes every filter, test and lookup that `source` names and enka
    /// lacks; `expression` for a bare condition.
    pub(crate) fn note_plugins(&mut self, location: &Location, source: &str, expression: bool) {
        for found in plugin_uses(source, expression) {
            let mut at = location.clone();
            if let Some(pos) = at.pos.as_mut() {
                let line = source[..found.offset].matches('\n').count();
                pos.line += u32::try_from(line).unwrap_or(0);
            }
            self.note_plugin(&at, found.kind, &found.name);
        }
    }

    /// Notes one plugin name, unless enka has it or it is noted already.
    pub(crate) fn note_plugin(&mut self, location: &Location, kind: PluginKind, name: &str) {
        if self
            .foreign_plugins
            .iter()
            .any(|(_, k, n)| *k == kind && n == name)
            || self
                .native_plugins
                .iter()
                .any(|(k, n)| *k == kind && n == name)
        {
            return;
        }
        if self.builder.has_plugin(kind, name) {
            // A project's own plugin may replace it (see resolve_shadowing).
            if kind != PluginKind::Lookup {
                self.native_plugins.push((kind, name.to_owned()));
            }
            return;
        }
        self.remember_task(location);
        self.foreign_plugins
            .push((location.clone(), kind, name.to_owned()));
    }

    fn add_plugin_dir(&mut self, dir: &Path) {
        if !self.plugin_dirs.iter().any(|d| d == dir) {
            self.plugin_dirs.push(dir.to_path_buf());
        }
    }

    /// Directories whose plugin subdirectories Ansible would add.
    pub(crate) fn plugin_dirs(&self) -> &[PathBuf] {
        &self.plugin_dirs
    }

    /// Whether a project's, playbook's or role's own `action_plugins/` or
    /// `library/` has an action named `name` (short, or `ansible.legacy.`),
    /// which Ansible's plugin loader finds before the built-in one.
    pub(crate) fn shadows_builtin(&self, name: &str) -> bool {
        let short = match name.strip_prefix("ansible.legacy.") {
            Some(short) => short,
            None if !name.contains('.') => name,
            None => return false,
        };
        let file = format!("{short}.py");
        self.plugin_dirs.iter().any(|dir| {
            dir.join("action_plugins").join(&file).is_file()
                || dir.join("library").join(&file).is_file()
        })
    }

    /// Checks a `module_defaults` value and resolves its keys, natively
    /// where enka can; the others wait for Ansible.
    pub(crate) fn note_module_defaults(&mut self, at: Location, value: &minijinja::Value) {
        let keys = match super::module_defaults::written_keys(value) {
            Ok(keys) => keys,
            Err(message) => {
                self.error(at, message);
                return;
            }
        };
        for key in keys {
            if self.module_defaults.keys.contains_key(&key)
                || self.module_defaults_foreign.iter().any(|(_, k)| *k == key)
                || (!self.shadows_builtin(&key) && self.module_defaults.resolve_natively(&key))
            {
                continue;
            }
            self.module_defaults_foreign.push((at.clone(), key));
        }
    }

    /// Reads `meta/main.yml`: its `collections` and `dependencies`.
    fn role_meta(&mut self, role: &Path) -> RoleMeta {
        let mut meta = RoleMeta {
            collections: Arc::from(Vec::new()),
            dependencies: None,
            allow_duplicates: false,
        };
        let Some(file) = ["main.yml", "main.yaml"]
            .iter()
            .map(|name| role.join("meta").join(name))
            .find(|p| p.is_file())
        else {
            return meta;
        };
        let Some(node) = read_yaml(self, &file) else {
            return meta;
        };
        if let Some(list) = node.get("collections") {
            match list.as_seq() {
                Some(items) => {
                    meta.collections = items
                        .iter()
                        .map(Node::key_string)
                        .collect::<Vec<_>>()
                        .into();
                }
                None if matches!(list.value, yaml::Value::Null) => {}
                None => self.error(
                    Location::new(&Arc::from(file.as_path()), list.pos),
                    "collections must be a list of collection names".to_owned(),
                ),
            }
        }
        meta.allow_duplicates = node
            .get("allow_duplicates")
            .is_some_and(|flag| matches!(flag.value, yaml::Value::Bool(true)));
        meta.dependencies = node
            .get("dependencies")
            .filter(|d| !matches!(d.value, yaml::Value::Null))
            .cloned();
        meta
    }

    /// `dependencies` of a role's meta: each a role name or a mapping with
    /// `role` and parameters, as in a play's `roles`.
    fn role_dependencies(&mut self, role: &Path, node: &Node) -> Vec<super::RoleRef> {
        let file: Arc<Path> = Arc::from(role.join("meta").join("main.yml").as_path());
        let at = TaskFile {
            file: &file,
            role: Some(role),
        };
        let Some(items) = node.as_seq() else {
            self.error(
                Location::new(&file, node.pos),
                "dependencies must be a list of roles".to_owned(),
            );
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|entry| self.role_ref(&at, entry))
            .collect()
    }
}

/// How far the loader's records went before a tentative load.
struct Mark {
    diagnostics: usize,
    bridged: usize,
    foreign_plugins: usize,
    extra_params: usize,
    parsed: usize,
    roles: HashSet<PathBuf>,
}

/// The task Ansible adds to a play that gathers facts.
fn fact_gathering_task(pos: yaml::Pos) -> Node {
    let node = |value| Node {
        value,
        pos,
        tag: None,
    };
    let text = |s: &str| node(yaml::Value::Str(s.to_owned()));
    node(yaml::Value::Map(vec![
        (text("name"), text("Gathering Facts")),
        (
            text("ansible.builtin.gather_facts"),
            node(yaml::Value::Null),
        ),
    ]))
}
