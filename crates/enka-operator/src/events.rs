//! Kubernetes Events for failed reconciles, one per object and task, with
//! a count that grows on repetition instead of a new Event each time.

use std::sync::Arc;

use serde_json::{Value as Json, json};
use tokio::sync::mpsc;

use enka_kube::{Cluster, PatchType, event};

/// Failures waiting to be recorded before new ones are dropped, as client-go's
/// event broadcaster does when the API server cannot keep up.
const QUEUE: usize = 1000;

struct Failure {
    object: Arc<Json>,
    task: String,
    message: String,
}

/// Records failure Events in the background, in order, so a reconcile never
/// waits for the API call an Event costs.
#[derive(Clone, Debug)]
pub struct Recorder {
    queue: mpsc::Sender<Failure>,
}

impl Recorder {
    /// Starts the worker that writes Events through `cluster`.
    pub fn start(cluster: Arc<dyn Cluster>) -> Recorder {
        let (queue, mut failures) = mpsc::channel::<Failure>(QUEUE);
        tokio::spawn(async move {
            let mut written = Written::default();
            while let Some(f) = failures.recv().await {
                record_failure(
                    cluster.as_ref(),
                    &mut written,
                    &f.object,
                    &f.task,
                    &f.message,
                )
                .await;
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

/// The `count` of each Event this recorder wrote, by namespace and name, so
/// that a repeat is one PATCH and a first failure one POST, without reading
/// the Event first (client-go's EventCorrelator keeps the same). Bounded: a
/// full table starts again, each Event's next repeat then reading it once.
#[derive(Default)]
pub struct Written(std::collections::HashMap<(String, String), i64>);

const WRITTEN_LIMIT: usize = 4096;

impl Written {
    fn remember(&mut self, namespace: &str, name: &str, event: &Json) {
        if self.0.len() >= WRITTEN_LIMIT {
            self.0.clear();
        }
        let count = event.get("count").and_then(Json::as_i64).unwrap_or(1);
        self.0
            .insert((namespace.to_owned(), name.to_owned()), count);
    }
}

/// Records a `Warning` event on `object` saying that `task` failed.
pub async fn record_failure(
    cluster: &dyn Cluster,
    written: &mut Written,
    object: &Json,
    task: &str,
    message: &str,
) {
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
    let now = enka_template::time::now_rfc3339();
    let message: String = message.chars().take(1024).collect();
    let new_event = || failure_event(object, &name, &namespace, &message, &now);
    let key = (namespace.clone(), name.clone());
    let step = if written.0.contains_key(&key) {
        event::Step::Update
    } else {
        event::Step::Create
    };
    let quick = match written.0.get(&key) {
        Some(count) => {
            let patch = json!({"count": count + 1, "lastTimestamp": now, "message": message});
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
        }
        None => {
            cluster
                .create(&events, Some(&namespace), &new_event())
                .await
        }
    };
    let recorded = match quick {
        Ok(event) => Ok(event),
        // Expired or deleted since (a repeat), or written by another replica
        // or an earlier run of enka (a first): read it and count on.
        Err(err) if err.is_not_found() || err.is_conflict() => {
            event::record(
                cluster,
                &events,
                &namespace,
                &name,
                Some(&message),
                &now,
                new_event,
            )
            .await
        }
        Err(err) => Err((step, err)),
    };
    match recorded {
        Ok(event) => written.remember(&namespace, &name, &event),
        Err((step, err)) => {
            written.0.remove(&key);
            tracing::debug!("could not {} for task {task:?}: {err}", step.action());
        }
    }
}

/// A new ReconcileFailed Event for `object`.
fn failure_event(object: &Json, name: &str, namespace: &str, message: &str, now: &str) -> Json {
    let text = |p: &str| object.pointer(p).and_then(Json::as_str).unwrap_or_default();
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": text("/apiVersion"),
            "kind": text("/kind"),
            "name": text("/metadata/name"),
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
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use enka_kube::memory::MemoryCluster;

    fn failed_object() -> Arc<Json> {
        Arc::new(json!({
            "apiVersion": "enka.test/v1",
            "kind": "Sample",
            "metadata": {"name": "s1", "namespace": "ns", "uid": "u-1"}
        }))
    }

    #[tokio::test]
    async fn a_repeated_failure_raises_the_count_of_one_event() {
        let cluster = Arc::new(MemoryCluster::new());
        let recorder = Recorder::start(cluster.clone());
        let object = failed_object();
        recorder.failure(&object, "create things", "first");
        recorder.failure(&object, "create things", "second");
        recorder.failure(&object, "another task", "third");
        let mut events = Vec::new();
        for _ in 0..200 {
            events = cluster.objects("Event");
            if events
                .iter()
                .map(|e| e["count"].as_i64().unwrap_or(0))
                .sum::<i64>()
                == 3
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(events.len(), 2, "one Event per task: {events:?}");
        let repeated = events
            .iter()
            .find(|e| e["count"] == 2)
            .unwrap_or_else(|| panic!("no Event counted twice: {events:?}"));
        assert_eq!(repeated["message"], "second", "the latest message wins");
        assert_eq!(repeated["reason"], "ReconcileFailed");
        assert_eq!(repeated["involvedObject"]["uid"], "u-1");
    }

    /// Written events are counted without reading them; one written by
    /// someone else, or gone since, is read or made again.
    #[tokio::test]
    async fn counts_survive_events_written_or_deleted_elsewhere() {
        let cluster = MemoryCluster::new();
        let object = failed_object();
        let count = |cluster: &MemoryCluster| -> Vec<i64> {
            cluster
                .objects("Event")
                .iter()
                .map(|e| e["count"].as_i64().unwrap_or(0))
                .collect()
        };
        // An earlier enka wrote it twice: this one creates, meets 409, and
        // counts on from what is stored.
        let mut earlier = Written::default();
        record_failure(&cluster, &mut earlier, &object, "t", "a").await;
        record_failure(&cluster, &mut earlier, &object, "t", "b").await;
        assert_eq!(count(&cluster), vec![2]);
        let mut written = Written::default();
        record_failure(&cluster, &mut written, &object, "t", "c").await;
        assert_eq!(count(&cluster), vec![3]);
        // Deleted (expired) since: the repeat's PATCH meets 404, so it is
        // made again from one.
        let name = cluster.objects("Event")[0]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        let events = cluster.resource("v1", "Event").await.unwrap();
        cluster
            .delete(&events, Some("ns"), &name, None)
            .await
            .unwrap();
        record_failure(&cluster, &mut written, &object, "t", "d").await;
        assert_eq!(count(&cluster), vec![1]);
        record_failure(&cluster, &mut written, &object, "t", "e").await;
        assert_eq!(count(&cluster), vec![2]);
    }
}
