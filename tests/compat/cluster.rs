//! What the scenarios share: the control plane, the two operators under test
//! and small readers of what they made.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube_env::KubeEnv;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::enka::Enka;
use crate::support::{eventually, kubectl, repo_path};

/// How long an outcome may take: upstream's molecule tasks wait up to 300 s
/// for a Successful condition; enka needs well under a second, so a minute
/// only rules out a hang.
pub const LIMIT: Duration = Duration::from_secs(60);

pub const MEMCACHED_PROJECT: &str = "tests/compat/memcached-operator";
pub const ADVANCED_PROJECT: &str = "tests/compat/advanced-operator";
/// The memcached operator watches one namespace, as upstream's molecule run
/// does (`TEST_OPERATOR_NAMESPACE`); the advanced one the whole cluster.
pub const MEMCACHED_NAMESPACE: &str = "compat-memcached";
pub const ADVANCED_NAMESPACE: &str = "compat-advanced";

/// Everything a scenario can reach.
pub struct Ctx {
    pub env: KubeEnv,
    pub client: Client,
    /// Behind a lock: one scenario restarts it.
    pub memcached: Mutex<Enka>,
    pub advanced: Enka,
}

impl Ctx {
    /// Starts a control plane with kube-controller-manager (garbage
    /// collection is part of what the finalizer scenarios check), installs
    /// both operators' CRDs and starts both operators.
    pub async fn start() -> Arc<Ctx> {
        let env = KubeEnv::start(kube_env::Options::default())
            .await
            .unwrap_or_else(|e| panic!("the compat control plane could not start: {e}"));
        let client = env.client().expect("a client for the control plane");
        for project in [MEMCACHED_PROJECT, ADVANCED_PROJECT] {
            apply_crds(&env, &repo_path(project).join("config/crd/bases"));
        }
        for namespace in [
            MEMCACHED_NAMESPACE,
            ADVANCED_NAMESPACE,
            &format!("{ADVANCED_NAMESPACE}-notes"),
        ] {
            create_namespace(&client, namespace).await;
        }
        let mut memcached = start_memcached(&env);
        let mut advanced = Enka::start_with_args(
            &env,
            &format!("{ADVANCED_PROJECT}/watches.yaml"),
            "",
            &[(
                "ANSIBLE_COLLECTIONS_PATH",
                &repo_path(ADVANCED_PROJECT)
                    .join("collections")
                    .display()
                    .to_string(),
            )],
            &[],
            "compat-advanced",
        );
        memcached.await_ready().await;
        advanced.await_ready().await;
        Arc::new(Ctx {
            env,
            client,
            memcached: Mutex::new(memcached),
            advanced,
        })
    }

    /// The custom resources of `kind` in `namespace`.
    pub fn custom(&self, group: &str, kind: &str, namespace: &str) -> Api<DynamicObject> {
        let plural = format!("{}s", kind.to_lowercase());
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, "v1alpha1", kind),
            &plural,
        );
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    pub fn config_maps(&self, namespace: &str) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Both operators' logs, for a failure message.
    pub async fn logs(&self) -> String {
        format!(
            "--- memcached operator ---\n{}\n--- advanced operator ---\n{}",
            self.memcached.lock().await.log(),
            self.advanced.log()
        )
    }
}

/// The memcached operator, on its namespace.
pub fn start_memcached(env: &KubeEnv) -> Enka {
    Enka::start_with_args(
        env,
        &format!("{MEMCACHED_PROJECT}/watches.yaml"),
        MEMCACHED_NAMESPACE,
        &[],
        &[],
        "-compat",
    )
}

/// `kubectl apply -f dir` with the kubectl built from Go modules, then waits
/// until every CRD is Established.
pub fn apply_crds(env: &KubeEnv, dir: &Path) {
    let dir = dir.display().to_string();
    kubectl(env, &["apply", "-f", &dir]);
    kubectl(
        env,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &dir,
        ],
    );
}

pub async fn create_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a Namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

/// Creates a custom resource from its JSON.
pub async fn create(api: &Api<DynamicObject>, object: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(object).expect("a custom resource");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {:?}: {e}", object.metadata.name))
}

pub async fn delete(api: &Api<DynamicObject>, name: &str) {
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
}

/// Merge-patches `patch` into an object.
pub async fn merge<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching {name}: {e}"));
}

/// The status condition `type` of an object, if it has one.
pub fn condition(object: &DynamicObject, kind: &str) -> Option<Value> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// Waits for the condition `type` to have `status`; the object then.
pub async fn await_condition(
    api: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    status: &str,
) -> DynamicObject {
    eventually(&format!("{name}: {kind}={status}"), LIMIT, || async {
        let object = api.get_opt(name).await.ok()??;
        (condition(&object, kind)?["status"] == status).then_some(object)
    })
    .await
}

/// Waits until `name` exists; the object then.
pub async fn await_object<K>(api: &Api<K>, name: &str) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} to exist"), LIMIT, || async {
        api.get_opt(name).await.ok()?
    })
    .await
}

/// Waits until `name` is gone.
pub async fn await_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} to be gone"), LIMIT, || async {
        matches!(api.get_opt(name).await, Ok(None)).then_some(())
    })
    .await
}

/// Deletes `name` and waits until the operator has made it again. A new uid
/// shows it: the operator can be quicker than any poll for "gone".
pub async fn delete_and_await_remade<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let before = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading {name}: {e}"))
        .meta()
        .uid
        .clone();
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    eventually(&format!("{name} made again"), LIMIT, || async {
        let again = api.get_opt(name).await.ok()??;
        (again.meta().uid != before).then_some(())
    })
    .await;
}

/// A ConfigMap's data value.
pub fn data<'a>(config_map: &'a ConfigMap, key: &str) -> Option<&'a str> {
    config_map.data.as_ref()?.get(key).map(String::as_str)
}
