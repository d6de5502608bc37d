//! What a reconcile writes back to its object: status conditions and
//! finalizers, each written over the newest copy known, so no read is
//! needed before or after.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use enka_kube::{Cluster, PatchType};

use super::WatchContext;
use crate::error::ReconcileError;

pub(super) fn now() -> String {
    enka_template::time::now_rfc3339()
}

pub(super) fn completion() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let base = enka_template::time::format_rfc3339(since.as_secs());
    format!(
        "{}.{:06}+00:00",
        base.trim_end_matches('Z'),
        since.subsec_micros()
    )
}

/// Writes the status `update` makes of `known`, the object as last seen, and
/// returns the object as the API server stored it, so no read is needed
/// before or after. The watch cache may know a newer version (the role
/// wrote the object, and the cache remembers its own writes): that one is
/// written over. A `known` stale all the same costs one conflict and one
/// read.
pub(super) async fn write_status(
    ctx: &WatchContext,
    namespace: Option<&str>,
    name: &str,
    known: Arc<Json>,
    api_wait: &mut Duration,
    update: impl Fn(&mut Json),
) -> Result<Arc<Json>, ReconcileError> {
    let resource = ctx.resource_ref();
    let known_version = known
        .pointer("/metadata/resourceVersion")
        .and_then(Json::as_str);
    let newer = ctx
        .cluster
        .watch_caches()
        .newer_than(&resource, namespace, name, known_version);
    let mut live = match newer {
        Some(newer) => Arc::new(newer),
        None => known,
    };
    for attempt in 0..3 {
        let before = live.get("status").cloned().unwrap_or_else(|| json!({}));
        let mut status = before.clone();
        update(&mut status);
        if status == before {
            return Ok(live);
        }
        let mut object = (*live).clone();
        object["status"] = status;
        let started = Instant::now();
        let written = ctx
            .cluster
            .replace(&resource, namespace, name, &object, Some("status"))
            .await;
        *api_wait += started.elapsed();
        match written {
            Ok(written) => return Ok(Arc::new(written)),
            // Deleted meanwhile (no status left to write), or a kind whose
            // CRD has no status subresource: only a read tells which.
            Err(err) if err.is_not_found() => {
                let started = Instant::now();
                let still = ctx
                    .cluster
                    .get_from_server(&resource, namespace, name)
                    .await;
                *api_wait += started.elapsed();
                return match still {
                    Ok(None) => Ok(live),
                    Ok(Some(_)) => Err(ReconcileError::NoStatusSubresource(
                        ctx.watch.gvk.to_string(),
                    )),
                    Err(source) => Err(ReconcileError::Api {
                        action: "read the object",
                        source,
                    }),
                };
            }
            Err(err) if err.is_conflict() && attempt < 2 => {
                let started = Instant::now();
                let fresh = ctx
                    .cluster
                    .get_from_server(&resource, namespace, name)
                    .await;
                *api_wait += started.elapsed();
                match fresh.map_err(|source| ReconcileError::Api {
                    action: "read the object",
                    source,
                })? {
                    Some(fresh) => live = Arc::new(fresh),
                    None => return Ok(live),
                }
            }
            Err(source) => {
                return Err(ReconcileError::Api {
                    action: "update the status",
                    source,
                });
            }
        }
    }
    Ok(live)
}

/// Sets the finalizers of `object`; the object as stored afterwards.
pub(super) async fn set_finalizers(
    ctx: &WatchContext,
    object: &Json,
    finalizers: Vec<String>,
) -> Result<Json, ReconcileError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let namespace = object.pointer("/metadata/namespace").and_then(Json::as_str);
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.pointer("/metadata/resourceVersion"),
    }});
    // Through the cluster, so the watch cache serves the roles' reads of the
    // object with its finalizers.
    let resource = ctx.resource_ref();
    ctx.cluster
        .patch(&resource, namespace, name, &patch, &PatchType::Merge, None)
        .await
        .map_err(|source| ReconcileError::Api {
            action: "update the finalizers",
            source,
        })
}
