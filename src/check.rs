//! `enka check`: load every watch and role, report every problem at once.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::catalogue::ModuleRef;
use crate::role::{
    Action, Diagnostics, LoadOptions, Location, Project, Role, RoleFrom, Target, Task,
};
use crate::watches::{self, role_paths, targets};

/// What `enka check` reads.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The watches file.
    pub watches_file: PathBuf,
    /// Extra role directories (`--ansible-roles-path`).
    pub roles_path: Vec<PathBuf>,
    /// Extra collection directories (`--ansible-collections-path`).
    pub collections_path: Vec<PathBuf>,
    /// How the Ansible worker starts (to resolve names and decrypt Vault).
    pub ansible: crate::worker::Config,
}

/// The result of a check.
#[derive(Debug)]
pub struct Report {
    /// Everything found.
    pub diagnostics: Diagnostics,
    /// Per watch: how many tasks run natively and which go through Ansible.
    pub watches: Vec<WatchReport>,
    /// Filters, tests and lookups that Ansible runs for the project's
    /// templates, with the first place that names each.
    pub python_plugins: Vec<(Location, String)>,
    /// One line for the end of the output.
    pub summary: String,
}

/// How one watch's tasks run.
#[derive(Debug)]
pub struct WatchReport {
    /// `group/version, Kind`.
    pub name: String,
    /// Tasks enka runs itself.
    pub native: usize,
    /// Tasks that go through Ansible: where, and the action.
    pub bridged: Vec<(Location, String)>,
    /// `include_role` names that are templates: which role runs is known only
    /// at run time, so what it holds is not counted here.
    pub unchecked: Vec<(Location, String)>,
}

impl WatchReport {
    /// The lines `enka check` prints for this watch.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{}: {} task{} native, {} through Ansible",
            self.name,
            self.native,
            plural(self.native, "s"),
            self.bridged.len()
        );
        for (location, action) in &self.bridged {
            out.push_str(&format!(
                "\n  {location}: {action} (no native code in enka; Ansible runs it in the worker)"
            ));
        }
        for (location, name) in &self.unchecked {
            out.push_str(&format!(
                "\n  {location}: include_role of {name}: the role is chosen at run time and was not counted"
            ));
        }
        out
    }
}

impl Report {
    /// Whether the project can run without a task failing on how it is
    /// written.
    pub fn ok(&self) -> bool {
        !self.diagnostics.has_problems()
    }
}

fn count_tasks(tasks: &[Task]) -> usize {
    tasks
        .iter()
        .map(|t| match &t.action {
            Action::Block {
                block,
                rescue,
                always,
            } => 1 + count_tasks(block) + count_tasks(rescue) + count_tasks(always),
            _ => 1,
        })
        .sum()
}

/// Checks a project.
pub fn check(options: &CheckOptions) -> Report {
    let (watches, mut diagnostics) = watches::load(&options.watches_file);
    let paths = role_paths(
        &options.watches_file,
        &options.roles_path,
        &options.collections_path,
    );
    let load = LoadOptions {
        role_paths: paths,
        templates: crate::template::Options::from_env(),
        origins: watches
            .iter()
            .map(|w| (w.target.clone(), w.location.clone()))
            .collect(),
        lookups: Vec::new(),
        ansible: Some(options.ansible.clone()),
        inventory: crate::role::InventoryLoad::WhenNamed,
    };
    let (project, project_diagnostics) = Project::load(&load, &targets(&watches));
    diagnostics.extend(project_diagnostics);
    // Errors a task meets only when it runs count as errors here: they
    // fail whenever that task runs.
    let errors = diagnostics.0.iter().filter(|d| d.is_problem()).count();
    let warnings = diagnostics.0.len() - errors;
    let summary = match (&project, errors) {
        (Some(project), 0) => {
            let in_plays: usize = project
                .playbooks
                .values()
                .flat_map(|playbook| &playbook.plays)
                .map(|play| {
                    count_tasks(&play.pre_tasks)
                        + count_tasks(&play.tasks)
                        + count_tasks(&play.post_tasks)
                })
                .sum();
            let tasks = in_plays
                + project
                    .task_files
                    .values()
                    .map(|t| count_tasks(t))
                    .sum::<usize>();
            format!(
                "enka check: ok — {} watch{}, {} role{}, {} playbook{}, {} task{}, {} warning{}",
                watches.len(),
                plural(watches.len(), "es"),
                project.roles.len(),
                plural(project.roles.len(), "s"),
                project.playbooks.len(),
                plural(project.playbooks.len(), "s"),
                tasks,
                plural(tasks, "s"),
                warnings,
                plural(warnings, "s"),
            )
        }
        _ => format!(
            "enka check: {errors} error{}, {warnings} warning{} in {}",
            plural(errors, "s"),
            plural(warnings, "s"),
            options.watches_file.display()
        ),
    };
    let (watch_reports, python_plugins) = match &project {
        Some(project) if errors == 0 => (
            watches
                .iter()
                .map(|watch| watch_report(project, watch))
                .collect(),
            project
                .python_plugins
                .iter()
                .map(|(location, kind, name)| (location.clone(), format!("{} {name}", kind.word())))
                .collect(),
        ),
        _ => (Vec::new(), Vec::new()),
    };
    Report {
        diagnostics,
        watches: watch_reports,
        python_plugins,
        summary,
    }
}

fn watch_report(project: &Project, watch: &watches::Watch) -> WatchReport {
    let mut walk = Walk {
        project,
        report: WatchReport {
            name: format!("{}, Kind={}", watch.gvk.api_version(), watch.gvk.kind),
            native: 0,
            bridged: Vec::new(),
            unchecked: Vec::new(),
        },
        seen_files: HashSet::new(),
        seen_roles: HashSet::new(),
    };
    let mut targets = vec![&watch.target];
    if let Some(Some(target)) = watch.finalizer.as_ref().map(|f| f.target.as_ref()) {
        targets.push(target);
    }
    for target in targets {
        match target {
            Target::Role(name) => {
                let path = crate::role::resolve_role(&project.role_paths, name).ok();
                if let Some(role) = path.and_then(|p| project.role(&p).cloned()) {
                    walk.role(&role, &RoleFrom::default());
                }
            }
            Target::Playbook(path) => {
                if let Some(playbook) = project.playbooks.get(path) {
                    for play in &playbook.plays {
                        walk.tasks(&play.pre_tasks);
                        for role_ref in &play.roles {
                            walk.role(&role_ref.role, &RoleFrom::default());
                        }
                        walk.tasks(&play.tasks);
                        walk.tasks(&play.post_tasks);
                    }
                }
            }
        }
    }
    walk.report
}

/// Walks the tasks a watch can run, counting each task file once.
struct Walk<'a> {
    project: &'a Project,
    report: WatchReport,
    seen_files: HashSet<*const [Task]>,
    seen_roles: HashSet<(std::path::PathBuf, String)>,
}

impl Walk<'_> {
    fn role(&mut self, role: &Arc<Role>, from: &RoleFrom) {
        if !self
            .seen_roles
            .insert((role.path.clone(), from.tasks.clone()))
        {
            return;
        }
        for dependency in &role.dependencies {
            self.role(&dependency.role, &RoleFrom::default());
        }
        if let Some(tasks) = role.tasks(&from.tasks) {
            self.file(tasks);
        }
    }

    fn file(&mut self, tasks: &Arc<[Task]>) {
        if self.seen_files.insert(Arc::as_ptr(tasks)) {
            self.tasks(tasks);
        }
    }

    fn tasks(&mut self, tasks: &[Task]) {
        for task in tasks {
            match &task.action {
                Action::Module { module, .. } => match module {
                    ModuleRef::Native(_) => self.report.native += 1,
                    ModuleRef::Ansible(action) => self
                        .report
                        .bridged
                        .push((task.location.clone(), action.qualified_name().to_owned())),
                },
                Action::Block {
                    block,
                    rescue,
                    always,
                } => {
                    self.tasks(block);
                    self.tasks(rescue);
                    self.tasks(always);
                }
                Action::ImportRole { role, from } => self.role(role, from),
                Action::IncludeRole(include) => match &include.role {
                    Some(role) => self.role(role, &include.from),
                    None => self.report.unchecked.push((
                        task.location.clone(),
                        crate::template::pyrepr::to_text(&include.name),
                    )),
                },
                Action::IncludeTasks {
                    file, role, dir, ..
                } => {
                    let name = file
                        .as_str()
                        .filter(|n| !crate::template::is_possibly_template(n));
                    let path =
                        name.and_then(|n| crate::role::resolve_task_file(role.as_deref(), dir, n));
                    match path.and_then(|p| self.project.task_files.get(&p).cloned()) {
                        Some(tasks) => self.file(&tasks),
                        None => self.report.unchecked.push((
                            task.location.clone(),
                            crate::template::pyrepr::to_text(file),
                        )),
                    }
                }
            }
        }
    }
}

fn plural(n: usize, suffix: &'static str) -> &'static str {
    if n == 1 { "" } else { suffix }
}
