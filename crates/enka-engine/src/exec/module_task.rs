//! A task that runs a module: once per host, or once for the batch (`run_once`), its loop, `async`.

use enka_project::role::Setting;
use std::sync::Arc;

use enka_modules as modules;
use enka_project::role::{Action, Task};
use enka_template::{Context, Var};
use minijinja::Value;

use super::blocks::as_failed_result;
use super::no_log::{censor, default_no_log};
use super::task_result::TaskResult;
use super::{Flow, Frame, KeywordError, Runner, TaskModes, TaskReport};
use crate::LogEvents;

impl Runner {
    /// A module task, run on this host unless it runs once for the batch
    /// (`run_once`, or an action that bypasses the host loop): then the
    /// first host runs it and the others take what it set and its failure.
    pub(super) async fn run_module_task_in_batch(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
        report: &mut TaskReport,
    ) -> Flow {
        let Some(lockstep) = self.lockstep.clone() else {
            return self.run_module_task(frame, task, report).await;
        };
        // add_host bypasses the host loop; the linear strategy runs the
        // meta actions that act on the whole play once for the batch.
        let bypasses = match &task.action {
            Action::Module { module, args } => {
                module.name().rsplit('.').next() == Some("add_host")
                    || (module.is_meta()
                        && args.get_attr("_raw_params").is_ok_and(|a| {
                            a.as_str()
                                .is_some_and(enka_modules::meta::runs_once_for_batch)
                        }))
            }
            _ => false,
        };
        let once = bypasses || {
            let scope = self.task_scope(frame, task);
            let ctx = self.context(frame, &scope, task);
            self.flag(
                &ctx,
                task.settings.get(Setting::RunOnce),
                frame.inherited.setting(Setting::RunOnce),
            )
            .unwrap_or(false)
        };
        if !once {
            return self.run_module_task(frame, task, report).await;
        }
        if lockstep.leads(self.host_index) {
            let before = self.facts.clone();
            let flow = self.run_module_task(frame, task, report).await;
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
            let cleared_facts = report.cleared_facts;
            let shared = crate::lockstep::Shared {
                vars,
                failure,
                cleared_facts,
            };
            lockstep.share(position, shared);
            return flow;
        }
        let Some(shared) = lockstep.shared(position).await else {
            return Flow::Continue;
        };
        let facts = Arc::make_mut(&mut self.facts);
        for (name, var) in shared.vars {
            facts.insert(name, var);
        }
        if shared.cleared_facts {
            Arc::make_mut(&mut self.host_facts).clear();
        }
        report.silent = true;
        match shared.failure {
            Some(failure) => Flow::Failed(failure),
            None => Flow::Continue,
        }
    }

    pub(super) async fn run_module_task(
        &mut self,
        frame: &Frame,
        task: &Task,
        report: &mut TaskReport,
    ) -> Flow {
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
        let modes = match self.task_modes(frame, task, &ctx) {
            Ok(modes) => modes,
            Err((keyword, KeywordError::Template(err), _)) => {
                return self.template_failure(task, keyword, &err);
            }
            Err((_, KeywordError::NotBoolean(message), no_log)) => {
                return self.finish_task(frame, task, TaskResult::failed(message), no_log, report);
            }
        };
        let no_log = modes.no_log;
        // An error templating the loop, a condition or the arguments is a
        // failed result, as TaskExecutor.run returns it: `ignore_errors`
        // forgives it and `register` keeps it.
        let items = match task.looping {
            Some(_) => match self.loop_items(task, &ctx, &frame.inherited) {
                Ok(items) => items,
                Err(flow) => match as_failed_result(censor(flow, no_log)) {
                    Ok(result) => {
                        let result = self.in_line(result);
                        return self.finish_task(frame, task, result, no_log, report);
                    }
                    Err(flow) => return flow,
                },
            },
            None => None,
        };
        // The loop says the no_log its first item settled (see
        // [`Runner::looped_no_log`]).
        let (result, first_no_log) = match items {
            None => match self.run_item(frame, task, module, args, scope, modes).await {
                Ok(result) => (result, None),
                Err(flow) => match as_failed_result(censor(flow, no_log)) {
                    Ok(result) => (result, None),
                    Err(flow) => return flow,
                },
            },
            Some(items) => {
                // The items' results are the task's once the loop ends,
                // however it ends: what they held against the memory budget
                // is given back.
                let looping = self.looping();
                let looped = self.run_loop(frame, task, &ctx, scope, items, modes).await;
                self.set_looping(looping);
                match looped {
                    Ok(result) => result,
                    Err(flow) => return flow,
                }
            }
        };
        let no_log = match self.looped_no_log(frame, task) {
            Some(_) => first_no_log.unwrap_or(no_log),
            None => no_log,
        };
        let result = self.in_line(result);
        self.finish_task(frame, task, result, no_log, report)
    }

    /// `no_log` of the task (else of its blocks and play, else
    /// `ANSIBLE_NO_LOG`), templated in `ctx`.
    pub(super) fn no_log(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
    ) -> Result<bool, KeywordError> {
        let own = task.settings.get(Setting::NoLog);
        let inherited = frame.inherited.setting(Setting::NoLog);
        if own.is_none() && inherited.is_empty() {
            return Ok(default_no_log());
        }
        self.keyword_bool(ctx, own, inherited, "no_log")
    }

    /// A looped task's own `no_log` when written as text (a template):
    /// TaskExecutor templates it for each item only. The loop's result is
    /// shown as the first item settled it (TaskExecutor validates the task
    /// itself with the first item's variables, later items copies of it); a
    /// loop of no items keeps the text, whose truth (not empty) hides the
    /// result. `None` when it is not text or the task does not loop.
    fn looped_no_log(&self, frame: &Frame, task: &Task) -> Option<bool> {
        task.looping.as_ref()?;
        let raw = task
            .settings
            .get(Setting::NoLog)
            .or_else(|| frame.inherited.setting(Setting::NoLog).last())?;
        raw.as_str().map(|text| !text.is_empty())
    }

    /// The task's `no_log`, `check_mode` and `diff`. TaskExecutor
    /// post-validates them as booleans: a value that is none is a failed
    /// result of the task (ignore_errors and register apply), as a template
    /// error in them is not; the error comes with the keyword and the
    /// `no_log` judged so far.
    fn task_modes(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
    ) -> Result<TaskModes, (&'static str, KeywordError, bool)> {
        let no_log = match self.looped_no_log(frame, task) {
            Some(no_log) => no_log,
            None => self
                .no_log(frame, task, ctx)
                .map_err(|err| ("no_log", err, false))?,
        };
        // `check_mode` of the task, else of its blocks and play, else the
        // run's --check. `ansible_check_mode` stays --check's, as in
        // Ansible (only the module is told).
        let mut modes = TaskModes {
            no_log,
            check_mode: self.options.check_mode,
            diff: self.options.diff,
        };
        for (keyword, own, inherited) in [
            (
                "check_mode",
                task.settings.get(Setting::CheckMode),
                frame.inherited.setting(Setting::CheckMode),
            ),
            (
                "diff",
                task.settings.get(Setting::Diff),
                frame.inherited.setting(Setting::Diff),
            ),
        ] {
            if own.is_none() && inherited.is_empty() {
                continue;
            }
            let value = self
                .keyword_bool(ctx, own, inherited, keyword)
                .map_err(|err| (keyword, err, no_log))?;
            match keyword {
                "check_mode" => modes.check_mode = value,
                _ => modes.diff = value,
            }
        }
        Ok(modes)
    }

    /// A meta task whose condition was false: skipped, with the reason
    /// Ansible's strategy gives.
    pub(super) fn meta_skipped(&self, task: &Task, action: &str) -> TaskResult {
        let (msg, skip_reason) =
            enka_modules::meta::report(action, &self.host, task.role.as_deref(), false);
        let mut fields = vec![("msg".into(), Value::from(msg))];
        if let Some(reason) = skip_reason {
            fields.push(("skipped".into(), Value::from(true)));
            fields.push(("skip_reason".into(), Value::from(reason)));
        }
        TaskResult::of(fields)
    }

    /// The task's `async` and `poll`, templated; `None` without `async`
    /// (or with `async: 0`).
    pub(super) fn asynchronous(
        &self,
        task: &Task,
        ctx: &Context,
    ) -> Result<Option<modules::Asynchronous>, String> {
        let whole = |raw: Option<&Value>, what: &str| -> Result<Option<u64>, String> {
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
        let Some(seconds) = whole(task.settings.get(Setting::Async), "async")?.filter(|&s| s > 0)
        else {
            return Ok(None);
        };
        let poll = whole(task.settings.get(Setting::Poll), "poll")?.unwrap_or(DEFAULT_POLL_SECONDS);
        Ok(Some(modules::Asynchronous { seconds, poll }))
    }
}

/// Ansible's DEFAULT_POLL_INTERVAL.
pub(super) const DEFAULT_POLL_SECONDS: u64 = 15;
