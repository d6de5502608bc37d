//! Task semantics: `when`, loops, `register`, `block`/`rescue`/`always`,
//! `until`, `changed_when`/`failed_when`, `ignore_errors`, includes, and
//! variable precedence — everything between a loaded role and a module call.
//!
//! A run is driven by [`run`]: given a loaded [`Project`], what to run and
//! the extra vars, it walks the compiled tasks and calls modules in-process.
//! The engine is the one place that attaches a task's location to errors.
//!
//! It stands on `enka-project` (the loaded tasks), `enka-modules` (what a
//! task's action runs), `enka-kube`, `enka-template` and `enka-worker`; the
//! operator and the command line drive it.

#![forbid(unsafe_code)]

mod exec;
mod lockstep;
mod observe;
mod reserved;
mod result;
mod runner_dir;
pub mod scope;
mod tags;
#[cfg(test)]
mod tests;
mod timing;
mod vars_files;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use minijinja::Value;

pub use exec::censored_item;
pub use observe::{Observer, TaskEvent, TaskStatus};
pub use result::{Failure, RunOutcome, RunStatus, Stats};
pub use runner_dir::RunnerDir;
use scope::{Facts, Scope};
pub use tags::TagSelection;
pub use tags::evaluate as evaluate_tags;
pub use timing::TaskTiming;

use enka_kube::Cluster;
use enka_project::role::{Project, VarList};
use enka_template::Var;

/// What to run.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A role directory (as resolved when the project loaded).
    Role(PathBuf),
    /// A playbook file.
    Playbook(PathBuf),
}

/// Limits and knobs of one run.
#[derive(Clone)]
pub struct RunOptions {
    /// Ansible verbosity (0–7); `debug` tasks above it are skipped.
    pub verbosity: u8,
    /// When the run must stop; `until` loops and pauses respect it.
    pub deadline: Option<Instant>,
    /// Nesting bound of `include_tasks`/`include_role` at run time.
    pub max_include_depth: usize,
    /// Loop iterations allowed per task.
    pub max_loop_items: usize,
    /// The custom resource the run is for.
    pub owner: Option<Arc<enka_kube::Owner>>,
    /// Which task events are logged.
    pub log_events: LogEvents,
    /// Told each task's result as the run goes.
    pub observer: Option<Arc<dyn Observer>>,
    /// `enka diff`: the run's cluster only pretends to write (the caller
    /// gives a dry-run one), and tasks that go through Ansible run in check
    /// mode.
    pub dry_run: bool,
    /// Log each task's outcome and duration at info level, as Ansible's
    /// `profile_tasks` callback (a custom resource's verbosity ≥ 1).
    pub profile_tasks: bool,
    /// Which tasks run by their tags.
    pub tags: TagSelection,
    /// `--check`: tasks run in check mode unless their `check_mode` says
    /// otherwise.
    pub check_mode: bool,
    /// `--diff`: actions report the changes they make unless their `diff`
    /// says otherwise.
    pub diff: bool,
    /// `--start-at-task`: tasks before the first whose name (or
    /// `role : name`) matches this pattern do not run.
    pub start_at_task: Option<String>,
    /// `--force-handlers` (or `ANSIBLE_FORCE_HANDLERS`): every play as if
    /// it said `force_handlers: true`.
    pub force_handlers: bool,
    /// `--forks`: how many hosts of a play run a task at once.
    pub forks: usize,
    /// `--limit`: the hosts every play is narrowed to.
    pub limit: Option<enka_project::inventory::HostLimit>,
    /// `--connection`: the connection of hosts that name none, below the
    /// `connection` keyword (Ansible's default: `ssh`, `local` for
    /// localhost).
    pub connection: Option<String>,
    /// An operator's reconcile: the directory upstream's ansible-runner
    /// would run it in, whose paths the run's magic variables name
    /// (`inventory_file`, `playbook_dir`, …) and whose inventory (localhost,
    /// `local`) the run has unless the project names one.
    pub runner_dir: Option<Arc<RunnerDir>>,
}

/// Which task events a run logs, as upstream's `--ansible-log-events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogEvents {
    /// Task starts (but `set_fact` and `debug`), `debug` output and failures.
    #[default]
    Tasks,
    /// Every task's result too.
    Everything,
    /// None.
    Nothing,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            verbosity: 0,
            deadline: None,
            max_include_depth: 32,
            max_loop_items: 100_000,
            owner: None,
            log_events: LogEvents::Nothing,
            observer: None,
            profile_tasks: false,
            dry_run: false,
            tags: TagSelection::default(),
            check_mode: false,
            diff: false,
            start_at_task: None,
            force_handlers: false,
            connection: None,
            limit: None,
            forks: 5,
            runner_dir: None,
        }
    }
}

/// Runs `entry` of `project` with `extra_vars` (highest precedence).
pub async fn run(
    project: &Arc<Project>,
    entry: &Entry,
    extra_vars: Vec<(Arc<str>, Var)>,
    cluster: Option<Arc<dyn Cluster>>,
    options: RunOptions,
) -> RunOutcome {
    let extra: VarList = extra_vars.into();
    let mut runner = exec::Runner::new(project.clone(), cluster, options);
    let started = Instant::now();
    let status = runner.run_entry(entry, extra).await;
    runner.finish(status, started.elapsed())
}

/// `ansible_version` as ansible-core makes it from its `__version__`
/// (`2.18.19`, `2.19.0rc1`): the worker's when known, else the line's first
/// release.
pub(crate) fn ansible_version(options: &enka_template::Options) -> Value {
    let version: Arc<str> = options.ansible_core.clone().unwrap_or_else(|| {
        Arc::from(match options.semantics {
            enka_template::Semantics::Ansible218 => "2.18.0",
            _ => "2.19.0",
        })
    });
    let mut parts = version.split('.');
    let mut number = || {
        let part = parts.next().unwrap_or("0");
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        Value::from(digits.parse::<i64>().unwrap_or(0))
    };
    let (major, minor, revision) = (number(), number(), number());
    Value::from_pairs([
        (Value::from("string"), Value::from(&*version)),
        (Value::from("full"), Value::from(&*version)),
        (Value::from("major"), major),
        (Value::from("minor"), minor),
        (Value::from("revision"), revision),
    ])
}

/// `ansible_config_file`: the configuration file Ansible reads
/// (`ANSIBLE_CONFIG`, a file or a directory holding `ansible.cfg`; then
/// `ansible.cfg` in `cwd`, when a run has one; `~/.ansible.cfg`;
/// `/etc/ansible/ansible.cfg`), or none. Without a `cwd` (a reconcile:
/// ansible-runner's `project/` holds none) it depends on the process alone,
/// so it is looked for once, not on every reconcile.
pub(crate) fn ansible_config_file(cwd: Option<&std::path::Path>) -> Value {
    static WITHOUT_CWD: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    match cwd {
        Some(_) => find_config_file(cwd),
        None => WITHOUT_CWD.get_or_init(|| find_config_file(None)).clone(),
    }
}

fn find_config_file(cwd: Option<&std::path::Path>) -> Value {
    let named = std::env::var_os("ANSIBLE_CONFIG")
        .map(PathBuf::from)
        .map(|path| {
            if path.is_dir() {
                path.join("ansible.cfg")
            } else {
                path
            }
        });
    let home = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".ansible.cfg"));
    [
        named,
        cwd.map(|dir| dir.join("ansible.cfg")),
        home,
        Some(PathBuf::from("/etc/ansible/ansible.cfg")),
    ]
    .into_iter()
    .flatten()
    .find(|path| path.is_file())
    .map_or(Value::from(()), |path| {
        Value::from(path.to_string_lossy().as_ref())
    })
}

pub(crate) fn empty_facts() -> Facts {
    Arc::default()
}

pub(crate) fn base_scope(extra: VarList) -> Scope {
    Scope {
        extra,
        builtins: builtins(),
        ..Scope::default()
    }
}

fn builtins() -> VarList {
    let pairs: Vec<(&str, Value)> = vec![
        ("ansible_check_mode", Value::from(false)),
        ("ansible_diff_mode", Value::from(false)),
        ("inventory_hostname", Value::from("localhost")),
        ("inventory_hostname_short", Value::from("localhost")),
        ("ansible_connection", Value::from("local")),
        // PlayContext.update_vars: the address tasks connect to, the
        // inventory name unless the inventory sets ansible_host.
        ("ansible_host", Value::from("localhost")),
        ("ansible_verbosity", Value::from(0)),
        ("ansible_forks", Value::from(5)),
        (
            "groups",
            Value::from_pairs([
                (
                    Value::from("all"),
                    Value::from(vec![Value::from("localhost")]),
                ),
                (
                    Value::from("ungrouped"),
                    Value::from(vec![Value::from("localhost")]),
                ),
            ]),
        ),
        ("group_names", Value::from(Vec::<Value>::new())),
        (
            "ansible_facts",
            Value::from_pairs(std::iter::empty::<(Value, Value)>()),
        ),
        (
            "ansible_play_hosts",
            Value::from(vec![Value::from("localhost")]),
        ),
        ("play_hosts", Value::from(vec![Value::from("localhost")])),
        (
            "ansible_play_hosts_all",
            Value::from(vec![Value::from("localhost")]),
        ),
        (
            "ansible_play_batch",
            Value::from(vec![Value::from("localhost")]),
        ),
        ("ansible_run_tags", Value::from(vec![Value::from("all")])),
        ("ansible_skip_tags", Value::from(Vec::<Value>::new())),
    ];
    pairs
        .into_iter()
        .map(|(k, v)| (Arc::from(k), Var::plain(v)))
        .collect::<Vec<_>>()
        .into()
}
