//! Walking tasks: conditions, loops, retries, blocks and includes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use minijinja::Value;
use minijinja::value::ValueKind;
use tracing::Instrument;

use super::lockstep::{Lockstep, Strategy, Turn};
use super::result::{Failure, RunOutcome, RunStatus, Stats};
use super::scope::{self, Scope};
use super::timing::{self, TaskOutcome, TaskTiming, task_span};
use super::{Entry, LogEvents, RunOptions, base_scope};
use enka_kube::Cluster;
use enka_modules::{self as modules, Control, MetricUpdate, ModuleContext, ModuleRef};
use enka_project::role::{Action, LoopKind, Project, Role, RoleFrom, Task, VarList};
use enka_template::time::seconds;
use enka_template::{Context, Error as TemplateError, Templar, Var};

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

/// Conditions and settings a block passes down to its tasks.
#[derive(Clone, Default)]
struct Inherited {
    when: Vec<Arc<[Value]>>,
    ignore_errors: Vec<Value>,
    ignore_unreachable: Vec<Value>,
    /// `connection` of the blocks and play around the task.
    connection: Vec<Value>,
    run_once: Vec<Value>,
    throttle: Vec<Value>,
    any_errors_fatal: Vec<Value>,
    no_log: Vec<Value>,
    /// `check_mode` of the blocks and play around the task.
    check_mode: Vec<Value>,
    /// `diff` of the blocks and play around the task.
    diff: Vec<Value>,
    /// `environment` of the play and blocks around the task, outermost
    /// first.
    environment: Vec<Value>,
    /// `module_defaults` of the play and blocks around the task, outermost
    /// first.
    module_defaults: Vec<Value>,
    /// Tags of the blocks, imports and plays around the task.
    tags: Vec<String>,
    /// `notify` of the blocks around the task.
    notify: Vec<String>,
}

impl Inherited {
    /// What a block passes down to its tasks: its conditions, tags,
    /// `notify` and keywords, inside those of the blocks around it.
    fn enter_block(&mut self, block: &Task) {
        self.tags.extend(block.tags.iter().cloned());
        self.notify.extend(block.notify.iter().cloned());
        if !block.when.is_empty() {
            self.when.push(block.when.clone());
        }
        let keywords = [
            (&block.ignore_errors, &mut self.ignore_errors),
            (&block.ignore_unreachable, &mut self.ignore_unreachable),
            (&block.connection, &mut self.connection),
            (&block.run_once, &mut self.run_once),
            (&block.throttle, &mut self.throttle),
            (&block.any_errors_fatal, &mut self.any_errors_fatal),
            (&block.no_log, &mut self.no_log),
            (&block.check_mode, &mut self.check_mode),
            (&block.diff, &mut self.diff),
            (&block.environment, &mut self.environment),
            (&block.module_defaults, &mut self.module_defaults),
        ];
        for (own, list) in keywords {
            list.extend(own.iter().cloned());
        }
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
    /// How the module task running now ended, for the observer.
    last_outcome: Option<(super::TaskStatus, Value, Option<String>)>,
    /// The play's handlers: its own, then each role's as the role runs.
    handlers: Vec<Handlers>,
    /// Handlers notified and not yet run, as (set, index) in `handlers`.
    notified: Vec<(usize, usize)>,
    /// `meta: flush_handlers` ran: flush after the task.
    flush_requested: bool,
    /// Whether the task running now is in check mode.
    check_mode: bool,
    /// Whether the task running now reports its changes (diff mode).
    diff: bool,
    /// `--start-at-task` until a task matches it.
    waiting_for: Option<glob::Pattern>,
    /// `meta: clear_host_errors` ran (in the `always` running now).
    host_errors_cleared: bool,
    /// `meta: clear_host_errors` ran on this host during the play: hosts
    /// that failed or could not be reached take part in the next play
    /// again (it clears the whole play's errors, as Ansible's).
    cleared_play_errors: bool,
    /// The host failed and runs the handlers it notified anyway
    /// (`force_handlers`): outside the batch's turn-taking, whose stop
    /// under any_errors_fatal would fail them.
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
    /// Counters of each host, for the recap.
    host_stats: indexmap::IndexMap<String, Stats>,
    /// Hosts that failed: later plays leave them out.
    failed_hosts: Vec<String>,
    /// The first task failure of a playbook run.
    first_failure: Option<Failure>,
    /// `meta: end_play` ran: the play's later batches do not run.
    play_ended: bool,
    /// The task now ending took another host's `run_once` result: the
    /// observer is not told (Ansible shows the one host that ran it).
    silent_task: bool,
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
            host_stats: indexmap::IndexMap::new(),
            failed_hosts: Vec::new(),
            first_failure: None,
            play_ended: false,
            silent_task: false,
            host_errors_cleared: false,
            cleared_play_errors: false,
            forcing_handlers: false,
            warned: Arc::default(),
            in_handlers: false,
            included_role_names: Vec::new(),
            check_mode: options.check_mode,
            diff: options.diff,
            waiting_for: options.start_at_task.as_deref().map(|p| {
                glob::Pattern::new(p)
                    .unwrap_or_else(|_| glob::Pattern::escape(p).parse().unwrap_or_default())
            }),
            project,
            templar,
            cluster,
            options,
            host_facts: super::empty_facts(),
            facts: super::empty_facts(),
            included: super::empty_facts(),
            stats: Stats::default(),
            requeue_after: None,
            api_time: Duration::ZERO,
            metrics: Vec::new(),
            module_timings: Vec::new(),
            failed_task_messages: Vec::new(),
            task_timings: Vec::new(),
            dependents: Vec::new(),
            dependencies_run: Vec::new(),
            last_outcome: None,
            handlers: Vec::new(),
            notified: Vec::new(),
            flush_requested: false,
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

    pub(crate) async fn run_entry(&mut self, entry: &Entry, extra: VarList) -> RunStatus {
        self.warn_if_reserved(extra.iter().map(|(name, _)| &**name));
        let mut base = base_scope(extra);
        // The run's options as Ansible's magic variables show them.
        let (check, diff) = (self.options.check_mode, self.options.diff);
        let tags = &self.options.tags;
        let names =
            |names: &[String]| Value::from(names.iter().map(Value::from).collect::<Vec<_>>());
        base.builtins = base
            .builtins
            .iter()
            .map(|(k, v)| match &**k {
                "ansible_check_mode" if check => (k.clone(), Var::plain(Value::from(true))),
                "ansible_diff_mode" if diff => (k.clone(), Var::plain(Value::from(true))),
                "ansible_run_tags" => (k.clone(), Var::plain(names(tags.run_tags()))),
                "ansible_skip_tags" => (k.clone(), Var::plain(names(tags.skip_tags()))),
                _ => (k.clone(), v.clone()),
            })
            .collect::<Vec<_>>()
            .into();
        // `playbook_dir`: the playbook's directory, or the project's for a
        // role (upstream runs a role from a playbook it writes there).
        let playbook_dir = match entry {
            Entry::Playbook(path) => path.parent().map(std::path::Path::to_path_buf),
            Entry::Role(_) => None,
        }
        .unwrap_or_else(|| self.project.base_dir.clone());
        let mut builtins: Vec<(Arc<str>, Var)> = base.builtins.iter().cloned().collect();
        if let Some(limit) = &self.options.limit {
            builtins.push((
                Arc::from("ansible_limit"),
                Var::plain(Value::from(limit.text.as_str())),
            ));
        }
        builtins.push((
            Arc::from("playbook_dir"),
            Var::plain(Value::from(playbook_dir.to_string_lossy().as_ref())),
        ));
        base.builtins = builtins.into();
        let flow = match entry {
            Entry::Role(path) => match self.project.role(path).cloned() {
                Some(role) => {
                    let frame = Frame {
                        scope: base,
                        inherited: Inherited::default(),
                        role: None,
                        search_path: Arc::from(vec![self.project.base_dir.clone()]),
                        depth: 0,
                        position: Arc::from(Vec::new()),
                    };
                    let end = frame.position.clone();
                    let flow = self
                        .run_role(
                            frame,
                            role,
                            RoleFrom::default(),
                            Arc::from(Vec::new()),
                            None,
                        )
                        .await;
                    self.flush_handlers_after(flow, end).await
                }
                None => return internal_failure(format!("role {} is not loaded", path.display())),
            },
            Entry::Playbook(path) => match self.project.playbooks.get(path).cloned() {
                Some(playbook) => {
                    self.inventory = Some(live_inventory(&self.project));
                    for play in &playbook.plays {
                        if !self.run_play(&playbook, play, &base).await {
                            break;
                        }
                    }
                    match self.first_failure.take() {
                        Some(failure) => Flow::Failed(failure),
                        None => Flow::Continue,
                    }
                }
                None => {
                    return internal_failure(format!("playbook {} is not loaded", path.display()));
                }
            },
        };
        match flow {
            // (A role ends its own `end_role`.)
            Flow::Continue | Flow::EndPlay | Flow::EndRole => RunStatus::Successful,
            Flow::Failed(failure) => RunStatus::Failed(failure),
        }
    }

    /// Runs a play on the hosts its `hosts` selects, batch by batch
    /// (`serial`), each batch in lockstep; `false` when the playbook must
    /// stop (a whole batch failed, or the play could not start).
    async fn run_play(
        &mut self,
        playbook: &enka_project::role::Playbook,
        play: &enka_project::role::Play,
        base: &Scope,
    ) -> bool {
        let mut scope = base.clone();
        scope.play_vars = scope::push(&None, &play.vars);
        // vars_prompt answers rank as play vars, beside the play's own.
        let play_vars =
            super::vars_files::with_prompted(&self.templar, &scope, play, &self.project.base_dir);
        scope.play_vars = scope::push(&None, &play_vars);
        let search_path: Arc<[std::path::PathBuf]> = Arc::from(vec![
            playbook
                .path
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default(),
            self.project.base_dir.clone(),
        ]);
        let ctx = Context::new(
            self.templar.clone(),
            Arc::new(scope.clone()),
            search_path.clone(),
        );
        let selected = self.play_hosts(play, &ctx);
        let name = match &play.name {
            Some(name) => name.clone(),
            None => hosts_text(&play.hosts),
        };
        if let Some(observer) = &self.options.observer {
            let count = selected.as_ref().map_or(0, |(hosts, _, _)| hosts.len());
            observer.play_started(&name, count);
        }
        let (hosts, batch_sizes, strategy) = match selected {
            Ok(selected) => selected,
            Err(message) => {
                let location = enka_project::role::Location::file(&playbook.path);
                let failure = Failure::new(name, location, message.clone(), fail_result(&message));
                self.first_failure.get_or_insert(failure);
                return false;
            }
        };
        // Roles listed in a play expose their defaults and vars to the
        // whole play (Ansible's default, with private role vars off), each
        // after its dependencies' (Role.get_vars).
        let mut dependent_names: Vec<Value> = Vec::new();
        for role_ref in &play.roles {
            let mut chain = Vec::new();
            with_dependencies(&role_ref.role, &mut chain);
            for role in chain {
                scope.defaults = scope::push(&scope.defaults, &role.defaults("main"));
                scope.role_vars = scope::push(&scope.role_vars, &role.vars("main"));
                let name = Value::from(role.name.as_str());
                if role.path != role_ref.role.path && !dependent_names.contains(&name) {
                    dependent_names.push(name);
                }
            }
        }
        // The play's role names: listed (`role_names`,
        // `ansible_play_role_names`), dependencies, and all.
        let play_names: Vec<Value> = play
            .roles
            .iter()
            .map(|r| Value::from(r.role.name.as_str()))
            .collect();
        let mut all_names = play_names.clone();
        for name in &dependent_names {
            if !all_names.contains(name) {
                all_names.push(name.clone());
            }
        }
        let mut builtins: Vec<(Arc<str>, Var)> = scope.builtins.iter().cloned().collect();
        builtins.extend([
            (
                Arc::from("role_names"),
                Var::plain(Value::from(play_names.clone())),
            ),
            (
                Arc::from("ansible_play_role_names"),
                Var::plain(Value::from(play_names)),
            ),
            (
                Arc::from("ansible_dependent_role_names"),
                Var::plain(Value::from(dependent_names)),
            ),
            (
                Arc::from("ansible_role_names"),
                Var::plain(Value::from(all_names)),
            ),
            (
                Arc::from("ansible_play_hosts_all"),
                Var::plain(names_value(&hosts)),
            ),
        ]);
        scope.builtins = builtins.into();
        let frame = Frame {
            scope,
            inherited: Inherited {
                check_mode: play.check_mode.iter().cloned().collect(),
                diff: play.diff.iter().cloned().collect(),
                environment: play.environment.iter().cloned().collect(),
                module_defaults: play.module_defaults.iter().cloned().collect(),
                ignore_errors: play.ignore_errors.iter().cloned().collect(),
                ignore_unreachable: play.ignore_unreachable.iter().cloned().collect(),
                connection: play.connection.iter().cloned().collect(),
                run_once: play.run_once.iter().cloned().collect(),
                any_errors_fatal: play.any_errors_fatal.iter().cloned().collect(),
                no_log: play.no_log.iter().cloned().collect(),
                tags: play.tags.clone(),
                ..Inherited::default()
            },
            role: None,
            search_path,
            depth: 0,
            position: Arc::from(Vec::new()),
        };
        let mut remaining = hosts.as_slice();
        for size in batch_sizes {
            let (batch, rest) = remaining.split_at(size.min(remaining.len()));
            remaining = rest;
            let lockstep =
                (batch.len() > 1).then(|| Lockstep::new(batch.len(), self.options.forks, strategy));
            let batch_names: Arc<[String]> = Arc::from(batch);
            // ansible_play_hosts: the play's hosts that have not failed.
            let active: Vec<String> = hosts
                .iter()
                .filter(|h| !self.failed_hosts.contains(h))
                .cloned()
                .collect();
            let runs = batch.iter().enumerate().map(|(index, host)| {
                let mut runner = self.for_host(host, &batch_names, index, lockstep.clone());
                let mut frame = runner.host_frame(&frame, host, &active, batch);
                if !play.vars_files.is_empty() {
                    let mut scope = frame.scope.clone();
                    scope.facts = runner.facts.clone();
                    scope.host_facts = runner.host_facts.clone();
                    scope.included = runner.included.clone();
                    frame.scope.play_vars = super::vars_files::play_vars(
                        &self.templar,
                        &scope,
                        &play_vars,
                        &play.vars_files,
                        &frame.search_path,
                    );
                }
                async move {
                    let flow = runner.run_play_body(play, frame).await;
                    if let Some(lockstep) = &runner.lockstep {
                        lockstep.done(runner.host_index, matches!(flow, Flow::Failed(_)));
                    }
                    (runner, flow)
                }
            });
            let finished = futures::future::join_all(runs).await;
            let cleared = finished
                .iter()
                .any(|(runner, _)| runner.cleared_play_errors);
            let mut failed = 0;
            let mut ended = false;
            for (runner, flow) in finished {
                let host = runner.host.clone();
                self.absorb(runner);
                match flow {
                    Flow::Failed(failure) => {
                        failed += 1;
                        self.failed_hosts.push(host.to_string());
                        self.first_failure.get_or_insert(failure);
                    }
                    Flow::EndPlay => ended = true,
                    Flow::Continue | Flow::EndRole => {}
                }
            }
            if cleared {
                self.failed_hosts.clear();
                failed = 0;
            }
            // A batch whose every host failed ends the playbook
            // (PlaybookExecutor's break_play).
            if failed == batch.len() {
                return false;
            }
            if ended && self.play_ended {
                break;
            }
        }
        self.play_ended = false;
        true
    }

    /// The hosts a play runs on (its `hosts` templated, in its `order`,
    /// without hosts that failed earlier), the sizes of its `serial`
    /// batches, and how its hosts take turns (`strategy`).
    fn play_hosts(
        &self,
        play: &enka_project::role::Play,
        ctx: &Context,
    ) -> Result<(Vec<String>, Vec<usize>, Strategy), String> {
        let template = |value: &Value, what: &str| -> Result<Value, String> {
            self.templar
                .template_value(value, ctx)
                .map_err(|err| format!("{what}: {}", err.ansible_message()))
        };
        let patterns: Vec<String> = match template(&play.hosts, "hosts")? {
            v if v.kind() == ValueKind::Seq => v
                .try_iter()
                .into_iter()
                .flatten()
                .map(|p| enka_template::pyrepr::to_text(&p))
                .collect(),
            v => vec![enka_template::pyrepr::to_text(&v)],
        };
        let order = match &play.order {
            Some(order) => enka_template::pyrepr::to_text(&template(order, "order")?),
            None => "inventory".to_owned(),
        };
        let inventory = self.live_inventory().unwrap_or_default();
        let mut hosts = inventory.select_limited(&patterns, &order, self.options.limit.as_ref())?;
        hosts.retain(|h| !self.failed_hosts.contains(h));
        let serial = match &play.serial {
            Some(serial) => template(serial, "serial")?,
            None => Value::UNDEFINED,
        };
        let strategy = match &play.strategy {
            Some(strategy) => Strategy::named(&enka_template::pyrepr::to_text(&template(
                strategy, "strategy",
            )?))?,
            None => Strategy::Linear,
        };
        Ok((hosts.clone(), batch_sizes(&serial, hosts.len())?, strategy))
    }

    /// The live inventory as it is now (`None` outside playbooks).
    fn live_inventory(&self) -> Option<Arc<enka_project::role::Inventory>> {
        self.inventory
            .as_ref()
            .and_then(|shared| shared.lock().ok().map(|i| i.clone()))
    }

    /// A runner for one host of a play: the run's settings and shared
    /// state, the host's facts so far, and counters of its own.
    fn for_host(
        &self,
        host: &str,
        batch: &Arc<[String]>,
        index: usize,
        lockstep: Option<Arc<Lockstep>>,
    ) -> Runner {
        let state = self.peers.get(host);
        let mut runner = Runner::new(
            self.project.clone(),
            self.cluster.clone(),
            self.options.clone(),
        );
        runner.batch = batch.clone();
        runner.host = Arc::from(host);
        runner.host_index = index;
        runner.lockstep = lockstep;
        runner.inventory = self.inventory.clone();
        runner.peers = self.peers.clone();
        runner.facts = state.facts;
        runner.host_facts = state.host_facts;
        runner.included = state.included;
        runner.waiting_for = self.waiting_for.clone();
        runner.warned = self.warned.clone();
        runner
    }

    /// Takes back what a host's runner did: its facts (kept for later
    /// plays and other hosts' `hostvars`) and its counters.
    fn absorb(&mut self, runner: Runner) {
        self.peers.set(&runner.host, runner.host_state());
        self.facts = runner.facts.clone();
        let host_stats = self.host_stats.entry(runner.host.to_string()).or_default();
        host_stats.add(&runner.stats);
        self.stats.add(&runner.stats);
        self.failed_task_messages
            .extend(runner.failed_task_messages);
        if runner.waiting_for.is_none() {
            self.waiting_for = None;
        }
        self.play_ended |= runner.play_ended;
        self.requeue_after = self.requeue_after.or(runner.requeue_after);
        self.api_time += runner.api_time;
        self.metrics.extend(runner.metrics);
        self.module_timings.extend(runner.module_timings);
        self.task_timings.extend(runner.task_timings);
        for dependent in runner.dependents {
            enka_kube::Dependent::merge_into(&mut self.dependents, dependent);
        }
    }

    fn host_state(&self) -> scope::HostState {
        scope::HostState {
            facts: self.facts.clone(),
            host_facts: self.host_facts.clone(),
            included: self.included.clone(),
        }
    }

    /// The play's frame for `host`: its inventory variables (below the
    /// play's) and the magic variables naming it, the play's hosts that
    /// have not failed (`ansible_play_hosts`) and its batch
    /// (`ansible_play_batch`, `play_hosts`), as VariableManager has them.
    fn host_frame(
        &self,
        play_frame: &Frame,
        host: &str,
        active: &[String],
        batch: &[String],
    ) -> Frame {
        let mut frame = play_frame.clone();
        let scope = &mut frame.scope;
        let inventory = self.live_inventory();
        let host_vars = inventory
            .as_ref()
            .and_then(|i| i.host_vars(host).cloned())
            .unwrap_or_else(|| Arc::from(Vec::new()));
        let address = host_vars
            .iter()
            .rev()
            .find(|(k, _)| &**k == "ansible_host")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| Var::plain(Value::from(host)));
        scope.inventory_vars = scope::push(&None, &host_vars);
        // Only localhost is reached through `local` by default; another
        // host's connection is its inventory's, or the task's or play's
        // keyword (see `unreachable`).
        let localhost = is_localhost(host);
        let mut builtins: Vec<(Arc<str>, Var)> = scope
            .builtins
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    &**k,
                    "inventory_hostname"
                        | "inventory_hostname_short"
                        | "ansible_host"
                        | "ansible_play_hosts"
                        | "ansible_play_batch"
                        | "play_hosts"
                ) && (localhost || &**k != "ansible_connection")
            })
            .cloned()
            .collect();
        builtins.extend(scope::host_magic(host));
        builtins.push((Arc::from("ansible_host"), address));
        builtins.push((
            Arc::from("ansible_play_hosts"),
            Var::plain(names_value(active)),
        ));
        for name in ["ansible_play_batch", "play_hosts"] {
            builtins.push((Arc::from(name), Var::plain(names_value(batch))));
        }
        scope.builtins = builtins.into();
        scope.inventory = inventory;
        scope.peers = Some(self.peers.clone());
        frame
    }

    /// A play's sections on this runner's host: pre_tasks, roles, tasks,
    /// post_tasks, each followed by the handlers they notified.
    async fn run_play_body(&mut self, play: &enka_project::role::Play, frame: Frame) -> Flow {
        self.handlers.push(Handlers {
            tasks: handler_list(&play.handlers),
            frame: frame.clone(),
            role: None,
        });
        let section = |index: u32| -> Frame {
            let mut frame = frame.clone();
            frame.position = Arc::from(vec![index]);
            frame
        };
        let after = |index: u32| -> Arc<[u32]> { Arc::from(vec![index, u32::MAX]) };
        self.warn_if_reserved(play.vars.iter().map(|(name, _)| &**name));
        let forced = self.forces_handlers(play, &frame);
        let mut flow = self.run_tasks(section(0), play.pre_tasks.clone()).await;
        flow = self.end_section(flow, after(0), forced).await;
        for (index, role_ref) in play.roles.iter().enumerate() {
            if !matches!(flow, Flow::Continue) {
                break;
            }
            let mut role_frame = section(1);
            role_frame.position = Arc::from(vec![1, index as u32]);
            flow = self.run_role_ref(role_frame, role_ref).await;
        }
        if matches!(flow, Flow::Continue) {
            flow = self.run_tasks(section(2), play.tasks.clone()).await;
        }
        flow = self.end_section(flow, after(2), forced).await;
        if matches!(flow, Flow::Continue) {
            flow = self.run_tasks(section(3), play.post_tasks.clone()).await;
        }
        self.end_section(flow, after(3), forced).await
    }

    /// Whether the play runs a failed host's notified handlers
    /// (`force_handlers`, or `--force-handlers` for every play).
    fn forces_handlers(&self, play: &enka_project::role::Play, frame: &Frame) -> bool {
        if self.options.force_handlers {
            return true;
        }
        let Some(raw) = &play.force_handlers else {
            return false;
        };
        let ctx = Context::new(
            self.templar.clone(),
            Arc::new(frame.scope.clone()),
            frame.search_path.clone(),
        );
        self.templar
            .template_value(raw, &ctx)
            .is_ok_and(|v| enka_template::to_bool(&v))
    }

    /// The handlers a play section notified: flushed when it went on, and
    /// when it failed too if `forced`; the section's failure stands
    /// whatever the handlers do.
    async fn end_section(&mut self, flow: Flow, after: Arc<[u32]>, forced: bool) -> Flow {
        match flow {
            Flow::Failed(failure) if forced && !self.notified.is_empty() => {
                self.forcing_handlers = true;
                self.flush_handlers_after(Flow::Continue, after).await;
                self.forcing_handlers = false;
                Flow::Failed(failure)
            }
            flow => self.flush_handlers_after(flow, after).await,
        }
    }

    /// A role as a play's `roles` or a role's dependencies list it: under
    /// its conditions, with its parameters.
    fn run_role_ref<'a>(
        &'a mut self,
        mut frame: Frame,
        role_ref: &'a enka_project::role::RoleRef,
    ) -> BoxFlow<'a> {
        if !role_ref.when.is_empty() {
            frame.inherited.when.push(role_ref.when.clone());
        }
        frame.inherited.tags.extend(role_ref.tags.iter().cloned());
        self.run_role(
            frame,
            role_ref.role.clone(),
            RoleFrom::default(),
            role_ref.params.clone(),
            None,
        )
    }

    /// Runs a role's tasks with its defaults and vars in scope.
    fn run_role<'a>(
        &'a mut self,
        mut frame: Frame,
        role: Arc<Role>,
        from: RoleFrom,
        params: VarList,
        location: Option<&'a Task>,
    ) -> BoxFlow<'a> {
        Box::pin(async move {
            // A role's parameters are visible to its dependencies too (the
            // dependency chain's params, Role.get_role_params).
            frame.scope.params = scope::push(&frame.scope.params, &params);
            // meta/main.yml dependencies first, each once per run (with the
            // same parameters), as Ansible runs them once per play.
            let role_at = frame.position.clone();
            for (index, dependency) in role.dependencies.iter().enumerate() {
                let key = (dependency.role.path.clone(), dependency.params.clone());
                let seen = self
                    .dependencies_run
                    .iter()
                    .any(|(path, params)| *path == key.0 && same_vars(params, &key.1));
                if seen && !dependency.role.allow_duplicates {
                    continue;
                }
                if !seen {
                    self.dependencies_run.push(key);
                }
                let mut dep_frame = frame.clone();
                dep_frame.position = self.at(&self.at(&role_at, 0), index);
                dep_frame.depth += 1;
                if dep_frame.depth > self.options.max_include_depth {
                    break;
                }
                let flow = self.run_role_ref(dep_frame, dependency).await;
                if !matches!(flow, Flow::Continue) {
                    return flow;
                }
            }
            let Some(tasks) = role.tasks(&from.tasks).cloned() else {
                return match location {
                    Some(task) => Flow::Failed(self.failure(
                        task,
                        format!("role {} has no tasks/{}.yml", role.name, from.tasks),
                        Value::UNDEFINED,
                    )),
                    None => Flow::Continue,
                };
            };
            let defaults = role.defaults(&from.defaults);
            let vars = role.vars(&from.vars);
            self.warn_if_reserved(
                params
                    .iter()
                    .chain(defaults.iter())
                    .chain(vars.iter())
                    .map(|(name, _)| &**name),
            );
            frame.scope.defaults = scope::push(&frame.scope.defaults, &defaults);
            // Role.get_vars: the parents' vars, then every dependency's
            // (theirs before their own), then the role's.
            push_dependency_vars(&mut frame.scope.role_vars, &role);
            frame.scope.role_vars = scope::push(&frame.scope.role_vars, &vars);
            let mut builtins: Vec<(Arc<str>, Var)> = frame.scope.builtins.iter().cloned().collect();
            // A role included or imported by another role sees the roles
            // above it, nearest first (`ansible_parent_role_names`/`_paths`).
            let parents = match (location, &frame.role) {
                (Some(_), Some(parent)) => {
                    let inherited = |key: &str| -> Vec<Value> {
                        builtins
                            .iter()
                            .find(|(k, _)| &**k == key)
                            .and_then(|(_, v)| v.value.try_iter().ok())
                            .map(Iterator::collect)
                            .unwrap_or_default()
                    };
                    let mut names = vec![Value::from(parent.name.as_str())];
                    names.extend(inherited("ansible_parent_role_names"));
                    let mut paths = vec![Value::from(parent.path.to_string_lossy().as_ref())];
                    paths.extend(inherited("ansible_parent_role_paths"));
                    Some((names, paths))
                }
                _ => None,
            };
            builtins.retain(|(k, _)| {
                !matches!(
                    &**k,
                    "role_path"
                        | "role_name"
                        | "ansible_parent_role_names"
                        | "ansible_parent_role_paths"
                )
            });
            if let Some((names, paths)) = parents {
                builtins.push((
                    Arc::from("ansible_parent_role_names"),
                    Var::plain(Value::from(names)),
                ));
                builtins.push((
                    Arc::from("ansible_parent_role_paths"),
                    Var::plain(Value::from(paths)),
                ));
            }
            builtins.push((
                Arc::from("role_path"),
                Var::plain(Value::from(role.path.to_string_lossy().as_ref())),
            ));
            builtins.push((
                Arc::from("role_name"),
                Var::plain(Value::from(role.name.as_str())),
            ));
            frame.scope.builtins = builtins.into();
            frame.search_path = Arc::from(vec![role.path.clone(), self.project.base_dir.clone()]);
            if !role.handlers.is_empty()
                && !self
                    .handlers
                    .iter()
                    .any(|h| h.role.as_ref().is_some_and(|(_, p)| *p == role.path))
            {
                self.handlers.push(Handlers {
                    tasks: handler_list(&role.handlers),
                    frame: frame.clone(),
                    role: Some((role.name.clone(), role.path.clone())),
                });
            }
            frame.role = Some(role);
            frame.position = self.at(&role_at, 1);
            match self.run_tasks(frame, tasks).await {
                Flow::EndRole => Flow::Continue,
                flow => flow,
            }
        })
    }

    fn run_tasks(&mut self, frame: Frame, tasks: Arc<[Task]>) -> BoxFlow<'_> {
        Box::pin(async move {
            for (index, task) in tasks.iter().enumerate() {
                let position = self.at(&frame.position, index);
                let mut flow = self.run_task(&frame, task, &position).await;
                if std::mem::take(&mut self.flush_requested) {
                    let after = self.at(&position, u32::MAX as usize);
                    flow = self.flush_handlers_after(flow, after).await;
                }
                match flow {
                    Flow::Continue => {}
                    other => return other,
                }
            }
            Flow::Continue
        })
    }

    /// Marks the handlers `names` calls for (by name, `<role> : <name>`, or
    /// `listen` topic) to run at the next flush; a name no handler answers
    /// to fails the task, as in Ansible.
    fn notify(&mut self, names: &[String]) -> Result<(), String> {
        for name in names {
            let mut found = false;
            // By name: the last handler loaded with it, as Ansible.
            let by_name = self.handlers.iter().enumerate().rev().find_map(|(set, h)| {
                h.tasks
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(index, (list, at))| {
                        let own = list[*at].name.as_deref()?;
                        let qualified = h.role.as_ref().map(|(role, _)| format!("{role} : {own}"));
                        (own == name || qualified.as_deref() == Some(name)).then_some((set, index))
                    })
            });
            let mut hits: Vec<(usize, usize)> = by_name.into_iter().collect();
            for (set, h) in self.handlers.iter().enumerate() {
                for (index, (list, at)) in h.tasks.iter().enumerate() {
                    if list[*at].listen.iter().any(|topic| topic == name) {
                        hits.push((set, index));
                    }
                }
            }
            for hit in hits {
                found = true;
                if !self.notified.contains(&hit) {
                    self.notified.push(hit);
                }
            }
            if !found {
                return Err(format!(
                    "The requested handler '{name}' was not found in either the main handlers list nor in the listening handlers list"
                ));
            }
        }
        Ok(())
    }

    /// Runs the notified handlers, in the order they were defined, each
    /// once, when `flow` went on (a failed play runs none, as without
    /// force_handlers); handlers they notify run in the same flush.
    fn flush_handlers_after(&mut self, flow: Flow, after: Arc<[u32]>) -> BoxFlow<'_> {
        Box::pin(async move {
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
            let mut round = 0;
            while !self.notified.is_empty() {
                let mut due = std::mem::take(&mut self.notified);
                due.sort_unstable();
                let round_at = self.at(&after, round);
                round += 1;
                for (set, index) in due {
                    let Some((list, at)) = self.handlers[set].tasks.get(index).cloned() else {
                        continue;
                    };
                    let frame = self.handlers[set].frame.clone();
                    let position = self.at(&self.at(&round_at, set), index);
                    let outer = std::mem::replace(&mut self.in_handlers, true);
                    let flow = self.run_task(&frame, &list[at], &position).await;
                    self.in_handlers = outer;
                    if !matches!(flow, Flow::Continue) {
                        return flow;
                    }
                }
            }
            Flow::Continue
        })
    }

    /// The templating context of `task`: its scope, and where lookups
    /// search, as Ansible's `ansible_search_path`: the role, the task file's
    /// own directory, then the project (the playbook's directory).
    fn context(&self, frame: &Frame, scope: &Scope, task: &Task) -> Context {
        let mut search_path = Vec::new();
        if let Some(role) = &frame.role {
            search_path.push(role.path.clone());
        }
        if let Some(dir) = task.location.file.parent()
            && !search_path.iter().any(|p| p == dir)
        {
            search_path.push(dir.to_path_buf());
        }
        if !search_path.contains(&self.project.base_dir) {
            search_path.push(self.project.base_dir.clone());
        }
        Context::new(
            self.templar.clone(),
            Arc::new(scope.clone()),
            Arc::from(search_path),
        )
    }

    /// The scope a task sees: the frame's, with the task's vars and the
    /// current facts.
    fn task_scope(&self, frame: &Frame, task: &Task) -> Scope {
        let mut scope = frame.scope.clone();
        scope.locals = scope::push(&scope.locals, &task.vars);
        scope.facts = self.facts.clone();
        scope.host_facts = self.host_facts.clone();
        scope.included = self.included.clone();
        if self.inventory.is_some() {
            // add_host and group_by change groups and so variables.
            let inventory = self.live_inventory();
            if let Some(vars) = inventory.as_ref().and_then(|i| i.host_vars(&self.host)) {
                scope.inventory_vars = scope::push(&None, vars);
            }
            scope.inventory = inventory;
        }
        // Hosts that failed out of the play leave ansible_play_hosts and
        // ansible_play_batch.
        if let Some(lockstep) = &self.lockstep {
            let failed: Vec<&str> = lockstep
                .failed()
                .into_iter()
                .filter_map(|i| self.batch.get(i).map(String::as_str))
                .collect();
            if !failed.is_empty() {
                for name in ["ansible_play_hosts", "ansible_play_batch", "play_hosts"] {
                    let left: Vec<Value> = enka_template::VarSource::get(&scope, name)
                        .and_then(|v| v.value.try_iter().ok().map(Iterator::collect::<Vec<Value>>))
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|h: &Value| !h.as_str().is_some_and(|h| failed.contains(&h)))
                        .collect();
                    scope.set_magic(name, Value::from(left));
                }
            }
        }
        if !self.included_role_names.is_empty() {
            for name in [
                "role_names",
                "ansible_play_role_names",
                "ansible_role_names",
            ] {
                let mut names: Vec<Value> = enka_template::VarSource::get(&scope, name)
                    .and_then(|v| v.value.try_iter().ok().map(Iterator::collect))
                    .unwrap_or_default();
                for included in &self.included_role_names {
                    if !names.contains(included) {
                        names.push(included.clone());
                    }
                }
                scope.set_magic(name, Value::from(names));
            }
        }
        scope
    }

    fn failure(&self, task: &Task, message: String, result: Value) -> Failure {
        let mut failure = Failure::new(task.display_name(), task.location.clone(), message, result);
        if let Action::Module { module, .. } = &task.action {
            failure.action = Arc::from(module.name());
        }
        failure
    }

    fn template_failure(&self, task: &Task, what: &str, err: &TemplateError) -> Flow {
        let message = if err.is_undefined() {
            format!(
                "The task includes an option with an undefined variable. The error was: {err} ({what})"
            )
        } else {
            format!("{what}: {err}")
        };
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }

    /// Evaluates the inherited and own conditions; `Ok(None)` means run,
    /// `Ok(Some(cond))` means skipped because `cond` was false.
    fn check_when(
        &self,
        ctx: &Context,
        inherited: &Inherited,
        task: &Task,
    ) -> Result<Option<Value>, TemplateError> {
        let own = std::iter::once(&task.when[..]);
        for (level, conditions) in inherited.when.iter().map(|c| &c[..]).chain(own).enumerate() {
            let is_own = level == inherited.when.len();
            for (index, condition) in conditions.iter().enumerate() {
                let judgement = self.templar.judge(condition, ctx)?;
                if let Some(warning) = judgement.delimiters_warning(condition) {
                    self.warn(warning);
                }
                if judgement.not_boolean.is_some() {
                    // Only the task's own conditions have their position;
                    // an inherited one is placed at the task, as Ansible
                    // does for a condition without one.
                    let at = task
                        .when_positions
                        .get(index)
                        .copied()
                        .flatten()
                        .filter(|_| is_own);
                    self.deprecate_broken_conditional(task, at, &judgement);
                }
                if !judgement.holds {
                    return Ok(Some(condition.clone()));
                }
            }
        }
        Ok(None)
    }

    /// 2.18's deprecation of a condition whose result is not a boolean,
    /// with where it is written (Conditional._get_conditional_source_context).
    fn deprecate_broken_conditional(
        &self,
        task: &Task,
        at: Option<enka_yaml::Pos>,
        judgement: &enka_template::Judgement,
    ) {
        let file = task.location.file.display();
        let place = match (at, task.location.pos) {
            (Some(pos), _) => format!("location {file} {}:{}", pos.line, pos.col),
            (None, Some(pos)) => format!("approximate location {file} {}:{}", pos.line, pos.col),
            (None, None) => format!("approximate location {file}"),
        };
        if let Some(message) = judgement.not_boolean_deprecation(&place) {
            self.deprecate(message, "2.19");
        }
    }

    fn flag(
        &self,
        ctx: &Context,
        own: Option<&Value>,
        inherited: &[Value],
    ) -> Result<bool, TemplateError> {
        let value = own.or_else(|| inherited.last());
        match value {
            None => Ok(false),
            Some(v) => {
                let v = self.templar.template_value(v, ctx)?;
                Ok(enka_template::to_bool(&v))
            }
        }
    }

    /// A boolean keyword (the task's, else its blocks' and play's) as
    /// FieldAttributeBase.post_validate converts it: templated, then
    /// `boolean(value, strict=True)`.
    fn keyword_bool(
        &self,
        ctx: &Context,
        own: Option<&Value>,
        inherited: &[Value],
        keyword: &str,
    ) -> Result<bool, KeywordError> {
        let Some(raw) = own.or_else(|| inherited.last()) else {
            return Ok(false);
        };
        let value = self
            .templar
            .template_value(raw, ctx)
            .map_err(KeywordError::Template)?;
        if value.is_none() || value.is_undefined() {
            return Ok(false);
        }
        enka_template::strict_boolean(&value).ok_or_else(|| {
            let text = enka_template::pyrepr::to_text(&value);
            KeywordError::NotBoolean(format!(
                "the field '{keyword}' has an invalid value ({text}), and could not be converted to bool. The error was: The value '{text}' is not a valid boolean.  Valid booleans include: 'yes', 'on', 'true', '1', 't', 'y', 1, 1.0, True, 'no', 'off', 'false', '0', 'f', 'n', 0, 0.0, False"
            ))
        })
    }

    /// Whether gathering is `smart` and this host's facts were gathered
    /// already.
    fn facts_gathered_smartly(&self) -> bool {
        std::env::var("ANSIBLE_GATHERING").is_ok_and(|g| g.trim() == "smart")
            && self
                .host_facts
                .get("_ansible_facts_gathered")
                .is_some_and(|var| var.value.is_true())
    }

    /// Says `message` once per run: to the observer (`enka playbook`
    /// prints `[WARNING]: …`). A reconcile has no observer and logs it at
    /// debug level: a custom resource field named like a keyword would
    /// otherwise repeat it on every reconcile.
    /// Whether `message` was not said yet in this run.
    fn first_time(&self, message: &str) -> bool {
        self.warned
            .lock()
            .map(|mut warned| warned.insert(message.to_owned()))
            .unwrap_or(false)
    }

    /// Says a deprecation once per run, as [`Runner::warn`] says a warning.
    fn deprecate(&self, message: String, version: &str) {
        if !self.first_time(&message) {
            return;
        }
        match &self.options.observer {
            Some(observer) => observer.deprecation(&message, version),
            None => tracing::debug!(host = %self.host, "{message}"),
        }
    }

    fn warn(&self, message: String) {
        if !self.first_time(&message) {
            return;
        }
        match &self.options.observer {
            Some(observer) => observer.warning(&message),
            None => tracing::debug!(host = %self.host, "{message}"),
        }
    }

    /// Ansible's warning for each variable `names` defines with a
    /// reserved name (warn_if_reserved).
    fn warn_if_reserved<'n>(&self, names: impl IntoIterator<Item = &'n str>) {
        for name in names {
            if super::reserved::is_reserved(name) {
                self.warn(super::reserved::warning(name));
            }
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

    fn run_task<'a>(
        &'a mut self,
        frame: &'a Frame,
        task: &'a Task,
        position: &'a Arc<[u32]>,
    ) -> BoxFlow<'a> {
        Box::pin(async move {
            self.warn_if_reserved(task.vars.iter().map(|(name, _)| &**name));
            if let Some(deadline) = self.options.deadline
                && Instant::now() >= deadline
            {
                let message = "the reconcile timed out before this task could run".to_owned();
                return Flow::Failed(self.failure(task, message.clone(), fail_result(&message)));
            }
            let static_parent = matches!(
                task.action,
                Action::Block { .. } | Action::ImportRole { .. }
            );
            if !static_parent && !self.selected(frame, task) {
                return Flow::Continue;
            }
            if !static_parent && !self.reached_start(frame, task) {
                return Flow::Continue;
            }
            // ANSIBLE_GATHERING=smart: facts are gathered once per host in a
            // run (PlayIterator skips its setup task once they are).
            if task.is_implicit_fact_gathering() && self.facts_gathered_smartly() {
                return Flow::Continue;
            }
            // Hosts of a batch take turns task by task (the linear strategy).
            if !static_parent
                && !self.forcing_handlers
                && let Some(lockstep) = self.lockstep.clone()
            {
                let throttle = self.throttle(frame, task);
                match lockstep
                    .arrive(self.host_index, position.to_vec(), throttle)
                    .await
                {
                    Turn::Go => {}
                    Turn::EndPlay => return Flow::EndPlay,
                    // Another host failed under any_errors_fatal: this one
                    // stops as failed, with nothing of its own to report.
                    Turn::Fatal => {
                        let message =
                            "any_errors_fatal: another host of the play failed".to_owned();
                        return Flow::Failed(self.failure(
                            task,
                            message.clone(),
                            fail_result(&message),
                        ));
                    }
                }
            }
            let started = Instant::now();
            let is_block = matches!(task.action, Action::Block { .. });
            let observed = match is_block {
                true => None,
                false => self.options.observer.clone(),
            };
            if let Some(observer) = &observed {
                observer.task_started(task);
                self.last_outcome = None;
            }
            let span = match is_block {
                true => tracing::Span::none(),
                false => task_span(task),
            };
            let counted_before = self.stats.clone();
            let flow = async {
                match &task.action {
                    Action::Block {
                        block,
                        rescue,
                        always,
                    } => {
                        self.run_block(frame, task, position, [block, rescue, always])
                            .await
                    }
                    Action::Module { .. } => self.run_module_task_once(frame, task, position).await,
                    Action::IncludeTasks { .. }
                    | Action::IncludeRole(_)
                    | Action::ImportRole { .. } => self.run_include(frame, task, position).await,
                }
            }
            .instrument(span.clone())
            .await;
            if self.lockstep.is_some() {
                self.peers.set(&self.host, self.host_state());
            }
            // A failure is counted once, on the task it arose in: a block or
            // an include that passes on a failure of a task inside it is not
            // a second failed result (Ansible's recap counts results).
            if let Flow::Failed(failure) = &flow
                && !failure.is_unreachable()
                && failure.location == task.location
                && !matches!(task.action, Action::Block { .. })
            {
                self.stats.failed += 1;
                self.failed_task_messages.push(failure.result_message());
                if let Some(lockstep) = &self.lockstep {
                    lockstep.task_failed(self.host_index, position);
                    if self.any_errors_fatal(frame, task) {
                        lockstep.fail_all(self.host_index, position);
                    }
                }
            }
            let took = started.elapsed();
            if let Some(observer) = observed {
                self.observe(&*observer, task, &flow, took);
            }
            if !is_block {
                let failure = match &flow {
                    Flow::Failed(failure) => Some(failure),
                    _ => None,
                };
                let outcome = TaskOutcome::judge(task, failure, &counted_before, &self.stats);
                span.record("outcome", outcome.word());
                timing::log_task(task, outcome, took, self.options.profile_tasks);
                self.task_timings.push(TaskTiming {
                    role: task.role.clone(),
                    task: timing::timing_name(task),
                    took,
                });
            }
            // A host that could not be reached leaves the play where it is:
            // a later `meta: clear_host_errors` on any host takes it back
            // from its next task (the linear strategy keeps its place).
            if !is_block
                && !static_parent
                && matches!(&flow, Flow::Failed(f) if f.is_unreachable())
                && let Some(lockstep) = self.lockstep.clone()
                && lockstep.park(self.host_index).await == Turn::Go
            {
                return Flow::Continue;
            }
            flow
        })
    }

    /// Whether a failure of `task` stops every host (`any_errors_fatal`
    /// of the task, else of its blocks and play).
    fn any_errors_fatal(&self, frame: &Frame, task: &Task) -> bool {
        if task.any_errors_fatal.is_none() && frame.inherited.any_errors_fatal.is_empty() {
            return false;
        }
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        self.flag(
            &ctx,
            task.any_errors_fatal.as_ref(),
            &frame.inherited.any_errors_fatal,
        )
        .unwrap_or(false)
    }

    /// How many hosts may run `task` at once (its `throttle`, else its
    /// blocks'); 0 when it sets no limit.
    fn throttle(&self, frame: &Frame, task: &Task) -> usize {
        let Some(raw) = task.throttle.as_ref().or(frame.inherited.throttle.last()) else {
            return 0;
        };
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        self.templar
            .template_value(raw, &ctx)
            .ok()
            .and_then(|v| {
                i64::try_from(v.clone())
                    .ok()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            })
            .map_or(0, |n| usize::try_from(n).unwrap_or(0))
    }

    /// The task's `environment`: the play's, its blocks' and its own
    /// merged in that order, each a mapping or a list of them
    /// (Task._post_validate_environment); `None` when there is none.
    fn environment(&self, frame: &Frame, task: &Task, ctx: &Context) -> Result<Value, String> {
        let layers: Vec<&Value> = frame
            .inherited
            .environment
            .iter()
            .chain(task.environment.as_ref())
            .collect();
        if layers.is_empty() {
            return Ok(Value::from(()));
        }
        let mut merged: Vec<(Value, Value)> = Vec::new();
        for layer in layers {
            let items = match layer.kind() {
                ValueKind::Seq => layer.try_iter().map(Iterator::collect).unwrap_or_default(),
                _ => vec![layer.clone()],
            };
            for item in items {
                // A mapping is templated value by value (Task's
                // _post_validate_environment): a value that needs the
                // `ansible_env` fact before facts are gathered is left out.
                let templated = if item.kind() == ValueKind::Map {
                    let mut pairs = Vec::new();
                    for key in item.try_iter().into_iter().flatten() {
                        let raw = item.get_item(&key).unwrap_or_default();
                        match self.templar.template_value(&raw, ctx) {
                            Ok(value) => pairs.push((key, value)),
                            Err(err)
                                if err.to_string().contains("ansible_env")
                                    && (err.is_undefined()
                                        || err.to_string().contains("undefined")) => {}
                            Err(err) => {
                                return Err(format!("environment: {}", err.ansible_message()));
                            }
                        }
                    }
                    Value::from_pairs(pairs)
                } else {
                    self.templar
                        .template_value(&item, ctx)
                        .map_err(|err| format!("environment: {}", err.ansible_message()))?
                };
                match templated.kind() {
                    ValueKind::None => {}
                    ValueKind::Map => {
                        for key in templated.try_iter().into_iter().flatten() {
                            let value = templated.get_item(&key).unwrap_or_default();
                            match merged.iter_mut().find(|(k, _)| *k == key) {
                                Some(slot) => slot.1 = value,
                                None => merged.push((key, value)),
                            }
                        }
                    }
                    // Task._post_validate_environment skips what is no
                    // mapping once templated, with a warning; the task runs.
                    _ => self.warn(format!(
                        "could not parse environment value, skipping: {}",
                        enka_template::pyrepr::to_text(&item)
                    )),
                }
            }
        }
        Ok(Value::from_pairs(merged))
    }

    /// Templates every string inside `value`, keeping a string as written
    /// when it meets an undefined variable (Ansible's
    /// `fail_on_undefined=False`); other errors keep it too, for the
    /// lookup to report.
    fn template_leniently(&self, value: &Value, ctx: &Context) -> Value {
        match value.kind() {
            ValueKind::String => self
                .templar
                .template_value(value, ctx)
                .unwrap_or_else(|_| value.clone()),
            ValueKind::Seq => Value::from(
                value
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .map(|item| self.template_leniently(&item, ctx))
                    .collect::<Vec<_>>(),
            ),
            ValueKind::Map => Value::from_pairs(
                value
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .map(|key| {
                        let item = value.get_item(&key).unwrap_or_default();
                        (key, self.template_leniently(&item, ctx))
                    })
                    .collect::<Vec<_>>(),
            ),
            _ => value.clone(),
        }
    }

    /// Whether `--start-at-task` lets `task` run: every task from the
    /// first whose name, or `role : name`, matches the pattern on (the
    /// PlayIterator's start_at_task).
    fn reached_start(&mut self, frame: &Frame, task: &Task) -> bool {
        let Some(pattern) = &self.waiting_for else {
            return true;
        };
        let Some(name) = task.name.as_deref() else {
            return false;
        };
        let matched = pattern.matches(name)
            || frame
                .role
                .as_ref()
                .is_some_and(|role| pattern.matches(&format!("{} : {name}", role.name)));
        if matched {
            self.waiting_for = None;
        }
        matched
    }

    /// Facts a module returned (`setup`, `gather_facts`, `*_facts`), as
    /// Ansible keeps them: the host's facts (below play vars), each a
    /// variable of its own (facts injected as vars), and under
    /// `ansible_facts` without the `ansible_` prefix.
    fn add_module_facts(&mut self, returned: &[(Arc<str>, Value)]) {
        let namespace = self
            .host_facts
            .get("ansible_facts")
            .map(|var| var.value.clone())
            .unwrap_or_default();
        let mut merged: Vec<(Value, Value)> = namespace
            .try_iter()
            .into_iter()
            .flatten()
            .map(|k| {
                let v = namespace.get_item(&k).unwrap_or_default();
                (k, v)
            })
            .collect();
        let facts = Arc::make_mut(&mut self.host_facts);
        for (name, value) in returned {
            facts.insert(name.clone(), Var::unsafe_data(value));
            let short = match name.strip_prefix("ansible_") {
                Some(short) if &**name != "ansible_local" => short,
                _ => name,
            };
            merged.retain(|(k, _)| k.as_str() != Some(short));
            merged.push((Value::from(short), value.clone()));
        }
        facts.insert(
            Arc::from("ansible_facts"),
            Var::unsafe_data(&Value::from_pairs(merged)),
        );
    }

    /// The loop variable's name: `loop_control.loop_var`, rendered when it
    /// is a template.
    fn loop_var(&self, task: &Task, ctx: &Context) -> Result<Arc<str>, Flow> {
        let Some(template) = &task.loop_control.loop_var_template else {
            return Ok(task.loop_control.loop_var.clone());
        };
        match self.templar.template_value(template, ctx) {
            Ok(name) => Ok(Arc::from(enka_template::pyrepr::to_text(&name).as_str())),
            Err(err) => Err(self.template_failure(task, "loop_var", &err)),
        }
    }

    /// Whether `--tags`/`--skip-tags` (and `never`) let `task` run.
    fn selected(&self, frame: &Frame, task: &Task) -> bool {
        let written = frame.inherited.tags.iter().chain(task.tags.iter());
        if !written
            .clone()
            .any(|t| enka_template::is_possibly_template(t))
        {
            return self.options.tags.selects(written.map(String::as_str));
        }
        // `tags: "{{ list }}"` takes its value from the task's variables
        // (Taggable.evaluate_tags).
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        let tags = crate::tags::evaluate(&self.templar, &ctx, written);
        self.options.tags.selects(tags.iter().map(String::as_str))
    }

    /// Tells the observer how `task` ended: a failure from the flow, else
    /// what `finish_task` recorded (an include that ran is `ok`).
    fn observe(
        &mut self,
        observer: &dyn super::Observer,
        task: &Task,
        flow: &Flow,
        duration: Duration,
    ) {
        use super::{TaskEvent, TaskStatus};
        let recorded = self.last_outcome.take();
        let (status, result, message) = match (flow, recorded) {
            (Flow::Failed(failure), _) => (
                TaskStatus::Failed,
                failure.result.clone(),
                Some(failure.message.clone()),
            ),
            (_, Some(recorded)) => recorded,
            (_, None) => (TaskStatus::Ok, Value::UNDEFINED, None),
        };
        if std::mem::take(&mut self.silent_task) {
            return;
        }
        observer.task_finished(&TaskEvent {
            task,
            host: &self.host,
            status,
            result: &result,
            message: message.as_deref(),
            duration,
            handler: self.in_handlers,
        });
    }

    async fn run_block(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
        [block, rescue, always]: [&Arc<[Task]>; 3],
    ) -> Flow {
        let section = |runner: &Runner, frame: &Frame, index: usize| -> Frame {
            let mut frame = frame.clone();
            frame.position = runner.at(position, index);
            frame
        };
        let mut inner = frame.clone();
        inner.scope.locals = scope::push(&inner.scope.locals, &task.vars);
        inner.inherited.enter_block(task);
        let mut flow = self
            .run_tasks(section(self, &inner, 0), block.clone())
            .await;
        // A host that cannot be reached leaves the play at once: its block
        // runs no rescue and no always.
        if matches!(&flow, Flow::Failed(f) if f.is_unreachable()) {
            return flow;
        }
        if let Flow::Failed(failure) = &flow
            && !rescue.is_empty()
        {
            let mut rescue_frame = inner.clone();
            rescue_frame.scope.set_magic(
                "ansible_failed_task",
                Value::from_pairs([
                    (Value::from("name"), Value::from(failure.task.as_str())),
                    (Value::from("action"), Value::from(&*failure.action)),
                    (
                        Value::from("location"),
                        Value::from(failure.location.to_string()),
                    ),
                ]),
            );
            rescue_frame
                .scope
                .set_magic("ansible_failed_result", failure.result.clone());
            // A failure a rescue takes is counted rescued, not failed,
            // whatever the rescue then does (StrategyBase's results).
            self.stats.rescued += 1;
            self.stats.failed = self.stats.failed.saturating_sub(1);
            flow = self
                .run_tasks(section(self, &rescue_frame, 1), rescue.clone())
                .await;
        }
        if !always.is_empty() && !matches!(flow, Flow::EndRole) {
            self.host_errors_cleared = false;
            let always_flow = self
                .run_tasks(section(self, &inner, 2), always.clone())
                .await;
            if !matches!(always_flow, Flow::Continue) {
                return always_flow;
            }
            // `meta: clear_host_errors` in `always` lets the host go on
            // after the failure it ran for (the strategy re-adds it).
            if std::mem::take(&mut self.host_errors_cleared) && matches!(flow, Flow::Failed(_)) {
                flow = Flow::Continue;
            }
        }
        flow
    }

    async fn run_include(&mut self, frame: &Frame, task: &Task, position: &Arc<[u32]>) -> Flow {
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        // An include's own `when` decides whether it runs; it is not passed
        // down (unlike a block's or an import's).
        match self.check_when(&ctx, &frame.inherited, task) {
            Ok(Some(_)) => {
                self.stats.skipped += 1;
                return Flow::Continue;
            }
            Ok(None) => {}
            Err(err) => return self.template_failure(task, "when", &err),
        }
        if frame.depth >= self.options.max_include_depth {
            let message = format!(
                "includes nested deeper than {} levels (recursive include?)",
                self.options.max_include_depth
            );
            return Flow::Failed(self.failure(task, message.clone(), fail_result(&message)));
        }
        let items = match self.loop_items(task, &ctx, &frame.inherited) {
            Ok(items) => items,
            Err(flow) => return flow,
        };
        let loop_var = match self.loop_var(task, &ctx) {
            Ok(name) => name,
            Err(flow) => return flow,
        };
        let iterations: Vec<Option<usize>> = match &items {
            None => vec![None],
            Some(items) => (0..items.len()).map(Some).collect(),
        };
        let items: Arc<[Value]> = items.unwrap_or_default().into();
        for iteration in iterations {
            // Ansible counts each dynamic include (each item of a looped
            // one) as a task that ran ok, before the tasks it brings in; an
            // import is static and counts nothing itself.
            if !matches!(task.action, Action::ImportRole { .. }) {
                self.stats.ok += 1;
            }
            let mut inner = frame.clone();
            inner.depth += 1;
            inner.position = self.at(position, iteration.unwrap_or(0));
            inner.scope.params = scope::push(&inner.scope.params, &task.vars);
            if let Some(index) = iteration {
                set_loop_vars(&mut inner.scope, task, &loop_var, index, &items);
            }
            let flow = match &task.action {
                Action::IncludeTasks {
                    file,
                    role,
                    dir,
                    apply,
                } => {
                    let scope = self.task_scope(&inner, task);
                    let ctx = self.context(&inner, &scope, task);
                    let name = match self.templar.template_value(file, &ctx) {
                        Ok(v) => enka_template::pyrepr::to_text(&v),
                        Err(err) => return self.template_failure(task, "include_tasks", &err),
                    };
                    let path = enka_project::role::resolve_task_file(role.as_deref(), dir, &name);
                    let tasks = path
                        .as_ref()
                        .and_then(|p| self.project.task_files.get(p).cloned());
                    if let (Some(observer), Some(path), Some(_)) =
                        (&self.options.observer, &path, &tasks)
                    {
                        let item = iteration.and_then(|index| items.get(index));
                        observer.included(task, self.in_handlers, &self.host, path, item);
                    }
                    match tasks {
                        Some(tasks) => match apply {
                            Some(apply) => {
                                let none: Arc<[Task]> = Arc::from(Vec::new());
                                let at = inner.position.clone();
                                self.run_block(&inner, apply, &at, [&tasks, &none, &none])
                                    .await
                            }
                            None => self.run_tasks(inner, tasks).await,
                        },
                        None => {
                            let broken = path
                                .as_ref()
                                .and_then(|p| self.project.unloadable_task_files.get(p));
                            let message = match broken {
                                Some(problem) => {
                                    format!("include_tasks: {name} does not load: {problem}")
                                }
                                None => format!(
                                    "include_tasks: could not find or load {name} (only files loaded with the project can be included)"
                                ),
                            };
                            return Flow::Failed(self.failure(
                                task,
                                message.clone(),
                                fail_result(&message),
                            ));
                        }
                    }
                }
                Action::IncludeRole(include) => {
                    let role = match &include.role {
                        Some(role) => Ok(role.clone()),
                        None => {
                            let scope = self.task_scope(&inner, task);
                            let ctx = self.context(&inner, &scope, task);
                            match self.templar.template_value(&include.name, &ctx) {
                                Ok(v) => {
                                    let name = enka_template::pyrepr::to_text(&v);
                                    enka_project::role::resolve_role(
                                        &self.project.role_paths,
                                        &name,
                                    )
                                    .ok()
                                    .and_then(|p| self.project.role(&p).cloned())
                                    .ok_or(name)
                                }
                                Err(err) => {
                                    return self.template_failure(task, "include_role", &err);
                                }
                            }
                        }
                    };
                    let role = match role {
                        Ok(role) => {
                            let name = Value::from(role.name.as_str());
                            if !self.included_role_names.contains(&name) {
                                self.included_role_names.push(name);
                            }
                            role
                        }
                        Err(name) => {
                            let message = format!(
                                "include_role: role {name} is not part of the loaded project (a role named by a template must exist when enka starts)"
                            );
                            return Flow::Failed(self.failure(
                                task,
                                message.clone(),
                                fail_result(&message),
                            ));
                        }
                    };
                    self.run_role(
                        inner,
                        role,
                        include.from.clone(),
                        Arc::from(Vec::new()),
                        Some(task),
                    )
                    .await
                }
                Action::ImportRole { role, from } => {
                    if !task.when.is_empty() {
                        inner.inherited.when.push(task.when.clone());
                    }
                    inner.inherited.tags.extend(task.tags.iter().cloned());
                    self.run_role(
                        inner,
                        role.clone(),
                        from.clone(),
                        Arc::from(Vec::new()),
                        Some(task),
                    )
                    .await
                }
                _ => Flow::Continue,
            };
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
        }
        Flow::Continue
    }

    /// The items of a task's loop, or `None` when it has no loop.
    fn loop_items(
        &mut self,
        task: &Task,
        ctx: &Context,
        inherited: &Inherited,
    ) -> Result<Option<Vec<Value>>, Flow> {
        let Some(looping) = &task.looping else {
            return Ok(None);
        };
        // with_first_found templates its terms leniently: a term that meets
        // an undefined variable stays as written and the lookup skips it
        // (TaskExecutor._get_loop_items, fail_on_undefined=False).
        let lenient = matches!(&looping.kind, LoopKind::Lookup(name) if name == "first_found");
        let templated = if lenient {
            Ok(self.template_leniently(&looping.items, ctx))
        } else {
            self.templar.template_value(&looping.items, ctx)
        };
        let raw = match templated {
            Ok(v) => v,
            // Ansible's TaskExecutor keeps an undefined loop for later and
            // evaluates `when` first: a task whose condition is false is
            // skipped, whatever its loop names (awx-operator's "Remove
            // tempfiles" loops over files of a block that did not run).
            Err(err) if err.is_undefined() => {
                // `None`: run once without a loop, where `when` skips it.
                return match self.check_when(ctx, inherited, task) {
                    Ok(Some(_)) => Ok(None),
                    _ => Err(self.template_failure(task, "loop", &err)),
                };
            }
            Err(err) => {
                return Err(self.template_failure(task, "loop", &err));
            }
        };
        let items: Result<Vec<Value>, String> = match &looping.kind {
            LoopKind::List => match raw.kind() {
                ValueKind::Seq => Ok(raw.try_iter().map(Iterator::collect).unwrap_or_default()),
                _ => Err(format!(
                    "Invalid data passed to 'loop', it requires a list, got this instead: {}. Hint: If you passed a list/dict of just one element, try adding wantlist=True to your lookup invocation or use q/query instead of lookup.",
                    enka_template::pyrepr::to_text(&raw)
                )),
            },
            LoopKind::Items => Ok(match raw.kind() {
                ValueKind::Seq => raw
                    .try_iter()
                    .map(|iter| {
                        iter.flat_map(|v| match v.kind() {
                            ValueKind::Seq => v
                                .try_iter()
                                .map(Iterator::collect::<Vec<_>>)
                                .unwrap_or_default(),
                            _ => vec![v],
                        })
                        .collect()
                    })
                    .unwrap_or_default(),
                ValueKind::None => Vec::new(),
                _ => vec![raw],
            }),
            LoopKind::Dict => match raw.kind() {
                ValueKind::Map => Ok(raw
                    .try_iter()
                    .map(|keys| {
                        keys.map(|k| {
                            let v = raw.get_item(&k).unwrap_or_default();
                            Value::from_pairs([(Value::from("key"), k), (Value::from("value"), v)])
                        })
                        .collect()
                    })
                    .unwrap_or_default()),
                _ => Err(format!(
                    "with_dict expects a dict, got {}",
                    enka_template::pyrepr::type_name(&raw)
                )),
            },
            // The list lookup takes its terms as they are: a dict is not a
            // list of terms (LookupModule.run of `list`).
            // Ansible hands these lookups a mapping as it is, and they
            // refuse it.
            LoopKind::Lookup(name)
                if matches!(name.as_str(), "list" | "indexed_items")
                    && raw.kind() == ValueKind::Map =>
            {
                Err(format!("with_{name} expects a list"))
            }
            LoopKind::Lookup(name) => {
                let mut terms: Vec<Value> = match raw.kind() {
                    ValueKind::Seq => raw.try_iter().map(Iterator::collect).unwrap_or_default(),
                    _ => vec![raw.clone()],
                };
                if lenient {
                    terms.retain(|t| !t.as_str().is_some_and(enka_template::is_possibly_template));
                }
                enka_template::query(ctx, name, &terms).map_err(|e| e.ansible_message())
            }
        };
        // Items of a with_* loop come from a lookup, which Ansible wraps as
        // unsafe (TaskExecutor._get_loop_items); `loop` items are templated
        // values.
        let items = match &looping.kind {
            LoopKind::List => items,
            _ => items.map(|items| items.iter().map(enka_template::mark_unsafe).collect()),
        };
        match items {
            Ok(items) if items.len() > self.options.max_loop_items => {
                let message = format!(
                    "loop has {} items, over the limit of {}",
                    items.len(),
                    self.options.max_loop_items
                );
                Err(Flow::Failed(self.failure(
                    task,
                    message.clone(),
                    fail_result(&message),
                )))
            }
            Ok(items) => Ok(Some(items)),
            Err(message) => Err(Flow::Failed(self.failure(
                task,
                message.clone(),
                fail_result(&message),
            ))),
        }
    }

    /// A module task, run on this host unless it runs once for the batch
    /// (`run_once`, or an action that bypasses the host loop): then the
    /// first host runs it and the others take what it set and its failure.
    async fn run_module_task_once(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
    ) -> Flow {
        let Some(lockstep) = self.lockstep.clone() else {
            return self.run_module_task(frame, task).await;
        };
        // add_host bypasses the host loop; the linear strategy runs
        // `meta: refresh_inventory` once for the batch.
        let bypasses = match &task.action {
            Action::Module { module, args } => {
                module.name().rsplit('.').next() == Some("add_host")
                    || (module.is_meta()
                        && args
                            .get_attr("_raw_params")
                            .is_ok_and(|a| a.as_str() == Some("refresh_inventory")))
            }
            _ => false,
        };
        let once = bypasses || {
            let scope = self.task_scope(frame, task);
            let ctx = self.context(frame, &scope, task);
            self.flag(&ctx, task.run_once.as_ref(), &frame.inherited.run_once)
                .unwrap_or(false)
        };
        if !once {
            return self.run_module_task(frame, task).await;
        }
        if lockstep.leads(self.host_index) {
            let before = self.facts.clone();
            let flow = self.run_module_task(frame, task).await;
            let vars: Vec<(Arc<str>, Var)> = self
                .facts
                .iter()
                .filter(|(name, var)| {
                    before
                        .get(*name)
                        .is_none_or(|old| old.value != var.value || old.is_unsafe != var.is_unsafe)
                })
                .map(|(name, var)| (name.clone(), var.clone()))
                .collect();
            let failure = match &flow {
                Flow::Failed(failure) => Some(failure.clone()),
                _ => None,
            };
            lockstep.share(position, super::lockstep::Shared { vars, failure });
            return flow;
        }
        let Some(shared) = lockstep.shared(position).await else {
            return Flow::Continue;
        };
        let facts = Arc::make_mut(&mut self.facts);
        for (name, var) in shared.vars {
            facts.insert(name, var);
        }
        self.silent_task = true;
        match shared.failure {
            Some(failure) => Flow::Failed(failure),
            None => Flow::Continue,
        }
    }

    async fn run_module_task(&mut self, frame: &Frame, task: &Task) -> Flow {
        let Action::Module { module, args } = &task.action else {
            return Flow::Continue;
        };
        let quiet = matches!(module.name(), "set_fact" | "debug");
        if self.options.log_events != LogEvents::Nothing && !quiet {
            tracing::info!(
                event_type = "playbook_on_task_start",
                task = %task.display_name(),
                "[playbook task start]"
            );
        }
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        // TaskExecutor post-validates these keywords as booleans: a value
        // that is none is a failed result of the task (ignore_errors and
        // register apply), as a template error in them is not.
        let no_log_set = task.no_log.is_some() || !frame.inherited.no_log.is_empty();
        let no_log = match self.keyword_bool(
            &ctx,
            task.no_log.as_ref(),
            &frame.inherited.no_log,
            "no_log",
        ) {
            Ok(b) if no_log_set => b,
            Ok(_) => default_no_log(),
            Err(KeywordError::Template(err)) => {
                return self.template_failure(task, "no_log", &err);
            }
            Err(KeywordError::NotBoolean(message)) => {
                return self.finish_task(frame, task, TaskResult::failed(message), false);
            }
        };
        // `check_mode` of the task, else of its blocks and play, else the
        // run's --check. `ansible_check_mode` stays --check's, as in
        // Ansible (only the module is told).
        self.check_mode = self.options.check_mode;
        self.diff = self.options.diff;
        for (keyword, own, inherited) in [
            ("check_mode", &task.check_mode, &frame.inherited.check_mode),
            ("diff", &task.diff, &frame.inherited.diff),
        ] {
            if own.is_none() && inherited.is_empty() {
                continue;
            }
            let value = match self.keyword_bool(&ctx, own.as_ref(), inherited, keyword) {
                Ok(b) => b,
                Err(KeywordError::Template(err)) => {
                    return self.template_failure(task, keyword, &err);
                }
                Err(KeywordError::NotBoolean(message)) => {
                    return self.finish_task(frame, task, TaskResult::failed(message), no_log);
                }
            };
            match keyword {
                "check_mode" => self.check_mode = value,
                _ => self.diff = value,
            }
        }
        // An error templating the loop, a condition or the arguments is a
        // failed result, as TaskExecutor.run returns it: `ignore_errors`
        // forgives it and `register` keeps it.
        let items = match task.looping {
            Some(_) => match self.loop_items(task, &ctx, &frame.inherited) {
                Ok(items) => items,
                Err(flow) => match as_failed_result(censor(flow, no_log)) {
                    Ok(result) => return self.finish_task(frame, task, result, no_log),
                    Err(flow) => return flow,
                },
            },
            None => None,
        };
        let result = match items {
            None => match self
                .run_once(frame, task, module, args, scope, no_log)
                .await
            {
                Ok(result) => result,
                Err(flow) => match as_failed_result(censor(flow, no_log)) {
                    Ok(result) => result,
                    Err(flow) => return flow,
                },
            },
            Some(items) => {
                let loop_var = match self.loop_var(task, &ctx) {
                    Ok(name) => name,
                    Err(flow) => return censor(flow, no_log),
                };
                let mut results = Vec::with_capacity(items.len());
                let mut scope = scope;
                // TaskExecutor.run: an item whose condition or arguments
                // cannot be templated ends the loop, and the task fails as
                // a whole with that error: no `results`, and none of the
                // facts the items before it set.
                let before = (
                    self.facts.clone(),
                    self.host_facts.clone(),
                    self.included.clone(),
                );
                let mut aborted = None;
                for (index, item) in items.iter().enumerate() {
                    let mut item_scope = scope.clone();
                    set_loop_vars(&mut item_scope, task, &loop_var, index, &items);
                    let item_scope_loop =
                        enka_template::VarSource::get(&item_scope, "ansible_loop").map(|v| v.value);
                    let break_scope =
                        (!task.loop_control.break_when.is_empty()).then(|| item_scope.clone());
                    let unreachable_scope = item_scope.clone();
                    let label_scope = task.loop_control.label.as_ref().map(|_| item_scope.clone());
                    let mut result = match self
                        .run_once(frame, task, module, args, item_scope, no_log)
                        .await
                    {
                        Ok(result) => result,
                        Err(flow) => match as_failed_result(censor(flow, no_log)) {
                            Ok(result) => TaskResult {
                                fails_task: true,
                                ..result
                            },
                            Err(flow) => return flow,
                        },
                    };
                    if result.fails_task {
                        (self.facts, self.host_facts, self.included) = before;
                        aborted = Some(result);
                        break;
                    }
                    if result.flag("unreachable") {
                        // An ignore_unreachable that cannot be templated
                        // does not forgive: the host leaves the play.
                        let item_ctx = self.context(frame, &unreachable_scope, task);
                        result.ignore_unreachable = Some(
                            self.flag(
                                &item_ctx,
                                task.ignore_unreachable.as_ref(),
                                &frame.inherited.ignore_unreachable,
                            )
                            .unwrap_or(false),
                        );
                    }
                    // Later items see what earlier ones set (facts, and the
                    // item's result under `register`), as TaskExecutor
                    // updates the task's variables after each item.
                    scope.facts = self.facts.clone();
                    scope.host_facts = self.host_facts.clone();
                    scope.included = self.included.clone();
                    if let Some(name) = &task.register {
                        Arc::make_mut(&mut scope.facts)
                            .insert(name.clone(), Var::unsafe_data(&result.registered()));
                    }
                    // The item's result names its item as TaskExecutor's:
                    // under the loop variable, with `ansible_loop_var`.
                    result.set(&loop_var, item.clone());
                    result.set("ansible_loop_var", Value::from(&*loop_var));
                    if let Some(index_var) = &task.loop_control.index_var {
                        result.set(index_var, Value::from(index));
                        result.set("ansible_index_var", Value::from(&**index_var));
                    }
                    if task.loop_control.extended {
                        let shown = item_scope_loop.clone().unwrap_or_default();
                        result.set("ansible_loop", shown);
                    }
                    // `loop_control.label`, templated with the item and its
                    // result under `register`, is what the callback shows for
                    // it (`_ansible_item_label`); a label that cannot be
                    // templated fails the item (TaskExecutor._run_loop).
                    if let (Some(label), Some(mut label_scope)) =
                        (&task.loop_control.label, label_scope)
                    {
                        label_scope.facts = scope.facts.clone();
                        let label_ctx = self.context(frame, &label_scope, task);
                        match self.templar.template_value(label, &label_ctx) {
                            Ok(shown) => result.set("_ansible_item_label", shown),
                            Err(err) => {
                                result.set("failed", Value::from(true));
                                result.set(
                                    "msg",
                                    Value::from(format!(
                                        "Failed to template loop_control.label: {}",
                                        err.message()
                                    )),
                                );
                            }
                        }
                    }
                    if result.is_failed() && !no_log {
                        // The task's own failure says only "One or more items
                        // failed", as Ansible's does; each item's reason is
                        // in the log, as Ansible prints it.
                        tracing::warn!(
                            task = %task.display_name(),
                            location = %task.location,
                            item = %enka_template::pyrepr::to_text(item),
                            "item failed: {}",
                            result.message()
                        );
                    }
                    // break_when sees the item's variables and its result
                    // under `register`, as TaskExecutor._run_loop.
                    let stop = match break_scope {
                        Some(mut break_scope) => {
                            break_scope.facts = self.facts.clone();
                            if let Some(name) = &task.register {
                                Arc::make_mut(&mut break_scope.facts)
                                    .insert(name.clone(), Var::unsafe_data(&result.registered()));
                            }
                            let break_ctx = self.context(frame, &break_scope, task);
                            match all_true(&self.templar, &task.loop_control.break_when, &break_ctx)
                            {
                                Ok(stop) => stop,
                                Err(err) => return self.conditional_failure(task, &err),
                            }
                        }
                        None => false,
                    };
                    results.push(result);
                    if stop {
                        break;
                    }
                    if let Some(pause) = task.loop_control.pause.as_ref().and_then(seconds) {
                        self.sleep(pause).await;
                    }
                }
                aborted.unwrap_or_else(|| TaskResult::combine(results))
            }
        };
        self.finish_task(frame, task, result, no_log)
    }

    /// `meta: refresh_inventory`: the inventory read again from its
    /// sources, with what `add_host` and `group_by` did so far kept. Only a
    /// playbook run has sources to read.
    async fn refresh_inventory(&mut self) -> Result<(), String> {
        let (Some(shared), Some(worker)) = (self.inventory.clone(), self.project.ansible.clone())
        else {
            return Ok(());
        };
        if worker.config().inventory.is_empty() {
            return Ok(());
        }
        let fresh = enka_project::role::reload_inventory(&worker, &self.project.base_dir).await?;
        if let Ok(mut inventory) = shared.lock() {
            *inventory = Arc::new(inventory.refreshed(fresh));
        }
        Ok(())
    }

    /// What `add_host` and `group_by` results ask of the inventory (each
    /// loop item's too), as the strategy applies them.
    fn change_inventory(&mut self, result: &mut TaskResult) {
        let added = result.get("add_host").cloned();
        let group = result
            .get("add_group")
            .and_then(|v| v.as_str().map(str::to_owned));
        if added.is_none() && group.is_none() {
            return;
        }
        // A role run has no inventory of its own: its hosts are the
        // project's (or localhost), for this run.
        let shared = self
            .inventory
            .get_or_insert_with(|| live_inventory(&self.project))
            .clone();
        let strings = |value: Option<Value>| -> Vec<String> {
            value
                .and_then(|v| v.try_iter().ok().map(|i| i.collect::<Vec<_>>()))
                .unwrap_or_default()
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        let field = |item: &Value, key: &str| item.get_attr(key).ok().filter(|v| !v.is_undefined());
        let Ok(mut inventory) = shared.lock() else {
            return;
        };
        // The strategy decides whether the task changed something (before
        // changed_when is judged): whether the inventory changed
        // (InventoryManager.add_dynamic_host, add_dynamic_group).
        let mut changed = None;
        if let Some(added) = added {
            let name = field(&added, "host_name").and_then(|v| v.as_str().map(str::to_owned));
            if let Some(name) = name {
                let groups = strings(field(&added, "groups"));
                let vars: Vec<(Arc<str>, Var)> = match field(&added, "host_vars") {
                    Some(map) => map
                        .try_iter()
                        .into_iter()
                        .flatten()
                        .filter_map(|k| {
                            let value = map.get_item(&k).ok()?;
                            Some((Arc::from(k.as_str()?), Var::unsafe_data(&value)))
                        })
                        .collect(),
                    None => Vec::new(),
                };
                changed = Some(Arc::make_mut(&mut inventory).add_host(&name, &groups, &vars));
            }
        }
        if let Some(group) = group {
            let parents = strings(result.get("parent_groups").cloned());
            changed = Some(Arc::make_mut(&mut inventory).add_group(&self.host, &group, &parents));
        }
        drop(inventory);
        if let Some(changed) = changed {
            result.set("changed", Value::from(changed));
        }
    }

    /// Records the result: register, stats, and whether the run goes on.
    fn finish_task(
        &mut self,
        frame: &Frame,
        task: &Task,
        result: TaskResult,
        no_log: bool,
    ) -> Flow {
        let failed = result.is_failed();
        let skipped = result.is_skipped();
        let changed = result.is_changed();
        // An action may mark its own result as not to be shown
        // (`_ansible_no_log`); `register` still keeps it whole.
        let no_log = no_log || result.flag("_ansible_no_log");
        let shown = if no_log {
            censored(&result)
        } else {
            result.to_value()
        };
        self.log_result(task, &result, &shown, no_log);
        if self.options.observer.is_some() {
            let status = match (failed, skipped, changed) {
                (true, _, _) => super::TaskStatus::Failed,
                (_, true, _) => super::TaskStatus::Skipped,
                (_, _, true) => super::TaskStatus::Changed,
                _ => super::TaskStatus::Ok,
            };
            self.last_outcome = Some((status, shown.clone(), None));
        }
        if let Some(name) = &task.register {
            self.warn_if_reserved([&**name]);
            // A module's result is unsafe data, as Ansible wraps it.
            Arc::make_mut(&mut self.facts)
                .insert(name.clone(), Var::unsafe_data(&result.registered()));
        }

        if result.flag("unreachable") {
            return self.finish_unreachable(frame, task, &result, shown, no_log);
        }
        // Meta tasks are not in Ansible's recap (`_execute_meta` counts
        // nothing), whatever they do.
        let is_meta = matches!(
            &task.action,
            Action::Module { module, .. } if !module.counts_in_recap()
        );
        if skipped {
            if !is_meta {
                self.stats.skipped += 1;
            }
            return Flow::Continue;
        }
        if changed && !failed {
            let names: Vec<String> = frame
                .inherited
                .notify
                .iter()
                .chain(task.notify.iter())
                .cloned()
                .collect();
            if !names.is_empty()
                && let Err(message) = self.notify(&names)
            {
                return Flow::Failed(self.failure(task, message.clone(), fail_result(&message)));
            }
        }
        if let Some(control) = result.control.clone() {
            match control {
                Control::FlushHandlers => self.flush_requested = true,
                Control::ClearHostErrors => {
                    self.host_errors_cleared = true;
                    self.cleared_play_errors = true;
                    if let Some(lockstep) = &self.lockstep {
                        lockstep.clear_host_errors();
                    }
                }
                Control::EndPlay => {
                    if let Some(lockstep) = &self.lockstep {
                        lockstep.end_play();
                    }
                    self.play_ended = true;
                    return Flow::EndPlay;
                }
                Control::EndHost => return Flow::EndPlay,
                Control::EndRole => return Flow::EndRole,
                Control::Requeue(after) => self.requeue_after = Some(after),
                Control::ClearFacts => {
                    Arc::make_mut(&mut self.facts).clear();
                    Arc::make_mut(&mut self.host_facts).clear();
                }
            }
        }
        if failed {
            let ignore = match self.task_flag(
                frame,
                task,
                task.ignore_errors.as_ref(),
                &frame.inherited.ignore_errors,
                "ignore_errors",
            ) {
                Ok(b) => b,
                Err(flow) => return flow,
            };
            let message = shown_message(&result, no_log);
            if ignore {
                self.forgive(task, &message, changed, "task failed");
                return Flow::Continue;
            }
            return Flow::Failed(self.failure(task, message, shown));
        }
        if !is_meta {
            self.stats.ok += 1;
            if changed {
                self.stats.changed += 1;
            }
        }
        Flow::Continue
    }

    /// A keyword of the task (else of its blocks and play) that is a flag,
    /// templated in the task's scope; a template error fails the task.
    fn task_flag(
        &self,
        frame: &Frame,
        task: &Task,
        own: Option<&Value>,
        inherited: &[Value],
        keyword: &str,
    ) -> Result<bool, Flow> {
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        self.flag(&ctx, own, inherited)
            .map_err(|err| self.template_failure(task, keyword, &err))
    }

    /// A failure or unreachable host `ignore_errors`/`ignore_unreachable`
    /// forgave: shown as ignored, and the recap counts it as a task that
    /// ran.
    fn forgive(&mut self, task: &Task, message: &str, changed: bool, what: &str) {
        if let Some(outcome) = &mut self.last_outcome {
            *outcome = (
                super::TaskStatus::Ignored,
                outcome.1.clone(),
                Some(message.to_owned()),
            );
        }
        self.stats.ok += 1;
        self.stats.ignored += 1;
        if changed {
            self.stats.changed += 1;
        }
        tracing::info!(task = %task.display_name(), location = %task.location, "{what}, ignoring: {message}");
    }

    /// A task whose host could not be reached: with `ignore_unreachable`
    /// the host goes on and the recap counts the task ok and ignored;
    /// otherwise the host leaves the play, counted unreachable, not failed.
    fn finish_unreachable(
        &mut self,
        frame: &Frame,
        task: &Task,
        result: &TaskResult,
        shown: Value,
        no_log: bool,
    ) -> Flow {
        let ignore = match result.ignore_unreachable {
            Some(judged) => judged,
            None => match self.task_flag(
                frame,
                task,
                task.ignore_unreachable.as_ref(),
                &frame.inherited.ignore_unreachable,
                "ignore_unreachable",
            ) {
                Ok(b) => b,
                Err(flow) => return flow,
            },
        };
        let message = shown_message(result, no_log);
        if ignore {
            self.forgive(task, &message, false, "host unreachable");
            return Flow::Continue;
        }
        self.stats.unreachable += 1;
        Flow::Failed(self.failure(task, message, shown))
    }

    /// The task events `--ansible-log-events` asks for: `debug` output and
    /// failures with Tasks, every result with Everything. A failure is
    /// logged when it happens, even if `ignore_errors` lets the run go on.
    /// `shown` is already censored for `no_log`; so is every message here.
    fn log_result(&self, task: &Task, result: &TaskResult, shown: &Value, no_log: bool) {
        let events = self.options.log_events;
        if events == LogEvents::Nothing {
            return;
        }
        let message = || {
            if no_log {
                return NO_LOG_MESSAGE.to_owned();
            }
            match shown.get_attr("msg") {
                Ok(msg) if !msg.is_undefined() => msg.to_string(),
                _ => result.message(),
            }
        };
        if result.is_failed() {
            tracing::error!(
                event_type = "runner_on_failed",
                task = %task.display_name(),
                location = %task.location,
                "[playbook task failed]: {}",
                message()
            );
            return;
        }
        let skipped = result.is_skipped();
        let is_debug =
            matches!(&task.action, Action::Module { module, .. } if module.name() == "debug");
        if is_debug && !skipped {
            tracing::info!(
                event_type = "runner_on_ok",
                task = %task.display_name(),
                "[playbook debug]: {}",
                message()
            );
            return;
        }
        if events == LogEvents::Everything {
            let event_type = if skipped {
                "runner_on_skipped"
            } else {
                "runner_on_ok"
            };
            tracing::info!(
                event_type,
                task = %task.display_name(),
                changed = result.is_changed(),
                result = %shown,
                "[playbook task result]"
            );
        }
    }

    /// A meta task whose condition was false: skipped, with the reason
    /// Ansible's strategy gives.
    fn meta_skipped(&self, task: &Task, action: &str) -> TaskResult {
        let (msg, skip_reason) =
            enka_modules::meta::report(action, &self.host, task.role.as_deref(), false);
        let mut fields = vec![("msg".into(), Value::from(msg))];
        if let Some(reason) = skip_reason {
            fields.push(("skipped".into(), Value::from(true)));
            fields.push(("skip_reason".into(), Value::from(reason)));
        }
        TaskResult::of(fields)
    }

    /// One execution of a module task (one loop item), with `when`,
    /// `until`, `changed_when` and `failed_when`.
    async fn run_once(
        &mut self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        scope: Scope,
        no_log: bool,
    ) -> Result<TaskResult, Flow> {
        let ctx = self.context(frame, &scope, task);
        // A meta task's condition decides what it does, and it reports in
        // its own words (the strategy's _execute_meta).
        let meta_action = module
            .is_meta()
            .then(|| args.get_attr("_raw_params").ok())
            .flatten()
            .and_then(|action| action.as_str().map(str::to_owned));
        let heeds_when = meta_action
            .as_deref()
            .is_none_or(enka_modules::meta::heeds_when);
        if heeds_when {
            match self.check_when(&ctx, &frame.inherited, task) {
                Ok(Some(condition)) => {
                    return Ok(match &meta_action {
                        Some(action) => self.meta_skipped(task, action),
                        None => TaskResult::skipped(condition),
                    });
                }
                Ok(None) => {}
                Err(err) => return Err(self.conditional_failure(task, &err)),
            }
        }
        // `retries` without `until` retries until the task succeeds
        // (TaskExecutor: `until or [not result['failed']]`).
        let until = task.until.clone();
        let (attempts, delay) = if until.is_some() || task.retries.is_some() {
            let retries = match &task.retries {
                Some(v) => match self.templar.template_value(v, &ctx) {
                    Ok(v) => i64::try_from(v.clone())
                        .ok()
                        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                        .unwrap_or(3),
                    Err(err) => return Err(self.template_failure(task, "retries", &err)),
                },
                None => 3,
            };
            let delay = match &task.delay {
                Some(v) => match self.templar.template_value(v, &ctx) {
                    Ok(v) => seconds(&v).unwrap_or(Duration::from_secs(5)),
                    Err(err) => return Err(self.template_failure(task, "delay", &err)),
                },
                None => Duration::from_secs(5),
            };
            (1 + retries.max(0) as u64, delay)
        } else {
            (1, Duration::ZERO)
        };
        if !module.runs_on_controller() {
            match self.unreachable_reason(frame, task, &ctx) {
                Ok(None) => {}
                Ok(Some(message)) => return Ok(TaskResult::unreachable(message)),
                Err(flow) => return Err(flow),
            }
        }
        let mut attempt = 0u64;
        loop {
            attempt += 1;
            let mut result = self.execute(frame, task, module, args, &ctx, no_log).await;
            // Raised, not returned, in Ansible: no condition judges it and
            // `until` does not retry it.
            if result.fails_task {
                return Ok(result);
            }
            if !result.is_failed() {
                self.change_inventory(&mut result);
                if meta_action.as_deref().map(str::trim) == Some("refresh_inventory")
                    && let Err(message) = self.refresh_inventory().await
                {
                    result = TaskResult::failed(message);
                } else if let Some(action) = &meta_action {
                    let (msg, _) =
                        enka_modules::meta::report(action, &self.host, task.role.as_deref(), true);
                    result.set("msg", Value::from(msg));
                }
            }
            // TaskExecutor's defaults: every result says whether it failed
            // and whether it changed something.
            if result.get("failed").is_none() {
                result.set("failed", Value::from(false));
            }
            if result.get("changed").is_none() {
                result.set("changed", Value::from(false));
            }
            // Conditions below see the result under the registered name.
            let mut judged_scope = scope.clone();
            judged_scope.facts = self.facts.clone();
            judged_scope.host_facts = self.host_facts.clone();
            if let Some(name) = &task.register {
                judged_scope.set_magic(name, result.to_value());
            }
            let judged_ctx = self.context(frame, &judged_scope, task);
            // A condition that cannot be evaluated fails the result, its
            // error under `<cond>_when_result`, as TaskExecutor does.
            if let Some(conditions) = &task.changed_when {
                match all_true(&self.templar, conditions, &judged_ctx) {
                    Ok(changed) => result.set("changed", Value::from(changed)),
                    Err(err) => {
                        result.set("failed", Value::from(true));
                        result.set("changed_when_result", Value::from(conditional_error(&err)));
                    }
                }
            }
            if let Some(conditions) = &task.failed_when {
                match all_true(&self.templar, conditions, &judged_ctx) {
                    Ok(failed) => {
                        result.set("failed_when_result", Value::from(failed));
                        result.set("failed", Value::from(failed));
                    }
                    Err(err) => {
                        result.set("failed", Value::from(true));
                        result.set("failed_when_result", Value::from(conditional_error(&err)));
                    }
                }
            }
            // With `retries: 0` Ansible runs the task once and never judges
            // `until`.
            if attempts <= 1 {
                return Ok(result);
            }
            // Ansible counts the attempt before judging `until`.
            result.set("attempts", Value::from(attempt));
            let done = match &until {
                Some(until) => {
                    if let Some(name) = &task.register {
                        judged_scope.set_magic(name, result.to_value());
                    }
                    let judged_ctx = self.context(frame, &judged_scope, task);
                    match all_true(&self.templar, until, &judged_ctx) {
                        Ok(done) => done,
                        Err(err) => return Err(self.conditional_failure(task, &err)),
                    }
                }
                None => !result.is_failed(),
            };
            if done {
                return Ok(result);
            }
            if attempt >= attempts || self.past_deadline(delay) {
                result.set("failed", Value::from(true));
                // Ansible reports the retries, not the runs, once they ran out.
                if attempt >= attempts {
                    result.set("attempts", Value::from(attempt - 1));
                }
                let why = if attempt >= attempts {
                    format!("the until condition never held in {attempt} attempts")
                } else {
                    format!(
                        "the reconcile timeout (--reconcile-timeout) ended the until loop after {attempt} of {attempts} attempts"
                    )
                };
                // The registered result keeps the module's own msg, as
                // Ansible's does; the run's failure message says why, so a
                // Failure condition does not read "polling".
                result.set(UNTIL_REASON, Value::from(why));
                return Ok(result);
            }
            tracing::debug!(task = %task.display_name(), attempt, "until condition not met; retrying");
            self.sleep(delay).await;
        }
    }

    /// Why the host `task` acts on cannot be reached, if it cannot: enka
    /// runs every action on its own machine, so only a `local` connection
    /// reaches a host. The host is `delegate_to`'s, else the task's own;
    /// its connection is its `ansible_connection`, else the task's, block's
    /// or play's `connection`, else `local` for localhost and Ansible's
    /// default, `ssh`, for any other host.
    fn unreachable_reason(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
    ) -> Result<Option<String>, Flow> {
        let delegate = match &task.delegate_to {
            Some(value) => match self.templar.template_value(value, ctx) {
                Ok(v) if v.is_none() || v.is_undefined() => None,
                Ok(v) => Some(enka_template::pyrepr::to_text(&v)),
                Err(err) => return Err(self.template_failure(task, "delegate_to", &err)),
            },
            None => None,
        };
        let target = delegate.clone().unwrap_or_else(|| self.host.to_string());
        let host_connection = match &delegate {
            Some(name) => ctx
                .hostvars()
                .get_item(&Value::from(name.as_str()))
                .ok()
                .filter(|vars| !vars.is_undefined())
                .and_then(|vars| vars.get_attr("ansible_connection").ok()),
            None => ctx.resolve("ansible_connection"),
        }
        .filter(|v| !v.is_undefined() && !v.is_none());
        let keyword = task
            .connection
            .as_ref()
            .or_else(|| frame.inherited.connection.last());
        let connection = match (host_connection, keyword) {
            (Some(v), _) => Some(v),
            (None, Some(keyword)) => match self.templar.template_value(keyword, ctx) {
                Ok(v) => Some(v),
                Err(err) => return Err(self.template_failure(task, "connection", &err)),
            },
            (None, None) => self
                .options
                .connection
                .as_ref()
                .map(|c| Value::from(c.as_str())),
        };
        let connection = match connection {
            Some(v) => enka_template::pyrepr::to_text(&v),
            None if is_localhost(&target) => return Ok(None),
            None => "ssh".to_owned(),
        };
        let local = matches!(
            connection.as_str(),
            "local" | "ansible.builtin.local" | "ansible.legacy.local"
        );
        Ok((!local).then(|| {
            format!(
                "Failed to connect to the host via {connection}: enka runs every task on its own machine, and host {target} asks for a {connection} connection"
            )
        }))
    }

    fn past_deadline(&self, upcoming: Duration) -> bool {
        self.options
            .deadline
            .is_some_and(|d| Instant::now() + upcoming >= d)
    }

    async fn sleep(&self, duration: Duration) {
        let duration = match self.options.deadline {
            Some(deadline) => duration.min(deadline.saturating_duration_since(Instant::now())),
            None => duration,
        };
        tokio::time::sleep(duration).await;
    }

    fn conditional_failure(&self, task: &Task, err: &TemplateError) -> Flow {
        let message = conditional_error(err);
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }

    /// The task's arguments over the `module_defaults` in force for its
    /// action (get_action_args_with_defaults); `None` when there are none.
    fn with_module_defaults(
        &self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        ctx: &Context,
    ) -> Result<Option<Value>, String> {
        if frame.inherited.module_defaults.is_empty() && task.module_defaults.is_none() {
            return Ok(None);
        }
        let action = match module {
            ModuleRef::Native(spec) => spec.fqcn(),
            ModuleRef::Ansible(action) => action.qualified_name().to_owned(),
        };
        let entries: Vec<Value> = frame
            .inherited
            .module_defaults
            .iter()
            .chain(task.module_defaults.as_ref())
            .cloned()
            .collect();
        let applied = self.project.module_defaults.for_action(&action, &entries);
        if applied.is_empty() {
            return Ok(None);
        }
        let mut pairs: Vec<(Value, Value)> = Vec::new();
        let mut set = |key: Value, value: Value| match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, kept)) => *kept = value,
            None => pairs.push((key, value)),
        };
        for defaults in applied {
            let defaults = self
                .templar
                .template_value(&defaults, ctx)
                .map_err(|err| format!("module_defaults: {}", err.ansible_message()))?;
            if defaults.kind() != ValueKind::Map {
                return Err(format!(
                    "module_defaults: the defaults of {action} must be a mapping, got {}",
                    enka_template::pyrepr::type_name(&defaults)
                ));
            }
            for key in defaults.try_iter().into_iter().flatten() {
                let value = defaults.get_item(&key).unwrap_or_default();
                set(key, value);
            }
        }
        // Arguments written as one template become their mapping first.
        let own = if args.kind() == ValueKind::Map {
            args.clone()
        } else {
            self.templar
                .template_value(args, ctx)
                .map_err(|err| err.ansible_message())?
        };
        for key in own.try_iter().into_iter().flatten() {
            let value = own.get_item(&key).unwrap_or_default();
            set(key, value);
        }
        Ok(Some(Value::from_pairs(pairs)))
    }

    /// Templates the arguments and calls the module.
    async fn execute(
        &mut self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        ctx: &Context,
        no_log: bool,
    ) -> TaskResult {
        let with_defaults;
        let args = match self.with_module_defaults(frame, task, module, args, ctx) {
            Ok(Some(merged)) => {
                with_defaults = merged;
                &with_defaults
            }
            Ok(None) => args,
            Err(message) => return TaskResult::task_error(message),
        };
        let templated = match self.templar.template_value(args, ctx) {
            Ok(v) => match variable_params(remove_omit(&v, self.templar.omit())) {
                Ok(v) => v,
                Err(message) => return TaskResult::task_error(message),
            },
            Err(err) => {
                if let Some((class, text)) = err.python_exception() {
                    return exception_result(class, &text, err.line());
                }
                let message = if err.is_undefined() {
                    undefined_in_arguments(task, &err)
                } else {
                    err.ansible_message()
                };
                return TaskResult::task_error(message);
            }
        };
        if templated.kind() != ValueKind::Map {
            return TaskResult::task_error(format!(
                "the arguments of {} must be a mapping, got {}",
                module.name(),
                enka_template::pyrepr::type_name(&templated)
            ));
        }
        let environment = match self.environment(frame, task, ctx) {
            Ok(environment) => environment,
            Err(message) => return TaskResult::task_error(message),
        };
        let task_timeout = match &task.timeout {
            Some(raw) => match self.templar.template_value(raw, ctx) {
                Ok(v) => seconds(&v).filter(|t| !t.is_zero()),
                Err(err) => return TaskResult::task_error(format!("timeout: {err}")),
            },
            None => None,
        };
        let deadline = match task_timeout {
            Some(t) => {
                let own = Instant::now() + t;
                Some(self.options.deadline.map_or(own, |d| d.min(own)))
            }
            None => self.options.deadline,
        };
        let asynchronous = match self.asynchronous(task, ctx) {
            Ok(asynchronous) => asynchronous,
            Err(message) => return TaskResult::task_error(message),
        };
        // A native action has no background: it runs to completion, within
        // the time `async` gives it when the task waits for it.
        let deadline = match asynchronous {
            Some(a) if a.poll > 0 && !module.is_bridged() => {
                let own = Instant::now() + Duration::from_secs(a.seconds);
                Some(deadline.map_or(own, |d| d.min(own)))
            }
            _ => deadline,
        };
        let not_a_module = Value::UNDEFINED;
        let mut module_ctx = ModuleContext {
            task: modules::TaskView {
                name: task.name.as_deref(),
                file: &task.location.file,
                written_args: match &task.action {
                    Action::Module { args, .. } => args,
                    _ => &not_a_module,
                },
            },
            ctx,
            templar: &self.templar,
            cluster: self.cluster.as_ref(),
            verbosity: self.options.verbosity,
            deadline,
            task_timeout,
            no_log,
            api_time: Duration::ZERO,
            role_path: frame.role.as_ref().map(|r| r.path.as_path()),
            base_dir: &self.project.base_dir,
            owner: self.options.owner.as_deref(),
            dependents: Vec::new(),
            ansible: self.project.ansible.as_ref(),
            environment,
            // A dry run's cluster writes nothing; Ansible's own modules
            // are kept from writing by its check mode.
            check_mode: self.check_mode || (self.options.dry_run && module.is_bridged()),
            diff: self.diff,
            asynchronous,
        };
        let started = Instant::now();
        let outcome = modules::run(module, &templated, &mut module_ctx).await;
        self.module_timings
            .push((module.timing_name(), started.elapsed()));
        for dependent in module_ctx.dependents.drain(..) {
            enka_kube::Dependent::merge_into(&mut self.dependents, dependent);
        }
        self.api_time += module_ctx.api_time;
        match outcome {
            Ok(output) => {
                self.warn_if_reserved(
                    output
                        .facts
                        .iter()
                        .chain(&output.included_vars)
                        .map(|(name, _)| &**name),
                );
                if !output.facts.is_empty() {
                    let facts = Arc::make_mut(&mut self.facts);
                    for (k, v) in &output.facts {
                        facts.insert(k.clone(), Var::templated(v.clone()));
                    }
                }
                if !output.plain_facts.is_empty() {
                    self.add_module_facts(&output.plain_facts);
                    // What gather_facts tells the executor (smart
                    // gathering then skips the next plays' gathering).
                    if module.name().rsplit('.').next() == Some("gather_facts") {
                        Arc::make_mut(&mut self.host_facts).insert(
                            Arc::from("_ansible_facts_gathered"),
                            Var::plain(Value::from(true)),
                        );
                    }
                }
                if !output.included_vars.is_empty() {
                    let included = Arc::make_mut(&mut self.included);
                    for (k, v) in &output.included_vars {
                        included.insert(k.clone(), Var::templated(v.clone()));
                    }
                }
                self.metrics.extend(output.metrics);
                TaskResult {
                    fields: output.fields,
                    control: output.control,
                    ignore_unreachable: None,
                    fails_task: false,
                }
            }
            Err(message) => TaskResult::failed(message),
        }
    }
}

impl Runner {
    /// The task's `async` and `poll`, templated; `None` without `async`
    /// (or with `async: 0`).
    fn asynchronous(
        &self,
        task: &Task,
        ctx: &Context,
    ) -> Result<Option<modules::Asynchronous>, String> {
        let whole = |raw: &Option<Value>, what: &str| -> Result<Option<u64>, String> {
            let Some(raw) = raw else {
                return Ok(None);
            };
            let value = self
                .templar
                .template_value(raw, ctx)
                .map_err(|err| format!("{what}: {}", err.ansible_message()))?;
            enka_template::time::seconds(&value)
                .map(|d| Some(d.as_secs()))
                .ok_or_else(|| format!("{what} must be a whole number of seconds, got {value}"))
        };
        let Some(seconds) = whole(&task.asynchronous, "async")?.filter(|&s| s > 0) else {
            return Ok(None);
        };
        let poll = whole(&task.poll, "poll")?.unwrap_or(DEFAULT_POLL_SECONDS);
        Ok(Some(modules::Asynchronous { seconds, poll }))
    }
}

/// Ansible's DEFAULT_POLL_INTERVAL.
const DEFAULT_POLL_SECONDS: u64 = 15;

/// Arguments whose templated free-form text rendered to a mapping: that
/// mapping, the arguments written beside it winning (Task._post_validate_args).
/// Ansible's names of the implicit localhost (`C.LOCALHOST`).
fn is_localhost(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

fn variable_params(args: Value) -> Result<Value, String> {
    let key = Value::from(enka_project::role::VARIABLE_PARAMS);
    let Ok(params) = args.get_item(&key) else {
        return Ok(args);
    };
    if params.is_undefined() {
        return Ok(args);
    }
    if params.kind() != ValueKind::Map {
        return Err(format!(
            "invalid or malformed argument: '{}'",
            enka_template::pyrepr::to_text(&params)
        ));
    }
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    for k in params.try_iter().into_iter().flatten() {
        if let Ok(v) = params.get_item(&k) {
            pairs.push((k, v));
        }
    }
    for k in args.try_iter().into_iter().flatten() {
        if k == key {
            continue;
        }
        if let Ok(v) = args.get_item(&k) {
            pairs.retain(|(existing, _)| *existing != k);
            pairs.push((k, v));
        }
    }
    Ok(Value::from_pairs(pairs))
}

/// The inventory a run changes (`add_host`, `group_by`): the project's,
/// else localhost's.
fn live_inventory(project: &Project) -> Arc<std::sync::Mutex<Arc<enka_project::role::Inventory>>> {
    let inventory = project.inventory.as_deref().cloned().unwrap_or_default();
    Arc::new(std::sync::Mutex::new(Arc::new(inventory)))
}

/// A play's `hosts` as its name when it has none (Play.get_name).
fn hosts_text(hosts: &Value) -> String {
    match hosts.kind() {
        ValueKind::Seq => hosts
            .try_iter()
            .into_iter()
            .flatten()
            .map(|h| enka_template::pyrepr::to_text(&h))
            .collect::<Vec<_>>()
            .join(","),
        _ => enka_template::pyrepr::to_text(hosts),
    }
}

fn names_value(names: &[String]) -> Value {
    Value::from(
        names
            .iter()
            .map(|n| Value::from(n.as_str()))
            .collect::<Vec<_>>(),
    )
}

/// The batch sizes `serial` makes of `hosts` hosts: one batch without it;
/// else each entry (a count, or a percentage of all hosts, at least one)
/// in turn, the last repeating (PlaybookExecutor._get_serialized_batches).
fn batch_sizes(serial: &Value, hosts: usize) -> Result<Vec<usize>, String> {
    let entries: Vec<Value> = match serial.kind() {
        ValueKind::Undefined | ValueKind::None => Vec::new(),
        ValueKind::Seq => serial.try_iter().into_iter().flatten().collect(),
        _ => vec![serial.clone()],
    };
    let size = |entry: &Value| -> Result<i64, String> {
        let text = enka_template::pyrepr::to_text(entry);
        let text = text.trim();
        if let Some(percent) = text.strip_suffix('%') {
            let percent: f64 = percent
                .trim()
                .parse()
                .map_err(|_| format!("serial: {text} is not a number or a percentage"))?;
            let count = (hosts as f64 * percent / 100.0) as i64;
            return Ok(count.max(1));
        }
        text.parse::<i64>()
            .map_err(|_| format!("serial: {text} is not a number or a percentage"))
    };
    if entries.is_empty() {
        return Ok(vec![hosts.max(1)]);
    }
    let mut sizes = Vec::new();
    let mut left = hosts;
    let mut index = 0;
    while left > 0 {
        let size = size(&entries[index])?;
        if size <= 0 {
            sizes.push(left);
            break;
        }
        let size = (size as usize).min(left);
        sizes.push(size);
        left -= size;
        index = (index + 1).min(entries.len() - 1);
    }
    Ok(sizes)
}

/// Whether two parameter lists name the same variables with the same raw
/// values.
/// Pushes the `vars/main.yml` of `role`'s dependencies, as
/// `Role.get_all_dependencies` orders them (each one's own dependencies
/// first).
fn push_dependency_vars(role_vars: &mut Option<Arc<scope::Frame>>, role: &Role) {
    for dependency in &role.dependencies {
        push_dependency_vars(role_vars, &dependency.role);
        *role_vars = scope::push(role_vars, &dependency.role.vars("main"));
    }
}

fn same_vars(a: &VarList, b: &VarList) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && va.value == vb.value)
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

fn fail_result(message: &str) -> Value {
    Value::from_pairs([
        (Value::from("failed"), Value::from(true)),
        (Value::from("msg"), Value::from(message)),
    ])
}

/// The loop variables of item `index` of `items`: `loop_var`,
/// `ansible_loop_var`, `index_var` and, with `extended`, `ansible_loop`
/// as TaskExecutor._run_loop sets them.
fn set_loop_vars(scope: &mut Scope, task: &Task, loop_var: &str, index: usize, items: &[Value]) {
    let item = items.get(index).cloned().unwrap_or_default();
    scope.set_magic(loop_var, item);
    scope.set_magic("ansible_loop_var", Value::from(loop_var));
    if let Some(index_var) = &task.loop_control.index_var {
        scope.set_magic(index_var, Value::from(index));
        scope.set_magic("ansible_index_var", Value::from(&**index_var));
    }
    if task.loop_control.extended {
        let mut ansible_loop = ansible_loop(items, index);
        if !task.loop_control.extended_allitems {
            ansible_loop = Value::from_pairs(
                ansible_loop
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .filter(|k| k.as_str() != Some("allitems"))
                    .map(|k| {
                        let v = ansible_loop.get_item(&k).unwrap_or_default();
                        (k, v)
                    })
                    .collect::<Vec<_>>(),
            );
        }
        scope.set_magic("ansible_loop", ansible_loop);
    }
}

/// A role after its dependencies, theirs first, depth first (the order
/// Ansible combines their variables in); a role met twice counts once.
fn with_dependencies(role: &Arc<Role>, out: &mut Vec<Arc<Role>>) {
    fn visit(role: &Arc<Role>, out: &mut Vec<Arc<Role>>, path: &mut Vec<std::path::PathBuf>) {
        // `path` guards against a dependency cycle.
        if out.iter().any(|seen| seen.path == role.path) || path.contains(&role.path) {
            return;
        }
        path.push(role.path.clone());
        for dependency in &role.dependencies {
            visit(&dependency.role, out, path);
        }
        path.pop();
        out.push(role.clone());
    }
    visit(role, out, &mut Vec::new());
}

/// `ansible_loop` of item `index` (`loop_control.extended`).
fn ansible_loop(items: &[Value], index: usize) -> Value {
    let length = items.len();
    let mut pairs = vec![
        (Value::from("allitems"), Value::from(items.to_vec())),
        (Value::from("index"), Value::from(index + 1)),
        (Value::from("index0"), Value::from(index)),
        (Value::from("first"), Value::from(index == 0)),
        (Value::from("last"), Value::from(index + 1 == length)),
        (Value::from("length"), Value::from(length)),
        (Value::from("revindex"), Value::from(length - index)),
        (Value::from("revindex0"), Value::from(length - index - 1)),
    ];
    if index + 1 < length {
        pairs.push((Value::from("nextitem"), items[index + 1].clone()));
    }
    if index > 0 {
        pairs.push((Value::from("previtem"), items[index - 1].clone()));
    }
    Value::from_pairs(pairs)
}

fn all_true(templar: &Templar, conditions: &[Value], ctx: &Context) -> Result<bool, TemplateError> {
    for condition in conditions {
        if !templar.evaluate(condition, ctx)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Ansible's words for arguments that use an undefined variable (the
/// task's `post_validate`): the cause after two dots, then where the task
/// is, as its errors show it.
fn undefined_in_arguments(task: &Task, err: &TemplateError) -> String {
    let mut message = format!(
        "The task includes an option with an undefined variable.. {}",
        err.message()
    );
    if let Some(excerpt) = enka_project::role::ansible_excerpt(&task.location) {
        message.push_str("\n\n");
        message.push_str(&excerpt);
    }
    message
}

/// Drops arguments equal to the `omit` placeholder, recursively.
fn remove_omit(value: &Value, omit: &str) -> Value {
    match value.kind() {
        ValueKind::Map => {
            Value::from_pairs(value.try_iter().into_iter().flatten().filter_map(|k| {
                let v = value.get_item(&k).unwrap_or_default();
                (v.as_str() != Some(omit)).then(|| (k, remove_omit(&v, omit)))
            }))
        }
        ValueKind::Seq => Value::from(
            value
                .try_iter()
                .into_iter()
                .flatten()
                .filter(|v| v.as_str() != Some(omit))
                .map(|v| remove_omit(&v, omit))
                .collect::<Vec<_>>(),
        ),
        _ => value.clone(),
    }
}

/// The result of a task whose templating raised a Python exception that
/// Ansible's templar lets through: TaskExecutor.run's, with the traceback
/// as `exception` and no `msg` (its message is the traceback's last line,
/// as ansible-playbook's "The error was: …").
fn exception_result(class: &str, text: &str, line: Option<usize>) -> TaskResult {
    TaskResult::of(vec![
        ("changed".into(), Value::from(false)),
        (
            "exception".into(),
            Value::from(format!(
                "Traceback (most recent call last):\n  File \"<template>\", line {}, in root\n{class}: {text}\n",
                line.unwrap_or(1)
            )),
        ),
        ("failed".into(), Value::from(true)),
    ])
}

/// Ansible's message for a condition that could not be evaluated, quoting
/// the condition as its Conditional does.
fn conditional_error(err: &TemplateError) -> String {
    match err.template() {
        Some(condition) => format!(
            "The conditional check '{condition}' failed. The error was: {}",
            err.message()
        ),
        None => format!("The conditional check failed. The error was: {err}"),
    }
}

/// A task's failure as the failed result TaskExecutor.run returns for it;
/// any other flow as it is.
fn as_failed_result(flow: Flow) -> Result<TaskResult, Flow> {
    match flow {
        Flow::Failed(failure) => {
            let mut result = TaskResult::error(failure.message);
            if let Ok(exception) = failure.result.get_attr("exception")
                && !exception.is_undefined()
            {
                result.set("exception", exception);
            }
            Ok(result)
        }
        other => Err(other),
    }
}

/// The handlers of a handlers list, those of the files it imports (blocks)
/// included, in order.
fn handler_list(tasks: &Arc<[Task]>) -> Vec<(Arc<[Task]>, usize)> {
    let mut out = Vec::new();
    for (index, task) in tasks.iter().enumerate() {
        match &task.action {
            Action::Block { block, .. } => out.extend(handler_list(block)),
            _ => out.push((tasks.clone(), index)),
        }
    }
    out
}

/// A `no_log` task's failure says nothing of its values, whichever step
/// failed: a condition, a loop item, `retries`, the arguments (whose
/// template errors may quote the data they were given).
fn censor(flow: Flow, no_log: bool) -> Flow {
    match flow {
        Flow::Failed(mut failure) if no_log => {
            failure.message = NO_LOG_MESSAGE.to_owned();
            failure.result = fail_result(NO_LOG_MESSAGE);
            Flow::Failed(failure)
        }
        other => other,
    }
}

/// `no_log` of a task that neither it nor its blocks or play set:
/// Ansible's `DEFAULT_NO_LOG` (`ANSIBLE_NO_LOG`, default false), read once.
fn default_no_log() -> bool {
    static DEFAULT: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::env::var("ANSIBLE_NO_LOG")
            .ok()
            .and_then(|v| enka_template::strict_boolean(&Value::from(v)))
            .unwrap_or(false)
    });
    *DEFAULT
}

/// What Ansible says in place of a `no_log` task's output.
const NO_LOG_MESSAGE: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

/// A result's message for logs, conditions and Events: a no_log task's
/// may hold what it hides, so it is censored too.
fn shown_message(result: &TaskResult, no_log: bool) -> String {
    if no_log {
        NO_LOG_MESSAGE.to_owned()
    } else {
        result.message()
    }
}

/// A result as a `no_log` task shows it: the message Ansible puts in its
/// place, with the flags that decide what follows; a loop's items each
/// censored alike, so each is still shown as Ansible's callback shows it.
fn censored(result: &TaskResult) -> Value {
    let mut shown = censored_fields(&result.to_value());
    if let Some(items) = result.get("results").filter(|v| v.kind() == ValueKind::Seq) {
        let items: Vec<Value> = items
            .try_iter()
            .into_iter()
            .flatten()
            .map(|item| censored_item(&item))
            .collect();
        shown.push((Value::from("results"), Value::from(items)));
    }
    Value::from_pairs(shown)
}

/// One loop item's result as shown when it is not to be: censored, and
/// marked `_ansible_no_log` for the callback.
pub fn censored_item(item: &Value) -> Value {
    let mut shown = censored_fields(item);
    shown.push((Value::from("_ansible_no_log"), Value::from(true)));
    Value::from_pairs(shown)
}

fn censored_fields(result: &Value) -> Vec<(Value, Value)> {
    let flag = |key: &str| {
        result
            .get_attr(key)
            .is_ok_and(|v| enka_template::to_bool(&v))
    };
    let mut pairs = vec![
        (Value::from("censored"), Value::from(NO_LOG_MESSAGE)),
        (Value::from("changed"), Value::from(flag("changed"))),
        (Value::from("failed"), Value::from(flag("failed"))),
    ];
    // Whether the host was reached, or the item skipped, is no secret, and
    // decides what follows.
    for key in ["unreachable", "skipped"] {
        if flag(key) {
            pairs.push((Value::from(key), Value::from(true)));
        }
    }
    pairs
}

/// Why an `until` loop ended without success: an internal key of the
/// result (stripped from what `register` keeps and callbacks show) that
/// the run's failure message adds to the module's `msg`.
const UNTIL_REASON: &str = "_ansible_enka_until";

/// A task's result as Ansible registers it.
#[derive(Debug, Clone)]
pub(crate) struct TaskResult {
    fields: Vec<(String, Value)>,
    control: Option<Control>,
    /// `ignore_unreachable` as judged for each item of a loop (with the
    /// item's variables), when one could not reach its host.
    ignore_unreachable: Option<bool>,
    /// An error Ansible raises out of `TaskExecutor._execute` (an argument,
    /// the environment or a keyword that cannot be templated): in a loop,
    /// it ends the loop and fails the task as a whole.
    fails_task: bool,
}

impl TaskResult {
    /// A result of these fields alone.
    fn of(fields: Vec<(String, Value)>) -> Self {
        TaskResult {
            fields,
            control: None,
            ignore_unreachable: None,
            fails_task: false,
        }
    }

    /// An error Ansible raises rather than returns (a template, a
    /// condition, a keyword): TaskExecutor.run's result for it says only
    /// that it failed, and why.
    fn error(message: String) -> Self {
        TaskResult::of(vec![
            ("failed".into(), Value::from(true)),
            ("msg".into(), Value::from(message)),
        ])
    }

    /// Such an error before the action ran (see `fails_task`).
    fn task_error(message: String) -> Self {
        TaskResult {
            fails_task: true,
            ..TaskResult::error(message)
        }
    }

    fn failed(message: String) -> Self {
        TaskResult::of(vec![
            ("changed".into(), Value::from(false)),
            ("failed".into(), Value::from(true)),
            ("msg".into(), Value::from(message)),
        ])
    }

    fn unreachable(message: String) -> Self {
        TaskResult::of(vec![
            ("changed".into(), Value::from(false)),
            ("msg".into(), Value::from(message)),
            ("unreachable".into(), Value::from(true)),
        ])
    }

    fn skipped(condition: Value) -> Self {
        TaskResult::of(vec![
            ("changed".into(), Value::from(false)),
            ("skipped".into(), Value::from(true)),
            (
                "skip_reason".into(),
                Value::from("Conditional result was False"),
            ),
            ("false_condition".into(), condition),
        ])
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn set(&mut self, key: &str, value: Value) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((key.to_owned(), value)),
        }
    }

    fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(enka_template::to_bool)
    }

    /// TaskResult.is_failed: `failed_when_result` decides when the task
    /// has one (a failed_when overrides even an until loop that ran out),
    /// else `failed`.
    fn is_failed(&self) -> bool {
        match self.get("failed_when_result") {
            Some(judged) => enka_template::to_bool(judged),
            None => self.flag("failed"),
        }
    }

    fn is_skipped(&self) -> bool {
        self.flag("skipped")
    }

    fn is_changed(&self) -> bool {
        self.flag("changed")
    }

    fn message(&self) -> String {
        let own = self
            .get("msg")
            .or_else(|| {
                self.get("message")
                    .filter(|v| v.kind() == ValueKind::String)
            })
            .or_else(|| {
                ["failed_when_result", "changed_when_result"]
                    .iter()
                    .filter_map(|k| self.get(k))
                    .find(|v| v.kind() == ValueKind::String)
            })
            .map(enka_template::pyrepr::to_text)
            .or_else(|| {
                // An exception's result: its traceback's last line.
                let exception = self.get("exception")?;
                let text = exception.as_str()?.trim_end().lines().last()?.to_owned();
                Some(text)
            });
        match (own, self.get(UNTIL_REASON).and_then(Value::as_str)) {
            (Some(own), Some(why)) => format!("{own} ({why})"),
            (None, Some(why)) => format!("Retried: {why}"),
            (Some(own), None) => own,
            (None, None) => "the task failed".to_owned(),
        }
    }

    fn to_value(&self) -> Value {
        Value::from_pairs(
            self.fields
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), v.clone())),
        )
    }

    /// The result as `register` keeps it: without the internal
    /// `_ansible_*` keys, in each item's result too (strip_internal_keys),
    /// and without the module's `invocation` (the strategy's clean copy;
    /// a loop's items keep theirs).
    fn registered(&self) -> Value {
        fn strip(value: &Value) -> Value {
            let Ok(keys) = value.try_iter() else {
                return value.clone();
            };
            Value::from_pairs(keys.filter_map(|k| {
                let internal = k.as_str().is_some_and(|k| k.starts_with("_ansible"));
                (!internal).then(|| {
                    let v = value.get_item(&k).unwrap_or_default();
                    (k, v)
                })
            }))
        }
        Value::from_pairs(
            self.fields
                .iter()
                .filter(|(k, _)| !k.starts_with("_ansible") && k != "invocation")
                .map(|(k, v)| {
                    let v = if k == "results" && v.kind() == ValueKind::Seq {
                        Value::from(
                            v.try_iter()
                                .into_iter()
                                .flatten()
                                .map(|item| {
                                    if item.kind() == ValueKind::Map {
                                        strip(&item)
                                    } else {
                                        item
                                    }
                                })
                                .collect::<Vec<_>>(),
                        )
                    } else {
                        v.clone()
                    };
                    (Value::from(k.as_str()), v)
                }),
        )
    }

    /// The result of a looped task: `results` plus combined flags.
    fn combine(results: Vec<TaskResult>) -> TaskResult {
        if results.is_empty() {
            // TaskExecutor.run on an empty loop.
            return TaskResult::of(vec![
                ("changed".to_owned(), Value::from(false)),
                ("skipped".to_owned(), Value::from(true)),
                (
                    "skipped_reason".to_owned(),
                    Value::from("No items in the list"),
                ),
                ("results".to_owned(), Value::from(Vec::<Value>::new())),
            ]);
        }
        let changed = results.iter().any(TaskResult::is_changed);
        let failed = results.iter().any(TaskResult::is_failed);
        let all_skipped = results.iter().all(TaskResult::is_skipped);
        let control = results.iter().find_map(|r| r.control.clone());
        let mut fields = vec![
            ("changed".to_owned(), Value::from(changed)),
            (
                "msg".to_owned(),
                Value::from(if failed {
                    "One or more items failed"
                } else if all_skipped {
                    "All items skipped"
                } else {
                    "All items completed"
                }),
            ),
            (
                "results".to_owned(),
                Value::from(results.iter().map(TaskResult::to_value).collect::<Vec<_>>()),
            ),
            ("skipped".to_owned(), Value::from(all_skipped)),
        ];
        if failed {
            fields.push(("failed".to_owned(), Value::from(true)));
        }
        // TaskExecutor: the first unreachable item's ignore_unreachable,
        // and false once any unreachable item's is.
        let unreachable: Vec<&TaskResult> =
            results.iter().filter(|r| r.flag("unreachable")).collect();
        if !unreachable.is_empty() {
            fields.push(("unreachable".to_owned(), Value::from(true)));
        }
        let ignore_unreachable = unreachable
            .iter()
            .map(|r| r.ignore_unreachable)
            .collect::<Option<Vec<bool>>>()
            .filter(|flags| !flags.is_empty())
            .map(|flags| flags.iter().all(|&f| f));
        TaskResult {
            fields,
            control,
            ignore_unreachable,
            fails_task: false,
        }
    }
}
