//! The operator runtime on a small custom resource: status conditions, live
//! role reload, and a rejected broken edit.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_env::KubeEnv;
use serde_json::{Value as Json, json};

use crate::support::{eventually, install_crd};
use crate::zundoko::Enka;

const ROLE_V1: &str = "- name: write the output\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: '{{ ansible_operator_meta.name }}-out'\n        namespace: '{{ ansible_operator_meta.namespace }}'\n      data:\n        version: \"VERSION\"\n        size: '{{ size | string }}'\n";

fn sample_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("enka.test", "v1", "Sample"),
        "samples",
    )
}

fn condition(object: &DynamicObject, kind: &str) -> Option<Json> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// A throwaway project directory.
struct Project {
    dir: std::path::PathBuf,
}

impl Project {
    fn new(name: &str) -> Self {
        Self::with_watches(
            name,
            "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n  reconcilePeriod: 0s\n",
        )
    }

    fn with_watches(name: &str, watches: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("enka-project-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("roles/sample/tasks")).unwrap();
        std::fs::write(dir.join("watches.yaml"), watches).unwrap();
        Project { dir }
    }

    fn write_role(&self, text: &str) {
        std::fs::write(self.dir.join("roles/sample/tasks/main.yml"), text).unwrap();
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn conditions_live_reload_and_a_rejected_edit() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/fixtures/crds/enka.test_samples.yaml").await;
    let ns = env.namespace("runtime").await.unwrap();
    let project = Project::new("reload");
    project.write_role(&ROLE_V1.replace("VERSION", "1"));
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);

    let samples: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &sample_resource());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut sample = DynamicObject::new("s1", &sample_resource());
    sample.data = json!({"spec": {"size": 3}});
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();

    let version = |want: &'static str| {
        let config_maps = config_maps.clone();
        move || {
            let config_maps = config_maps.clone();
            async move {
                let cm = config_maps.get_opt("s1-out").await.unwrap()?;
                (cm.data?.get("version")?.as_str() == want).then_some(())
            }
        }
    };
    eventually(
        "the first version of the role to run",
        Duration::from_secs(30),
        version("1"),
    )
    .await;
    let cm = config_maps.get("s1-out").await.unwrap();
    assert_eq!(cm.data.unwrap()["size"], "3");
    assert_eq!(cm.metadata.owner_references.unwrap()[0].kind, "Sample");

    // manageStatus (the default): Successful after a clean run.
    let done = eventually("Successful=True", Duration::from_secs(30), || {
        let samples = samples.clone();
        async move {
            let s = samples.get("s1").await.unwrap();
            (condition(&s, "Successful")?["status"] == "True").then_some(s)
        }
    })
    .await;
    let running = condition(&done, "Running").unwrap();
    assert_eq!(
        (running["status"].as_str(), running["reason"].as_str()),
        (Some("True"), Some("Successful"))
    );
    assert_eq!(running["message"], "Awaiting next reconciliation");
    assert!(running["ansibleResult"]["changed"].as_i64().unwrap() >= 1);
    assert_eq!(condition(&done, "Failure").unwrap()["status"], "False");

    // Metrics and health endpoints.
    let (status, _) = crate::zundoko::http_get(enka.health_port, "/readyz").await;
    assert_eq!(status, 200);
    let (status, _) = crate::zundoko::http_get(enka.health_port, "/healthz").await;
    assert_eq!(status, 200);
    // The counter moves just after the status write the test saw.
    let port = enka.metrics_port;
    let text = eventually("the reconcile to be counted", Duration::from_secs(10), || async move {
        let (status, text) = crate::zundoko::http_get(port, "/metrics").await;
        (status == 200 && text.contains(r#"ansible_operator_reconcile_result_total{GVK="enka.test/v1, Kind=Sample",result="succeeded"}"#)).then_some(text)
    })
    .await;
    assert!(
        text.contains(r#"enka_module_calls_total{module="k8s"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"ansible_operator_reconciles_count{GVK="enka.test/v1, Kind=Sample"}"#),
        "{text}"
    );

    // A saved edit takes effect without touching the object or restarting.
    project.write_role(&ROLE_V1.replace("VERSION", "2"));
    eventually(
        "the edited role to run",
        Duration::from_secs(30),
        version("2"),
    )
    .await;

    // A broken edit is rejected: the object says why, the last good role runs on.
    project.write_role("- name: broken\n  k8s:\n    definition: {apiVersion: v1\n");
    let failed = eventually(
        "Failure=True naming the broken file",
        Duration::from_secs(30),
        || {
            let samples = samples.clone();
            async move {
                let s = samples.get("s1").await.unwrap();
                let failure = condition(&s, "Failure")?;
                (failure["status"] == "True").then_some(failure)
            }
        },
    )
    .await;
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.contains("roles/sample/tasks/main.yml:"),
        "{message}"
    );
    assert!(message.contains("last good version"), "{message}");
    assert!(enka.log().contains("rejected role edit"), "{}", enka.log());
    let cm = config_maps.get("s1-out").await.unwrap();
    assert_eq!(
        cm.data.unwrap()["version"],
        "2",
        "the last good role still ran"
    );

    // Fixing the file recovers.
    project.write_role(&ROLE_V1.replace("VERSION", "3"));
    eventually(
        "the fixed role to run",
        Duration::from_secs(30),
        version("3"),
    )
    .await;
    eventually("Failure=False again", Duration::from_secs(30), || {
        let samples = samples.clone();
        async move {
            let s = samples.get("s1").await.unwrap();
            (condition(&s, "Failure")?["status"] == "False").then_some(())
        }
    })
    .await;
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/fixtures/crds/enka.test_samples.yaml").await;
    let ns = env.namespace("leader").await.unwrap();
    let project = Project::new("leader");
    project.write_role(&ROLE_V1.replace("VERSION", "1"));
    let watches = project.dir.join("watches.yaml").display().to_string();
    let flags = [
        "--leader-elect",
        "--leader-election-namespace",
        &ns,
        "--leader-election-lease-duration",
        "3s",
        "--leader-election-renew-deadline",
        "2s",
        "--leader-election-retry-period",
        "500ms",
    ];
    let first = Enka::start_with_args(env, &watches, &ns, &[], &flags, "-a");
    eventually(
        "the first replica to lead",
        Duration::from_secs(30),
        || async { first.log().contains("acquired leadership").then_some(()) },
    )
    .await;
    let second = Enka::start_with_args(env, &watches, &ns, &[], &flags, "-b");
    eventually(
        "the second replica to wait",
        Duration::from_secs(30),
        || async {
            second
                .log()
                .contains("waiting for leadership")
                .then_some(())
        },
    )
    .await;

    let samples: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &sample_resource());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut sample = DynamicObject::new("s1", &sample_resource());
    sample.data = json!({"spec": {"size": 1}});
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();
    let size = |want: &'static str| {
        let config_maps = config_maps.clone();
        move || {
            let config_maps = config_maps.clone();
            async move {
                let cm = config_maps.get_opt("s1-out").await.unwrap()?;
                (cm.data?.get("size")?.as_str() == want).then_some(())
            }
        }
    };
    eventually(
        "the leader to reconcile",
        Duration::from_secs(30),
        size("1"),
    )
    .await;
    assert!(first.log().contains("reconciled"), "{}", first.log());
    assert!(
        !second.log().contains("reconciled"),
        "only the leader acts:\n{}",
        second.log()
    );

    // The leader dies; the other takes over and acts on the next change.
    drop(first);
    eventually(
        "the second replica to take over",
        Duration::from_secs(30),
        || async { second.log().contains("acquired leadership").then_some(()) },
    )
    .await;
    let mut patched = samples.get("s1").await.unwrap();
    patched.data["spec"]["size"] = json!(2);
    samples
        .replace("s1", &PostParams::default(), &patched)
        .await
        .unwrap();
    eventually(
        "the new leader to reconcile",
        Duration::from_secs(30),
        size("2"),
    )
    .await;
    drop(second);
    env.delete_namespace(&ns).await.unwrap();
}

const DEPENDENTS_ROLE: &str = r#"
- name: a watched dependent
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-out'
        namespace: '{{ ansible_operator_meta.namespace }}'
      data:
        size: '{{ size | string }}'
- name: a blacklisted dependent
  k8s:
    definition:
      apiVersion: v1
      kind: Secret
      metadata:
        name: '{{ ansible_operator_meta.name }}-secret'
        namespace: '{{ ansible_operator_meta.namespace }}'
      stringData:
        size: '{{ size | string }}'
"#;

#[tokio::test]
async fn deleted_or_edited_dependents_are_restored() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{DeleteParams, Patch, PatchParams};

    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/fixtures/crds/enka.test_samples.yaml").await;
    let ns = env.namespace("dependents").await.unwrap();
    // No periodic resync: only the dependent watch can bring a reconcile.
    let project = Project::with_watches(
        "dependents",
        "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n  reconcilePeriod: 0s\n  blacklist:\n  - {group: '', version: v1, kind: Secret}\n",
    );
    project.write_role(DEPENDENTS_ROLE);
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);

    let samples: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &sample_resource());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut sample = DynamicObject::new("s1", &sample_resource());
    sample.data = json!({"spec": {"size": 3}});
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();

    let size_is = |want: &'static str| {
        let config_maps = config_maps.clone();
        move || {
            let config_maps = config_maps.clone();
            async move {
                let cm = config_maps.get_opt("s1-out").await.unwrap()?;
                let uid = cm.metadata.uid.clone()?;
                (cm.data?.get("size")?.as_str() == want).then_some(uid)
            }
        }
    };
    let first_uid = eventually("the first reconcile", Duration::from_secs(30), size_is("3")).await;
    let secret_uid = eventually("the secret", Duration::from_secs(30), || {
        let secrets = secrets.clone();
        async move { secrets.get_opt("s1-secret").await.unwrap()?.metadata.uid }
    })
    .await;
    eventually("Successful=True", Duration::from_secs(30), || {
        let samples = samples.clone();
        async move {
            let s = samples.get("s1").await.unwrap();
            (condition(&s, "Successful")?["status"] == "True").then_some(())
        }
    })
    .await;

    // An edit outside status brings the owner back to reconcile it away.
    config_maps
        .patch(
            "s1-out",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"size": "tampered"}})),
        )
        .await
        .unwrap();
    eventually(
        "the edit to be undone",
        Duration::from_secs(30),
        size_is("3"),
    )
    .await;

    // A blacklisted kind is not watched: deleting it brings no reconcile.
    secrets
        .delete("s1-secret", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        secrets.get_opt("s1-secret").await.unwrap().is_none(),
        "a blacklisted dependent was watched"
    );

    // A deleted dependent is re-created; that reconcile restores the secret too.
    config_maps
        .delete("s1-out", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the config map to come back",
        Duration::from_secs(30),
        || {
            let size_is = size_is("3");
            let first_uid = first_uid.clone();
            async move { size_is().await.filter(|uid| *uid != first_uid) }
        },
    )
    .await;
    let restored = secrets.get("s1-secret").await.unwrap();
    assert_ne!(restored.metadata.uid.unwrap(), secret_uid);
    assert!(enka.log().contains("watching dependents"), "{}", enka.log());
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}
