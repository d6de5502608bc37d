//! The floor: the API calls the memcached role needs before its Deployment
//! exists, made by a hand-written controller with no engine at all. On a
//! watch event for a new Memcached it writes the `Running` status, reads the
//! Deployment (absent), creates it, then writes `Successful`, which is what an
//! operator with `manageStatus: true` must do.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

use crate::scenarios::RequestTimes;
use crate::workload::memcached_resource;

type Times = Arc<Mutex<RequestTimes>>;

/// Runs the bare controller on `namespace` until the task is aborted;
/// returns once its watch has listed, so no sample pays for its start,
/// with the times of the requests its reconciles make.
pub async fn spawn(client: Client, namespace: String) -> (tokio::task::JoinHandle<()>, Times) {
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
    let times = Times::default();
    let recorded = times.clone();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed_tx);
        let memcacheds: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &memcached_resource());
        let deployments: Api<Deployment> = Api::namespaced(client, &namespace);
        let mut events = watcher::watcher(memcacheds.clone(), watcher::Config::default()).boxed();
        while let Ok(Some(event)) = events.try_next().await {
            if matches!(event, Event::InitDone)
                && let Some(listed) = listed.take()
            {
                let _ = listed.send(());
            }
            let (Event::Apply(object) | Event::InitApply(object)) = event else {
                continue;
            };
            if object.data.get("status").is_some() {
                continue;
            }
            if let Err(e) = reconcile(&memcacheds, &deployments, object, &recorded).await {
                eprintln!("bench: bare controller: {e}");
            }
        }
    });
    tokio::time::timeout(std::time::Duration::from_secs(30), listed_rx)
        .await
        .expect("the bare controller lists within 30 s")
        .expect("the bare controller is running");
    (task, times)
}

/// Awaits `request`, adding its time to `times` under `verb`.
async fn timed<T>(times: &Times, verb: &str, request: impl Future<Output = T>) -> T {
    let sent = Instant::now();
    let answer = request.await;
    times
        .lock()
        .expect("bare request times")
        .add(verb, sent.elapsed());
    answer
}

fn condition(kind: &str, reason: &str) -> serde_json::Value {
    json!({"type": kind, "status": "True", "reason": reason,
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

async fn reconcile(
    memcacheds: &Api<DynamicObject>,
    deployments: &Api<Deployment>,
    mut object: DynamicObject,
    times: &Times,
) -> kube::Result<()> {
    let name = object.metadata.name.clone().unwrap_or_default();
    object.data["status"] = json!({"conditions": [condition("Running", "Running")]});
    let mut object = timed(
        times,
        "PUT",
        memcacheds.replace_status(&name, &PostParams::default(), &object),
    )
    .await?;
    let deployment_name = format!("{name}-memcached");
    if timed(times, "GET", deployments.get_opt(&deployment_name))
        .await?
        .is_none()
    {
        let labels = json!({"app.kubernetes.io/name": "memcached",
                            "app.kubernetes.io/instance": name});
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": deployment_name, "labels": labels},
            "spec": {
                "replicas": object.data["spec"]["size"],
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{
                        "name": "memcached",
                        "image": "docker.io/library/memcached:1.6-alpine",
                        "command": ["memcached", "-m=64", "-o", "modern", "-v"],
                        "ports": [{"containerPort": 11211, "name": "memcached"}]
                    }]}
                }
            }
        }))
        .map_err(kube::Error::SerdeError)?;
        timed(
            times,
            "POST",
            deployments.create(&PostParams::default(), &deployment),
        )
        .await?;
    }
    object.data["status"] = json!({"conditions": [condition("Successful", "Successful")]});
    timed(
        times,
        "PUT",
        memcacheds.replace_status(&name, &PostParams::default(), &object),
    )
    .await?;
    Ok(())
}
