//! What an operator left in the cluster, read back and normalised so two runs
//! on different namespaces can be compared object by object.
//!
//! Everything the API server or kube-controller-manager sets differently in
//! any two runs is taken out here, and each such rule is one entry of
//! [`BY_DESIGN`], printed once per run with its reason.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope, verbs};
use serde_json::{Map, Value as Json};

/// The field manager of everything the harness writes.
pub const HARNESS_MANAGER: &str = "differential";

/// Managers whose objects are the control plane's, not an operator's.
const CONTROL_PLANE_MANAGERS: &[&str] = &[
    "kube-controller-manager",
    // kube-controller-manager's controller that fills aggregated ClusterRoles
    // (`view`, `edit`, `admin`) writes under its own name.
    "clusterrole-aggregation-controller",
    "kube-apiserver",
    "kube-scheduler",
    "kwok",
    kube_env::nodes::FIELD_MANAGER,
];

/// Differences that are not the operators': what the harness leaves out of
/// the comparison, and why.
pub const BY_DESIGN: &[(&str, &str)] = &[
    (
        "metadata.uid, resourceVersion, creationTimestamp, deletionTimestamp, managedFields; ownerReferences[].uid",
        "set by the API server, different in any two runs; field managers name the client (upstream's Python client, enka)",
    ),
    (
        "the namespace's name",
        "each side runs in its own namespace; every occurrence is replaced by <namespace>",
    ),
    (
        "status of objects other than the watched custom resources",
        "written by kube-controller-manager and kwok's simulated nodes, not by the operator",
    ),
    (
        "Service spec.clusterIP, spec.clusterIPs",
        "allocated by the API server",
    ),
    (
        "conditions[].lastTransitionTime, ansibleResult.completion",
        "timestamps",
    ),
    (
        "creationTimestamp, time, uid, resourceVersion and manager inside a condition's message",
        "an API server's refusal quotes the object it refused, with what it set and which client wrote it",
    ),
    (
        "the Running condition of a custom resource whose Failure condition is True",
        "a failed run is retried, and whether a retry is in flight when the objects are read is timing (upstream, 35 s a run on awx-operator, is nearly always in one)",
    ),
    (
        "Events and Leases",
        "Event names are random and their count depends on timing; Leases are leader election's",
    ),
    (
        "objects only the control plane manages (ReplicaSets, Pods, claims of StatefulSets, the default ServiceAccount, kube-root-ca.crt)",
        "made by kube-controller-manager from what the operator created",
    ),
];

/// Kinds never compared (see [`BY_DESIGN`]).
fn ignored_kind(resource: &ApiResource) -> bool {
    matches!(
        (resource.group.as_str(), resource.kind.as_str()),
        ("", "Event")
            | ("events.k8s.io", "Event")
            | ("coordination.k8s.io", "Lease")
            | ("", "Endpoints")
            | ("discovery.k8s.io", "EndpointSlice")
    )
}

/// Every kind that can be listed, found once per control plane.
pub struct Kinds(Vec<(ApiResource, bool)>);

impl Kinds {
    pub async fn discover(client: &Client) -> Kinds {
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .unwrap_or_else(|e| panic!("API discovery: {e}"));
        let mut kinds = Vec::new();
        for group in discovery.groups() {
            // Every kind of the group, each at its most stable version: the
            // group's preferred version alone misses kinds served only at
            // another (the seed's Zundoko and Kiyoshi are v1beta1 beside
            // Hikawa's v1beta2).
            for (resource, capabilities) in group.resources_by_stability() {
                if !capabilities.supports_operation(verbs::LIST) || ignored_kind(&resource) {
                    continue;
                }
                kinds.push((resource, capabilities.scope == Scope::Namespaced));
            }
        }
        Kinds(kinds)
    }
}

/// Which objects belong to a run.
pub struct RunScope {
    /// The run's namespace: every object in it counts.
    pub namespace: String,
    /// Objects elsewhere count when created at or after this time
    /// (RFC 3339, seconds) by a manager that is not the control plane's.
    pub since: String,
    /// The watched kinds: their status is the operator's and is compared.
    pub primary: Vec<(String, String)>,
}

/// One reading of the cluster.
pub struct Snapshot {
    /// Normalised objects by `<group>/<kind> <namespace>/<name>`.
    pub objects: BTreeMap<String, Json>,
    /// Every included object's resourceVersion: changes when anything does.
    pub fingerprint: String,
    /// Whether a watched object has a `Running` condition with reason
    /// `Running` (a reconcile in flight).
    pub running: bool,
    /// A failed custom resource's retry is in flight.
    pub retrying: bool,
    /// Workloads the operator made that are not at their end yet: a
    /// Deployment not Available with every replica updated, a StatefulSet
    /// without every replica Ready, a Job neither Complete nor Failed.
    pub workloads_pending: Vec<String>,
}

pub async fn take(client: &Client, kinds: &Kinds, scope: &RunScope) -> Snapshot {
    let mut objects = BTreeMap::new();
    let mut fingerprint = String::new();
    let mut running = false;
    let mut retrying = false;
    let mut workloads_pending = Vec::new();
    for (resource, namespaced) in &kinds.0 {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        let Ok(list) = api.list(&ListParams::default()).await else {
            // A kind whose CRD went away between discovery and now.
            continue;
        };
        for object in list.items {
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            let in_scope = *namespaced && namespace == scope.namespace;
            if !in_scope && !made_here_by_an_operator(&object, &scope.since) {
                continue;
            }
            if only_control_plane_managed(&object) {
                continue;
            }
            let primary = scope
                .primary
                .iter()
                .any(|(group, kind)| *group == resource.group && *kind == resource.kind);
            // A failed custom resource being retried has reached its end
            // (the same Failure each time); only a first run is awaited.
            if primary && reconcile_in_flight(&object) {
                if failed(&object.data) {
                    retrying = true;
                } else {
                    running = true;
                }
            }
            let key = format!(
                "{}/{} {}/{}",
                resource.group,
                resource.kind,
                if *namespaced {
                    namespace.replace(&scope.namespace, "<namespace>")
                } else {
                    "-".to_owned()
                },
                object.metadata.name.clone().unwrap_or_default()
            );
            if workload_pending(resource, &object) {
                workloads_pending.push(key.clone());
            }
            fingerprint.push_str(&format!(
                "{key}@{};",
                object.metadata.resource_version.clone().unwrap_or_default()
            ));
            let mut value = serde_json::to_value(&object).unwrap_or(Json::Null);
            // A list's items carry no apiVersion or kind.
            value["apiVersion"] = Json::String(resource.api_version.clone());
            value["kind"] = Json::String(resource.kind.clone());
            let normal = normalise(value, resource, primary, &scope.namespace);
            objects.insert(key, normal);
        }
    }
    Snapshot {
        objects,
        fingerprint,
        running,
        retrying,
        workloads_pending,
    }
}

fn managers(object: &DynamicObject) -> Vec<String> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

fn only_control_plane_managed(object: &DynamicObject) -> bool {
    let managers = managers(object);
    !managers.is_empty()
        && managers
            .iter()
            .all(|m| CONTROL_PLANE_MANAGERS.contains(&m.as_str()))
}

fn made_here_by_an_operator(object: &DynamicObject, since: &str) -> bool {
    let created = object
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    // Both are RFC 3339 in UTC with the same shape, so they order as text.
    created.as_str() >= since
        && managers(object)
            .iter()
            .any(|m| !CONTROL_PLANE_MANAGERS.contains(&m.as_str()) && m.as_str() != HARNESS_MANAGER)
}

/// Whether `object` is a workload still on its way to where a user would
/// stop waiting for it.
fn workload_pending(resource: &ApiResource, object: &DynamicObject) -> bool {
    let status = &object.data["status"];
    let generation = object.metadata.generation.unwrap_or(0);
    let observed = status["observedGeneration"].as_i64().unwrap_or(0) >= generation;
    let replicas = object.data["spec"]["replicas"].as_i64().unwrap_or(1);
    let count = |field: &str| status[field].as_i64().unwrap_or(0);
    let condition = |kind: &str| {
        status["conditions"].as_array().is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
    };
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("apps", "Deployment") => {
            !(observed
                && condition("Available")
                && count("updatedReplicas") == replicas
                && count("availableReplicas") == replicas)
        }
        ("apps", "StatefulSet") => !(observed && count("readyReplicas") == replicas),
        ("batch", "Job") => !(condition("Complete") || condition("Failed")),
        _ => false,
    }
}

fn reconcile_in_flight(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c["type"] == "Running" && c["status"] == "True" && c["reason"] == "Running"
            })
        })
}

/// Whether the object's `Failure` condition is True.
fn failed(object: &Json) -> bool {
    object["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| has_failure(conditions))
}

fn has_failure(conditions: &[Json]) -> bool {
    conditions
        .iter()
        .any(|c| c["type"] == "Failure" && c["status"] == "True")
}

/// The object as the comparison sees it (see [`BY_DESIGN`]).
fn normalise(object: Json, resource: &ApiResource, primary: bool, namespace: &str) -> Json {
    let Json::Object(mut fields) = object else {
        return Json::Null;
    };
    let mut out = Map::new();
    if let Some(Json::Object(metadata)) = fields.remove("metadata") {
        let mut kept = Map::new();
        for key in [
            "name",
            "generateName",
            "namespace",
            "labels",
            "annotations",
            "finalizers",
            "generation",
        ] {
            if let Some(value) = metadata.get(key) {
                kept.insert(key.to_owned(), value.clone());
            }
        }
        if let Some(Json::Array(owners)) = metadata.get("ownerReferences") {
            let owners = owners
                .iter()
                .map(|owner| {
                    let mut owner = owner.clone();
                    if let Some(owner) = owner.as_object_mut() {
                        owner.remove("uid");
                    }
                    owner
                })
                .collect();
            kept.insert("ownerReferences".to_owned(), Json::Array(owners));
        }
        out.insert("metadata".to_owned(), Json::Object(kept));
    }
    let status = fields.remove("status");
    for (key, value) in fields {
        out.insert(key, value);
    }
    if resource.group.is_empty()
        && resource.kind == "Service"
        && let Some(spec) = out.get_mut("spec").and_then(Json::as_object_mut)
    {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if primary && let Some(mut status) = status {
        if let Some(conditions) = status.get_mut("conditions").and_then(Json::as_array_mut) {
            for condition in conditions.iter_mut() {
                if let Some(condition) = condition.as_object_mut() {
                    condition.remove("lastTransitionTime");
                    if let Some(Json::String(message)) = condition.get_mut("message") {
                        *message = server_set_fields_masked(message);
                    }
                    if let Some(result) = condition
                        .get_mut("ansibleResult")
                        .and_then(Json::as_object_mut)
                    {
                        result.remove("completion");
                    }
                }
            }
            if has_failure(conditions) {
                conditions.retain(|c| c["type"] != "Running");
            }
            conditions.sort_by(|a, b| a["type"].to_string().cmp(&b["type"].to_string()));
        }
        out.insert("status".to_owned(), status);
    }
    replace_strings(Json::Object(out), namespace)
}

/// `message` with the values the API server sets on an object it quotes
/// (at any depth of JSON quoting) masked.
fn server_set_fields_masked(message: &str) -> String {
    static FIELDS: std::sync::OnceLock<Option<fancy_regex::Regex>> = std::sync::OnceLock::new();
    let fields = FIELDS.get_or_init(|| {
        fancy_regex::Regex::new(
            r#"(creationTimestamp|resourceVersion|uid|time|manager)((?:\\*"|:)+)[^\\"]*"#,
        )
        .ok()
    });
    match fields {
        Some(fields) => fields
            .replace_all(message, "$1$2<set by the API server>")
            .into_owned(),
        None => message.to_owned(),
    }
}

fn replace_strings(value: Json, namespace: &str) -> Json {
    match value {
        Json::String(text) => Json::String(text.replace(namespace, "<namespace>")),
        Json::Array(items) => Json::Array(
            items
                .into_iter()
                .map(|item| replace_strings(item, namespace))
                .collect(),
        ),
        Json::Object(fields) => Json::Object(
            fields
                .into_iter()
                .map(|(key, item)| {
                    (
                        key.replace(namespace, "<namespace>"),
                        replace_strings(item, namespace),
                    )
                })
                .collect(),
        ),
        other => other,
    }
}
