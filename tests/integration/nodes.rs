//! The control plane with simulated nodes: kube-scheduler binds Pods to kwok's
//! nodes, kwok runs them through their lifecycle, and kube-controller-manager's
//! own controllers make workloads come up as on a real cluster. One shared
//! control plane with three nodes serves every test here.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_env::KubeEnv;
use serde_json::json;

use crate::support::eventually;

const NODES: usize = kube_env::SHARED_NODES;
/// Workloads come up in seconds here; the limit is for a loaded machine.
const LIMIT: Duration = Duration::from_secs(90);

async fn env() -> &'static KubeEnv {
    KubeEnv::shared_with_nodes().await
}

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a well-formed test object")
}

fn pod_template(app: &str) -> serde_json::Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": app, "image": "registry.invalid/app:1", "ports": [{"containerPort": 8080}]}]}
    })
}

/// A new namespace with a Deployment `app` of `replicas` Pods labelled
/// `app=<app>`.
async fn namespace_with_deployment(
    prefix: &str,
    app: &str,
    replicas: i32,
) -> (kube::Client, String) {
    let env = env().await;
    let client = env.client().unwrap();
    let ns = env.namespace(prefix).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deployment = from_json(json!({
        "metadata": {"name": app},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}}, "template": pod_template(app)}
    }));
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    (client, ns)
}

#[tokio::test]
async fn simulated_nodes_are_ready_and_schedulable() {
    let env = env().await;
    let nodes: Api<Node> = Api::all(env.client().unwrap());
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), NODES);
    for node in &list.items {
        assert!(
            kube_env::nodes::is_ready(node),
            "{:?} is not Ready",
            node.metadata.name
        );
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .unwrap();
        assert_eq!(allocatable["pods"].0, "110");
    }
    assert_eq!(env.node_names().len(), NODES);
}

#[tokio::test]
async fn a_deployment_becomes_available_and_a_deleted_pod_is_replaced() {
    let (client, ns) = namespace_with_deployment("nodes-deploy", "web", 3).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let available = |deployments: Api<Deployment>| async move {
        let d = deployments.get("web").await.ok()?;
        let status = d.status?;
        let available = status
            .conditions?
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True");
        (available && status.available_replicas == Some(3)).then_some(())
    };
    eventually("Deployment web Available with 3 replicas", LIMIT, || {
        available(deployments.clone())
    })
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let listed = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    let victim = listed.items[0].metadata.name.clone().unwrap();
    for pod in &listed.items {
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(
            status
                .pod_ip
                .as_deref()
                .is_some_and(|ip| ip.starts_with("10.244.")),
            "{status:?}"
        );
        assert!(
            pod.spec
                .as_ref()
                .unwrap()
                .node_name
                .as_deref()
                .is_some_and(|n| n.starts_with("kwok-node-"))
        );
    }
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the deleted Pod gone and replaced, 3 Ready again",
        LIMIT,
        || {
            let pods = pods.clone();
            let victim = victim.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app=web"))
                    .await
                    .ok()?;
                let gone = list
                    .items
                    .iter()
                    .all(|p| p.metadata.name.as_deref() != Some(&victim));
                let running = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count();
                (gone && running == 3).then_some(())
            }
        },
    )
    .await;
    eventually("Deployment web Available again", LIMIT, || {
        available(deployments.clone())
    })
    .await;
}

#[tokio::test]
async fn a_statefulset_gets_its_claims_bound_and_its_pods_ready() {
    let env = env().await;
    let client = env.client().unwrap();
    let ns = env.namespace("nodes-sts").await.unwrap();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let set = from_json(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": pod_template("db"),
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }));
    sets.create(&PostParams::default(), &set).await.unwrap();
    eventually("StatefulSet db with 2 ready replicas", LIMIT, || {
        let sets = sets.clone();
        async move {
            let status = sets.get("db").await.ok()?.status?;
            (status.ready_replicas == Some(2) && status.available_replicas == Some(2)).then_some(())
        }
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, &ns);
    for name in ["data-db-0", "data-db-1"] {
        let claim = claims.get(name).await.unwrap();
        assert_eq!(
            claim.spec.as_ref().unwrap().storage_class_name.as_deref(),
            Some(kube_env::nodes::STORAGE_CLASS)
        );
        assert_eq!(
            claim.status.as_ref().unwrap().phase.as_deref(),
            Some("Bound"),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_service_gets_ready_endpoints() {
    let (client, ns) = namespace_with_deployment("nodes-svc", "api", 2).await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service = from_json(json!({
        "metadata": {"name": "api"},
        "spec": {"selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }));
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(client, &ns);
    let addresses = eventually("Service api with 2 ready endpoints", LIMIT, || {
        let slices = slices.clone();
        async move {
            let list = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=api"))
                .await
                .ok()?;
            let ready: Vec<String> = list
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter().flatten())
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .flat_map(|e| e.addresses.clone())
                .collect();
            (ready.len() == 2).then_some(ready)
        }
    })
    .await;
    assert!(
        addresses.iter().all(|a| a.starts_with("10.244.")),
        "{addresses:?}"
    );
}

#[tokio::test]
async fn a_job_completes() {
    let env = env().await;
    let client = env.client().unwrap();
    let ns = env.namespace("nodes-job").await.unwrap();
    let jobs: Api<Job> = Api::namespaced(client, &ns);
    let mut template = pod_template("migrate");
    template["spec"]["restartPolicy"] = json!("Never");
    let job = from_json(json!({
        "metadata": {"name": "migrate"},
        "spec": {"backoffLimit": 0, "template": template}
    }));
    jobs.create(&PostParams::default(), &job).await.unwrap();
    eventually("Job migrate Complete", LIMIT, || {
        let jobs = jobs.clone();
        async move {
            let status = jobs.get("migrate").await.ok()?.status?;
            let complete = status
                .conditions?
                .iter()
                .any(|c| c.type_ == "Complete" && c.status == "True");
            (complete && status.succeeded == Some(1)).then_some(())
        }
    })
    .await;
}

/// kwok's nodes have no kubelet to run a command in: exec into their Pods
/// is refused by the API server, which enka reports as that failure (as the
/// Python client raises it), never as a command that exited with 1.
#[tokio::test]
async fn exec_into_a_simulated_pod_is_the_api_servers_failure() {
    use enka::kube::client::KubeCluster;
    use enka::kube::{Cluster, Error};
    let (client, ns) = namespace_with_deployment("nodes-exec", "exec", 1).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = eventually("a Running Pod of exec", LIMIT, || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("app=exec"))
                .await
                .ok()?;
            list.items
                .into_iter()
                .find(|p| {
                    p.status
                        .as_ref()
                        .is_some_and(|s| s.phase.as_deref() == Some("Running"))
                })?
                .metadata
                .name
        }
    })
    .await;
    let cluster = KubeCluster::new(client, "nodes-test");
    let command = vec!["true".to_owned()];
    match cluster.exec(&ns, &pod, None, &command).await {
        Err(Error::Api { code, message, .. }) => {
            assert_eq!(code, 500, "{message}");
            assert!(
                message.contains(":10250"),
                "not the kubelet port: {message}"
            );
        }
        other => panic!("exec into a simulated Pod: {other:?}"),
    }
}
