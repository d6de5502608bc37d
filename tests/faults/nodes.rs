//! Faults under a workload: a role that waits for its Deployment, run on a
//! control plane with simulated nodes (kwok), while its Pods and nodes fail.
//! The operator must converge: one Deployment with every replica Running on
//! a Ready node, recorded in the custom resource's status, nothing twice.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube_env::KubeEnv;
use serde_json::json;
use tokio::sync::OnceCell;

use crate::enka::Enka;
use crate::support;

const WATCHES: &str = "tests/fixtures/workload-operator/watches.yaml";
const CRD: &str = "tests/fixtures/workload-operator/config/crd/bases/workload.enka.dev_webs.yaml";
const NODES: usize = 3;
/// Pods of a failed node are evicted this long after it goes NotReady.
const EVICTION_AFTER: Duration = Duration::from_secs(5);
const LIMIT: Duration = Duration::from_secs(150);
const REPLICAS: usize = 3;

/// The control plane with nodes, started by the first scenario that needs it.
pub struct NodesEnv {
    cell: OnceCell<(KubeEnv, Client)>,
}

impl NodesEnv {
    pub const fn new() -> Self {
        NodesEnv {
            cell: OnceCell::const_new(),
        }
    }

    async fn get(&self) -> &(KubeEnv, Client) {
        self.cell
            .get_or_init(|| async {
                let options = kube_env::Options::default()
                    .nodes(NODES)
                    .pod_eviction_after(EVICTION_AFTER);
                let env = KubeEnv::start(options).await.unwrap_or_else(|e| {
                    panic!("the control plane with nodes could not start: {e}")
                });
                let client = env.client().expect("a client");
                support::install_crd(&client, CRD).await;
                (env, client)
            })
            .await
    }
}

fn web_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "workload.enka.dev",
        "v1alpha1",
        "Web",
    ))
}

fn webs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &web_resource())
}

/// The Web's Pods that are Running and not being deleted.
async fn live_pods(client: &Client, namespace: &str) -> Option<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .ok()?;
    Some(
        list.items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect(),
    )
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// Starts enka on the workload operator in a new namespace and creates a
/// Web of three replicas whose Pods must be Ready `min_ready_seconds` before
/// the Deployment is Available.
async fn start(
    ctx: &crate::Ctx,
    prefix: &str,
    min_ready_seconds: u32,
) -> (String, Client, std::sync::Arc<tokio::sync::Mutex<Enka>>) {
    let (env, client) = ctx.nodes.get().await;
    let ns = env.namespace(prefix).await.expect("a namespace");
    let vars = [("ENKA_LOG", "info,enka=debug")];
    let enka = Enka::start_with_args(env, WATCHES, &ns, &vars, &[], &format!("-{prefix}"));
    let enka = ctx.track(enka).await;
    enka.lock().await.await_ready().await;
    let mut web = DynamicObject::new("web", &web_resource());
    web.data = json!({"spec": {"size": REPLICAS, "minReadySeconds": min_ready_seconds}});
    webs(client, &ns)
        .create(&PostParams::default(), &web)
        .await
        .expect("creating the Web");
    (ns, client.clone(), enka)
}

/// Waits until the Web is Successful with every replica Running, none on
/// `avoid`, and checks that nothing was made twice.
async fn await_converged(client: &Client, ns: &str, avoid: Option<&str>) {
    let webs = webs(client, ns);
    let mut last_seen = String::from("nothing yet");
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        match converged_state(&webs, client, ns, avoid).await {
            Some(state) if state.is_empty() => break,
            Some(state) => last_seen = state,
            None => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Web did not converge within {LIMIT:?}; last seen: {last_seen}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    assert_eq!(
        deployments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap().items.len(),
        1,
        "one rollout"
    );
}

/// What keeps the Web from having converged (empty once it has); `None`
/// while the API server cannot answer.
async fn converged_state(
    webs: &Api<DynamicObject>,
    client: &Client,
    ns: &str,
    avoid: Option<&str>,
) -> Option<String> {
    let web = webs.get("web").await.ok()?;
    let status = &web.data["status"];
    let successful = status["conditions"].as_array().is_some_and(|conditions| {
        conditions
            .iter()
            .any(|c| c["type"] == "Successful" && c["status"] == "True")
    });
    let pods = live_pods(client, ns).await?;
    let recorded: Vec<String> = serde_json::from_value(status["nodes"].clone()).unwrap_or_default();
    let mut actual: Vec<String> = pods.iter().map(node_of).collect();
    actual.sort();
    actual.dedup();
    let ready = status["readyPods"].to_string().trim_matches('"') == REPLICAS.to_string();
    let avoided = avoid.is_none_or(|node| actual.iter().all(|n| n != node));
    if successful && ready && pods.len() == REPLICAS && recorded == actual && avoided {
        return Some(String::new());
    }
    Some(format!(
        "status {status}; {} live Pods on {actual:?}; avoiding {avoid:?}",
        pods.len()
    ))
}

/// A Pod is deleted while the role waits for the Deployment to be Available.
pub async fn pod_deleted_while_waiting(ctx: std::sync::Arc<crate::Ctx>) {
    let (ns, client, enka) = start(&ctx, "pod-deleted", 8).await;
    let victim = support::eventually("three Running Pods", LIMIT, || async {
        let pods = live_pods(&client, &ns).await?;
        (pods.len() == REPLICAS).then(|| pods[0].metadata.name.clone().unwrap_or_default())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deployment = deployments.get("web-web").await.expect("the Deployment");
    let available = deployment
        .status
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    assert!(
        (available as usize) < REPLICAS,
        "the Deployment was Available before the fault: the role was not waiting"
    );
    assert!(enka.lock().await.full_log().contains("Web Deployment"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("deleting a Pod");
    await_converged(&client, &ns, None).await;
    let names: Vec<String> = live_pods(&client, &ns)
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(
        !names.contains(&victim),
        "{victim} is still there: {names:?}"
    );
}

/// A node with Pods of the workload goes NotReady; its Pods are evicted and
/// rescheduled on the others, and the operator records where they run now.
pub async fn node_not_ready(ctx: std::sync::Arc<crate::Ctx>) {
    let (ns, client, _enka) = start(&ctx, "node-not-ready", 0).await;
    await_converged(&client, &ns, None).await;
    let pods = live_pods(&client, &ns).await.unwrap_or_default();
    let victim = node_of(&pods[0]);
    let (env, _) = ctx.nodes.get().await;
    env.set_node_ready(&victim, false)
        .await
        .expect("making a node NotReady");
    let result = tokio::spawn({
        let (client, ns, victim) = (client.clone(), ns.clone(), victim.clone());
        async move { await_converged(&client, &ns, Some(&victim)).await }
    })
    .await;
    // The node comes back whatever happened, for the scenarios after this.
    env.set_node_ready(&victim, true)
        .await
        .expect("making the node Ready again");
    if let Err(panic) = result {
        std::panic::resume_unwind(panic.into_panic());
    }
}
