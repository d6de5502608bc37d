//! Scenarios on tests/compat/memcached-operator, asserting what upstream's
//! memcached-molecule-operator asserts (molecule/default/tasks/*_test.yml and
//! test/e2e/ansible/cluster_test.go in ansible-operator-plugins).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::cluster::{
    Ctx, LIMIT, MEMCACHED_NAMESPACE, await_condition, await_gone, await_object, create, data,
    delete, delete_and_await_remade, merge, start_memcached,
};
use crate::support::{eventually, http_get, sum_metric, sum_metric_where};

const GROUP: &str = "cache.compat.enka.dev";
const SAMPLE: &str = "memcached-sample";
const DEPLOYMENT: &str = "memcached-sample-memcached";

fn deployments(ctx: &Ctx) -> Api<Deployment> {
    Api::namespaced(ctx.client.clone(), MEMCACHED_NAMESPACE)
}

async fn replicas_become(ctx: &Ctx, replicas: i32) {
    let api = deployments(ctx);
    eventually(
        &format!("{DEPLOYMENT} at {replicas} replicas"),
        LIMIT,
        || async {
            let deployment = api.get_opt(DEPLOYMENT).await.ok()??;
            (deployment.spec?.replicas == Some(replicas)).then_some(())
        },
    )
    .await;
}

/// memcached_test.yml: the sample becomes Successful, its Deployment has
/// `size` replicas (a templated string the k8s module sends as is), and the
/// role's `k8s_status` field is kept next to the conditions. cluster_test.go:
/// a hand-made scale is reverted, and a new `size` is applied.
pub async fn deployment_and_custom_status(ctx: Arc<Ctx>) {
    let api = ctx.custom(GROUP, "Memcached", MEMCACHED_NAMESPACE);
    let sample: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(crate::support::repo_path(
            "tests/compat/memcached-operator/config/samples/cache_v1alpha1_memcached.yaml",
        ))
        .expect("the sample"),
    )
    .expect("the sample is YAML");
    create(&api, sample).await;
    let done = await_condition(&api, SAMPLE, "Successful", "True").await;
    assert_eq!(
        done.data["status"]["test"], "hello world",
        "{:?}",
        done.data
    );
    replicas_become(&ctx, 1).await;

    merge(
        &deployments(&ctx),
        DEPLOYMENT,
        json!({"spec": {"replicas": 2}}),
    )
    .await;
    // The dependent watch sees the edit and the role puts size back.
    replicas_become(&ctx, 1).await;

    merge(&api, SAMPLE, json!({"spec": {"size": 2}})).await;
    replicas_become(&ctx, 2).await;
}

/// memcached_test.yml: the custom metrics the role reports with
/// `osdk_metric` are served with the operator's own metrics (upstream on
/// its :8443/metrics via the 5050 side endpoint; enka on its /metrics).
pub async fn osdk_metric_on_metrics(ctx: Arc<Ctx>) {
    let port = ctx.memcached.lock().await.metrics_port;
    let (status, text) = http_get(port, "/metrics").await;
    assert_eq!(status, 200);
    // The counter is named as Prometheus advises, `_total` included, and
    // served under that name alone.
    assert!(
        text.lines()
            .any(|l| l.starts_with("compat_memcached_runs_total ")),
        "counter missing:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("compat_memcached_size ")),
        "gauge missing:\n{text}"
    );
    assert!(
        sum_metric(&text, "compat_memcached_size_histogram_count") >= 1.0,
        "histogram missing:\n{text}"
    );
    assert!(
        sum_metric(&text, "compat_memcached_size_summary_count") >= 1.0,
        "summary missing:\n{text}"
    );
    for help in [
        "# HELP compat_memcached_runs_total Runs of the memcached role\n",
        "# HELP compat_memcached_size spec.size of the last Memcached reconciled\n",
    ] {
        assert!(text.contains(help), "{help:?} missing:\n{text}");
    }
}

/// cluster_test.go: the role's ConfigMap exists, but ConfigMaps are
/// blacklisted, so editing it brings no reconcile and stays as edited.
pub async fn blacklisted_kind_is_not_watched(ctx: Arc<Ctx>) {
    let name = format!("{SAMPLE}-blacklist-watches");
    let config_maps = ctx.config_maps(MEMCACHED_NAMESPACE);
    let made = await_object(&config_maps, &name).await;
    assert_eq!(data(&made, "arbitrary"), Some("afdasdfsajsafj"));
    ctx.memcached.lock().await.settle().await;
    let before = memcached_reconciles(&ctx).await;

    merge(
        &config_maps,
        &name,
        json!({"data": {"arbitrary": "edited"}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = memcached_reconciles(&ctx).await;
    assert_eq!(
        after, before,
        "an edit of a blacklisted kind started a reconcile"
    );
    let edited = config_maps.get(&name).await.expect("the ConfigMap");
    assert_eq!(data(&edited, "arbitrary"), Some("edited"));
}

async fn memcached_reconciles(ctx: &Ctx) -> f64 {
    let port = ctx.memcached.lock().await.metrics_port;
    let (_, text) = http_get(port, "/metrics").await;
    sum_metric_where(&text, "ansible_operator_reconcile_result", "Kind=Memcached")
}

/// memcached_test.yml (test-local): the Secret the role made is reconciled
/// by the core-group watch (`manageStatus: false`) into a Service; after an
/// operator restart, a deleted Service is made again.
pub async fn core_secret_watch_survives_restart(ctx: Arc<Ctx>) {
    let secret = format!("{SAMPLE}-secret");
    let service = format!("{secret}-service");
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), MEMCACHED_NAMESPACE);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), MEMCACHED_NAMESPACE);
    await_object(&secrets, &secret).await;
    let made = await_object(&services, &service).await;
    let owner = &made.metadata.owner_references.expect("an owner reference")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Secret", secret.as_str())
    );

    let mut operator = ctx.memcached.lock().await;
    let (_, text) = http_get(operator.metrics_port, "/metrics").await;
    assert_eq!(
        sum_metric_where(&text, "ansible_operator_reconcile_result", "Kind=Secret"),
        sum_metric_where(
            &text,
            "ansible_operator_reconcile_result",
            "Kind=Secret\",result=\"succeeded"
        ),
        "a Secret reconcile failed (a status write on a manageStatus: false kind?):\n{text}"
    );
    operator.terminate(Duration::from_secs(10));
    *operator = start_memcached(&ctx.env);
    operator.await_ready().await;
    drop(operator);

    delete_and_await_remade(&services, &service).await;
}

/// foo_test.yml: a role with no tasks still succeeds.
pub async fn empty_role_succeeds(ctx: Arc<Ctx>) {
    let api = ctx.custom(GROUP, "Foo", MEMCACHED_NAMESPACE);
    create(
        &api,
        json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Foo",
               "metadata": {"name": "foo-sample"}, "spec": {"foo": "bar"}}),
    )
    .await;
    await_condition(&api, "foo-sample", "Successful", "True").await;
}

async fn create_deleteme(ctx: &Ctx) {
    let config_map = serde_json::from_value::<ConfigMap>(json!({
        "metadata": {"name": "deleteme"}, "data": {"delete": "me"}
    }))
    .expect("a ConfigMap");
    ctx.config_maps(MEMCACHED_NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .expect("creating deleteme");
}

/// memfin_test.yml: the finalizer's role also runs as a playbook of its own.
pub async fn finalizer_role_as_playbook(ctx: Arc<Ctx>) {
    create_deleteme(&ctx).await;
    let api = ctx.custom(GROUP, "Memfin", MEMCACHED_NAMESPACE);
    create(
        &api,
        json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Memfin",
               "metadata": {"name": "memfin-sample"}, "spec": {}}),
    )
    .await;
    await_condition(&api, "memfin-sample", "Successful", "True").await;
    await_gone(&ctx.config_maps(MEMCACHED_NAMESPACE), "deleteme").await;
}

/// memcached_test.yml and cluster_test.go: deleting the sample runs the
/// finalizer role (the ConfigMap `deleteme` goes), the object goes, and the
/// Deployment is garbage-collected.
pub async fn finalizer_role_on_delete(ctx: Arc<Ctx>) {
    let api = ctx.custom(GROUP, "Memcached", MEMCACHED_NAMESPACE);
    let sample = api.get(SAMPLE).await.expect("the sample");
    assert!(
        sample
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&format!("{GROUP}/finalizer")),
        "the finalizer was not added"
    );
    create_deleteme(&ctx).await;
    delete(&api, SAMPLE).await;
    await_gone(&api, SAMPLE).await;
    await_gone(&ctx.config_maps(MEMCACHED_NAMESPACE), "deleteme").await;
    await_gone(&deployments(&ctx), DEPLOYMENT).await;
}
