//! What enka's native Kubernetes modules and `k8s` lookup register when the
//! API server refuses a task: each case of tests/refusals/roles/refusals
//! compared with what kubernetes.core 5.4.1 (and operator_sdk.util)
//! registered for it on a real control plane (`tests/refusals/expected.json`,
//! recorded by `tests/refusals/record.py`). Roles read these results in
//! `failed_when`, `until` and `rescue`; a Failure condition quotes their `msg`.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_env::KubeEnv;
use serde_json::{Value as Json, json};

use crate::enka::Enka;
use crate::support::{eventually, install_crd, repo_path};

/// Keys that differ on every run, and the owner references the operator
/// adds where ansible-playbook alone does not: record.py's `DROPPED`.
const DROPPED: &[&str] = &[
    "ownerReferences",
    "invocation",
    "exception",
    "duration",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "lastTransitionTime",
    "lastUpdateTime",
];

/// HTTP response headers quoted in a message whose values differ on every
/// request: record.py's `HEADERS`.
const HEADERS: &str = r"'(Audit-Id|audit-id|Date|date|X-Kubernetes-Pf-Flowschema-Uid|X-Kubernetes-Pf-Prioritylevel-Uid)': '[^']*'";

/// Cases where enka registers something else, each with why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// record.py's `normalize`: volatile keys out, the namespace and volatile
/// header values masked, Python's traceback frames cut.
fn normalize(value: &Json, namespace: &str, headers: &fancy_regex::Regex) -> Json {
    match value {
        Json::Object(map) => Json::Object(
            map.iter()
                .filter(|(k, _)| !DROPPED.contains(&k.as_str()))
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("module_stderr", Json::String(text)) => json!(last_line(text)),
                        _ => v.clone(),
                    };
                    (k.clone(), normalize(&v, namespace, headers))
                })
                .collect(),
        ),
        Json::Array(items) => Json::Array(
            items
                .iter()
                .map(|v| normalize(v, namespace, headers))
                .collect(),
        ),
        Json::String(text) => {
            let text = text.split("\nOriginal traceback:").next().unwrap_or("");
            let text = headers.replace_all(text, "'$1': '<masked>'");
            json!(text.replace(namespace, "<namespace>"))
        }
        other => other.clone(),
    }
}

fn last_line(text: &str) -> &str {
    text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("")
}

#[tokio::test]
async fn refused_tasks_register_what_kubernetes_core_registers() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/refusals/config/crd.yaml").await;
    let ns = env.namespace("refusals").await.unwrap();
    let mut enka = Enka::start(env, "tests/refusals/watches.yaml", &ns, &[]);
    enka.await_ready().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("refusals.enka.dev", "v1", "Refusal"),
        "refusals",
    );
    let refusals: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let mut refusal = DynamicObject::new("refusal", &resource);
    refusal.data = json!({"spec": {}});
    refusals
        .create(&PostParams::default(), &refusal)
        .await
        .unwrap();

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = eventually(
        "the refusals' results",
        Duration::from_secs(120),
        || async { config_maps.get_opt("refusal-results").await.unwrap()?.data },
    )
    .await;
    let headers = fancy_regex::Regex::new(HEADERS).unwrap();
    let results: Json = serde_json::from_str(&data["results"]).unwrap();
    let actual = normalize(&results, &ns, &headers);
    let recorded: Json = serde_json::from_str(
        &std::fs::read_to_string(repo_path("tests/refusals/expected.json")).unwrap(),
    )
    .unwrap();
    let mut differences = Vec::new();
    let mut known = Vec::new();
    for (case, want) in recorded["cases"].as_object().unwrap() {
        let got = actual.get(case).cloned().unwrap_or(Json::Null);
        let expected_to_differ = KNOWN_DIFFERENCES.iter().any(|(name, _)| name == case);
        match (got == *want, expected_to_differ) {
            (true, true) => {
                known.push(format!("{case} now agrees: drop it from KNOWN_DIFFERENCES"))
            }
            (false, false) => differences.push(format!(
                "{case}:\n  kubernetes.core: {want}\n  enka:            {got}"
            )),
            _ => {}
        }
    }
    differences.extend(known);
    assert!(
        differences.is_empty(),
        "{} of {} refusals differ from kubernetes.core {}'s:\n{}\n\nenka's log:\n{}",
        differences.len(),
        recorded["cases"].as_object().unwrap().len(),
        recorded["kubernetes_core"],
        differences.join("\n"),
        enka.log()
    );
}
