//! The operator runtime on a small custom resource: status conditions, live
//! role reload, and a rejected broken edit.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube_env::KubeEnv;
use serde_json::{Value as Json, json};

use crate::enka::Enka;
use crate::support::{eventually, install_crd};

const ROLE_V1: &str = "- name: write the output\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: '{{ ansible_operator_meta.name }}-out'\n        namespace: '{{ ansible_operator_meta.namespace }}'\n      data:\n        version: \"VERSION\"\n        size: '{{ size | string }}'\n";

pub(crate) fn sample_resource() -> ApiResource {
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

/// A fresh namespace with the Sample CRD installed: the shared control
/// plane, a client, the namespace and its Samples.
async fn sample_namespace(
    prefix: &str,
) -> (&'static KubeEnv, kube::Client, String, Api<DynamicObject>) {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/fixtures/crds/enka.test_samples.yaml").await;
    let ns = env.namespace(prefix).await.unwrap();
    let samples = Api::namespaced_with(client.clone(), &ns, &sample_resource());
    (env, client, ns, samples)
}

async fn create_sample(samples: &Api<DynamicObject>, name: &str, spec: Json) {
    let mut sample = DynamicObject::new(name, &sample_resource());
    sample.data = json!({ "spec": spec });
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();
}

/// Waits until the ConfigMap `s1-out` has `key` = `want`.
async fn await_output(config_maps: &Api<ConfigMap>, key: &str, want: &str, what: &str) {
    eventually(what, Duration::from_secs(30), || async move {
        let cm = config_maps.get_opt("s1-out").await.unwrap()?;
        (cm.data?.get(key)?.as_str() == want).then_some(())
    })
    .await
}

/// Waits until condition `kind` of sample `name` has `status`; the object.
async fn await_condition(
    samples: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    status: &str,
) -> DynamicObject {
    let what = format!("{kind}={status} on {name}");
    eventually(&what, Duration::from_secs(30), || async move {
        let s = samples.get(name).await.unwrap();
        (condition(&s, kind)?["status"] == status).then_some(s)
    })
    .await
}

/// A throwaway project directory.
pub(crate) struct Project {
    pub(crate) dir: std::path::PathBuf,
}

impl Project {
    fn new(name: &str) -> Self {
        Self::with_watches(
            name,
            "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n  reconcilePeriod: 0s\n",
        )
    }

    pub(crate) fn with_watches(name: &str, watches: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("enka-project-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("roles/sample/tasks")).unwrap();
        std::fs::write(dir.join("watches.yaml"), watches).unwrap();
        Project { dir }
    }

    pub(crate) fn write_role(&self, text: &str) {
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
    let (env, client, ns, samples) = sample_namespace("runtime").await;
    let project = Project::new("reload");
    project.write_role(&ROLE_V1.replace("VERSION", "1"));
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_sample(&samples, "s1", json!({"size": 3})).await;

    await_output(
        &config_maps,
        "version",
        "1",
        "the first version of the role to run",
    )
    .await;
    let cm = config_maps.get("s1-out").await.unwrap();
    assert_eq!(cm.data.unwrap()["size"], "3");
    assert_eq!(cm.metadata.owner_references.unwrap()[0].kind, "Sample");

    // manageStatus (the default): Successful after a clean run.
    let done = await_condition(&samples, "s1", "Successful", "True").await;
    let running = condition(&done, "Running").unwrap();
    assert_eq!(
        (running["status"].as_str(), running["reason"].as_str()),
        (Some("True"), Some("Successful"))
    );
    assert_eq!(running["message"], "Awaiting next reconciliation");
    assert!(running["ansibleResult"]["changed"].as_i64().unwrap() >= 1);
    assert_eq!(condition(&done, "Failure").unwrap()["status"], "False");

    // Metrics and health endpoints.
    let (status, _) = crate::support::http_get(enka.health_port, "/readyz").await;
    assert_eq!(status, 200);
    let (status, _) = crate::support::http_get(enka.health_port, "/healthz").await;
    assert_eq!(status, 200);
    // The gauge (a gauge, as upstream's) moves just after the status write
    // the test saw.
    let port = enka.metrics_port;
    let text = eventually("the reconcile to be counted", Duration::from_secs(10), || async move {
        let (status, text) = crate::support::http_get(port, "/metrics").await;
        (status == 200 && text.contains(r#"ansible_operator_reconcile_result{GVK="enka.test/v1, Kind=Sample",result="succeeded"}"#)).then_some(text)
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
    await_output(&config_maps, "version", "2", "the edited role to run").await;

    // A broken edit is rejected: the object says why, the last good role runs on.
    project.write_role("- name: broken\n  k8s:\n    definition: {apiVersion: v1\n");
    let failed = condition(
        &await_condition(&samples, "s1", "Failure", "True").await,
        "Failure",
    )
    .unwrap();
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.contains("roles/sample/tasks/main.yml:"),
        "{message}"
    );
    assert!(message.contains("last good version"), "{message}");
    assert!(
        enka.full_log().contains("rejected role edit"),
        "{}",
        enka.log()
    );
    let cm = config_maps.get("s1-out").await.unwrap();
    assert_eq!(
        cm.data.unwrap()["version"],
        "2",
        "the last good role still ran"
    );

    // Fixing the file recovers.
    project.write_role(&ROLE_V1.replace("VERSION", "3"));
    await_output(&config_maps, "version", "3", "the fixed role to run").await;
    await_condition(&samples, "s1", "Failure", "False").await;
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over() {
    let (env, client, ns, samples) = sample_namespace("leader").await;
    let project = Project::new("leader");
    project.write_role(&ROLE_V1.replace("VERSION", "1"));
    let watches = project.dir.join("watches.yaml").display().to_string();
    let flags = [
        "--leader-elect",
        "--leader-election-id=enka-test-lease",
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
        || async {
            first
                .full_log()
                .contains("acquired leadership")
                .then_some(())
        },
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

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_sample(&samples, "s1", json!({"size": 1})).await;
    await_output(&config_maps, "size", "1", "the leader to reconcile").await;
    // The object is written mid-run; the run's log line comes after it.
    eventually(
        "the leader to log its reconcile",
        Duration::from_secs(30),
        || async { first.full_log().contains("reconciled").then_some(()) },
    )
    .await;
    assert!(
        !second.full_log().contains("reconciled"),
        "only the leader acts:\n{}",
        second.log()
    );

    // The leader dies; the other takes over and acts on the next change.
    drop(first);
    eventually(
        "the second replica to take over",
        Duration::from_secs(30),
        || async {
            second
                .full_log()
                .contains("acquired leadership")
                .then_some(())
        },
    )
    .await;
    samples
        .patch(
            "s1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    await_output(&config_maps, "size", "2", "the new leader to reconcile").await;
    drop(second);
    env.delete_namespace(&ns).await.unwrap();
}

const DEPENDENTS_ROLE: &str = r#"
- name: a watched dependent
  k8s:
    definition:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: '{{ ansible_operator_meta.name }}-app'
        namespace: '{{ ansible_operator_meta.namespace }}'
      spec:
        replicas: '{{ size }}'
        selector:
          matchLabels: {app: '{{ ansible_operator_meta.name }}'}
        template:
          metadata:
            labels: {app: '{{ ansible_operator_meta.name }}'}
          spec:
            containers:
            - name: app
              image: registry.k8s.io/pause:3.10
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

/// The first dependent of a kind is made, then deleted while the run that
/// made it is still going: its watch starts only when the run ends, so the
/// deletion is no event. The watch's first list shows it gone, and the owner
/// runs again to make it anew.
#[tokio::test]
async fn a_dependent_deleted_before_its_watch_listed_is_made_again() {
    use kube::api::DeleteParams;

    let (env, client, ns, samples) = sample_namespace("unseen-delete").await;
    let project = Project::new("unseen-delete");
    project.write_role(&format!(
        "{}- name: keep the run going\n  pause:\n    seconds: 2\n",
        ROLE_V1.replace("VERSION", "1")
    ));
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &ns);
    create_sample(&samples, "s1", json!({"size": 1})).await;

    let first = eventually("s1-out made", Duration::from_secs(30), || async {
        config_maps.get_opt("s1-out").await.unwrap()?.metadata.uid
    })
    .await;
    config_maps
        .delete("s1-out", &DeleteParams::default())
        .await
        .unwrap();
    await_condition(&samples, "s1", "Successful", "True").await;
    let again = eventually("s1-out made again", Duration::from_secs(30), || async {
        let uid = config_maps.get_opt("s1-out").await.unwrap()?.metadata.uid;
        (uid != Some(first.clone())).then_some(uid)
    })
    .await;
    assert!(again.is_some(), "{}", enka.log());
    assert!(
        enka.log()
            .contains("a dependent went before its watch listed"),
        "{}",
        enka.log()
    );
}

#[tokio::test]
async fn deleted_or_edited_dependents_are_restored() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{DeleteParams, Patch, PatchParams};

    let (env, client, ns, samples) = sample_namespace("dependents").await;
    // No periodic resync: only the dependent watch can bring a reconcile.
    let project = Project::with_watches(
        "dependents",
        "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n  reconcilePeriod: 0s\n  blacklist:\n  - {group: '', version: v1, kind: Secret}\n",
    );
    project.write_role(DEPENDENTS_ROLE);
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    create_sample(&samples, "s1", json!({"size": 3})).await;

    let replicas_are = |want: i32| {
        let deployments = deployments.clone();
        move || {
            let deployments = deployments.clone();
            async move {
                let d = deployments.get_opt("s1-app").await.unwrap()?;
                let uid = d.metadata.uid.clone()?;
                (d.spec?.replicas? == want).then_some(uid)
            }
        }
    };
    let first_uid = eventually(
        "the first reconcile",
        Duration::from_secs(30),
        replicas_are(3),
    )
    .await;
    let secret_uid = eventually("the secret", Duration::from_secs(30), || {
        let secrets = secrets.clone();
        async move { secrets.get_opt("s1-secret").await.unwrap()?.metadata.uid }
    })
    .await;
    await_condition(&samples, "s1", "Successful", "True").await;

    // An edit outside status brings the owner back to reconcile it away.
    deployments
        .patch(
            "s1-app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    eventually(
        "the edit to be undone",
        Duration::from_secs(30),
        replicas_are(3),
    )
    .await;

    // A blacklisted kind is not watched: deleting it brings no reconcile.
    // (The undo was itself a change to a watched dependent, so one more
    // reconcile follows it; let that pass first.)
    enka.settle().await;
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
    deployments
        .delete("s1-app", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the deployment to come back",
        Duration::from_secs(30),
        || {
            let replicas_are = replicas_are(3);
            let first_uid = first_uid.clone();
            async move { replicas_are().await.filter(|uid| *uid != first_uid) }
        },
    )
    .await;
    let restored = secrets.get("s1-secret").await.unwrap();
    assert_ne!(restored.metadata.uid.unwrap(), secret_uid);
    assert!(
        enka.full_log().contains("watching dependents"),
        "{}",
        enka.log()
    );
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

const PACED_ROLE: &str = r#"
- name: fail on request
  fail:
    msg: 'asked to fail: {{ reason }}'
  when: fail_now | default(false)
- name: count the runs
  k8s_status:
    api_version: enka.test/v1
    kind: Sample
    name: '{{ ansible_operator_meta.name }}'
    namespace: '{{ ansible_operator_meta.namespace }}'
    status:
      runs: '{{ (_enka_test_sample.status.runs | default(0) | int) + 1 }}'
- name: come back in a second
  operator_sdk.util.requeue_after:
    time: 1s
"#;

const CLEANUP_ROLE: &str = r#"
- name: remove what garbage collection cannot see
  k8s:
    state: absent
    api_version: v1
    kind: ConfigMap
    name: '{{ ansible_operator_meta.name }}-{{ suffix }}'
    namespace: '{{ ansible_operator_meta.namespace }}'
"#;

#[tokio::test]
async fn failure_conditions_requeue_after_pacing_and_a_finalizer_role() {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::{DeleteParams, ListParams, Patch, PatchParams};

    let (env, client, ns, samples) = sample_namespace("paced").await;
    let project = Project::with_watches(
        "paced",
        "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n  reconcilePeriod: 0s\n  finalizer:\n    name: enka.test/cleanup\n    role: cleanup\n    vars: {suffix: external}\n",
    );
    project.write_role(PACED_ROLE);
    std::fs::create_dir_all(project.dir.join("roles/cleanup/tasks")).unwrap();
    std::fs::write(
        project.dir.join("roles/cleanup/tasks/main.yml"),
        CLEANUP_ROLE,
    )
    .unwrap();
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    // Something outside garbage collection's reach that the finalizer must remove.
    let external: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "s1-external"}})).unwrap();
    config_maps
        .create(&PostParams::default(), &external)
        .await
        .unwrap();

    create_sample(
        &samples,
        "s1",
        json!({"failNow": true, "reason": "testing"}),
    )
    .await;

    // A failing task: Failure=True with the task's message, and an Event.
    let failure = await_condition(&samples, "s1", "Failure", "True").await;
    let message = condition(&failure, "Failure").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("asked to fail: testing"), "{message}");
    assert_eq!(
        condition(&failure, "Successful").unwrap()["status"],
        "False"
    );
    // Running flips back to True as each retry starts, so it is not asserted.
    assert_eq!(
        failure.metadata.finalizers.as_deref(),
        Some(&["enka.test/cleanup".to_owned()][..]),
        "the finalizer is added on the first run"
    );
    let event = eventually("a ReconcileFailed event", Duration::from_secs(30), || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.unwrap();
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("ReconcileFailed")
                    && e.involved_object.name.as_deref() == Some("s1")
            })
        }
    })
    .await;
    let event_message = event.message.unwrap_or_default();
    assert!(event_message.contains("fail on request"), "{event_message}");

    // Fixed: Successful, and from then on a run about every second.
    samples
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"failNow": false}})),
        )
        .await
        .unwrap();
    let fixed = await_condition(&samples, "s1", "Successful", "True").await;
    assert_eq!(condition(&fixed, "Failure").unwrap()["status"], "False");
    let runs = |s: &DynamicObject| {
        s.data["status"]["runs"]
            .as_str()
            .and_then(|r| r.parse::<u32>().ok())
    };
    let mut seen: Vec<(u32, std::time::Instant)> = Vec::new();
    let watching = std::time::Instant::now();
    while watching.elapsed() < Duration::from_millis(4500) {
        let s = samples.get("s1").await.unwrap();
        if let Some(n) = runs(&s)
            && seen.last().is_none_or(|(last, _)| *last != n)
        {
            seen.push((n, std::time::Instant::now()));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1].1 - w[0].1).collect();
    assert!(gaps.len() >= 2, "requeue_after brought no runs: {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[1].0 == w[0].0 + 1),
        "each paced run counts once: {seen:?}"
    );
    // Paced, not a hot loop: no two runs closer than most of the second.
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(700)),
        "{gaps:?}"
    );
    // The role's own status write and the runtime's conditions both stand:
    // the final status write starts from a copy the role made stale, so it
    // must conflict and re-read rather than drop `runs`.
    let last = samples.get("s1").await.unwrap();
    let counted = seen.last().map(|(n, _)| *n).unwrap_or_default();
    assert!(
        runs(&last).is_some_and(|n| n >= counted),
        "{:?}",
        last.data["status"]
    );
    assert_eq!(condition(&last, "Successful").unwrap()["status"], "True");

    // Deleting runs the finalizer role (with the finalizer's vars), then lets go.
    samples
        .delete("s1", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the finalizer role to clean up and release the object",
        Duration::from_secs(30),
        || {
            let samples = samples.clone();
            let config_maps = config_maps.clone();
            async move {
                let cleaned = config_maps.get_opt("s1-external").await.unwrap().is_none();
                let gone = samples.get_opt("s1").await.unwrap().is_none();
                (cleaned && gone).then_some(())
            }
        },
    )
    .await;
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

const SLOW_ROLE: &str = r#"
- name: take a while
  pause:
    seconds: PAUSE
- name: write after the pause
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-out'
        namespace: '{{ ansible_operator_meta.namespace }}'
"#;

#[tokio::test]
async fn sigterm_lets_a_run_finish_within_the_graceful_shutdown_timeout() {
    let (env, client, ns, samples) = sample_namespace("graceful").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    for (name, pause, grace, finishes) in [("s1", "2", "30s", true), ("s2", "60", "300ms", false)] {
        let project = Project::new(&format!("graceful-{name}"));
        project.write_role(&SLOW_ROLE.replace("PAUSE", pause));
        let watches = project.dir.join("watches.yaml").display().to_string();
        let mut enka = Enka::start_with_args(
            env,
            &watches,
            &ns,
            &[],
            &["--graceful-shutdown-timeout", grace],
            name,
        );
        create_sample(&samples, name, json!({})).await;
        // Running=True is written just before the run starts its pause.
        await_condition(&samples, name, "Running", "True").await;
        let status = enka.terminate(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "enka did not exit cleanly on SIGTERM ({status:?}):\n{}",
            enka.log()
        );
        let written = config_maps
            .get_opt(&format!("{name}-out"))
            .await
            .unwrap()
            .is_some();
        assert_eq!(written, finishes, "{}", enka.log());
        if !finishes {
            assert!(
                enka.full_log().contains("stopping anyway"),
                "{}",
                enka.log()
            );
        }
    }
    env.delete_namespace(&ns).await.unwrap();
}

#[tokio::test]
async fn the_duration_histogram_measures_the_whole_run() {
    let (env, client, ns, samples) = sample_namespace("duration").await;
    let project = Project::new("duration");
    project.write_role(&SLOW_ROLE.replace("PAUSE", "1"));
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_sample(&samples, "s1", json!({})).await;
    eventually("the slow run to write", Duration::from_secs(30), || {
        let config_maps = config_maps.clone();
        async move { config_maps.get_opt("s1-out").await.unwrap().map(|_| ()) }
    })
    .await;
    // Upstream's histogram times only the run's setup; enka's spans the 1 s pause.
    let port = enka.metrics_port;
    let sum = eventually(
        "the run to be timed",
        Duration::from_secs(10),
        || async move {
            let (_, text) = crate::support::http_get(port, "/metrics").await;
            text.contains("ansible_operator_reconciles_sum{")
                .then(|| crate::support::sum_metric(&text, "ansible_operator_reconciles_sum"))
        },
    )
    .await;
    assert!(
        sum >= 1.0,
        "reconcile duration sum {sum} s for a run with a 1 s pause"
    );
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

const ADOPTING_ROLE: &str = r#"
- name: apply
  k8s:
    apply: yes
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-applied'
        namespace: '{{ ansible_operator_meta.namespace }}'
      data: {how: apply, round: "{{ round | default(1) }}"}
- name: forced replace
  k8s:
    force: yes
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-forced'
        namespace: '{{ ansible_operator_meta.namespace }}'
      data: {how: force, round: "{{ round | default(1) }}"}
"#;

/// Objects that existed before the role touched them are never adopted
/// (the garbage collector would delete them with the custom resource, and
/// a CR author may pick their names); objects the role created keep their
/// owner through later applies and forced replaces, which upstream loses
/// (ansible-operator-plugins #33).
#[tokio::test]
async fn apply_and_force_keep_the_owner_of_what_they_created_and_adopt_nothing() {
    let (env, client, ns, samples) = sample_namespace("adopt").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for name in ["s1-applied", "s1-forced"] {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        config_maps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let project = Project::new("adopt");
    project.write_role(ADOPTING_ROLE);
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    create_sample(&samples, "s1", json!({})).await;
    create_sample(&samples, "s2", json!({})).await;
    let written = |name: &'static str, round: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            eventually(
                &format!("{name} to be written (round {round})"),
                Duration::from_secs(30),
                || {
                    let config_maps = config_maps.clone();
                    async move {
                        let cm = config_maps.get(name).await.ok()?;
                        (cm.data.as_ref()?.get("round")?.as_str() == round).then_some(cm)
                    }
                },
            )
            .await
        }
    };
    let owned_by = |cm: &ConfigMap, uid: &str| {
        cm.metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .iter()
            .any(|o| o.kind == "Sample" && o.uid == uid)
    };
    let s1 = samples.get("s1").await.unwrap().metadata.uid.unwrap();
    for name in ["s1-applied", "s1-forced"] {
        let cm = written(name, "1").await;
        assert!(
            cm.metadata.owner_references.is_none() && !owned_by(&cm, &s1),
            "{name}, which existed before, was adopted: {:?}\n{}",
            cm.metadata.owner_references,
            enka.log()
        );
    }
    // s2's objects are created by the role; a second round applies and
    // replaces them again.
    for name in ["s2-applied", "s2-forced"] {
        written(name, "1").await;
    }
    let s2 = samples.get("s2").await.unwrap().metadata.uid.unwrap();
    samples
        .patch(
            "s2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"round": "2"}})),
        )
        .await
        .unwrap();
    for name in ["s2-applied", "s2-forced"] {
        let cm = written(name, "2").await;
        assert!(
            owned_by(&cm, &s2),
            "{name} lost its owner: {:?}\n{}",
            cm.metadata.owner_references,
            enka.log()
        );
    }
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

/// A kind whose CRD has no status subresource: the status write answers
/// 404 while the object exists. enka says what is missing, on every retry,
/// instead of taking the object for deleted and going quiet.
#[tokio::test]
async fn a_missing_status_subresource_is_named_not_taken_for_a_deletion() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/fixtures/crds/enka.test_nostatuses.yaml").await;
    let ns = env.namespace("nostatus").await.unwrap();
    let project = Project::with_watches(
        "nostatus",
        "- version: v1\n  group: enka.test\n  kind: NoStatus\n  role: sample\n  reconcilePeriod: 0s\n",
    );
    project.write_role("- name: nothing to do\n  debug:\n    msg: hello\n");
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("enka.test", "v1", "NoStatus"),
        "nostatuses",
    );
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let mut object = DynamicObject::new("n1", &resource);
    object.data = json!({"spec": {}});
    objects
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    eventually(
        "enka to name the missing status subresource",
        Duration::from_secs(30),
        || async {
            enka.full_log()
                .contains("has no status subresource")
                .then_some(())
        },
    )
    .await;
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

const MAYBE_ROLE: &str = r#"
- name: Apply what the template renders (nothing, when its condition is false)
  k8s:
    apply: yes
    definition: "{{ lookup('template', 'maybe.yaml.j2') }}"
    wait: yes
  register: maybe
- name: Record what the empty apply returned
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-out'
        namespace: '{{ ansible_operator_meta.namespace }}'
      data:
        changed: '{{ maybe.changed | string }}'
        results: '{{ maybe.result.results | length }}'
"#;

/// A definition that renders to no object (awx-operator's optional
/// templates, `{% if %}` false, render "\n") applies nothing, as
/// kubernetes.core drops empty YAML documents: the task is ok, unchanged,
/// with no results, and the run goes on.
#[tokio::test]
async fn a_definition_that_renders_to_nothing_applies_nothing() {
    let (env, client, ns, samples) = sample_namespace("empty-definition").await;
    let project = Project::new("empty-definition");
    project.write_role(MAYBE_ROLE);
    std::fs::create_dir_all(project.dir.join("roles/sample/templates")).unwrap();
    std::fs::write(
        project.dir.join("roles/sample/templates/maybe.yaml.j2"),
        "{% if false %}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never\n{% endif %}\n",
    )
    .unwrap();
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_sample(&samples, "s1", json!({})).await;
    await_output(
        &config_maps,
        "results",
        "0",
        "the run after the empty apply",
    )
    .await;
    let out = config_maps.get("s1-out").await.unwrap();
    assert_eq!(
        out.data
            .unwrap_or_default()
            .get("changed")
            .map(String::as_str),
        Some("False"),
        "{}",
        enka.log()
    );
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}
