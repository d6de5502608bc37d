//! The memcached workload: Memcached custom resources, each of which the role
//! turns into a Deployment, and an observer that timestamps when each
//! Deployment appears and when each resource first reports `Successful`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::Notify;

pub const GROUP: &str = "cache.bench.enka.dev";
pub const CRD: &str = "benches/memcached/crd.yaml";
pub const WATCHES: &str = "benches/memcached/watches.yaml";
/// Label the role puts on each Deployment, naming its Memcached.
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

pub fn memcached_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1alpha1", "Memcached"),
        "memcacheds",
    )
}

pub async fn create_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a namespace object");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

#[derive(Default)]
struct Seen {
    deployment: HashMap<String, Instant>,
    successful: HashMap<String, Instant>,
    /// When each Deployment was first `Available` (only where nodes run Pods).
    available: HashMap<String, Instant>,
}

/// What [`Observer::await_all`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// Each Memcached's Deployment exists.
    Deployment,
    /// That, and each Memcached reports `Successful`.
    Successful,
    /// Each Deployment is `Available` (a control plane with nodes).
    Available,
}

#[derive(Default)]
struct Shared {
    seen: Mutex<Seen>,
    changed: Notify,
}

impl Shared {
    fn record(&self, field: impl FnOnce(&mut Seen) -> &mut HashMap<String, Instant>, name: String) {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        field(&mut seen).entry(name).or_insert(now);
        drop(seen);
        self.changed.notify_waiters();
    }
}

/// Watches one namespace's Deployments and Memcacheds.
pub struct Observer {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Observer {
    /// Starts watching `namespace` and returns once both initial lists are in.
    pub async fn start(client: &Client, namespace: &str) -> Observer {
        let shared = Arc::new(Shared::default());
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let memcacheds: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &memcached_resource());
        let (listed_tx, mut listed_rx) = tokio::sync::mpsc::channel::<()>(2);

        let observer = shared.clone();
        let tx = listed_tx.clone();
        let deployment_task = tokio::spawn(async move {
            let mut events = watcher::watcher(deployments, watcher::Config::default()).boxed();
            while let Ok(Some(event)) = events.try_next().await {
                match event {
                    Event::InitDone => {
                        let _ = tx.send(()).await;
                    }
                    Event::Apply(d) | Event::InitApply(d) => {
                        let owner = d
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(INSTANCE_LABEL))
                            .cloned();
                        if let Some(owner) = owner {
                            if is_available(&d) {
                                observer.record(|seen| &mut seen.available, owner.clone());
                            }
                            observer.record(|seen| &mut seen.deployment, owner);
                        }
                    }
                    _ => {}
                }
            }
        });
        let observer = shared.clone();
        let memcached_task = tokio::spawn(async move {
            let mut events = watcher::watcher(memcacheds, watcher::Config::default()).boxed();
            while let Ok(Some(event)) = events.try_next().await {
                match event {
                    Event::InitDone => {
                        let _ = listed_tx.send(()).await;
                    }
                    Event::Apply(m) | Event::InitApply(m) if is_successful(&m) => {
                        let name = m.metadata.name.clone().unwrap_or_default();
                        observer.record(|seen| &mut seen.successful, name);
                    }
                    _ => {}
                }
            }
        });
        for _ in 0..2 {
            tokio::time::timeout(Duration::from_secs(30), listed_rx.recv())
                .await
                .expect("the observer's watches list within 30 s");
        }
        Observer {
            shared,
            tasks: vec![deployment_task, memcached_task],
        }
    }

    /// Waits until every name is where `until` says; when the last one got
    /// there.
    pub async fn await_all(&self, names: &[String], until: Until, limit: Duration) -> Instant {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.shared.changed.notified();
            {
                let seen = self.shared.seen.lock().unwrap_or_else(|e| e.into_inner());
                let mut last = None::<Instant>;
                let mut missing = 0;
                for name in names {
                    let deployment = seen.deployment.get(name);
                    let done = match until {
                        Until::Deployment => deployment.copied(),
                        Until::Successful => seen
                            .successful
                            .get(name)
                            .zip(deployment)
                            .map(|(a, b)| *a.max(b)),
                        Until::Available => seen.available.get(name).copied(),
                    };
                    match done {
                        Some(at) => last = Some(last.map_or(at, |l| l.max(at))),
                        None => missing += 1,
                    }
                }
                if missing == 0 {
                    return last.unwrap_or_else(Instant::now);
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{missing} of {} Memcacheds not done after {limit:?}",
                    names.len()
                );
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }
}

fn is_available(deployment: &Deployment) -> bool {
    deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Available" && c.status == "True")
}

pub fn is_successful(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Successful" && c["status"] == "True")
}

/// Creates the Memcached `name` of `size` replicas.
pub async fn create_memcached(api: &Api<DynamicObject>, name: &str, size: u32) {
    let mut object = DynamicObject::new(name, &memcached_resource());
    object.data = json!({"spec": {"size": size}});
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating Memcached {name}: {e}"));
}

/// Creates `names` with up to `parallel` requests in flight.
pub async fn create_many(api: &Api<DynamicObject>, names: &[String], parallel: usize) {
    futures::stream::iter(names)
        .for_each_concurrent(parallel, |name| create_memcached(api, name, 1))
        .await;
}

/// Percentile `p` (0..=100) of `samples`, by nearest rank.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
