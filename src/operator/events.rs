//! Kubernetes Events for failed reconciles, one per object and task, with
//! a count that grows on repetition instead of a new Event each time.

use serde_json::{Value as Json, json};

use crate::kube::client::KubeCluster;
use crate::kube::{Cluster, PatchType};

/// Records a `Warning` event on `object` saying that `task` failed.
pub async fn record_failure(cluster: &KubeCluster, object: &Json, task: &str, message: &str) {
    let text = |p: &str| {
        object
            .pointer(p)
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let namespace = match text("/metadata/namespace") {
        ns if ns.is_empty() => "default".to_owned(),
        ns => ns,
    };
    let object_name = text("/metadata/name");
    let name = format!("{object_name}.enka.{:x}", fnv(task));
    let Ok(events) = cluster.resource("v1", "Event").await else {
        return;
    };
    let now = crate::modules::now_rfc3339();
    let message: String = message.chars().take(1024).collect();
    let result = match cluster.get(&events, Some(&namespace), &name).await {
        Ok(Some(existing)) => {
            let count = existing.get("count").and_then(Json::as_i64).unwrap_or(1) + 1;
            let patch = json!({"count": count, "lastTimestamp": now, "message": message});
            cluster
                .patch(
                    &events,
                    Some(&namespace),
                    &name,
                    &patch,
                    &PatchType::Merge,
                    None,
                )
                .await
                .map(|_| ())
        }
        Ok(None) => {
            let event = json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": text("/apiVersion"),
                    "kind": text("/kind"),
                    "name": object_name,
                    "namespace": text("/metadata/namespace"),
                    "uid": text("/metadata/uid"),
                    "resourceVersion": text("/metadata/resourceVersion"),
                },
                "reason": "ReconcileFailed",
                "message": message,
                "type": "Warning",
                "source": {"component": "enka"},
                "reportingComponent": "enka",
                "reportingInstance": hostname(),
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
            });
            cluster
                .create(&events, Some(&namespace), &event)
                .await
                .map(|_| ())
        }
        Err(err) => Err(err),
    };
    if let Err(err) = result {
        tracing::debug!("could not record an event for task {task:?}: {err}");
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME").unwrap_or_else(|_| "enka".to_owned())
}

/// FNV-1a, for short stable event names.
fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
