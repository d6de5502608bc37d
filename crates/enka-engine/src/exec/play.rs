//! Plays: their hosts and batches (`serial`), a runner per host in step, and what a play leaves to
//! the next.

use enka_project::role::Setting;
use std::sync::Arc;

use enka_project::role::{Project, RoleFrom, VarList};
use enka_template::{Context, Var};
use minijinja::Value;
use minijinja::value::ValueKind;

use super::handlers::handler_list;
use super::outcome::fail_result;
use super::roles::with_dependencies;
use super::{Flow, Frame, Handlers, Inherited, Runner, internal_failure};
use crate::lockstep::{Lockstep, Strategy};
use crate::result::{Failure, RunStatus};
use crate::scope::{self, Scope};
use crate::{Entry, base_scope};

impl Runner {
    pub(crate) async fn run_entry(&mut self, entry: &Entry, extra: VarList) -> RunStatus {
        self.warn_if_reserved(extra.iter().map(|(name, _)| &**name));
        let mut base = base_scope(extra);
        base.builtins = self.run_builtins(entry, &base.builtins);
        if let (Entry::Role(_), Some(inventory)) = (entry, self.runner_inventory()) {
            // A reconcile's role runs on the localhost of ansible-operator's
            // inventory, with the variables its line gives it.
            if let Some(vars) = inventory.host_vars("localhost") {
                base.inventory_vars = scope::push(&None, vars);
            }
            let inventory = Arc::new(inventory);
            base.inventory = Some(inventory.clone());
            self.inventory = Some(Arc::new(std::sync::Mutex::new(inventory)));
        }
        let flow = match entry {
            Entry::Role(path) => match self.project.role(path).cloned() {
                Some(role) => {
                    // The play ansible-runner writes to run a role: `hosts:
                    // localhost`, the role alone.
                    let localhost = ["localhost".to_owned()];
                    let magic =
                        play_magic(std::slice::from_ref(&role), &localhost, "localhost".into());
                    let mut builtins: Vec<(Arc<str>, Var)> =
                        base.builtins.iter().cloned().collect();
                    builtins.extend(magic);
                    base.builtins = builtins.into();
                    let frame = Frame {
                        scope: base,
                        inherited: Inherited::default(),
                        role: None,
                        search_path: Arc::from(vec![self.role_play_dir()]),
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
                    self.inventory = Some(live_inventory(&self.project, self.runner_inventory()));
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

    /// The run's magic variables: its options as Ansible shows them,
    /// `playbook_dir`, the controller's Python and, for an operator's
    /// reconcile, the inventory source ansible-runner names.
    fn run_builtins(&self, entry: &Entry, builtins: &VarList) -> VarList {
        let (check, diff) = (self.options.check_mode, self.options.diff);
        let tags = &self.options.tags;
        let names =
            |names: &[String]| Value::from(names.iter().map(Value::from).collect::<Vec<_>>());
        let mut builtins: Vec<(Arc<str>, Var)> = builtins
            .iter()
            .map(|(k, v)| match &**k {
                "ansible_check_mode" if check => (k.clone(), Var::plain(Value::from(true))),
                "ansible_diff_mode" if diff => (k.clone(), Var::plain(Value::from(true))),
                "ansible_run_tags" => (k.clone(), Var::plain(names(tags.run_tags()))),
                "ansible_skip_tags" => (k.clone(), Var::plain(names(tags.skip_tags()))),
                "ansible_forks" => (k.clone(), Var::plain(Value::from(self.options.forks))),
                "ansible_verbosity" => (k.clone(), Var::plain(Value::from(self.options.verbosity))),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let runner = self.options.runner_dir.as_deref();
        builtins.push((
            Arc::from("ansible_version"),
            Var::plain(crate::ansible_version(self.templar.options())),
        ));
        // ansible-runner runs Ansible in its `project/`, never in a
        // directory holding the project's ansible.cfg.
        let cwd = match runner {
            Some(_) => None,
            None => std::env::current_dir().ok(),
        };
        builtins.push((
            Arc::from("ansible_config_file"),
            Var::plain(crate::ansible_config_file(cwd.as_deref())),
        ));
        // `playbook_dir`: the playbook's directory; for a role, the
        // directory ansible-runner writes the play that runs it into, or
        // the project's (upstream runs a role from a playbook it writes).
        let playbook_dir = match entry {
            Entry::Playbook(path) => path.parent().map(std::path::Path::to_path_buf),
            Entry::Role(_) => None,
        }
        .unwrap_or_else(|| self.role_play_dir());
        if let Some(limit) = &self.options.limit {
            builtins.push((
                Arc::from("ansible_limit"),
                Var::plain(Value::from(limit.text.as_str())),
            ));
        }
        let sources = match (runner, self.project.inventory.as_deref()) {
            (_, Some(inventory)) => inventory.sources().cloned(),
            (Some(runner), None) => Some(runner.inventory_sources()),
            (None, None) => None,
        };
        if let Some(sources) = sources {
            builtins.push((Arc::from("ansible_inventory_sources"), Var::plain(sources)));
        }
        builtins.push((
            Arc::from("ansible_playbook_python"),
            Var::plain(Value::from(self.controller_python())),
        ));
        builtins.push((
            Arc::from("playbook_dir"),
            Var::plain(Value::from(playbook_dir.to_string_lossy().as_ref())),
        ));
        builtins.into()
    }

    /// The directory of the play that runs a role: ansible-runner's
    /// `project/` for a reconcile, else the project's.
    fn role_play_dir(&self) -> std::path::PathBuf {
        match self.options.runner_dir.as_deref() {
            Some(runner) => runner.project_dir(),
            None => self.project.base_dir.clone(),
        }
    }

    /// The controller's Python: Ansible's own, which for enka is the
    /// worker's (inventories set `ansible_python_interpreter` to it).
    fn controller_python(&self) -> String {
        match &self.project.ansible {
            Some(worker) => worker.config().python.to_string_lossy().into_owned(),
            None => "/usr/bin/python3".to_owned(),
        }
    }

    /// The inventory ansible-operator writes for a reconcile, when this run
    /// is one and the project names no inventory of its own.
    pub(super) fn runner_inventory(&self) -> Option<enka_project::role::Inventory> {
        let runner = self.options.runner_dir.as_deref()?;
        self.project
            .inventory
            .is_none()
            .then(|| runner.inventory(&self.controller_python()))
    }

    /// Runs a play on the hosts its `hosts` selects, batch by batch
    /// (`serial`), each batch in lockstep; `false` when the playbook must
    /// stop (a whole batch failed, or the play could not start).
    pub(super) async fn run_play(
        &mut self,
        playbook: &enka_project::role::Playbook,
        play: &enka_project::role::Play,
        base: &Scope,
    ) -> bool {
        let (mut scope, play_vars, search_path) = self.play_scope(playbook, play, base);
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
        let selected = selected.and_then(|(matched, sizes, strategy)| {
            let max_fail = self.max_fail_share(play, &ctx, strategy)?;
            Ok((matched, sizes, strategy, max_fail))
        });
        let (matched, batch_sizes, strategy, max_fail) = match selected {
            Ok(selected) => selected,
            Err(message) => {
                self.play_started(&name, 0);
                let location = enka_project::role::Location::file(&playbook.path);
                let failure = Failure::new(name, location, message.clone(), fail_result(&message));
                self.first_failure.get_or_insert(failure);
                return false;
            }
        };
        if matched.is_empty() {
            self.play_started(&name, 0);
            if let Some(observer) = &self.options.observer {
                observer.no_hosts_matched();
            }
            return true;
        }
        // Hosts that failed in an earlier play stay in their batch but
        // run nothing (the strategy leaves them out).
        let hosts: Vec<String> = matched
            .iter()
            .filter(|h| !self.failed_hosts.contains(h))
            .cloned()
            .collect();
        add_play_roles(&mut scope, play, &hosts);
        let frame = play_frame(play, scope, search_path);
        let mut remaining = matched.as_slice();
        for size in batch_sizes {
            let (whole_batch, rest) = remaining.split_at(size.min(remaining.len()));
            remaining = rest;
            // Each batch is a run of the play of its own (TaskQueueManager.run).
            let batch: Vec<String> = whole_batch
                .iter()
                .filter(|h| !self.failed_hosts.contains(h))
                .cloned()
                .collect();
            self.play_started(&name, batch.len());
            let batch = batch.as_slice();
            // A play with max_fail_percentage counts failures even on one
            // host.
            let lockstep = (batch.len() > 1 || max_fail.is_some())
                .then(|| Lockstep::new(batch.len(), self.options.forks, strategy));
            if let (Some(lockstep), Some(share)) = (&lockstep, max_fail) {
                lockstep.limit_failures(share, whole_batch.len());
            }
            let failed = self
                .run_batch(play, &frame, &play_vars, &hosts, batch, lockstep.clone())
                .await;
            if self.first_failure.as_ref().is_some_and(|f| f.aborts_run) {
                return false;
            }
            if lockstep.as_ref().is_some_and(|l| l.broken()) {
                self.too_many_failed(batch);
                return false;
            }
            // `meta: end_play` ran (end_host only ends its own host): the
            // play ends, and the playbook goes on whoever failed.
            if self.play_ended {
                break;
            }
            // A batch whose every host failed in it ends the playbook
            // (PlaybookExecutor's break_play; hosts failed before count
            // in the batch's size, not in its failures).
            if failed == whole_batch.len() {
                return false;
            }
        }
        self.play_ended = false;
        true
    }

    /// The play's scope (its vars, with the answers to its `vars_prompt`),
    /// those vars, and where its files are looked for.
    fn play_scope(
        &self,
        playbook: &enka_project::role::Playbook,
        play: &enka_project::role::Play,
        base: &Scope,
    ) -> (Scope, VarList, Arc<[std::path::PathBuf]>) {
        let mut scope = base.clone();
        scope.play_vars = scope::push(&None, &play.vars);
        // vars_prompt answers rank as play vars, beside the play's own.
        let play_vars =
            crate::vars_files::with_prompted(&self.templar, &scope, play, &self.project.base_dir);
        scope.play_vars = scope::push(&None, &play_vars);
        let search_path: Arc<[std::path::PathBuf]> = Arc::from(vec![
            playbook
                .path
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default(),
            self.project.base_dir.clone(),
        ]);
        (scope, play_vars, search_path)
    }

    /// Runs one batch of a play's hosts together (in lockstep when there
    /// are several), the play's hosts that have not failed being `hosts`;
    /// how many of the batch failed.
    async fn run_batch(
        &mut self,
        play: &enka_project::role::Play,
        frame: &Frame,
        play_vars: &VarList,
        hosts: &[String],
        batch: &[String],
        lockstep: Option<Arc<Lockstep>>,
    ) -> usize {
        let batch_names: Arc<[String]> = Arc::from(batch);
        // ansible_play_hosts: the play's hosts that have not failed.
        let active: Vec<String> = hosts
            .iter()
            .filter(|h| !self.failed_hosts.contains(h))
            .cloned()
            .collect();
        let runs = batch.iter().enumerate().map(|(index, host)| {
            let mut runner = self.for_host(host, &batch_names, index, lockstep.clone());
            let mut frame = runner.host_frame(frame, host, &active, batch);
            if !play.vars_files.is_empty() {
                let mut scope = frame.scope.clone();
                scope.facts = runner.facts.clone();
                scope.host_facts = runner.host_facts.clone();
                scope.included = runner.included.clone();
                frame.scope.play_vars = crate::vars_files::play_vars(
                    &self.templar,
                    &scope,
                    play_vars,
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
        self.absorb_batch(finished)
    }

    /// The hosts a play's `hosts` (templated) matches, in its `order` and
    /// with hosts that failed earlier, the sizes of its `serial`
    /// batches, and how its hosts take turns (`strategy`).
    pub(super) fn play_hosts(
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
        if let Some(observer) = &self.options.observer {
            for pattern in inventory.unmatched(&patterns) {
                observer.warning(&format!(
                    "Could not match supplied host pattern, ignoring: {pattern}"
                ));
            }
        }
        let hosts = inventory.select_limited(&patterns, &order, self.options.limit.as_ref())?;
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

    /// `max_fail_percentage` as a share of a batch (linear plays only; the
    /// free strategy warns that it takes none).
    fn max_fail_share(
        &self,
        play: &enka_project::role::Play,
        ctx: &Context,
        strategy: Strategy,
    ) -> Result<Option<f64>, String> {
        let Some(raw) = &play.max_fail_percentage else {
            return Ok(None);
        };
        if strategy == Strategy::Free {
            self.warn("Using max_fail_percentage with the free strategy is not supported, as tasks are executed independently on each host".to_owned());
            return Ok(None);
        }
        let value = self
            .templar
            .template_value(raw, ctx)
            .map_err(|err| format!("max_fail_percentage: {}", err.ansible_message()))?;
        let text = enka_template::pyrepr::to_text(&value).replace('%', "");
        let percent: f64 = text.trim().parse().map_err(|_| {
            format!("the field 'max_fail_percentage' has an invalid value ({text}), and could not be converted to float")
        })?;
        Ok(Some(percent / 100.0))
    }

    /// More than `max_fail_percentage` of a batch failed: every host of the
    /// batch is out of the run (without a failure of its own in the
    /// recap), and the playbook stops.
    fn too_many_failed(&mut self, batch: &[String]) {
        for host in batch {
            if !self.failed_hosts.contains(host) {
                self.failed_hosts.push(host.clone());
            }
        }
        if let Some(observer) = &self.options.observer {
            // The strategy says so when it stops the hosts, and again as it
            // finds none left.
            observer.no_hosts_remaining();
            observer.no_hosts_remaining();
        }
    }

    /// A play (or one `serial` batch of it) starts on `hosts` hosts.
    fn play_started(&self, name: &str, hosts: usize) {
        if let Some(observer) = &self.options.observer {
            observer.play_started(name, hosts);
        }
    }

    /// The live inventory as it is now (`None` outside playbooks).
    pub(super) fn live_inventory(&self) -> Option<Arc<enka_project::role::Inventory>> {
        self.inventory
            .as_ref()
            .and_then(|shared| shared.lock().ok().map(|i| i.clone()))
    }

    /// A runner for one host of a play: the run's settings and shared
    /// state, the host's facts so far, and counters of its own.
    pub(super) fn for_host(
        &self,
        host: &str,
        batch: &Arc<[String]>,
        index: usize,
        lockstep: Option<Arc<Lockstep>>,
    ) -> Runner {
        // What was delivered to the host is in its state already.
        let _ = self.peers.take_mail(host);
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
    pub(super) fn absorb(&mut self, runner: Runner) {
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

    /// Takes the facts other hosts' tasks delivered to this host
    /// (`delegate_facts`) since it last looked.
    pub(super) fn take_delivered_facts(&mut self) {
        let mail = self.peers.take_mail(&self.host);
        if mail.is_empty() {
            return;
        }
        let mut state = self.host_state();
        for delivered in mail {
            delivered.apply(&mut state);
        }
        (self.facts, self.host_facts) = (state.facts, state.host_facts);
    }

    /// What the host has set so far (facts, module facts, included vars),
    /// to be put back when what set more fails.
    pub(super) fn fact_state(&self) -> (scope::Facts, scope::Facts, scope::Facts) {
        (
            self.facts.clone(),
            self.host_facts.clone(),
            self.included.clone(),
        )
    }

    pub(super) fn host_state(&self) -> scope::HostState {
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
    pub(super) fn host_frame(
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
    pub(super) async fn run_play_body(
        &mut self,
        play: &enka_project::role::Play,
        frame: Frame,
    ) -> Flow {
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
        // Ansible checks every variable the host has before the magic
        // ones, its inventory's first.
        if let Some(inventory) = self.live_inventory()
            && let Some(vars) = inventory.host_vars(&self.host)
        {
            self.warn_if_reserved(vars.iter().map(|(name, _)| &**name));
        }
        self.warn_if_reserved(play.vars.iter().map(|(name, _)| &**name));
        let forced = self.forces_handlers(play, &frame);
        let mut flow = self.run_tasks(section(0), play.pre_tasks.clone()).await;
        flow = self.end_section(flow, after(0), forced).await;
        for (index, role_ref) in play.roles.iter().enumerate() {
            if !matches!(flow, Flow::Continue) {
                break;
            }
            // The same role with the same parameters runs once.
            if !self.runs_again(role_ref) {
                continue;
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
    pub(super) fn forces_handlers(&self, play: &enka_project::role::Play, frame: &Frame) -> bool {
        if self.options.force_handlers {
            return true;
        }
        let Some(raw) = play.settings.get(Setting::ForceHandlers) else {
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
    pub(super) async fn end_section(
        &mut self,
        flow: Flow,
        after: Arc<[u32]>,
        forced: bool,
    ) -> Flow {
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

    /// Takes the hosts of a batch back: their state, and how many failed
    /// (a `meta: clear_host_errors` on any of them clears the play's
    /// failures).
    fn absorb_batch(&mut self, finished: Vec<(Runner, Flow)>) -> usize {
        let cleared = finished
            .iter()
            .any(|(runner, _)| runner.cleared_play_errors);
        let mut failed = 0;
        for (runner, flow) in finished {
            let host = runner.host.clone();
            self.absorb(runner);
            match flow {
                Flow::Failed(failure) => {
                    failed += 1;
                    self.failed_hosts.push(host.to_string());
                    self.first_failure.get_or_insert(failure);
                }
                Flow::EndPlay | Flow::Continue | Flow::EndRole => {}
            }
        }
        if cleared {
            self.failed_hosts.clear();
            failed = 0;
        }
        failed
    }
}

/// Ansible's names of the implicit localhost (`C.LOCALHOST`).
pub(super) fn is_localhost(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// The inventory a run's plays run over and change (`add_host`,
/// `group_by`): the project's own, else the reconcile's (`runner`), else
/// localhost alone.
pub(super) fn live_inventory(
    project: &Project,
    runner: Option<enka_project::role::Inventory>,
) -> Arc<std::sync::Mutex<Arc<enka_project::role::Inventory>>> {
    let inventory = match &project.inventory {
        Some(own) => (**own).clone(),
        None => runner.unwrap_or_default(),
    };
    Arc::new(std::sync::Mutex::new(Arc::new(inventory)))
}

/// A play's `hosts` as its name when it has none (Play.get_name).
pub(super) fn hosts_text(hosts: &Value) -> String {
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

pub(super) fn names_value(names: &[String]) -> Value {
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
pub(super) fn batch_sizes(serial: &Value, hosts: usize) -> Result<Vec<usize>, String> {
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

/// What the roles listed in a play give the whole play: their defaults and
/// vars (Ansible's default, with private role vars off), each after its
/// dependencies' (Role.get_vars), and the magic variables naming its roles,
/// hosts and name ([`play_magic`]).
fn add_play_roles(scope: &mut Scope, play: &enka_project::role::Play, hosts: &[String]) {
    for role_ref in &play.roles {
        let mut chain = Vec::new();
        with_dependencies(&role_ref.role, &mut chain);
        for role in chain {
            scope.defaults = scope::push(&scope.defaults, &role.defaults("main"));
            scope.role_vars = scope::push(&scope.role_vars, &role.vars("main"));
        }
    }
    let listed: Vec<Arc<enka_project::role::Role>> =
        play.roles.iter().map(|r| r.role.clone()).collect();
    let name = match &play.name {
        Some(name) => name.clone(),
        None => hosts_text(&play.hosts),
    };
    let mut builtins: Vec<(Arc<str>, Var)> = scope.builtins.iter().cloned().collect();
    builtins.extend(play_magic(&listed, hosts, name));
    scope.builtins = builtins.into();
}

/// The magic variables a play gives its tasks: its role names (listed:
/// `role_names`, `ansible_play_role_names`; their dependencies; and all),
/// its hosts and its name (Play.get_name(): its name, else its hosts).
pub(super) fn play_magic(
    listed: &[Arc<enka_project::role::Role>],
    hosts: &[String],
    name: String,
) -> Vec<(Arc<str>, Var)> {
    let mut dependent_names: Vec<Value> = Vec::new();
    for listed_role in listed {
        let mut chain = Vec::new();
        with_dependencies(listed_role, &mut chain);
        for role in chain {
            let name = Value::from(role.name.as_str());
            if role.path != listed_role.path && !dependent_names.contains(&name) {
                dependent_names.push(name);
            }
        }
    }
    let play_names: Vec<Value> = listed
        .iter()
        .map(|role| Value::from(role.name.as_str()))
        .collect();
    let mut all_names = play_names.clone();
    for name in &dependent_names {
        if !all_names.contains(name) {
            all_names.push(name.clone());
        }
    }
    vec![
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
            Var::plain(names_value(hosts)),
        ),
        (
            Arc::from("ansible_play_name"),
            Var::templated(Value::from(name)),
        ),
    ]
}

/// The frame a play's tasks start in: its scope, and its keywords as what
/// it passes down to its blocks and tasks.
fn play_frame(
    play: &enka_project::role::Play,
    scope: Scope,
    search_path: Arc<[std::path::PathBuf]>,
) -> Frame {
    Frame {
        scope,
        inherited: {
            let mut inherited = Inherited {
                tags: play.tags.clone(),
                ..Inherited::default()
            };
            inherited.enter(&play.settings);
            inherited
        },
        role: None,
        search_path,
        depth: 0,
        position: Arc::from(Vec::new()),
    }
}
