//! Walking a task list: which task runs (tags, `--start-at-task`), on which host turn, and what
//! kind of task it is.

use enka_project::role::Setting;
use std::sync::Arc;
use std::time::{Duration, Instant};

use enka_project::role::{Action, Task};
use minijinja::Value;
use minijinja::value::ValueKind;
use tracing::Instrument;

use super::outcome::fail_result;
use super::{BoxFlow, Flow, Frame, Runner, TaskReport};
use crate::lockstep::Turn;
use crate::result::Stats;
use crate::timing::{self, TaskOutcome, TaskTiming, task_span};

impl Runner {
    pub(super) fn run_tasks(&mut self, frame: Frame, tasks: Arc<[Task]>) -> BoxFlow<'_> {
        Box::pin(async move {
            for (index, task) in tasks.iter().enumerate() {
                let position = self.at(&frame.position, index);
                let mut report = TaskReport::default();
                let mut flow = self.run_task(&frame, task, &position, &mut report).await;
                if report.flush_handlers {
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

    pub(super) fn run_task<'a>(
        &'a mut self,
        frame: &'a Frame,
        task: &'a Task,
        position: &'a Arc<[u32]>,
        report: &'a mut TaskReport,
    ) -> BoxFlow<'a> {
        Box::pin(async move {
            let static_parent = matches!(
                task.action,
                Action::Block { .. } | Action::ImportRole { .. }
            );
            if let Some(flow) = self.gate(frame, task, position, static_parent).await {
                return flow;
            }
            self.take_delivered_facts();
            let started = Instant::now();
            let is_block = matches!(task.action, Action::Block { .. });
            // A block and an imported role are static: only their tasks
            // have results to show.
            let observed = match static_parent {
                true => None,
                false => self.options.observer.clone(),
            };
            if let Some(observer) = &observed {
                observer.task_started(task);
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
                    Action::Module { .. } => {
                        self.run_module_task_in_batch(frame, task, position, report)
                            .await
                    }
                    Action::IncludeTasks { .. }
                    | Action::IncludeRole(_)
                    | Action::ImportRole { .. } => {
                        self.run_include(frame, task, position, report).await
                    }
                }
            }
            .instrument(span.clone())
            .await;
            if self.lockstep.is_some() {
                self.peers.set(&self.host, self.host_state());
            }
            // A failure taken from another host's run_once result is that
            // host's to count (the others are only marked failed).
            if !report.silent {
                self.count_failure(frame, task, position, &flow);
            }
            let took = started.elapsed();
            if let Some(observer) = observed {
                self.observe(&*observer, task, &flow, took, report);
            }
            if !is_block {
                self.record_timing(task, &flow, &counted_before, took, &span);
            }
            // An error that ends the run stops the other hosts where they
            // wait (the strategy raises it as it reads this result).
            if let Flow::Failed(failure) = &flow
                && failure.aborts_run
                && let Some(lockstep) = &self.lockstep
            {
                lockstep.end_play();
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
    pub(super) fn any_errors_fatal(&self, frame: &Frame, task: &Task) -> bool {
        if task.settings.get(Setting::AnyErrorsFatal).is_none()
            && frame.inherited.setting(Setting::AnyErrorsFatal).is_empty()
        {
            return false;
        }
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        self.flag(
            &ctx,
            task.settings.get(Setting::AnyErrorsFatal),
            frame.inherited.setting(Setting::AnyErrorsFatal),
        )
        .unwrap_or(false)
    }

    /// How many hosts may run `task` at once (its `throttle`, else its
    /// blocks'); 0 when it sets no limit. A value that is no integer is the
    /// strategy's error, which ends the run.
    pub(super) fn throttle(&self, frame: &Frame, task: &Task) -> Result<usize, String> {
        let Some(raw) = task
            .settings
            .get(Setting::Throttle)
            .or(frame.inherited.setting(Setting::Throttle).last())
        else {
            return Ok(0);
        };
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        let refused = |why: String| {
            let separator = match self.semantics() {
                enka_template::Semantics::Ansible218 => ".",
                enka_template::Semantics::Ansible219 => ":",
            };
            format!("Failed to convert the throttle value to an integer{separator} {why}")
        };
        let value = self
            .templar
            .template_value(raw, &ctx)
            .map_err(|err| refused(err.message().to_owned()))?;
        let number = match value.kind() {
            ValueKind::Number | ValueKind::Bool => i64::try_from(value.clone())
                .ok()
                .or_else(|| f64::try_from(value.clone()).ok().map(|f| f.trunc() as i64)),
            _ => value.as_str().and_then(|s| s.trim().parse().ok()),
        };
        let number = number.ok_or_else(|| {
            refused(format!(
                "invalid literal for int() with base 10: {}",
                enka_template::pyrepr::repr(&value)
            ))
        })?;
        Ok(usize::try_from(number).unwrap_or(0))
    }

    /// Whether `--start-at-task` lets `task` run: every task from the
    /// first whose name, or `role : name`, matches the pattern on (the
    /// PlayIterator's start_at_task).
    pub(super) fn reached_start(&mut self, frame: &Frame, task: &Task) -> bool {
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

    /// Whether `--tags`/`--skip-tags` (and `never`) let `task` run.
    pub(super) fn selected(&self, frame: &Frame, task: &Task) -> bool {
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
    pub(super) fn observe(
        &mut self,
        observer: &dyn crate::Observer,
        task: &Task,
        flow: &Flow,
        duration: Duration,
        report: &mut TaskReport,
    ) {
        use crate::{TaskEvent, TaskStatus};
        let recorded = report.outcome.take();
        let (status, result, message) = match (flow, recorded) {
            (Flow::Failed(failure), _) => (
                TaskStatus::Failed,
                failure.result.clone(),
                Some(failure.message.clone()),
            ),
            (_, Some(recorded)) => recorded,
            (_, None) => (TaskStatus::Ok, Value::UNDEFINED, None),
        };
        if report.silent {
            return;
        }
        // An error raised out of the strategy shows no result for the task.
        if let Flow::Failed(f) = flow
            && f.aborts_run
        {
            if f.location == task.location {
                observer.task_raised(task, self.in_handlers, &self.host);
            }
            return;
        }
        // An include whose included task failed: that task said so.
        let is_include = matches!(
            task.action,
            enka_project::role::Action::IncludeTasks { .. }
                | enka_project::role::Action::IncludeRole(_)
        );
        if is_include && matches!(flow, Flow::Failed(f) if f.location != task.location) {
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
            items_before: &report.items_before,
        });
    }

    /// Whether the task runs at all, and when: past the deadline it fails;
    /// tags, `--start-at-task` and smart fact gathering may skip it; the
    /// hosts of a batch take turns task by task (the linear strategy). A
    /// flow when the task does not run now.
    async fn gate(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
        static_parent: bool,
    ) -> Option<Flow> {
        self.warn_if_reserved(task.vars.iter().map(|(name, _)| &**name));
        if let Some(deadline) = self.options.deadline
            && Instant::now() >= deadline
        {
            let message = "the reconcile timed out before this task could run".to_owned();
            return Some(Flow::Failed(self.failure(
                task,
                message.clone(),
                fail_result(&message),
            )));
        }
        if !static_parent && !self.selected(frame, task) {
            return Some(Flow::Continue);
        }
        if !static_parent && !self.reached_start(frame, task) {
            return Some(Flow::Continue);
        }
        // ANSIBLE_GATHERING=smart: facts are gathered once per host in a
        // run (PlayIterator skips its setup task once they are).
        if task.is_implicit_fact_gathering() && self.facts_gathered_smartly() {
            return Some(Flow::Continue);
        }
        // Hosts of a batch take turns task by task (the linear strategy);
        // a failed host forcing its handlers runs them in turn with the
        // others' (at the same flush), and no fatal failure stops it.
        let throttle = match self.throttle(frame, task) {
            Ok(throttle) => throttle,
            // The strategy cannot run the task: the run ends (ERROR!).
            Err(message) => {
                let failure = self.failure(task, message.clone(), fail_result(&message));
                return Some(Flow::Failed(failure.aborting()));
            }
        };
        if !static_parent && let Some(lockstep) = self.lockstep.clone() {
            match lockstep
                .arrive(self.host_index, position.to_vec(), throttle)
                .await
            {
                Turn::Go => {}
                Turn::Fatal if self.forcing_handlers => {}
                Turn::EndPlay => return Some(Flow::EndPlay),
                // Another host failed under any_errors_fatal: this one
                // stops as failed, with nothing of its own to report.
                Turn::Fatal => {
                    let message = "any_errors_fatal: another host of the play failed".to_owned();
                    return Some(Flow::Failed(self.failure(
                        task,
                        message.clone(),
                        fail_result(&message),
                    )));
                }
            }
        }
        None
    }

    /// Counts a failure once, on the task it arose in: a block or an
    /// include that passes on a failure of a task inside it is not a
    /// second failed result (Ansible's recap counts results).
    fn count_failure(&mut self, frame: &Frame, task: &Task, position: &[u32], flow: &Flow) {
        if let Flow::Failed(failure) = flow
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
    }

    /// The task's timing and outcome, for the log, the span and the run's
    /// timings.
    fn record_timing(
        &mut self,
        task: &Task,
        flow: &Flow,
        counted_before: &Stats,
        took: Duration,
        span: &tracing::Span,
    ) {
        let failure = match flow {
            Flow::Failed(failure) => Some(failure),
            _ => None,
        };
        let outcome = TaskOutcome::judge(task, failure, counted_before, &self.stats);
        span.record("outcome", outcome.word());
        timing::log_task(task, outcome, took, self.options.profile_tasks);
        self.task_timings.push(TaskTiming {
            role: task.role.clone(),
            task: timing::timing_name(task),
            took,
        });
    }
}
