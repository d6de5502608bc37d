//! `enka check`: load every watch and role, report every problem at once.

use std::path::{Path, PathBuf};

use crate::role::{Action, Diagnostics, LoadOptions, Project, RolePaths, Target, Task};
use crate::watches;

/// What `enka check` reads.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The watches file.
    pub watches_file: PathBuf,
    /// Extra role directories (`--ansible-roles-path`).
    pub roles_path: Vec<PathBuf>,
    /// Extra collection directories (`--ansible-collections-path`).
    pub collections_path: Vec<PathBuf>,
}

/// The result of a check.
#[derive(Debug)]
pub struct Report {
    /// Everything found.
    pub diagnostics: Diagnostics,
    /// One line for the end of the output.
    pub summary: String,
}

impl Report {
    /// Whether the project can run.
    pub fn ok(&self) -> bool {
        !self.diagnostics.has_errors()
    }
}

/// The role search paths for a project whose watches file is `watches_file`.
pub fn role_paths(
    watches_file: &Path,
    roles_path: &[PathBuf],
    collections_path: &[PathBuf],
) -> RolePaths {
    let base_dir = watches_file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let base_dir = std::fs::canonicalize(&base_dir).unwrap_or(base_dir);
    let mut paths = RolePaths::from_env(&base_dir);
    paths.roles_path.splice(0..0, roles_path.iter().cloned());
    paths
        .collections_path
        .splice(0..0, collections_path.iter().cloned());
    paths
}

/// The targets (roles and playbooks) that the watches run.
pub fn targets(watches: &[watches::Watch]) -> Vec<Target> {
    let mut targets = Vec::new();
    for watch in watches {
        let mut add = |t: &Target| {
            if !targets.contains(t) {
                targets.push(t.clone());
            }
        };
        add(&watch.target);
        if let Some(Some(t)) = watch.finalizer.as_ref().map(|f| f.target.as_ref()) {
            add(t);
        }
    }
    targets
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
        ansible: Some(crate::worker::Config::from_env()),
    };
    let (project, project_diagnostics) = Project::load(&load, &targets(&watches));
    diagnostics.extend(project_diagnostics);
    let errors = diagnostics.errors().count();
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
    Report {
        diagnostics,
        summary,
    }
}

fn plural(n: usize, suffix: &'static str) -> &'static str {
    if n == 1 { "" } else { suffix }
}
