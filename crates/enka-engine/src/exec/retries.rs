//! One execution of a module task (one loop item): `when`, then `until` retries, `changed_when` and
//! `failed_when`.

use enka_project::role::Setting;
use std::time::{Duration, Instant};

use enka_modules::ModuleRef;
use enka_project::role::Task;
use enka_template::time::seconds;
use enka_template::{Context, Error as TemplateError};
use minijinja::Value;

use super::conditions::{
    all_true_at, condition_at, condition_error_219, conditional_error, located,
};
use super::task_result::TaskResult;
use super::{Flow, Frame, Runner, TaskModes};
use crate::scope::Scope;

impl Runner {
    /// One execution of a module task (one loop item), with `when`,
    /// `until`, `changed_when` and `failed_when`. A result that fails
    /// leaves no facts (the strategy takes them from an ok result only).
    pub(super) async fn run_item(
        &mut self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        scope: Scope,
        modes: TaskModes,
    ) -> Result<TaskResult, Flow> {
        let ctx = self.context(frame, &scope, task);
        // A meta task's condition decides what it does, and it reports in
        // its own words (the strategy's _execute_meta).
        let meta_action = module
            .is_meta()
            .then(|| args.get_attr("_raw_params").ok())
            .flatten()
            .and_then(|action| action.as_str().map(str::to_owned));
        // The task's delegate is known before its condition is judged, and
        // every result after names it (the callbacks' host label).
        let delegate = self.delegate(frame, task, &ctx)?;
        let delegated = delegate.as_deref().map(|d| self.delegated_vars(d, &ctx));
        match self.judge_when(frame, task, &ctx, meta_action.as_deref()) {
            Ok(Some(skipped)) => return Ok(skipped),
            Ok(None) => {}
            Err(flow) => return Err(marked_flow(flow, delegated.as_ref())),
        }
        // `delegate_facts`: facts the task sets go to the host it is
        // delegated to.
        let facts_to = match delegate.as_deref().filter(|d| *d != &*self.host) {
            Some(delegate) => {
                let own = task.settings.get(Setting::DelegateFacts);
                let inherited = frame.inherited.setting(Setting::DelegateFacts);
                self.flag(&ctx, own, inherited)
                    .map_err(|err| self.template_failure(task, "delegate_facts", &err))?
                    .then_some(delegate)
            }
            None => None,
        };
        if !module.runs_on_controller() {
            match self.unreachable_reason(frame, task, &ctx, delegate.as_deref()) {
                Ok(None) => {}
                Ok(Some(message)) => {
                    let mut result = TaskResult::unreachable(message);
                    if let Some(vars) = &delegated {
                        result.set("_ansible_delegated_vars", vars.clone());
                    }
                    return Ok(result);
                }
                Err(flow) => return Err(flow),
            }
        }
        let before = self.fact_state();
        let attempt = Attempt {
            frame,
            task,
            module,
            args,
            scope: &scope,
            ctx: &ctx,
            modes,
            facts_to,
            delegated: delegated.as_ref(),
            meta_action: meta_action.as_deref(),
        };
        let outcome = self
            .attempts(attempt)
            .await
            .map(|result| normalized_failure(result, self.templar.options().semantics));
        let failed = match &outcome {
            Ok(result) => result.is_failed(),
            Err(flow) => matches!(flow, Flow::Failed(_)),
        };
        let delivering = std::mem::take(&mut self.delivering);
        if failed {
            (self.facts, self.host_facts, self.included) = before;
        } else {
            for (host, delivered) in delivering {
                self.peers.deliver(&host, delivered);
            }
        }
        outcome.map_err(|flow| marked_flow(flow, delegated.as_ref()))
    }

    /// Runs the module until its `until` holds, out of retries or not.
    async fn attempts(&mut self, at: Attempt<'_>) -> Result<TaskResult, Flow> {
        let Attempt { frame, task, .. } = at;
        let until = task.until.clone();
        let (attempts, delay) = self.retry_plan(task, at.ctx)?;
        let mut attempt = 0u64;
        loop {
            attempt += 1;
            let mut result = self.execute(&at).await;
            if let Some(vars) = at.delegated {
                result.set("_ansible_delegated_vars", vars.clone());
            }
            // Raised, not returned, in Ansible: no condition judges it and
            // `until` does not retry it.
            if result.fails_task {
                return Ok(result);
            }
            if !result.is_failed() {
                if let Err(message) = self.change_inventory(&mut result) {
                    // Up to 2.19 the strategy's error ends the run; 2.21
                    // fails the task with it.
                    if self.templar.options().release_at_least(21) {
                        return Ok(TaskResult::task_error(format!(
                            "Task failed: {}",
                            message.trim_end()
                        )));
                    }
                    let result = super::outcome::fail_result(&message);
                    return Err(Flow::Failed(self.failure(task, message, result).aborting()));
                }
                if at.meta_action.map(str::trim) == Some("refresh_inventory")
                    && let Err(message) = self.refresh_inventory().await
                {
                    result = TaskResult::failed(message);
                } else if let Some(action) = at.meta_action {
                    let (msg, _) =
                        enka_modules::meta::report(action, &self.host, task.role.as_deref(), true);
                    result.set("msg", Value::from(msg));
                }
            }
            // TaskExecutor makes `attempts` available early, for
            // changed_when and failed_when to use.
            if attempts > 1 {
                result.set("attempts", Value::from(attempt));
            }
            let mut judged_scope = self.judge_result(frame, task, at.scope, &mut result);
            // With `retries: 0` Ansible runs the task once and never judges
            // `until`.
            if attempts <= 1 {
                return Ok(result);
            }
            let done = match &until {
                Some(until) => {
                    if let Some(name) = &task.register {
                        judged_scope.set_magic(name, result.to_value());
                    }
                    let judged_ctx = self.context(frame, &judged_scope, task);
                    match all_true_at(&self.templar, until, &judged_ctx) {
                        Ok(done) => done,
                        Err((index, err)) => {
                            return Err(self.keyword_condition_failure(task, "until", index, &err));
                        }
                    }
                }
                None => !result.is_failed(),
            };
            if done {
                return Ok(result);
            }
            if attempt >= attempts || self.past_deadline(delay) {
                out_of_retries(&mut result, attempt, attempts);
                // 2.21's result says `failed` as its failed_when judged it,
                // retries run out or not.
                if self.templar.options().release_at_least(21)
                    && let Some(judged) = result.get("failed_when_result").cloned()
                    && judged.kind() == minijinja::value::ValueKind::Bool
                {
                    result.set("failed", judged);
                }
                return Ok(result);
            }
            tracing::debug!(task = %task.display_name(), attempt, "until condition not met; retrying");
            self.tell_retry(task, &result, attempts - attempt, attempts, at.modes.no_log);
            self.sleep(delay).await;
        }
    }

    /// The task's `when`: `Some(result)` when it skips the task. A meta
    /// task's condition is the strategy's to judge: some meta actions take
    /// none (a warning), and one that cannot be evaluated ends the run.
    fn judge_when(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
        meta_action: Option<&str>,
    ) -> Result<Option<TaskResult>, Flow> {
        let heeds_when = meta_action.is_none_or(enka_modules::meta::heeds_when);
        if !heeds_when {
            // The strategy's _cond_not_supported_warn.
            if let Some(action) = meta_action
                && (!task.when.is_empty() || !frame.inherited.when.is_empty())
            {
                self.warn(format!(
                    "{} task does not support when conditional",
                    action.trim()
                ));
            }
            return Ok(None);
        }
        match self.check_when(ctx, &frame.inherited, task) {
            Ok(Some(condition)) => Ok(Some(match meta_action {
                Some(action) => self.meta_skipped(task, action),
                None => TaskResult::skipped(condition),
            })),
            Ok(None) => Ok(None),
            Err(when) => Err(match (self.when_failure(task, &when), meta_action) {
                (Flow::Failed(failure), Some(_)) => Flow::Failed(failure.aborting()),
                (flow, _) => flow,
            }),
        }
    }

    /// Tells the observer the task runs again (v2_runner_retry), with the
    /// attempt's result, which says how many runs there are at most.
    fn tell_retry(&self, task: &Task, result: &TaskResult, left: u64, runs: u64, no_log: bool) {
        let Some(observer) = &self.options.observer else {
            return;
        };
        let mut shown = result.clone();
        shown.set("retries", Value::from(runs));
        let shown = if no_log {
            super::no_log::censored(&shown)
        } else {
            shown.to_value()
        };
        observer.task_retrying(task, self.in_handlers, &self.host, left, &shown);
    }

    pub(super) fn past_deadline(&self, upcoming: Duration) -> bool {
        self.options
            .deadline
            .is_some_and(|d| Instant::now() + upcoming >= d)
    }

    pub(super) async fn sleep(&self, duration: Duration) {
        let duration = match self.options.deadline {
            Some(deadline) => duration.min(deadline.saturating_duration_since(Instant::now())),
            None => duration,
        };
        tokio::time::sleep(duration).await;
    }

    /// How many times the task may run and the pause between runs:
    /// `retries` (default 3) and `delay` (default 5 s) when it has `until`
    /// or `retries`; `retries` without `until` retries until the task
    /// succeeds (TaskExecutor: `until or [not result['failed']]`).
    fn retry_plan(&self, task: &Task, ctx: &Context) -> Result<(u64, Duration), Flow> {
        if task.until.is_none() && task.settings.get(Setting::Retries).is_none() {
            return Ok((1, Duration::ZERO));
        }
        let retries = match task.settings.get(Setting::Retries) {
            Some(v) => match self.templar.template_value(v, ctx) {
                Ok(v) => i64::try_from(v.clone())
                    .ok()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                    .unwrap_or(3),
                Err(err) => return Err(self.template_failure(task, "retries", &err)),
            },
            None => 3,
        };
        let delay = match task.settings.get(Setting::Delay) {
            Some(v) => match self.templar.template_value(v, ctx) {
                Ok(v) => seconds(&v).unwrap_or(Duration::from_secs(5)),
                Err(err) => return Err(self.template_failure(task, "delay", &err)),
            },
            None => Duration::from_secs(5),
        };
        Ok((1 + retries.max(0) as u64, delay))
    }

    /// Judges a result as TaskExecutor does: every result says whether it
    /// failed and whether it changed something, then `changed_when` and
    /// `failed_when` see it under the registered name (a condition that
    /// cannot be evaluated fails the result, its error under
    /// `<cond>_when_result`). Returns the scope the conditions saw.
    fn judge_result(
        &self,
        frame: &Frame,
        task: &Task,
        scope: &Scope,
        result: &mut TaskResult,
    ) -> Scope {
        if result.get("failed").is_none() {
            result.set("failed", Value::from(false));
        }
        if result.get("changed").is_none() {
            result.set("changed", Value::from(false));
        }
        let mut judged_scope = scope.clone();
        judged_scope.facts = self.facts.clone();
        judged_scope.host_facts = self.host_facts.clone();
        if let Some(name) = &task.register {
            judged_scope.set_magic(name, result.to_value());
        }
        let judged_ctx = self.context(frame, &judged_scope, task);
        // A condition that cannot be evaluated fails the result, its error
        // (and where the condition is written) under `<keyword>_result`.
        let error_text = |keyword: &str, index: usize, err: &TemplateError| {
            let at = condition_at(task, keyword, index);
            Value::from(match self.semantics() {
                enka_template::Semantics::Ansible218 => located(conditional_error(err), task, at),
                enka_template::Semantics::Ansible219 => {
                    let written = enka_project::role::Location {
                        file: task.location.file.clone(),
                        pos: at,
                    };
                    condition_error_219(err, Some(&written))
                }
            })
        };
        // From 2.19 the error is raised and caught: its summary comes along.
        let raised = |result: &mut TaskResult| {
            if self.semantics() == enka_template::Semantics::Ansible219 {
                result.set("exception", Value::from("(traceback unavailable)"));
            }
        };
        if let Some(conditions) = &task.changed_when {
            match all_true_at(&self.templar, conditions, &judged_ctx) {
                Ok(changed) => {
                    result.set("changed", Value::from(changed));
                    // 2.21 keeps the judgement, as it keeps failed_when's.
                    if self.templar.options().release_at_least(21) {
                        result.set("changed_when_result", Value::from(changed));
                    }
                }
                // TaskExecutor judges failed_when only once changed_when
                // evaluated.
                Err((index, err)) => {
                    result.set("failed", Value::from(true));
                    result.set(
                        "changed_when_result",
                        error_text("changed_when", index, &err),
                    );
                    raised(result);
                    return judged_scope;
                }
            }
        }
        if let Some(conditions) = &task.failed_when {
            match all_true_at(&self.templar, conditions, &judged_ctx) {
                Ok(failed) => {
                    result.set("failed_when_result", Value::from(failed));
                    result.set("failed", Value::from(failed));
                    // 2.19 keeps what failed_when forgave aside.
                    if !failed
                        && self.semantics() == enka_template::Semantics::Ansible219
                        && let Some(exception) = result.take("exception")
                    {
                        result.set("failed_when_suppressed_exception", exception);
                    }
                }
                Err((index, err)) => {
                    result.set("failed", Value::from(true));
                    result.set("failed_when_result", error_text("failed_when", index, &err));
                    raised(result);
                }
            }
        }
        judged_scope
    }
}

/// 2.19's words for a failed result that says nothing (`failed_when`
/// without a message): its task error's brief message, which the result
/// then carries as `msg` (TaskExecutor._execute's error normalization).
pub(super) const ACTION_FAILED_UNKNOWN: &str = "Task failed: Action failed: Unknown error.";

/// A failed result as 2.19 normalizes it (TaskExecutor._execute raises
/// every failed result and catches it again): the error's summary as
/// `exception` (its traceback only when tracebacks are shown), and a `msg`
/// when it had none. 2.18 leaves it.
fn normalized_failure(mut result: TaskResult, semantics: enka_template::Semantics) -> TaskResult {
    if semantics != enka_template::Semantics::Ansible219 || !result.is_failed() {
        return result;
    }
    if result.get("exception").is_none() {
        result.set("exception", Value::from("(traceback unavailable)"));
    }
    if result.get("msg").is_none() {
        result.set("msg", Value::from(ACTION_FAILED_UNKNOWN));
    }
    result
}

/// Why an `until` loop ended without success: an internal key of the
/// result (stripped from what `register` keeps and callbacks show) that
/// the run's failure message adds to the module's `msg`.
pub(super) const UNTIL_REASON: &str = "_ansible_enka_until";

/// Fails a result whose `until` never held, or that the reconcile's
/// deadline stopped. The registered result keeps the module's own msg, as
/// Ansible's does; the run's failure message says why, so a Failure
/// condition does not read "polling".
fn out_of_retries(result: &mut TaskResult, attempt: u64, attempts: u64) {
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
    result.set(UNTIL_REASON, Value::from(why));
}

/// What one run of a module task's attempts needs.
#[derive(Clone, Copy)]
pub(super) struct Attempt<'a> {
    pub(super) frame: &'a Frame,
    pub(super) task: &'a Task,
    pub(super) module: &'a ModuleRef,
    pub(super) args: &'a Value,
    pub(super) scope: &'a Scope,
    pub(super) ctx: &'a Context,
    pub(super) modes: TaskModes,
    /// `delegate_facts`: the host the facts it sets go to.
    pub(super) facts_to: Option<&'a str>,
    /// `_ansible_delegated_vars` of a delegated task.
    pub(super) delegated: Option<&'a Value>,
    pub(super) meta_action: Option<&'a str>,
}

/// A failure of a delegated task, naming its delegate as its results do.
fn marked_flow(flow: Flow, delegated: Option<&Value>) -> Flow {
    match (flow, delegated) {
        (Flow::Failed(mut failure), Some(vars)) => {
            failure.result = enka_template::convert::with_entry(
                &failure.result,
                "_ansible_delegated_vars",
                vars.clone(),
            );
            Flow::Failed(failure)
        }
        (flow, _) => flow,
    }
}
