//! The outcome of a run and of its tasks.

use std::time::Duration;

use minijinja::Value;

use enka_project::role::Location;

/// Counts of task results, as Ansible's play recap counts them (and
/// upstream copies them into `ansibleResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Tasks that ran and did not fail the run: changed ones, forgiven
    /// failures and each dynamic include included.
    pub ok: u32,
    /// Of those, tasks that changed something.
    pub changed: u32,
    /// Tasks that failed (and stopped the run unless rescued).
    pub failed: u32,
    /// Tasks skipped by a condition.
    pub skipped: u32,
    /// Blocks whose failure a `rescue` handled.
    pub rescued: u32,
    /// Failures forgiven by `ignore_errors`, and unreachable hosts by
    /// `ignore_unreachable`.
    pub ignored: u32,
    /// Tasks whose host could not be reached (the recap's `unreachable`).
    pub unreachable: u32,
}

impl Stats {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Stats) {
        self.ok += other.ok;
        self.changed += other.changed;
        self.failed += other.failed;
        self.skipped += other.skipped;
        self.rescued += other.rescued;
        self.ignored += other.ignored;
        self.unreachable += other.unreachable;
    }
}

/// The task that failed a run, and why.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The task's name (or module).
    pub task: std::sync::Arc<str>,
    /// Where it is.
    pub location: Location,
    /// Ansible's message for it.
    pub message: String,
    /// The task's result (censored when `no_log`).
    pub result: Value,
    /// The task's action as written (`fail`, `ansible.builtin.command`),
    /// empty for a failure that is not a task's.
    pub action: std::sync::Arc<str>,
    /// Raised out of Ansible's strategy rather than returned by a task (a
    /// notified handler that does not exist, a meta task's condition that
    /// cannot be evaluated): no `rescue` or `always` runs for it, and
    /// ansible-playbook stops with `ERROR!`, exit 1 and no recap.
    pub aborts_run: bool,
    /// The strategy marked the host failed itself (an included file that
    /// could not be loaded) rather than from a task's result: a rescue
    /// runs, without `ansible_failed_task` and `ansible_failed_result`.
    pub marked_failed: bool,
    /// Raised as a parser error (an included file that does not parse):
    /// ansible-playbook stops with exit 4 rather than 1.
    pub parser_error: bool,
}

/// The longest failure message kept: it lands in the object's `Failure`
/// condition, an Event and the log, and a task's message can hold anything
/// its data held (a registered result of megabytes).
pub const MAX_FAILURE_MESSAGE: usize = 4096;

/// The longest failed result's `msg` kept for the Failure condition, which
/// upstream writes verbatim: room for any refusal kubernetes.core quotes.
pub const MAX_RESULT_MESSAGE: usize = 64 * 1024;

/// Upstream's words for a failed result without a `msg`.
pub const UNKNOWN_PLAYBOOK_FAILURE: &str = "unknown playbook failure";

impl Failure {
    /// The failed result's `msg`, as upstream's operator reads it from the
    /// event (`unknown playbook failure` when there is none, or it is not
    /// text), cut at [`MAX_RESULT_MESSAGE`] bytes so that a status write
    /// stays far below the API server's object size limit.
    pub fn result_message(&self) -> String {
        let msg = self
            .result
            .get_attr("msg")
            .ok()
            .and_then(|msg| msg.as_str().map(str::to_owned));
        match msg {
            Some(msg) => bounded(msg, MAX_RESULT_MESSAGE),
            None => UNKNOWN_PLAYBOOK_FAILURE.to_owned(),
        }
    }

    /// A failure of `task` at `location`; a message longer than
    /// [`MAX_FAILURE_MESSAGE`] bytes is cut, saying how much was left out.
    pub fn new(task: String, location: Location, message: String, result: Value) -> Self {
        Failure {
            task: std::sync::Arc::from(task),
            location,
            message: bounded(message, MAX_FAILURE_MESSAGE),
            result,
            action: std::sync::Arc::from(""),
            aborts_run: false,
            marked_failed: false,
            parser_error: false,
        }
    }

    /// This failure, raised out of the strategy (see [`Failure::aborts_run`]).
    pub fn aborting(self) -> Self {
        Failure {
            aborts_run: true,
            ..self
        }
    }

    /// Whether the task's host could not be reached (its result says
    /// `unreachable`): no `rescue` or `always` runs for it, as Ansible's
    /// strategy drops the host.
    pub fn is_unreachable(&self) -> bool {
        self.result
            .get_attr("unreachable")
            .is_ok_and(|v| v.is_true())
    }
}

fn bounded(mut message: String, limit: usize) -> String {
    if message.len() <= limit {
        return message;
    }
    let mut cut = limit;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let left_out = message.len() - cut;
    message.truncate(cut);
    message.push_str(&format!("… ({left_out} more bytes)"));
    message
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "task {:?} at {} failed: {}",
            self.task, self.location, self.message
        )
    }
}

/// How a run ended.
#[derive(Debug, Clone, Default)]
pub enum RunStatus {
    /// Every task ran (or `meta: end_play` ended it).
    #[default]
    Successful,
    /// A task failed and nothing rescued it.
    Failed(Failure),
}

/// Everything the operator needs to know about a finished run.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// Task counts.
    pub stats: Stats,
    /// Task counts of each host, for a play recap (one host, `localhost`,
    /// for a role).
    pub hosts: Vec<(String, Stats)>,
    /// The `msg` of each task result that failed and was not ignored, in
    /// order, rescued ones included: what upstream's operator collects from
    /// Ansible Runner's `runner_on_failed` events for the Failure
    /// condition. (Its check for a rescued failure reads a field those
    /// events do not carry, so a failure a `rescue` took still fails the
    /// reconcile there; ansible-runner 2.4 writes no `rescued` into them.)
    pub failed_task_messages: Vec<String>,
    /// Set by `requeue_after`.
    pub requeue_after: Option<Duration>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Time spent inside Kubernetes calls.
    pub api_time: Duration,
    /// User metrics recorded by `osdk_metric`.
    pub metrics: Vec<enka_modules::MetricUpdate>,
    /// The host's facts at the end (`set_fact`, `register`).
    pub facts: super::scope::Facts,
    /// Each module call: the module and how long it took.
    pub module_timings: Vec<(&'static str, Duration)>,
    /// Each task that ran (blocks aside), in order.
    pub task_timings: Vec<super::TaskTiming>,
    /// The dependents the run wrote.
    pub dependents: Vec<enka_kube::Dependent>,
}

impl RunOutcome {
    /// Whether the run succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self.status, RunStatus::Successful)
    }

    /// What upstream's operator writes as the Failure condition's message
    /// when the reconcile failed: the failed results' messages, one per
    /// line; none when no task failed (a run that failed elsewhere, such
    /// as an include that does not load, gives its own message).
    pub fn reconcile_failure(&self) -> Option<String> {
        if !self.failed_task_messages.is_empty() {
            return Some(self.failed_task_messages.join("\n"));
        }
        self.failure().map(|failure| failure.message.clone())
    }

    /// Whether upstream's operator counts the reconcile failed.
    pub fn fails_reconcile(&self) -> bool {
        !self.failed_task_messages.is_empty() || self.failure().is_some()
    }

    /// The failure, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.status {
            RunStatus::Failed(f) => Some(f),
            RunStatus::Successful => None,
        }
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character() {
        let message = "é".repeat(MAX_FAILURE_MESSAGE);
        let cut = bounded(message.clone(), MAX_FAILURE_MESSAGE);
        assert!(cut.len() < MAX_FAILURE_MESSAGE + 40, "{}", cut.len());
        assert!(cut.ends_with(&format!(
            "… ({} more bytes)",
            message.len() - MAX_FAILURE_MESSAGE
        )));
        assert_eq!(bounded("short".into(), MAX_FAILURE_MESSAGE), "short");
    }
}
