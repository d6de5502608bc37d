//! Walking tasks: conditions, loops, retries, blocks and includes.
//!
//! The runner's state is here; what it does is in one module per job:
//! - `play.rs`: plays: their hosts and batches (`serial`), a runner per host in step, and what a
//!   play leaves to the next.
//! - `roles.rs`: roles: dependencies (each once per play and parameters), `vars`/`defaults`,
//!   handlers, `end_role`.
//! - `handlers.rs`: handlers: `notify` (by name or `listen`), and running the notified ones when a
//!   section ends or `flush_handlers` asks.
//! - `walk.rs`: walking a task list: which task runs (tags, `--start-at-task`), on which host turn,
//!   and what kind of task it is.
//! - `variables.rs`: a task's variables and context: precedence, `environment`, `module_defaults`,
//!   free-form `args`, `omit`.
//! - `conditions.rs`: conditions and boolean keywords: `when`, `ignore_errors` and their kin,
//!   judged as Ansible's strict booleans.
//! - `warnings.rs`: warnings and deprecations as Ansible's display gives them: each said once per
//!   run.
//! - `blocks.rs`: `block`, `rescue` and `always`.
//! - `includes.rs`: `include_tasks` and `include_role`: resolved, loaded and run when the task
//!   runs.
//! - `loops.rs`: loops: `loop` and `with_*` items, `loop_control`, the loop variables.
//! - `module_task.rs`: a task that runs a module: once per host, or once for the batch
//!   (`run_once`), its loop, `async`.
//! - `inventory.rs`: the inventory as `add_host`, `group_by` and `refresh_inventory` change it
//!   during a run.
//! - `outcome.rs`: a task's end: its result counted, registered, logged and forgiven
//!   (`ignore_errors`), or its failure.
//! - `retries.rs`: one execution of a module task (one loop item): `when`, then `until` retries,
//!   `changed_when` and `failed_when`.
//! - `execute.rs`: the module call itself: check mode, arguments templated, the deadline, an
//!   unreachable host.
//! - `no_log.rs`: `no_log`: what a hidden result shows, and what it keeps.
//! - `task_result.rs`: a task's result as Ansible registers it.

mod blocks;
mod conditions;
mod execute;
mod handlers;
mod includes;
mod inventory;
mod loops;
mod memory;
mod module_task;
mod no_log;
mod outcome;
mod play;
mod retries;
mod roles;
mod task_result;
mod variables;
mod walk;
mod warnings;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use enka_kube::Cluster;
use enka_modules::MetricUpdate;
use enka_project::role::Project;
use enka_project::role::Role;
use enka_project::role::Task;
use enka_project::role::VarList;
use enka_project::role::{Setting, Settings};
use enka_template::Error as TemplateError;
use enka_template::Templar;
use minijinja::Value;

use crate::RunOptions;
use crate::lockstep::Lockstep;
use crate::result::Failure;
use crate::result::RunOutcome;
use crate::result::RunStatus;
use crate::result::Stats;
use crate::scope;
use crate::scope::Scope;
use crate::timing::TaskTiming;

pub use no_log::censored_item;
use outcome::fail_result;

/// How a list of tasks ended.
enum Flow {
    Continue,
    Failed(Failure),
    EndPlay,
    /// `meta: end_role`: the tasks left in the role are skipped, `always`
    /// sections included (the strategy skips to the role's end).
    EndRole,
}

type BoxFlow<'a> = Pin<Box<dyn Future<Output = Flow> + Send + 'a>>;

/// Why a boolean keyword has no value.
enum KeywordError {
    /// Templating it failed.
    Template(TemplateError),
    /// It is not a boolean (Ansible's strict conversion).
    NotBoolean(String),
}

/// The `when` of a block, an import or a role entry, as its tasks inherit
/// it: the conditions, and where each string one is written when known.
#[derive(Clone)]
struct InheritedWhen {
    conditions: Arc<[Value]>,
    /// The file, and each condition's position in it.
    written: Option<(Arc<std::path::Path>, Positions)>,
}

/// Where each of a keyword's string values is written.
type Positions = Arc<[Option<enka_yaml::Pos>]>;

impl InheritedWhen {
    /// A task's `when` (a block's, an import's) with its positions.
    fn of(task: &Task) -> Self {
        InheritedWhen {
            conditions: task.when.clone(),
            written: Some((task.location.file.clone(), task.when_positions.clone())),
        }
    }
}

/// Conditions and settings a block passes down to its tasks.
#[derive(Clone, Default)]
struct Inherited {
    when: Vec<InheritedWhen>,
    /// Each inherited setting (the keyword table says which) of the play
    /// and blocks around the task, outermost first: most read the
    /// innermost, `environment` and `module_defaults` merge them all.
    settings: [Vec<Value>; Setting::COUNT],
    /// Tags of the blocks, imports and plays around the task.
    tags: Vec<String>,
    /// `notify` of the blocks around the task.
    notify: Vec<String>,
}

impl Inherited {
    /// What a block passes down to its tasks: its conditions, tags,
    /// `notify` and settings, inside those of the blocks around it.
    fn enter_block(&mut self, block: &Task) {
        self.tags.extend(block.tags.iter().cloned());
        self.notify.extend(block.notify.iter().cloned());
        if !block.when.is_empty() {
            self.when.push(InheritedWhen::of(block));
        }
        self.enter(&block.settings);
    }

    /// Takes on the settings a play or a block passes down.
    fn enter(&mut self, settings: &Settings) {
        for (setting, value) in settings.inherited() {
            self.settings[setting as usize].push(value.clone());
        }
    }

    /// `setting`'s values around the task, outermost first.
    fn setting(&self, setting: Setting) -> &[Value] {
        &self.settings[setting as usize]
    }

    /// The value of `setting` that holds for `task`: its own, else the
    /// innermost block's or the play's.
    fn for_task<'a>(&'a self, task: &'a Task, setting: Setting) -> Option<&'a Value> {
        task.settings
            .get(setting)
            .or_else(|| self.setting(setting).last())
    }
}

/// Where a task list runs: variables plus what the block above passes down.
#[derive(Clone)]
struct Frame {
    scope: Scope,
    inherited: Inherited,
    /// The role whose tasks these are, for includes and lookups.
    role: Option<Arc<Role>>,
    /// Where `template` and `file` lookups search (the role, the project).
    search_path: Arc<[std::path::PathBuf]>,
    depth: usize,
    /// Where its task list sits in the play's tree, for the lockstep of
    /// hosts (kept empty when a play runs on one host).
    position: Arc<[u32]>,
}

pub(crate) struct Runner {
    project: Arc<Project>,
    templar: Arc<Templar>,
    cluster: Option<Arc<dyn Cluster>>,
    options: RunOptions,
    facts: scope::Facts,
    host_facts: scope::Facts,
    included: scope::Facts,
    stats: Stats,
    /// The `msg` of each failed task result not ignored, in order (see
    /// [`RunOutcome::failed_task_messages`]).
    failed_task_messages: Vec<String>,
    requeue_after: Option<Duration>,
    api_time: Duration,
    metrics: Vec<MetricUpdate>,
    module_timings: Vec<(&'static str, Duration)>,
    task_timings: Vec<TaskTiming>,
    dependents: Vec<enka_kube::Dependent>,
    /// Role dependencies already run, by role and parameters: Ansible runs
    /// each once per play.
    dependencies_run: Vec<(std::path::PathBuf, VarList)>,
    /// What the run keeps, against its memory budget.
    kept: memory::Kept,
    /// The play's handlers: its own, then each role's as the role runs.
    handlers: Vec<Handlers>,
    /// Handlers notified and not yet run, as (set, index) in `handlers`.
    notified: Vec<(usize, usize)>,
    /// `--start-at-task` until a task matches it.
    waiting_for: Option<glob::Pattern>,
    /// `meta: clear_host_errors` ran (in the `always` running now).
    host_errors_cleared: bool,
    /// `meta: clear_host_errors` ran on this host during the play: hosts
    /// that failed or could not be reached take part in the next play
    /// again (it clears the whole play's errors, as Ansible's).
    cleared_play_errors: bool,
    /// The host failed and runs the handlers it notified anyway
    /// (`force_handlers`): in turn with the other hosts, where a stop
    /// under any_errors_fatal does not fail them.
    forcing_handlers: bool,
    /// Handlers run now (Ansible's output calls their tasks `RUNNING
    /// HANDLER`).
    in_handlers: bool,
    /// Warnings given so far in this run, each said once (shared by the
    /// hosts' runners, as Ansible's display says each once).
    warned: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// Roles `include_role` ran in this play: Ansible adds them to the
    /// play's role names (`role_names`, `ansible_role_names`, …).
    included_role_names: Vec<Value>,
    /// The defaults and vars of roles `include_role` ran with `public:
    /// true`: the rest of the play sees them.
    public_role_vars: Vec<(VarList, VarList)>,
    /// The host this runner runs tasks on.
    host: Arc<str>,
    /// Its place in the play's batch (the batch's hosts), and the batch's
    /// turn-taking when the batch has several hosts.
    host_index: usize,
    batch: Arc<[String]>,
    lockstep: Option<Arc<Lockstep>>,
    /// The inventory of a playbook run, changed by `add_host` and
    /// `group_by` for every host.
    inventory: Option<Arc<std::sync::Mutex<Arc<enka_project::role::Inventory>>>>,
    /// Every host's facts, for later plays and `hostvars`.
    peers: Arc<scope::Peers>,
    /// Facts a task with `delegate_facts` set for another host, given to it
    /// once the task's result is known to be ok.
    delivering: Vec<(String, scope::Delivered)>,
    /// Counters of each host, for the recap.
    host_stats: indexmap::IndexMap<String, Stats>,
    /// Hosts that failed: later plays leave them out.
    failed_hosts: Vec<String>,
    /// The first task failure of a playbook run.
    first_failure: Option<Failure>,
    /// `meta: end_play` ran: the play's later batches do not run.
    play_ended: bool,
}

/// What one task tells the list it runs in, beside how it ended: per-task
/// state, made fresh for each task and never kept on the runner.
#[derive(Default)]
struct TaskReport {
    /// How its module ended, for the observer: status, the result as
    /// shown, and a message.
    outcome: Option<(crate::TaskStatus, Value, Option<String>)>,
    /// It took another host's `run_once` result: the observer is not told
    /// (Ansible shows the one host that ran it).
    silent: bool,
    /// `meta: flush_handlers` ran: the notified handlers run after it.
    flush_handlers: bool,
    /// `meta: clear_facts` ran (on every host of a batch).
    cleared_facts: bool,
    /// The loop items shown before an item ended the loop.
    items_before: Vec<Value>,
}

/// How a module task runs, judged once per task from its own keywords,
/// else its blocks' and play's, else the run's: whether its output is
/// hidden (`no_log`), whether it runs in check mode, whether it reports its
/// changes (diff mode).
#[derive(Debug, Clone, Copy)]
struct TaskModes {
    no_log: bool,
    check_mode: bool,
    diff: bool,
}

/// Handlers of a play or a role, and the frame they run in.
struct Handlers {
    /// Each handler as (the list it is in, its index there): the handlers
    /// file's tasks, and those of the files it imports.
    tasks: Vec<(Arc<[Task]>, usize)>,
    frame: Frame,
    /// The role's name (handlers are also `<role> : <name>`) and path.
    role: Option<(String, std::path::PathBuf)>,
}

impl Runner {
    pub(crate) fn new(
        project: Arc<Project>,
        cluster: Option<Arc<dyn Cluster>>,
        options: RunOptions,
    ) -> Self {
        let templar = project.templar.clone();
        Runner {
            host: Arc::from("localhost"),
            host_index: 0,
            batch: Arc::from(Vec::new()),
            lockstep: None,
            inventory: None,
            peers: Arc::default(),
            delivering: Vec::new(),
            host_stats: indexmap::IndexMap::new(),
            failed_hosts: Vec::new(),
            first_failure: None,
            play_ended: false,
            host_errors_cleared: false,
            cleared_play_errors: false,
            forcing_handlers: false,
            warned: Arc::default(),
            in_handlers: false,
            included_role_names: Vec::new(),
            public_role_vars: Vec::new(),
            waiting_for: options.start_at_task.as_deref().map(|p| {
                glob::Pattern::new(p)
                    .unwrap_or_else(|_| glob::Pattern::escape(p).parse().unwrap_or_default())
            }),
            project,
            templar,
            cluster,
            options,
            host_facts: crate::empty_facts(),
            facts: crate::empty_facts(),
            included: crate::empty_facts(),
            stats: Stats::default(),
            requeue_after: None,
            api_time: Duration::ZERO,
            metrics: Vec::new(),
            module_timings: Vec::new(),
            failed_task_messages: Vec::new(),
            task_timings: Vec::new(),
            dependents: Vec::new(),
            dependencies_run: Vec::new(),
            kept: memory::Kept::default(),
            handlers: Vec::new(),
            notified: Vec::new(),
        }
    }

    pub(crate) fn finish(self, status: RunStatus, elapsed: Duration) -> RunOutcome {
        let mut hosts: Vec<(String, Stats)> = self.host_stats.into_iter().collect();
        if hosts.is_empty() {
            hosts.push((self.host.to_string(), self.stats.clone()));
        }
        RunOutcome {
            status,
            hosts,
            stats: self.stats,
            failed_task_messages: self.failed_task_messages,
            requeue_after: self.requeue_after,
            elapsed,
            api_time: self.api_time,
            metrics: self.metrics,
            facts: self.facts,
            module_timings: self.module_timings,
            task_timings: self.task_timings,
            dependents: self.dependents,
        }
    }

    /// `position + [index]` when hosts run in lockstep (positions order
    /// their turns), else nothing is built.
    fn at(&self, position: &Arc<[u32]>, index: usize) -> Arc<[u32]> {
        if self.lockstep.is_none() {
            return position.clone();
        }
        let mut extended = position.to_vec();
        extended.push(u32::try_from(index).unwrap_or(u32::MAX));
        Arc::from(extended)
    }
}

fn internal_failure(message: String) -> RunStatus {
    let result = fail_result(&message);
    RunStatus::Failed(Failure::new(
        "(run)".to_owned(),
        enka_project::role::Location::file(std::path::Path::new(".")),
        message,
        result,
    ))
}
