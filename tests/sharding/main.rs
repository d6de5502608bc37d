//! enka as shards of a ControllerRing, with timebertt's sharder
//! (github.com/timebertt/kubernetes-controller-sharding, built from its Go
//! module by scripts/sharder.sh) on a real control plane: the sharder's
//! webhook assigns each custom resource to a shard, enka replicas watch only
//! theirs, a new replica takes a share through the drain handshake, and a
//! replica killed with SIGKILL loses its objects to the others, which finish
//! them. Every reconcile's start and end, from each replica's log, shows that
//! no object was ever reconciled by two replicas at once.

#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../integration/enka.rs"]
mod enka;

#[path = "../integration/runner.rs"]
mod runner;

// Also the operators bench's (it deletes its ring between runs).
#[allow(dead_code)]
mod ring;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube_env::KubeEnv;
use serde_json::json;

use enka::Enka;
use ring::{RING, Sharder};

/// Custom resources the ring shares out.
const OBJECTS: usize = 300;
const WATCHES: &str = "benches/memcached/watches.yaml";
const CRD: &str = "benches/memcached/crd.yaml";

fn main() {
    let filters = runner::filters();
    runner::main(async move {
        let env = KubeEnv::start(kube_env::Options::default().controller_manager(false))
            .await
            .unwrap_or_else(|e| panic!("the control plane could not start: {e}"));
        let env = std::sync::Arc::new(env);
        let scenarios: Vec<runner::Scenario> = vec![
            (
                "config/sharding deploys enka as three shards of a ring".to_owned(),
                Box::pin(the_component_applies(env.clone())),
            ),
            (
                "three shards share 300 objects, take a new shard's share by draining, and survive a SIGKILL".to_owned(),
                Box::pin(three_shards(env.clone())),
            ),
        ];
        runner::run(
            "sharding",
            "scenarios",
            scenarios,
            &filters,
            Duration::from_secs(600),
            || async { String::new() },
        )
        .await
    });
}

/// `config/sharding` on top of `config/default`, as its comment tells users
/// to combine them: three replicas, `--sharding-ring` instead of
/// `--leader-elect`, the pod's name as the shard's, a ControllerRing of the
/// project's kind and the sharder's RBAC for it; the API server accepts it
/// all (server-side dry run, with the sharder's CRD installed).
async fn the_component_applies(env: std::sync::Arc<KubeEnv>) {
    ring::install_crd(&env);
    let overlay = support::repo_path("target/sharding-overlay");
    std::fs::create_dir_all(&overlay).expect("the overlay's directory");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources: [../../config/default]\ncomponents: [../../config/sharding]\n",
    )
    .expect("the overlay");
    let rendered = support::kubectl(&env, &["kustomize", &overlay.display().to_string()]);
    let documents: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&rendered)
        .map(|d| serde::Deserialize::deserialize(d).expect("a rendered manifest"))
        .collect();
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the operator's Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--sharding-ring=zundoko-ansible-operator"),
        "{args:?}"
    );
    assert!(!args.contains(&"--leader-elect"), "{args:?}");
    assert!(
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["name"] == "POD_NAME"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "{container}"
    );
    let ring = documents
        .iter()
        .find(|d| d["kind"] == "ControllerRing")
        .expect("the ControllerRing");
    assert_eq!(ring["metadata"]["name"], "zundoko-ansible-operator");
    assert_eq!(ring["spec"]["resources"][0]["resource"], "hikawas");
    let controlled = &ring["spec"]["resources"][0]["controlledResources"];
    assert_eq!(controlled[0]["resource"], "zundokos", "{ring}");
    assert_eq!(controlled[1]["resource"], "kiyoshis", "{ring}");
    // The shards read the ring: the binding names the Deployment's own
    // service account (a component's names are not prefixed).
    let pod = &deployment["spec"]["template"]["spec"];
    let reader = documents
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding"
                && d["roleRef"]["name"] == "zundoko-ansible-operator-ring-reader"
        })
        .expect("the ring reader's binding");
    assert_eq!(
        reader["subjects"][0]["name"], pod["serviceAccountName"],
        "{reader}"
    );
    assert_eq!(
        reader["subjects"][0]["namespace"], deployment["metadata"]["namespace"],
        "{reader}"
    );
    // The CRDs and the namespace first: a server dry run creates neither
    // for the objects that need them.
    support::kubectl(&env, &["apply", "-k", "config/crd"]);
    support::kubectl(
        &env,
        &["create", "namespace", "zundoko-ansible-operator-system"],
    );
    support::kubectl(
        &env,
        &[
            "apply",
            "-k",
            &overlay.display().to_string(),
            "--dry-run=server",
        ],
    );
}

fn memcacheds(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cache.bench.enka.dev", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// A shard: `enka run` with `--sharding-ring`, its Lease renewed every
/// second and expiring after four, so a failover takes seconds.
fn start_shard(env: &KubeEnv, namespace: &str, name: &str) -> Enka {
    Enka::start_with_args(
        env,
        WATCHES,
        namespace,
        &[("ENKA_LOG", "info,enka::operator=debug")],
        &[
            "--sharding-ring",
            RING,
            "--shard-name",
            name,
            "--leader-election-namespace",
            namespace,
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=1s",
            "--zap-encoder=json",
            // Seconds with their fraction, to order reconciles.
            "--zap-time-encoding=epoch",
        ],
        &format!("-{name}"),
    )
}

/// Which shard each object is assigned to, by name (`None`: none yet).
async fn assignments(api: &Api<DynamicObject>) -> HashMap<String, Option<String>> {
    let label = format!("shard.alpha.sharding.timebertt.dev/{RING}");
    api.list(&ListParams::default())
        .await
        .expect("listing the ring's objects")
        .items
        .into_iter()
        .map(|object| {
            let shard = object
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(&label).cloned());
            (object.metadata.name.unwrap_or_default(), shard)
        })
        .collect()
}

/// Waits until every object is assigned to one of `shards`.
async fn all_assigned_to(api: &Api<DynamicObject>, shards: &[&str], what: &str, limit: Duration) {
    support::eventually(what, limit, || async move {
        assignments(api)
            .await
            .values()
            .all(|s| s.as_deref().is_some_and(|s| shards.contains(&s)))
            .then_some(())
    })
    .await;
}

/// How many objects show a `Successful` condition that is true.
async fn successful(api: &Api<DynamicObject>) -> usize {
    api.list(&ListParams::default())
        .await
        .expect("listing the Memcacheds")
        .items
        .iter()
        .filter(|object| {
            object.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Successful" && c["status"] == "True")
        })
        .count()
}

async fn three_shards(env: std::sync::Arc<KubeEnv>) {
    // The overlap check itself: two replicas on one object at once is found.
    let at = |shard: &str, start: f64, end: f64| Reconcile {
        shard: shard.to_owned(),
        object: "x".to_owned(),
        job: format!("{shard}{start}"),
        start,
        end: Some(end),
        ok: true,
    };
    assert_eq!(
        overlapping(&[at("a", 1.0, 2.0), at("b", 1.5, 3.0)], 9.0).len(),
        1
    );
    assert!(
        overlapping(
            &[at("a", 1.0, 2.0), at("b", 2.0, 3.0), at("a", 3.5, 4.0)],
            9.0
        )
        .is_empty()
    );
    let client = env.client().expect("a client");
    support::install_crd(&client, CRD).await;
    let namespace = env.namespace("sharding").await.expect("a namespace");
    let sharder = Sharder::start(
        &env,
        &client,
        json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}}),
    )
    .await;

    // Two shards first; the third joins while the objects are being
    // reconciled, and takes its share through the drain handshake.
    let mut shards = vec![
        ("shard-a", start_shard(&env, &namespace, "shard-a")),
        ("shard-b", start_shard(&env, &namespace, "shard-b")),
    ];
    for (_, shard) in &mut shards {
        shard.await_ready().await;
    }
    sharder.await_available(&client, 2).await;

    let api = memcacheds(&client, &namespace);
    futures::stream::iter(0..OBJECTS)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "cache.bench.enka.dev/v1alpha1",
                    "kind": "Memcached",
                    "metadata": {"name": format!("m{i:03}")},
                    "spec": {"size": 1},
                }))
                .expect("a Memcached");
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("creating a Memcached");
            }
        })
        .await;
    support::eventually(
        "a third of the objects reconciled",
        Duration::from_secs(120),
        || {
            let api = api.clone();
            async move { (successful(&api).await >= OBJECTS / 3).then_some(()) }
        },
    )
    .await;
    let mut third = start_shard(&env, &namespace, "shard-c");
    third.await_ready().await;
    shards.push(("shard-c", third));
    sharder.await_available(&client, 3).await;
    support::eventually(
        "every object reconciled and assigned to one of three shards",
        Duration::from_secs(180),
        || {
            let api = api.clone();
            async move {
                let assigned = assignments(&api).await;
                let mut per_shard: HashMap<String, usize> = HashMap::new();
                for shard in assigned.values().flatten() {
                    *per_shard.entry(shard.clone()).or_default() += 1;
                }
                (successful(&api).await == OBJECTS && per_shard.len() == 3).then_some(per_shard)
            }
        },
    )
    .await;
    // Each replica's metrics count what it holds: one
    // resource_created_at_seconds series per object assigned to it. A
    // drain can still be settling when the last object reports success, so
    // this waits for the metrics and the labels to agree, and that agreed
    // assignment is what the rest of the scenario holds the shards to.
    let before_kill = support::eventually(
        "each shard's resource_created_at_seconds series to match the objects assigned to it",
        Duration::from_secs(60),
        || {
            let api = api.clone();
            let shards = &shards;
            async move {
                let assigned = assignments(&api).await;
                for (name, shard) in shards {
                    let (_, metrics) = support::http_get(shard.metrics_port, "/metrics").await;
                    let series = metrics
                        .lines()
                        .filter(|l| l.starts_with("resource_created_at_seconds{"))
                        .count();
                    let held = assigned
                        .values()
                        .filter(|s| s.as_deref() == Some(*name))
                        .count();
                    if series != held {
                        eprintln!("sharding: {name} has {series} series for {held} objects");
                        return None;
                    }
                }
                Some(assigned)
            }
        },
    )
    .await;
    let held_by = |shard: &str| -> Vec<String> {
        let mut names: Vec<String> = before_kill
            .iter()
            .filter(|(_, s)| s.as_deref() == Some(shard))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    };
    let counts: Vec<(String, usize)> = ["shard-a", "shard-b", "shard-c"]
        .iter()
        .map(|s| ((*s).to_owned(), held_by(s).len()))
        .collect();
    eprintln!("sharding: objects per shard before the kill: {counts:?}");
    for (shard, count) in &counts {
        assert!(
            *count >= OBJECTS / 10,
            "{shard} holds {count} of {OBJECTS} objects: the ring did not share them out ({counts:?})"
        );
    }

    // SIGKILL shard-b: no release of its Lease, no last write. The sharder
    // sees the Lease expire, takes it, and moves its objects.
    let orphans = held_by("shard-b");
    let killed_at = now();
    shards[1].1.kill();
    all_assigned_to(
        &api,
        &["shard-a", "shard-c"],
        "shard-b's objects moved to the other shards",
        Duration::from_secs(120),
    )
    .await;
    // The survivors reconcile each moved object (it appears in their
    // watch) to the end.
    let survivors = [0, 2];
    support::eventually(
        "the survivors reconciled every object shard-b held",
        Duration::from_secs(120),
        || {
            let finished: Vec<Vec<Reconcile>> = survivors
                .iter()
                .map(|&i| reconciles(&shards[i].1.full_log(), shards[i].0))
                .collect();
            let all: Vec<&Reconcile> = finished.iter().flatten().collect();
            let done = orphans.iter().all(|name| {
                all.iter()
                    .any(|r| r.object == *name && r.ok && r.end.is_some_and(|end| end > killed_at))
            });
            async move { done.then_some(()) }
        },
    )
    .await;
    assert_eq!(
        successful(&api).await,
        OBJECTS,
        "every object ends Successful"
    );
    // Dependents follow their owner: the ring lists Deployments as
    // controlled, enka's owner references are controller references, so
    // each Deployment carries its Memcached's shard (moved with it after the
    // kill), and each shard watches only its own Deployments.
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        ),
    );
    support::eventually(
        "every Deployment on its Memcached's shard",
        Duration::from_secs(60),
        || {
            let (api, deployments) = (api.clone(), deployments.clone());
            async move {
                let owners = assignments(&api).await;
                let placed = assignments(&deployments).await;
                let listed = deployments.list(&ListParams::default()).await.ok()?;
                let follow = listed.items.len() == OBJECTS
                    && listed.items.iter().all(|deployment| {
                        let name = deployment.metadata.name.clone().unwrap_or_default();
                        let owner = deployment
                            .metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .find(|r| r.controller == Some(true));
                        owner.is_some_and(|owner| {
                            placed.get(&name).cloned().flatten().is_some()
                                && placed.get(&name) == owners.get(&owner.name)
                        })
                    });
                follow.then_some(())
            }
        },
    )
    .await;
    let selector = format!("\"selector\":\"shard.alpha.sharding.timebertt.dev/{RING}=shard-a\"");
    assert!(
        shards[0].1.full_log().contains(&selector),
        "shard-a does not watch its Deployments with its own selector"
    );

    // No object was ever reconciled by two replicas at once.
    let mut all: Vec<Reconcile> = Vec::new();
    for (i, (name, shard)) in shards.iter().enumerate() {
        let mut mine = reconciles(&shard.full_log(), name);
        if i == 1 {
            // What shard-b had started ended when it was killed.
            for r in &mut mine {
                r.end.get_or_insert(killed_at);
            }
        }
        all.extend(mine);
    }
    let overlaps = overlapping(&all, now());
    assert!(
        overlaps.is_empty(),
        "objects reconciled by two shards at once: {overlaps:?}"
    );
    // The third shard's share came through the drain handshake: the first
    // two let go of objects (removing both labels) before it took them.
    let drained: usize = shards
        .iter()
        .map(|(_, shard)| {
            shard
                .full_log()
                .matches("drained: the object moves")
                .count()
        })
        .sum();
    assert!(
        drained > 0,
        "no shard acknowledged a drain, though a third shard joined"
    );
    let per_replica: Vec<(&str, usize)> = shards
        .iter()
        .map(|(name, shard)| (*name, reconciles(&shard.full_log(), name).len()))
        .collect();
    eprintln!(
        "sharding: {} reconciles ({per_replica:?}), none overlapping across replicas; {drained} drains acknowledged; {} objects moved after the kill",
        all.len(),
        orphans.len()
    );
    // A graceful stop gives the shard's Lease up (an empty holder): the
    // sharder moves its objects at once, not after the Lease expires.
    assert!(
        shards[2].1.terminate(Duration::from_secs(20)).is_some(),
        "shard-c did not stop by itself on SIGTERM"
    );
    let leases: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
            "leases",
        ),
    );
    let lease = leases.get("shard-c").await.expect("shard-c's Lease");
    assert_eq!(
        lease.data["spec"]["holderIdentity"].as_str(),
        Some(""),
        "shard-c's Lease after a graceful stop: {lease:?}"
    );
    assert_eq!(
        lease
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ring::RING_LABEL))
            .map(String::as_str),
        Some(RING)
    );
    all_assigned_to(
        &api,
        &["shard-a"],
        "shard-c's objects moved to shard-a after its graceful stop",
        Duration::from_secs(30),
    )
    .await;
    shards[0].1.terminate(Duration::from_secs(20));
    drop(sharder);
}

/// One reconcile of one object by one replica, from its log.
#[derive(Debug, Clone)]
struct Reconcile {
    shard: String,
    object: String,
    job: String,
    start: f64,
    end: Option<f64>,
    ok: bool,
}

/// The reconciles in a replica's JSON log: `reconcile started` and
/// `reconcile ended` events, paired by their span's job id. A reconcile that
/// hands its object over to another shard (a drain) is done with it when it
/// sends that write (`handing the object over`): the next shard can only
/// start once the write is through.
fn reconciles(log: &str, shard: &str) -> Vec<Reconcile> {
    let mut by_job: Vec<Reconcile> = Vec::new();
    let mut handed_over: HashMap<String, f64> = HashMap::new();
    for line in log.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let msg = event["msg"].as_str().unwrap_or_default();
        if msg == "handing the object over" {
            if let Some(ts) = event["ts"].as_f64() {
                handed_over.insert(event["job"].to_string(), ts);
            }
            continue;
        }
        if msg != "reconcile started" && msg != "reconcile ended" {
            continue;
        }
        let ts = event["ts"]
            .as_f64()
            .unwrap_or_else(|| panic!("a log time that is not epoch seconds: {line}"));
        let job = event["job"].to_string();
        let object = event["name"].as_str().unwrap_or_default().to_owned();
        if msg == "reconcile started" {
            by_job.push(Reconcile {
                shard: shard.to_owned(),
                object,
                job,
                start: ts,
                end: None,
                ok: false,
            });
        } else if let Some(open) = by_job.iter_mut().rev().find(|r| r.job == job) {
            open.end = Some(handed_over.get(&job).copied().unwrap_or(ts));
            open.ok = event["ok"].as_bool().unwrap_or(false);
        }
    }
    by_job
}

/// Pairs of reconciles of one object by different replicas whose times
/// overlap (a reconcile still open counts as running until `now`).
fn overlapping(all: &[Reconcile], now: f64) -> Vec<(Reconcile, Reconcile)> {
    let mut found = Vec::new();
    let mut by_object: HashMap<&str, Vec<&Reconcile>> = HashMap::new();
    for r in all {
        by_object.entry(r.object.as_str()).or_default().push(r);
    }
    for list in by_object.values() {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if a.shard == b.shard {
                    continue;
                }
                let (a_end, b_end) = (a.end.unwrap_or(now), b.end.unwrap_or(now));
                if a.start < b_end && b.start < a_end {
                    found.push(((*a).clone(), (*b).clone()));
                }
            }
        }
    }
    found
}
