//! Scenarios on tests/compat/advanced-operator, asserting what upstream's
//! advanced-molecule-operator asserts
//! (hack/generate/samples/ansible/testdata/tasks/*_test.yml).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::cluster::{
    ADVANCED_NAMESPACE, Ctx, LIMIT, await_condition, await_gone, await_object, condition, create,
    data, delete, delete_and_await_remade, merge,
};
use crate::support::{eventually, http_get, sum_metric_where};

const GROUP: &str = "test.compat.enka.dev";

fn api(ctx: &Ctx, kind: &str) -> Api<DynamicObject> {
    ctx.custom(GROUP, kind, ADVANCED_NAMESPACE)
}

/// Creates `kind` named `name` with `spec` and `labels` in the advanced
/// namespace.
async fn create_test(ctx: &Ctx, kind: &str, name: &str, spec: Value, labels: Value) {
    create(
        &api(ctx, kind),
        json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": kind,
               "metadata": {"name": name, "labels": labels}, "spec": spec}),
    )
    .await;
}

async fn successful(ctx: &Ctx, kind: &str, name: &str) -> DynamicObject {
    await_condition(&api(ctx, kind), name, "Successful", "True").await
}

async fn config_map(ctx: &Ctx, namespace: &str, name: &str) -> ConfigMap {
    await_object(&ctx.config_maps(namespace), name).await
}

/// collectiontest_test.yml: `role: namespace.collection.role` is found in
/// ANSIBLE_COLLECTIONS_PATH.
pub async fn collection_qualified_role(ctx: Arc<Ctx>) {
    let name = "collectiontest-sample";
    create_test(&ctx, "CollectionTest", name, json!({}), json!({})).await;
    successful(&ctx, "CollectionTest", name).await;
    let made = config_map(&ctx, ADVANCED_NAMESPACE, &format!("{name}-collection")).await;
    assert_eq!(data(&made, "did_it_work"), Some("indeed"));
}

/// subresourcestest_test.yml (its status part): fields and a condition
/// written with `k8s_status` sit next to the operator's own Successful.
pub async fn k8s_status_fields_and_conditions(ctx: Arc<Ctx>) {
    let name = "statustest-sample";
    create_test(&ctx, "StatusTest", name, json!({"replicas": 3}), json!({})).await;
    let done = successful(&ctx, "StatusTest", name).await;
    let status = &done.data["status"];
    assert_eq!(status["phase"], "Ready", "{status}");
    // Not native templating: a filtered expression renders to a string, as
    // ansible-core 2.18 does (tests/conformance, `{{ y.z | default(5) }}`).
    assert_eq!(status["replicas"], "3", "{status}");
    let ready = condition(&done, "Ready").unwrap_or_else(|| panic!("no Ready in {status}"));
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["reason"], "AllGood");
    assert_eq!(ready["message"], "ready with 3 replicas");
}

fn secret(name: &str, reconcile: &str, data: &[(&str, &str)]) -> Secret {
    use base64::Engine;
    let data: BTreeMap<String, String> = data
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                base64::engine::general_purpose::STANDARD.encode(v),
            )
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"reconcile": reconcile}},
        "data": data,
    }))
    .expect("a Secret")
}

async fn secret_reconciles(ctx: &Ctx) -> f64 {
    let (_, text) = http_get(ctx.advanced.metrics_port, "/metrics").await;
    sum_metric_where(&text, "ansible_operator_reconcile_result", "Kind=Secret")
}

/// secretstest_test.yml: a Secret labelled `reconcile` is read through
/// `__secret`, decoded with `with_dict` into a ConfigMap whose definition is
/// a YAML string, and an update adds a key. A Secret whose label says no
/// ends its play at `meta: end_play`: reconciled, nothing made.
pub async fn core_secret_raw_var_with_dict_end_play(ctx: Arc<Ctx>) {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ADVANCED_NAMESPACE);
    let config_maps = ctx.config_maps(ADVANCED_NAMESPACE);
    secrets
        .create(
            &PostParams::default(),
            &secret("test-secret", "yes", &[("test", "test")]),
        )
        .await
        .expect("creating the Secret");
    let made = await_object(&config_maps, "test-secret").await;
    assert_eq!(data(&made, "test"), Some("test"));

    merge(
        &secrets,
        "test-secret",
        json!({"data": {"new": "Y29udGVudA=="}}),
    )
    .await;
    eventually("the new key in the ConfigMap", LIMIT, || async {
        let cm = config_maps.get("test-secret").await.ok()?;
        (data(&cm, "new")? == "content").then_some(())
    })
    .await;

    let before = secret_reconciles(&ctx).await;
    secrets
        .create(
            &PostParams::default(),
            &secret("ended-secret", "no", &[("test", "test")]),
        )
        .await
        .expect("creating the Secret");
    eventually("the labelled-no Secret to be reconciled", LIMIT, || async {
        (secret_reconciles(&ctx).await > before).then_some(())
    })
    .await;
    assert!(
        config_maps
            .get_opt("ended-secret")
            .await
            .expect("reading")
            .is_none(),
        "meta: end_play did not end the play"
    );
}

/// selectortest_test.yml: an object the selector matches is reconciled; one
/// it does not match is never touched.
pub async fn selector(ctx: Arc<Ctx>) {
    create_test(
        &ctx,
        "SelectorTest",
        "selectortest-ignored",
        json!({}),
        json!({}),
    )
    .await;
    create_test(
        &ctx,
        "SelectorTest",
        "selectortest-sample",
        json!({}),
        json!({"testLabel": "testValue"}),
    )
    .await;
    successful(&ctx, "SelectorTest", "selectortest-sample").await;
    let made = config_map(&ctx, ADVANCED_NAMESPACE, "selectortest-sample-selected").await;
    assert_eq!(data(&made, "hello"), Some("world"));

    // Upstream waits 30 s; the ignored one was created first, so a reconcile
    // would long have shown by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ignored = api(&ctx, "SelectorTest")
        .get("selectortest-ignored")
        .await
        .expect("the unlabelled object");
    assert!(
        ignored.data.get("status").is_none_or(Value::is_null),
        "the unlabelled object was reconciled: {:?}",
        ignored.data
    );
    assert!(
        ctx.config_maps(ADVANCED_NAMESPACE)
            .get_opt("selectortest-ignored-selected")
            .await
            .expect("reading")
            .is_none()
    );
}

/// casetest_test.yml: with `snakeCaseParameters: false` the spec's keys
/// reach the role as written.
pub async fn snake_case_parameters_false(ctx: Arc<Ctx>) {
    let name = "casetest-sample";
    create_test(
        &ctx,
        "CaseTest",
        name,
        json!({"camelCaseVar": "true"}),
        json!({}),
    )
    .await;
    successful(&ctx, "CaseTest", name).await;
    let made = config_map(&ctx, ADVANCED_NAMESPACE, &format!("{name}-case")).await;
    assert_eq!(data(&made, "shouldBeCamel"), Some("true"));
    assert_eq!(data(&made, "snakeCase"), Some("undefined"));
}

/// reconciliationtest_test.yml: `requeue_after` brings the object back
/// until the role stops asking, at five iterations.
pub async fn requeue_after(ctx: Arc<Ctx>) {
    let name = "reconciliation-test";
    create_test(
        &ctx,
        "ReconciliationTest",
        name,
        json!({"field": "value"}),
        json!({}),
    )
    .await;
    successful(&ctx, "ReconciliationTest", name).await;
    let config_maps = ctx.config_maps(ADVANCED_NAMESPACE);
    eventually("five iterations", Duration::from_secs(40), || async {
        let cm = config_maps.get_opt(name).await.ok()??;
        (data(&cm, "iterations")? == "5").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cm = config_maps.get(name).await.expect("the ConfigMap");
    assert_eq!(data(&cm, "iterations"), Some("5"), "it went on after five");
}

/// clusterannotationtest_test.yml: a cluster-scoped dependent and one in
/// another namespace carry the primary-resource annotations instead of an
/// owner reference, and edits to them are reverted.
pub async fn cluster_scoped_and_cross_namespace_dependents(ctx: Arc<Ctx>) {
    let name = "clusterannotationtest-sample";
    let external = format!("external-{name}");
    create_test(&ctx, "ClusterAnnotationTest", name, json!({}), json!({})).await;
    successful(&ctx, "ClusterAnnotationTest", name).await;

    let made = config_map(&ctx, &external, name).await;
    let annotations = made.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("operator-sdk/primary-resource")
            .map(String::as_str),
        Some(format!("{ADVANCED_NAMESPACE}/{name}").as_str()),
        "{annotations:?}"
    );
    assert_eq!(
        annotations
            .get("operator-sdk/primary-resource-type")
            .map(String::as_str),
        Some(format!("ClusterAnnotationTest.{GROUP}").as_str())
    );
    assert!(made.metadata.owner_references.is_none_or(|o| o.is_empty()));

    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    merge(
        &namespaces,
        &external,
        json!({"metadata": {"labels": {"foo": "baz"}}}),
    )
    .await;
    eventually("the Namespace label back at bar", LIMIT, || async {
        let namespace = namespaces.get(&external).await.ok()?;
        (namespace.metadata.labels?.get("foo")? == "bar").then_some(())
    })
    .await;

    let config_maps = ctx.config_maps(&external);
    delete_and_await_remade(&config_maps, name).await;
}

/// The memcached finalizer with `vars` instead of a role: the main role runs
/// again on deletion with `cleanup: true`, removes what it made and leaves a
/// note in another namespace.
pub async fn finalizer_with_vars(ctx: Arc<Ctx>) {
    let name = "finalizervars-sample";
    create_test(&ctx, "FinalizerVarsTest", name, json!({}), json!({})).await;
    successful(&ctx, "FinalizerVarsTest", name).await;
    let lives = format!("{name}-lives");
    config_map(&ctx, ADVANCED_NAMESPACE, &lives).await;

    delete(&api(&ctx, "FinalizerVarsTest"), name).await;
    await_gone(&api(&ctx, "FinalizerVarsTest"), name).await;
    let note = config_map(
        &ctx,
        &format!("{ADVANCED_NAMESPACE}-notes"),
        &format!("{name}-finalized"),
    )
    .await;
    assert_eq!(data(&note, "cleanup"), Some("True"));
    await_gone(&ctx.config_maps(ADVANCED_NAMESPACE), &lives).await;
}

/// `include_role` with `tasks_from` runs one file of another role, whose
/// `lookup('template')` finds that role's templates, `{% include %}` and
/// all. The expected ConfigMap is what ansible-core 2.18 renders from the
/// same template (checked with ansible-playbook from PyPI's ansible 11).
pub async fn include_role_tasks_from_and_template_lookup(ctx: Arc<Ctx>) {
    let name = "includetest-sample";
    create_test(&ctx, "IncludeTest", name, json!({}), json!({})).await;
    successful(&ctx, "IncludeTest", name).await;
    let made = config_map(&ctx, ADVANCED_NAMESPACE, &format!("{name}-included")).await;
    assert_eq!(
        data(&made, "settings.yaml"),
        Some("features:\n- a\n- b\nreplicas: 2\n")
    );
    assert_eq!(data(&made, "owner"), Some(name));
    let labels = made.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("app.kubernetes.io/name").map(String::as_str),
        Some(format!("{name}-included").as_str())
    );
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("compat")
    );
}

/// `k8s_info` with `until` polls until what it waits for appears.
pub async fn k8s_info_until(ctx: Arc<Ctx>) {
    let name = "polltest-sample";
    create_test(&ctx, "PollTest", name, json!({}), json!({})).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let go = serde_json::from_value::<ConfigMap>(json!({
        "metadata": {"name": format!("{name}-go")}, "data": {"say": "hello"}
    }))
    .expect("a ConfigMap");
    ctx.config_maps(ADVANCED_NAMESPACE)
        .create(&PostParams::default(), &go)
        .await
        .expect("creating the go-ahead");
    successful(&ctx, "PollTest", name).await;
    let done = config_map(&ctx, ADVANCED_NAMESPACE, &format!("{name}-done")).await;
    assert_eq!(data(&done, "said"), Some("hello"));
    let attempts: u32 = data(&done, "attempts")
        .and_then(|a| a.parse().ok())
        .expect("attempts is a number");
    assert!(
        attempts >= 2,
        "the go-ahead was there at once: {attempts} attempts"
    );
}
