//! Proof that the test control plane is the real thing: upstream version,
//! CRD validation by the real OpenAPI schema, and garbage collection by the
//! real kube-controller-manager.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube_env::{KubeEnv, Options};
use serde_json::json;

use crate::support::{eventually, expect_api_error, install_crd};

const HIKAWA_CRD: &str = "config/crd/bases/zundokokiyoshi.kaitoy.github.com_hikawas.yaml";

fn hikawa_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("zundokokiyoshi.kaitoy.github.com", "v1beta2", "Hikawa");
    ApiResource::from_gvk_with_plural(&gvk, "hikawas")
}

fn hikawa(name: &str, spec: serde_json::Value) -> DynamicObject {
    let mut object = DynamicObject::new(name, &hikawa_resource());
    object.data = json!({ "spec": spec });
    object
}

#[tokio::test]
async fn reports_the_upstream_version() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    let info = client.apiserver_version().await.unwrap();
    assert_eq!(info.git_version, "v1.36.4", "built with version ldflags");
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "36"));
}

#[tokio::test]
async fn hikawa_crd_validates_like_the_seed_expects() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    let crd = install_crd(&client, HIKAWA_CRD).await;
    assert_eq!(crd.spec.versions[0].name, "v1beta2");

    let ns = env.namespace("crd").await.unwrap();
    let hikawas: Api<DynamicObject> = Api::namespaced_with(client, &ns, &hikawa_resource());

    let created = hikawas
        .create(
            &PostParams::default(),
            &hikawa("hikawa", json!({"intervalMillis": 500, "numZundokos": "3"})),
        )
        .await
        .unwrap();
    let read = hikawas.get("hikawa").await.unwrap();
    assert_eq!(read.metadata.uid, created.metadata.uid);
    assert_eq!(read.types.as_ref().unwrap().kind, "Hikawa");
    assert_eq!(read.data["spec"]["numZundokos"], json!("3"));
    assert_eq!(read.data["spec"]["intervalMillis"], json!(500));

    // The seed made numZundokos a string because Jinja renders text; the
    // server must refuse the integer form and anything but digits.
    let as_integer = hikawas
        .create(
            &PostParams::default(),
            &hikawa(
                "as-integer",
                json!({"intervalMillis": 500, "numZundokos": 3}),
            ),
        )
        .await;
    let status = expect_api_error(as_integer, "numZundokos: 3");
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.numZundokos")
            && status.message.contains("must be of type string"),
        "{}",
        status.message
    );

    let not_digits = hikawas
        .create(
            &PostParams::default(),
            &hikawa(
                "not-digits",
                json!({"intervalMillis": 500, "numZundokos": "x"}),
            ),
        )
        .await;
    let status = expect_api_error(not_digits, "numZundokos: \"x\"");
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.numZundokos")
            && status.message.contains(r"should match '^\d+$'"),
        "{}",
        status.message
    );

    let missing_required = hikawas
        .create(
            &PostParams::default(),
            &hikawa("no-interval", json!({"numZundokos": "1"})),
        )
        .await;
    let status = expect_api_error(missing_required, "missing intervalMillis");
    assert!(
        status
            .message
            .contains("spec.intervalMillis: Required value"),
        "{}",
        status.message
    );

    env.delete_namespace(&ns).await.unwrap();
}

#[tokio::test]
async fn garbage_collector_deletes_dependents_of_a_deleted_owner() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    let ns = env.namespace("gc").await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &ns);

    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("owner".into());
    let owner = config_maps
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();

    let mut dependent = ConfigMap::default();
    dependent.metadata.name = Some("dependent".into());
    dependent.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.clone().unwrap(),
        ..OwnerReference::default()
    }]);
    config_maps
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();

    config_maps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the garbage collector to delete the dependent",
        Duration::from_secs(60),
        || {
            let config_maps = config_maps.clone();
            async move {
                config_maps
                    .get_opt("dependent")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;

    env.delete_namespace(&ns).await.unwrap();
}

#[tokio::test]
async fn namespace_controller_finishes_deleting_a_namespace() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    let ns = env.namespace("nsdel").await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("content".into());
    config_maps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    env.delete_namespace(&ns).await.unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    eventually("the namespace to be gone", Duration::from_secs(60), || {
        let namespaces = namespaces.clone();
        let ns = ns.clone();
        async move {
            namespaces
                .get_opt(&ns)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
}

fn process_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[tokio::test]
async fn a_private_control_plane_is_torn_down_on_drop_even_after_a_panic() {
    let env = KubeEnv::start(Options::default().controller_manager(false))
        .await
        .unwrap();
    let pids = env.pids();
    let dir = env.dir().to_owned();
    assert_eq!(pids.len(), 2, "etcd and kube-apiserver");
    assert!(pids.iter().all(|&p| process_alive(p)));

    // A panicking test unwinds through the value; Drop must still clean up.
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _env = env;
        panic!("a test failed while holding the control plane");
    }));
    assert!(unwound.is_err());
    for pid in pids {
        assert!(!process_alive(pid), "process {pid} survived the drop");
    }
    assert!(!dir.exists(), "{} was not removed", dir.display());
}
