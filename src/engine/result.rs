//! The outcome of a run and of its tasks.

use std::time::Duration;

use minijinja::Value;

use crate::role::Location;

/// Counts of task results, like Ansible's play recap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Tasks that ran without change.
    pub ok: u32,
    /// Tasks that changed something.
    pub changed: u32,
    /// Tasks that failed (and stopped the run unless rescued).
    pub failed: u32,
    /// Tasks skipped by a condition.
    pub skipped: u32,
    /// Blocks whose failure a `rescue` handled.
    pub rescued: u32,
    /// Failures forgiven by `ignore_errors`.
    pub ignored: u32,
}

/// The task that failed a run, and why.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The task's name (or module).
    pub task: String,
    /// Where it is.
    pub location: Location,
    /// Ansible's message for it.
    pub message: String,
    /// The task's result (censored when `no_log`).
    pub result: Value,
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
#[derive(Debug, Clone)]
pub enum RunStatus {
    /// Every task ran (or `meta: end_play` ended it).
    Successful,
    /// A task failed and nothing rescued it.
    Failed(Failure),
}

/// Everything the operator needs to know about a finished run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// Task counts.
    pub stats: Stats,
    /// Set by `requeue_after`.
    pub requeue_after: Option<Duration>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Time spent inside Kubernetes calls.
    pub api_time: Duration,
    /// User metrics recorded by `osdk_metric`.
    pub metrics: Vec<crate::modules::MetricUpdate>,
    /// The host's facts at the end (`set_fact`, `register`).
    pub facts: super::scope::Facts,
    /// Each module call: the module and how long it took.
    pub module_timings: Vec<(&'static str, Duration)>,
    /// The dependents the run wrote.
    pub dependents: Vec<crate::kube::Dependent>,
}

impl RunOutcome {
    /// Whether the run succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self.status, RunStatus::Successful)
    }

    /// The failure, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.status {
            RunStatus::Failed(f) => Some(f),
            RunStatus::Successful => None,
        }
    }
}
