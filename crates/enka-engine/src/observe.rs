//! Who watches a run task by task: `enka playbook`'s Ansible-style output,
//! and whatever else wants each task's result as it happens. The engine
//! calls the observer in task order; an observer must not block.

use std::time::Duration;

use minijinja::Value;

use enka_project::role::Task;

/// How a task ended, as Ansible's default callback names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Ran, changed nothing.
    Ok,
    /// Ran and changed something.
    Changed,
    /// Skipped by a condition (every loop item, for a loop).
    Skipped,
    /// Failed, and the failure stops the block.
    Failed,
    /// Failed, and `ignore_errors` let the run go on.
    Ignored,
}

impl TaskStatus {
    /// The word Ansible prints before `[host]`.
    pub fn word(self) -> &'static str {
        match self {
            TaskStatus::Ok => "ok",
            TaskStatus::Changed => "changed",
            TaskStatus::Skipped => "skipping",
            TaskStatus::Failed | TaskStatus::Ignored => "fatal",
        }
    }
}

/// One finished task.
#[derive(Debug)]
pub struct TaskEvent<'a> {
    /// The task (name, location, action).
    pub task: &'a Task,
    /// The host it ran on.
    pub host: &'a str,
    /// How it ended.
    pub status: TaskStatus,
    /// Its result as `register` would store it (censored for `no_log`).
    pub result: &'a Value,
    /// The failure message, for a failed or ignored task.
    pub message: Option<&'a str>,
    /// Wall time of the task, loop items and retries included.
    pub duration: Duration,
    /// It ran as a handler (or inside one).
    pub handler: bool,
    /// The results of the loop items before the item that ended the loop
    /// (its arguments could not be templated): shown before the failure.
    pub items_before: &'a [Value],
}

/// Receives each task's result while a run goes on.
pub trait Observer: Send + Sync {
    /// A play starts: its `name`, else its `hosts` pattern, and how many
    /// hosts it runs on.
    fn play_started(&self, _name: &str, _hosts: usize) {}
    /// The play that just started matches no host: it runs nothing.
    fn no_hosts_matched(&self) {}
    /// No host is left to run the play's next task (too many failed).
    fn no_hosts_remaining(&self) {}
    /// `task` is about to run (its `when` not yet evaluated).
    fn task_started(&self, _task: &Task) {}
    /// The include `task` (a handler's when `handler`) brings in `file`
    /// for `host` (once per loop `item`), before the file's tasks run.
    fn included(
        &self,
        _task: &Task,
        _handler: bool,
        _host: &str,
        _file: &std::path::Path,
        _item: Option<&Value>,
    ) {
    }
    /// An item of the looped include `task` (a handler's when `handler`)
    /// was skipped on `host` (its `when`): `result` says so.
    fn include_item_skipped(&self, _task: &Task, _handler: bool, _host: &str, _result: &Value) {}
    /// `event.task` finished.
    fn task_finished(&self, event: &TaskEvent<'_>);
    /// An error the run reports without stopping (Ansible's display.error),
    /// such as an included file that is nowhere.
    fn error(&self, message: &str) {
        tracing::error!("{message}");
    }
    /// `task` (a handler's when `handler`) did not meet its `until` on
    /// `host` and runs again, `retries_left` more times at most.
    /// `result` is the attempt's.
    fn task_retrying(
        &self,
        _task: &Task,
        _handler: bool,
        _host: &str,
        _retries_left: u64,
        _result: &Value,
    ) {
    }
    /// `task` (a handler's when `handler`) waited on `host` for its
    /// background job, which said `event` (Ansible's
    /// `v2_runner_on_async_poll`, `_ok` and `_failed`).
    fn async_event(
        &self,
        _task: &Task,
        _handler: bool,
        _host: &str,
        _event: &enka_modules::AsyncEvent,
    ) {
    }
    /// `task` (a handler's when `handler`) ran on `host`, and reading its
    /// result raised an error that ends the run (see
    /// `Failure::aborts_run`): it has no result to show.
    fn task_raised(&self, _task: &Task, _handler: bool, _host: &str) {}
    /// Something works but is likely a mistake, as Ansible's warnings say
    /// (each distinct warning once per run).
    fn warning(&self, message: &str) {
        tracing::warn!("{message}");
    }
    /// Something works today and will not in Ansible `version`, as
    /// Ansible's deprecation warnings say (each distinct one once per run).
    fn deprecation(&self, message: &str, version: &str) {
        tracing::warn!("{message} This feature will be removed in version {version}.");
    }
}
