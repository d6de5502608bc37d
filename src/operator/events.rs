//! Kubernetes Events for failed reconciles, one per object and task, with
//! a count that grows on repetition instead of a new Event each time.

use std::sync::Arc;

use serde_json::{Value as Json, json};
use tokio::sync::mpsc;

use crate::kube::client::KubeCluster;
use crate::kube::{Cluster, PatchType};

/// Failures waiting to be recorded before new ones are dropped, as client-go's
/// event broadcaster does when the API server cannot keep up.
const QUEUE: usize = 1000;

struct Failure {
    object: Arc<Json>,
    task: String,
    message: String,
}

/// Records failure Events in the background, in order, so a reconcile never
/// waits for the two API calls an Event costs.
#[derive(Clone, Debug)]
pub struct Recorder {
    queue: mpsc::Sender<Failure>,
}

impl Recorder {
    /// Starts the worker that writes Events through `cluster`.
    pub fn start(cluster: Arc<KubeCluster>) -> Recorder {
        let (queue, mut failures) = mpsc::channel::<Failure>(QUEUE);
        tokio::spawn(async move {
            while let Some(f) = failures.recv().await {
                record_failure(&cluster, &f.object, &f.task, &f.message).await;
            }
        });
        Recorder { queue }
    }

    /// Queues a `Warning` Event on `object` saying that `task` failed.
    pub fn failure(&self, object: &Arc<Json>, task: &str, message: &str) {
        let failure = Failure {
            object: object.clone(),
            task: task.to_owned(),
            message: message.to_owned(),
        };
        if self.queue.try_send(failure).is_err() {
            tracing::debug!("event queue full; dropped the event for task {task:?}");
        }
    }
}

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
