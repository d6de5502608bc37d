//! Simulated nodes: kube-scheduler binds Pods to Node objects that kwok
//! (sigs.k8s.io/kwok) keeps Ready, and kwok moves each bound Pod through its
//! lifecycle by the Stage documents its module ships: Running and Ready at
//! once, Succeeded for a Job's Pods, gone when deleted. No container runs.
//! kube-controller-manager runs its default controllers, so Deployments,
//! StatefulSets, Jobs and Services behave as on a real cluster, and its
//! host-path provisioner binds claims of the default StorageClass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::Error;

/// Environment variable naming a directory with a prebuilt `kwok` and its
/// `stages/` (what `scripts/kwok.sh` prints), which skips the build script.
pub const KWOK_DIR_ENV: &str = "ENKA_KWOK_DIR";

/// The annotation kwok is told to manage nodes by (kwokctl uses the same).
const MANAGED_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// The label kwok's node-not-ready chaos stage acts on.
const NOT_READY_LABEL: &str = "node-not-ready.stage.kwok.x-k8s.io";

/// The default StorageClass, served by kube-controller-manager's host-path
/// provisioner.
pub const STORAGE_CLASS: &str = "standard";

/// What each simulated node offers: enough for a whole operator's
/// application (databases, web and task Pods, migration Jobs) on a few nodes.
const NODE_CPU: &str = "32";
const NODE_MEMORY: &str = "256Gi";
const NODE_PODS: &str = "110";

/// kwok's node lease, as kwokctl's default cluster sets it.
const NODE_LEASE_SECONDS: u32 = 40;

/// The name of simulated node `index`.
pub fn node_name(index: usize) -> String {
    format!("kwok-node-{index}")
}

/// The kwok binary and the Stage documents it runs with.
#[derive(Debug, Clone)]
pub struct Kwok {
    dir: PathBuf,
}

impl Kwok {
    /// `$ENKA_KWOK_DIR` if set, otherwise whatever `scripts/kwok.sh` prints
    /// (building kwok from its Go module on a cold cache).
    pub fn locate() -> Result<Self, Error> {
        let kwok = match std::env::var_os(KWOK_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Kwok {
                dir: PathBuf::from(dir),
            },
            _ => Kwok {
                dir: crate::binaries::run_build_script(&build_script())?,
            },
        };
        for path in [kwok.binary(), kwok.dir.join("stages")] {
            if !path.exists() {
                return Err(Error::MissingBinary { path });
            }
        }
        Ok(kwok)
    }

    /// The `kwok` controller binary.
    pub fn binary(&self) -> PathBuf {
        self.dir.join("kwok")
    }

    /// Writes kwok's configuration: every Stage document of `stages/` in one
    /// multi-document file, as `kwok --config` reads it.
    pub fn write_config(&self, path: &Path) -> Result<(), Error> {
        let stages = self.dir.join("stages");
        let mut names: Vec<PathBuf> = std::fs::read_dir(&stages)
            .map_err(crate::io_error(format!("read {}", stages.display())))?
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
            .collect();
        names.sort();
        let mut config = String::new();
        for name in &names {
            let text = std::fs::read_to_string(name)
                .map_err(crate::io_error(format!("read {}", name.display())))?;
            config.push_str("---\n");
            config.push_str(&text);
        }
        std::fs::write(path, config).map_err(crate::io_error("write kwok's configuration"))
    }
}

/// `scripts/kwok.sh`, found relative to this crate.
fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kwok.sh")
}

pub(crate) fn scheduler_args(kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
    ]
}

pub(crate) fn kwok_args(kubeconfig: &Path, config: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--config={}", config.display()),
        "--manage-all-nodes=false".into(),
        format!(
            "--manage-nodes-with-annotation-selector={}={}",
            MANAGED_ANNOTATION.0, MANAGED_ANNOTATION.1
        ),
        // Pod IPs outside the Service range (10.0.0.0/24), so endpoints and
        // cluster IPs never collide.
        "--cidr=10.244.0.0/16".into(),
        "--node-ip=127.0.0.1".into(),
        format!("--node-lease-duration-seconds={NODE_LEASE_SECONDS}"),
    ]
}

/// kube-controller-manager's flags with nodes: every default controller (the
/// workload, endpoint, volume, node-lifecycle and eviction ones), claims
/// provisioned on the host path, and kwokctl's node monitor periods.
pub(crate) fn controller_manager_args(kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--controllers=*".into(),
        "--enable-hostpath-provisioner=true".into(),
        "--node-monitor-period=5s".into(),
        "--node-monitor-grace-period=40s".into(),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
    ]
}

/// The API server's flags with nodes: how long Pods stay bound to a node
/// that is not ready or unreachable before they are evicted.
pub(crate) fn apiserver_args(eviction_after: Duration) -> Vec<String> {
    let seconds = eviction_after.as_secs();
    vec![
        format!("--default-not-ready-toleration-seconds={seconds}"),
        format!("--default-unreachable-toleration-seconds={seconds}"),
    ]
}

fn node_object(name: &str) -> Result<Node, Error> {
    let resources = json!({"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS});
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {MANAGED_ANNOTATION.0: MANAGED_ANNOTATION.1},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": {"allocatable": resources, "capacity": resources},
    }))
    .map_err(|e| Error::Spawn {
        name: "node definition",
        reason: e.to_string(),
    })
}

/// Creates `count` simulated nodes and the default StorageClass.
pub(crate) async fn create(client: &Client, count: usize) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    for index in 0..count {
        let node = node_object(&node_name(index))?;
        if let Err(e) = nodes.create(&post_params(), &node).await
            && !is_conflict(&e)
        {
            return Err(api_error("create a simulated node", e));
        }
    }
    let class: k8s_openapi::api::storage::v1::StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/host-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }))
    .map_err(|e| Error::Spawn {
        name: "storage class definition",
        reason: e.to_string(),
    })?;
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(client.clone());
    if let Err(e) = classes.create(&post_params(), &class).await
        && !is_conflict(&e)
    {
        return Err(api_error("create the default StorageClass", e));
    }
    Ok(())
}

/// Whether every simulated node is Ready; else the first that is not.
pub(crate) async fn all_ready(client: &Client, count: usize) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in (0..count).map(node_name) {
        let node = nodes.get(&name).await.map_err(|e| e.to_string())?;
        if !is_ready(&node) {
            return Err(format!("{name} is not Ready yet"));
        }
    }
    Ok(())
}

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Makes kwok report the node NotReady (its node-not-ready chaos stage), or
/// Ready again: what a kubelet that stops answering looks like to the
/// control plane. The node-lifecycle controller then taints it, and its
/// Pods are evicted after the API server's toleration seconds.
pub async fn set_ready(client: &Client, name: &str, ready: bool) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let value = if ready {
        serde_json::Value::Null
    } else {
        json!("true")
    };
    let patch = json!({"metadata": {"labels": {NOT_READY_LABEL: value}}});
    nodes
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// The field manager of what kube-env itself writes, so that tools reading
/// managedFields (the differential harness) can tell it from an operator's.
pub const FIELD_MANAGER: &str = "kube-env";

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn api_error(what: &'static str, error: kube::Error) -> Error {
    Error::Spawn {
        name: what,
        reason: error.to_string(),
    }
}
