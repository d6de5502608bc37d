//! `--list-tasks`, `--list-tags` and `--list-hosts`: what ansible-playbook
//! prints instead of running a playbook (PlaybookCLI.run): each play, and
//! the tasks the tag selection keeps with their tags, templated with the
//! play's variables.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use minijinja::Value;

use crate::engine::{TagSelection, evaluate_tags};
use crate::role::{Action, Play, Playbook, Project, RoleFrom, RoleRef, Task};
use crate::template::{Context, VarList, VarSource};

/// Which listings to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Listings {
    /// `--list-tasks`.
    pub tasks: bool,
    /// `--list-tags`.
    pub tags: bool,
    /// `--list-hosts`.
    pub hosts: bool,
}

impl Listings {
    /// Whether any listing replaces the run.
    pub fn any(&self) -> bool {
        self.tasks || self.tags || self.hosts
    }
}

/// The listing of `playbook` (shown as `shown`), as ansible-playbook
/// prints it.
pub fn render(
    project: &Project,
    playbook: &Playbook,
    shown: &Path,
    listings: Listings,
    selection: &TagSelection,
    extra_vars: &[(Arc<str>, crate::template::Var)],
    limit: Option<&crate::inventory::HostLimit>,
) -> String {
    let mut out = format!("\nplaybook: {}\n", shown.display());
    for (index, play) in playbook.plays.iter().enumerate() {
        let hosts = host_list(&play.hosts);
        let name = play.name.clone().unwrap_or_else(|| hosts.join(","));
        out.push_str(&format!(
            "\n  play #{} ({}): {name}\tTAGS: [{}]\n",
            index + 1,
            hosts.join(","),
            play.tags.join(",")
        ));
        if listings.hosts {
            out.push_str(&hosts_section(project, &hosts, limit));
        }
        if listings.tasks || listings.tags {
            // The last definition of a name wins: extra vars over play vars.
            let vars: Vec<(String, crate::template::Var)> = play
                .vars
                .iter()
                .chain(extra_vars.iter())
                .map(|(name, var)| (name.to_string(), var.clone()))
                .collect();
            let source: Arc<dyn VarSource> = Arc::new(VarList(vars));
            let ctx = Context::new(
                project.templar.clone(),
                source,
                Arc::from(vec![project.base_dir.clone()]),
            );
            let mut walk = Walk {
                ctx: &ctx,
                selection,
                list_tasks: listings.tasks,
                lines: String::new(),
                all_tags: BTreeSet::new(),
            };
            if listings.tasks {
                walk.lines.push_str("    tasks:\n");
            }
            walk.play(play);
            if listings.tags {
                let tags: BTreeSet<String> = play
                    .tags
                    .iter()
                    .cloned()
                    .chain(walk.all_tags.iter().cloned())
                    .collect();
                walk.lines.push_str(&format!(
                    "      TASK TAGS: [{}]\n",
                    tags.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            out.push_str(&walk.lines);
        }
    }
    out
}

/// Calls `warn` for each host pattern of the playbook's plays that matches
/// nothing, as ansible-playbook warns when it makes each play's variables
/// (its listings included).
pub fn warn_unmatched(project: &Project, path: &Path, mut warn: impl FnMut(&str)) {
    let Some(playbook) = project.playbooks.get(path) else {
        return;
    };
    let inventory = project.inventory.as_deref().cloned().unwrap_or_default();
    for play in &playbook.plays {
        for pattern in inventory.unmatched(&host_list(&play.hosts)) {
            warn(&format!(
                "Could not match supplied host pattern, ignoring: {pattern}"
            ));
        }
    }
}

/// `play.hosts` as the list the Play keyword makes of it.
fn host_list(hosts: &Value) -> Vec<String> {
    match hosts.as_str() {
        Some(text) => text
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect(),
        None => hosts
            .try_iter()
            .into_iter()
            .flatten()
            .map(|h| crate::template::pyrepr::to_text(&h))
            .collect(),
    }
}

fn hosts_section(
    project: &Project,
    patterns: &[String],
    limit: Option<&crate::inventory::HostLimit>,
) -> String {
    let inventory = project.inventory.as_deref().cloned().unwrap_or_default();
    let hosts = inventory
        .select_limited(patterns, "inventory", limit)
        .unwrap_or_default();
    let quoted: Vec<String> = patterns.iter().map(|p| format!("'{p}'")).collect();
    let mut out = format!(
        "    pattern: [{}]\n    hosts ({}):\n",
        quoted.join(", "),
        hosts.len()
    );
    for host in hosts {
        out.push_str(&format!("      {host}\n"));
    }
    out
}

struct Walk<'a> {
    ctx: &'a Context,
    selection: &'a TagSelection,
    list_tasks: bool,
    lines: String,
    all_tags: BTreeSet<String>,
}

impl Walk<'_> {
    /// Play.compile's order: pre_tasks, roles, tasks, post_tasks; the
    /// implicit fact gathering is not among them.
    fn play(&mut self, play: &Play) {
        let inherited = play.tags.clone();
        let pre_tasks: Vec<&Task> = play
            .pre_tasks
            .iter()
            .filter(|t| !t.is_implicit_fact_gathering())
            .collect();
        self.tasks(pre_tasks.into_iter(), &inherited);
        for role_ref in &play.roles {
            self.role(role_ref, &inherited);
        }
        self.tasks(play.tasks.iter(), &inherited);
        self.tasks(play.post_tasks.iter(), &inherited);
    }

    fn role(&mut self, role_ref: &RoleRef, inherited: &[String]) {
        let mut inherited = inherited.to_vec();
        inherited.extend(role_ref.tags.iter().cloned());
        for dependency in &role_ref.role.dependencies {
            self.role(dependency, &inherited);
        }
        if let Some(tasks) = role_ref.role.tasks(&RoleFrom::default().tasks) {
            self.tasks(tasks.iter(), &inherited);
        }
    }

    fn tasks<'t>(&mut self, tasks: impl Iterator<Item = &'t Task>, inherited: &[String]) {
        for task in tasks {
            let mut own = inherited.to_vec();
            own.extend(task.tags.iter().cloned());
            match &task.action {
                // The CLI lists a block's tasks, not its rescue or always.
                Action::Block { block, .. } => self.tasks(block.iter(), &own),
                Action::ImportRole { role, from } => {
                    if let Some(tasks) = role.tasks(&from.tasks) {
                        self.tasks(tasks.iter(), &own);
                    }
                }
                _ => self.task(task, &own),
            }
        }
    }

    fn task(&mut self, task: &Task, written: &[String]) {
        let tags = evaluate_tags(self.ctx.templar(), self.ctx, written.iter());
        if !self.selection.selects(tags.iter().map(String::as_str)) {
            return;
        }
        let tags: BTreeSet<String> = tags.into_iter().collect();
        self.all_tags.extend(tags.iter().cloned());
        if self.list_tasks {
            self.lines.push_str(&format!(
                "      {}\tTAGS: [{}]\n",
                task.title(),
                tags.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
}
