//! A task's end: its result counted, registered, logged and forgiven (`ignore_errors`), or its
//! failure.

use enka_project::role::Setting;
use std::sync::Arc;

use enka_modules::Control;
use enka_project::role::{Action, Task};
use enka_template::{Error as TemplateError, Var};
use minijinja::Value;
use minijinja::value::ValueKind;

use super::no_log::{NO_LOG_MESSAGE, censored, shown_message};
use super::task_result::TaskResult;
use super::{Flow, Frame, Runner, TaskReport};
use crate::LogEvents;
use crate::result::Failure;

impl Runner {
    /// Records the result: register, stats, and whether the run goes on.
    pub(super) fn finish_task(
        &mut self,
        frame: &Frame,
        task: &Task,
        result: TaskResult,
        no_log: bool,
        report: &mut TaskReport,
    ) -> Flow {
        let (result, registered) = self.register_within_budget(task, result);
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
                (true, _, _) => crate::TaskStatus::Failed,
                (_, true, _) => crate::TaskStatus::Skipped,
                (_, _, true) => crate::TaskStatus::Changed,
                _ => crate::TaskStatus::Ok,
            };
            report.outcome = Some((status, shown.clone(), None));
            if !no_log {
                report.items_before = result.shown_before.clone();
            }
        }
        // Meta tasks are not in Ansible's recap (`_execute_meta` counts
        // nothing), whatever they do, and register nothing (their results
        // never reach `_process_pending_results`).
        let is_meta = matches!(
            &task.action,
            Action::Module { module, .. } if !module.counts_in_recap()
        );
        if let (Some(name), Some(registered), false) = (&task.register, registered, is_meta) {
            self.warn_if_reserved([&**name]);
            Arc::make_mut(&mut self.facts).insert(name.clone(), registered);
        }

        if result.flag("unreachable") {
            return self.finish_unreachable(frame, task, &result, shown, no_log, report);
        }
        if skipped {
            if !is_meta {
                self.stats.skipped += 1;
            }
            return Flow::Continue;
        }
        if changed
            && !failed
            && let Some(flow) = self.notify_for(frame, task, report)
        {
            return flow;
        }
        if let Some(control) = result.control.clone()
            && let Some(flow) = self.obey(control, report)
        {
            return flow;
        }
        if failed {
            let ignore = match self.task_flag(
                frame,
                task,
                task.settings.get(Setting::IgnoreErrors),
                frame.inherited.setting(Setting::IgnoreErrors),
                "ignore_errors",
            ) {
                Ok(b) => b,
                Err(flow) => return flow,
            };
            let message = shown_message(&result, no_log);
            if ignore {
                self.forgive(task, &message, changed, "task failed", report);
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
    /// Notifies the handlers a changed task (and its blocks) name; a name
    /// no handler answers to is raised while the strategy reads the result,
    /// before it is shown, and ends the run.
    fn notify_for(&mut self, frame: &Frame, task: &Task, report: &mut TaskReport) -> Option<Flow> {
        let names: Vec<String> = frame
            .inherited
            .notify
            .iter()
            .chain(task.notify.iter())
            .cloned()
            .collect();
        if names.is_empty() {
            return None;
        }
        let message = self.notify(&names).err()?;
        report.outcome = None;
        let failure = self.failure(task, message.clone(), fail_result(&message));
        Some(Flow::Failed(failure.aborting()))
    }

    /// Does what a module asked of the run beyond its result (`meta`,
    /// `requeue_after`); a flow when the task list ends here.
    fn obey(&mut self, control: Control, report: &mut TaskReport) -> Option<Flow> {
        match control {
            Control::FlushHandlers => report.flush_handlers = true,
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
                return Some(Flow::EndPlay);
            }
            Control::EndHost => return Some(Flow::EndPlay),
            Control::EndRole => return Some(Flow::EndRole),
            Control::Requeue(after) => self.requeue_after = Some(after),
            // VariableManager.clear_facts: the host's fact cache, not what
            // set_fact and register keep (the non-persistent cache).
            Control::ClearFacts => {
                Arc::make_mut(&mut self.host_facts).clear();
                report.cleared_facts = true;
            }
        }
        None
    }

    /// A failure or unreachable host `ignore_errors`/`ignore_unreachable`
    /// forgave: shown as ignored, and the recap counts it as a task that
    /// ran.
    pub(super) fn forgive(
        &mut self,
        task: &Task,
        message: &str,
        changed: bool,
        what: &str,
        report: &mut TaskReport,
    ) {
        if let Some(outcome) = &mut report.outcome {
            *outcome = (
                crate::TaskStatus::Ignored,
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
    pub(super) fn finish_unreachable(
        &mut self,
        frame: &Frame,
        task: &Task,
        result: &TaskResult,
        shown: Value,
        no_log: bool,
        report: &mut TaskReport,
    ) -> Flow {
        let ignore = match result.ignore_unreachable {
            Some(judged) => judged,
            None => match self.task_flag(
                frame,
                task,
                task.settings.get(Setting::IgnoreUnreachable),
                frame.inherited.setting(Setting::IgnoreUnreachable),
                "ignore_unreachable",
            ) {
                Ok(b) => b,
                Err(flow) => return flow,
            },
        };
        let message = shown_message(result, no_log);
        if ignore {
            self.forgive(task, &message, false, "host unreachable", report);
            return Flow::Continue;
        }
        self.stats.unreachable += 1;
        Flow::Failed(self.failure(task, message, shown))
    }

    /// The task events `--ansible-log-events` asks for: `debug` output and
    /// failures with Tasks, every result with Everything. A failure is
    /// logged when it happens, even if `ignore_errors` lets the run go on.
    /// `shown` is already censored for `no_log`; so is every message here.
    pub(super) fn log_result(&self, task: &Task, result: &TaskResult, shown: &Value, no_log: bool) {
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

    /// A registered result as a variable. 2.18 wraps a module's result as
    /// unsafe data; 2.19 trusts nothing a module made, while the loop items
    /// in it (`item`, each of `results`) are the values the loop was given,
    /// whose trust they keep.
    pub(super) fn registered(&self, task: &Task, result: &TaskResult) -> Var {
        // TaskExecutor wraps no result of the actions whose facts it keeps
        // clean (`_ACTION_WITH_CLEAN_FACTS`); the values keep their own.
        // An error raised before or instead of the action is wrapped as
        // any other (TaskExecutor's `msg=wrap_var(...)`).
        let clean_facts = !result.flag("failed")
            && matches!(
                &task.action,
                Action::Module { module, .. } if matches!(module.name(), "set_fact" | "include_vars")
            );
        let result = result.registered();
        if clean_facts {
            return Var::templated(result);
        }
        match self.semantics() {
            enka_template::Semantics::Ansible218 => Var::unsafe_data(&result),
            enka_template::Semantics::Ansible219 => Var::plain(untrusted_but_items(&result)),
        }
    }

    /// The ansible-core line whose semantics the run follows.
    pub(super) fn semantics(&self) -> enka_template::Semantics {
        self.templar.options().semantics
    }

    /// A task's result as the run's line shapes it (see
    /// [`TaskResult::raised_as_219`]).
    pub(super) fn in_line(&self, result: TaskResult) -> TaskResult {
        let mut result = match self.semantics() {
            enka_template::Semantics::Ansible219 => result.raised_as_219(),
            enka_template::Semantics::Ansible218 => result,
        };
        // 2.21's results are one dataclass whose `failed` is always said,
        // a skipped one's too.
        if self.templar.options().release_at_least(21) && result.get("failed").is_none() {
            result.set("failed", minijinja::Value::from(false));
        }
        result
    }

    pub(super) fn failure(&self, task: &Task, message: String, result: Value) -> Failure {
        let mut failure = Failure::new(task.display_name(), task.location.clone(), message, result);
        if let Action::Module { module, .. } = &task.action {
            failure.action = Arc::from(module.name());
        }
        failure
    }

    pub(super) fn template_failure(&self, task: &Task, what: &str, err: &TemplateError) -> Flow {
        let message = if err.is_undefined() {
            format!(
                "The task includes an option with an undefined variable. The error was: {err} ({what})"
            )
        } else {
            format!("{what}: {err}")
        };
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }
}

/// Ansible's words for arguments that use an undefined variable (the
/// task's `post_validate`): the cause after two dots, then where the task
/// is, as its errors show it.
pub(super) fn undefined_in_arguments(task: &Task, err: &TemplateError) -> String {
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

/// The result of a task whose templating raised a Python exception that
/// Ansible's templar lets through: TaskExecutor.run's, with the traceback
/// as `exception` and no `msg` (its message is the traceback's last line,
/// as ansible-playbook's "The error was: …").
pub(super) fn exception_result(class: &str, text: &str, line: Option<usize>) -> TaskResult {
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

pub(super) fn fail_result(message: &str) -> Value {
    Value::from_pairs([
        (Value::from("failed"), Value::from(true)),
        (Value::from("msg"), Value::from(message)),
    ])
}

/// A result with every string marked unsafe but its loop items'.
fn untrusted_but_items(result: &Value) -> Value {
    if result.kind() != ValueKind::Map {
        return enka_template::mark_unsafe(result);
    }
    let loop_var = result
        .get_attr("ansible_loop_var")
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "item".to_owned());
    Value::from_pairs(result.try_iter().into_iter().flatten().map(|key| {
        let value = result.get_item(&key).unwrap_or_default();
        let value = match key.as_str() {
            Some(name) if name == loop_var => value,
            Some("results") if value.kind() == ValueKind::Seq => Value::from(
                value
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .map(|item| untrusted_but_items(&item))
                    .collect::<Vec<_>>(),
            ),
            _ => enka_template::mark_unsafe(&value),
        };
        (key, value)
    }))
}
