//! What each task cost: a tracing span around it (so an OTLP exporter shows
//! a reconcile's slow task at a glance), its duration for
//! `enka_task_duration_seconds`, and, under `profile_tasks`, a log line per
//! task as Ansible's `profile_tasks` callback prints one.

use std::sync::Arc;
use std::time::Duration;

use enka_project::role::{Action, Task};

use super::result::{Failure, Stats};
use enka_modules::catalogue::ModuleRef;

/// How a task ended, judged from its flow and what it added to the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskOutcome {
    Ok,
    Changed,
    Skipped,
    Failed,
    /// Failed, forgiven by `ignore_errors`.
    Ignored,
    Unreachable,
}

impl TaskOutcome {
    /// `failure` is how the task's flow failed, if it did; a module task's
    /// other outcomes show in the counts it added (an include's counts are
    /// its tasks', so an include that did not fail is `ok`).
    pub(super) fn judge(
        task: &Task,
        failure: Option<&Failure>,
        before: &Stats,
        after: &Stats,
    ) -> TaskOutcome {
        match failure {
            Some(failure) if failure.is_unreachable() => return TaskOutcome::Unreachable,
            Some(_) => return TaskOutcome::Failed,
            None => {}
        }
        if !matches!(task.action, Action::Module { .. }) {
            return TaskOutcome::Ok;
        }
        if after.unreachable > before.unreachable {
            TaskOutcome::Unreachable
        } else if after.ignored > before.ignored {
            TaskOutcome::Ignored
        } else if after.changed > before.changed {
            TaskOutcome::Changed
        } else if after.skipped > before.skipped {
            TaskOutcome::Skipped
        } else {
            TaskOutcome::Ok
        }
    }

    pub(super) fn word(self) -> &'static str {
        match self {
            TaskOutcome::Ok => "ok",
            TaskOutcome::Changed => "changed",
            TaskOutcome::Skipped => "skipped",
            TaskOutcome::Failed => "failed",
            TaskOutcome::Ignored => "ignored",
            TaskOutcome::Unreachable => "unreachable",
        }
    }
}

/// One task that ran, for `enka_task_duration_seconds{gvk,role,task}`.
#[derive(Debug, Clone)]
pub struct TaskTiming {
    /// The role whose file holds the task (empty for a playbook's own).
    pub role: Option<Arc<str>>,
    /// The task's name as written, else its module.
    pub task: Arc<str>,
    /// Wall time, loop items and retries included.
    pub took: Duration,
}

/// How the task's action runs: `native`, `ansible` (the worker) or
/// `engine` (an include).
fn runs_via(task: &Task) -> (&str, &'static str) {
    match &task.action {
        Action::Module { module, .. } => (
            module.name(),
            match module {
                ModuleRef::Native(_) => "native",
                ModuleRef::Ansible(_) => "ansible",
            },
        ),
        Action::IncludeTasks { .. } => ("include_tasks", "engine"),
        Action::IncludeRole(_) => ("include_role", "engine"),
        Action::ImportRole { .. } => ("import_role", "engine"),
        Action::Block { .. } => ("block", "engine"),
    }
}

/// The span a task runs in. Trace level: logs, even at debug, leave it out
/// (every line of a task would repeat its fields; the task events carry
/// their task already), a trace exporter takes it. Its fields are named
/// apart from the task events' own (`task`, `location`) so a line at trace
/// level keeps each key once.
pub(super) fn task_span(task: &Task) -> tracing::Span {
    let (module, via) = runs_via(task);
    tracing::trace_span!(
        "task",
        role = task.role.as_deref().unwrap_or(""),
        task_name = %task.display_name(),
        code_location = %task.location,
        module,
        via,
        outcome = tracing::field::Empty,
    )
}

/// The task's name for metrics: as written, else its module.
pub(super) fn timing_name(task: &Task) -> Arc<str> {
    match &task.name {
        Some(name) => name.clone(),
        None => Arc::from(task.display_name()),
    }
}

/// Logs a finished task at info level (`profile_tasks`) or debug.
pub(super) fn log_task(task: &Task, outcome: TaskOutcome, took: Duration, profile: bool) {
    // A tracing event's level is part of its static callsite: one event per
    // level, the same fields.
    macro_rules! task_finished {
        ($level:expr) => {
            tracing::event!(
                $level,
                role = task.role.as_deref().unwrap_or(""),
                task = %task.display_name(),
                location = %task.location,
                outcome = outcome.word(),
                duration_ms = took.as_secs_f64() * 1000.0,
                "task finished"
            )
        };
    }
    if profile {
        task_finished!(tracing::Level::INFO);
    } else {
        task_finished!(tracing::Level::DEBUG);
    }
}
