//! A reconcile that fails: its Failure condition and Event, and when the
//! object is tried again (controller-runtime's backoff).

use std::sync::Arc;
use std::time::{Duration, Instant};

use enka_engine as engine;
use enka_kube::api_error;
use enka_kube::object::WatchedObject;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value as Json, json};

use super::{WatchContext, now, object_key, write_status};
use crate::error::ReconcileError;
use crate::status;

/// An object whose fields could not be decoded (nested too deep) fails
/// alone: a Failure condition and an Event say why, and its kind goes on.
/// Its status is merge-patched, and the answer read as a [`WatchedObject`],
/// since neither side can decode the whole object.
pub(super) async fn report_undecodable(
    ctx: &WatchContext,
    object: &WatchedObject,
    reason: &enka_kube::object::Undecodable,
    api_wait: &mut Duration,
) -> ReconcileError {
    let message = reason.to_string();
    let head = Arc::new(object.head_json());
    ctx.events.failure(&head, "(reading the object)", &message);
    if ctx.watch.manage_status {
        let name = object.metadata.name.as_deref().unwrap_or_default();
        let client = ctx.cluster.client().clone();
        let api: Api<WatchedObject> = match object.metadata.namespace.as_deref() {
            Some(ns) if ctx.namespaced => Api::namespaced_with(client, ns, &ctx.resource),
            _ => Api::all_with(client, &ctx.resource),
        };
        let mut status = json!({});
        status::mark_error(&mut status, &message, &now());
        let started = Instant::now();
        let written = api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await;
        *api_wait += started.elapsed();
        if let Err(e) = written {
            return ReconcileError::Api {
                action: "update the status",
                source: api_error(e),
            };
        }
    }
    ReconcileError::Undecodable(message)
}

/// A reconcile of a watch whose role or playbook does not load fails as
/// upstream's run of it would: the status's Failure condition (manageStatus)
/// and an Event say why, and the object is retried with backoff (after a fix,
/// the reload loads it and the retry runs it).
pub(super) async fn report_unloaded(
    ctx: &WatchContext,
    ns: Option<&str>,
    name: &str,
    json: Arc<Json>,
    reason: &str,
    api_wait: &mut Duration,
) -> ReconcileError {
    let refused = ReconcileError::NotLoaded(reason.to_string());
    let message = refused.to_string();
    if ctx.watch.manage_status {
        let written = write_status(ctx, ns, name, json.clone(), api_wait, |s| {
            status::mark_error(s, &message, &now())
        })
        .await;
        if let Err(err) = written {
            return err;
        }
    }
    ctx.events.failure(&json, "(load)", &message);
    refused
}

/// Whether the run fails the reconcile, as upstream decides it: a task
/// result failed and was not ignored (a rescued one too), or the run itself
/// failed. The Event and the error name the task and where it is; the
/// status says only what upstream's does (see `status::mark_done`).
pub(super) fn failed_reconcile(
    ctx: &WatchContext,
    object: &Arc<Json>,
    outcome: &engine::RunOutcome,
) -> Option<ReconcileError> {
    let message = outcome.reconcile_failure()?;
    let (task, refused) = match outcome.failure() {
        Some(failure) => (
            failure.task.to_string(),
            ReconcileError::TaskFailed(Box::new(failure.clone())),
        ),
        None => (
            "(a rescued task)".to_owned(),
            ReconcileError::RescuedFailure(message),
        ),
    };
    ctx.events.failure(object, &task, &refused.to_string());
    Some(refused)
}

/// Exponential backoff per object, from 5 ms to 1000 s, reset on success:
/// the delay before the failed object runs again.
pub fn error_policy(
    object: Arc<WatchedObject>,
    error: &ReconcileError,
    ctx: Arc<WatchContext>,
) -> Duration {
    let key = ObjectRef::from_obj_with(&*object, ctx.resource.clone());
    let attempts = {
        let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        *count
    };
    let delay = backoff(attempts);
    ctx.metrics.requeued(
        &ctx.controller_name,
        object_key(
            object.metadata.namespace.as_deref(),
            object.metadata.name.as_deref().unwrap_or_default(),
        ),
        delay,
        true,
    );
    tracing::warn!(
        kind = %ctx.watch.gvk.kind,
        name = object.metadata.name.as_deref().unwrap_or(""),
        namespace = object.metadata.namespace.as_deref().unwrap_or(""),
        retry_in_ms = delay.as_millis() as u64,
        "reconcile failed: {error}"
    );
    delay
}

/// The delay before retry number `attempts`.
pub fn backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(32);
    Duration::from_millis(5)
        .saturating_mul(1u32 << exponent.min(31))
        .min(Duration::from_secs(1000))
}
