//! Why a reconcile did not finish, typed from the task or API call that
//! stopped it to the Failure condition and the Event.

use std::time::Duration;

use enka_engine as engine;

/// Why a reconcile did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A task failed: which, where, and its result, as the engine judged it.
    #[error("{0}")]
    TaskFailed(Box<engine::Failure>),
    /// A failure that a `rescue` took: upstream fails the reconcile all the
    /// same (its collector does not see `rescued`).
    #[error("a task failed and a rescue took it; upstream fails the reconcile all the same: {0}")]
    RescuedFailure(String),
    /// The watch's role or playbook does not load.
    #[error("the role or playbook does not load: {0}")]
    NotLoaded(String),
    /// The object's fields cannot be decoded (nested too deep).
    #[error("{0}")]
    Undecodable(String),
    /// The object's reconcile-period annotation is no duration.
    #[error("Unable to parse reconcile period annotation: invalid duration {0:?}")]
    InvalidReconcilePeriod(String),
    /// The API refused a write of the runtime itself (status, finalizer).
    #[error("failed to {action}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// Why it failed.
        #[source]
        source: enka_kube::Error,
    },
    /// The object could not be read as JSON.
    #[error("the object could not be encoded: {0}")]
    Encode(String),
    /// The status subresource answered 404 while the object exists.
    #[error(
        "cannot write the status of {0}: its CustomResourceDefinition has no status subresource (add `subresources: {{status: {{}}}}` to the version, or set manageStatus: false in watches.yaml)"
    )]
    NoStatusSubresource(String),
    /// The reconcile panicked: a bug in enka, recovered as controller-runtime
    /// recovers one, so the object is retried and its kind goes on.
    #[error("the reconcile panicked (a bug in enka; please report it): {0}")]
    Panicked(String),
    /// The reconcile outlived `--reconcile-timeout` and the time to write
    /// its status: an API server that stopped answering.
    #[error("the reconcile did not finish within {0:?}; is the API server answering?")]
    TimedOut(Duration),
}
