//! What the Kubernetes modules share: JSON conversion, namespace defaults,
//! owner references, change detection and waiting.

use std::time::{Duration, Instant};

use minijinja::Value;
use serde_json::{Map, Value as Json, json};

use super::{ModuleContext, ModuleError};
use enka_kube::{Error as KubeError, Owner, Resource, python};
use enka_template::convert;

/// API groups whose types support strategic merge patch.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "node.k8s.io",
    "certificates.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
];

/// Whether strategic merge patch works for this resource.
pub fn supports_strategic_merge(resource: &Resource) -> bool {
    BUILTIN_GROUPS.contains(&resource.group.as_str())
}

/// A template value as JSON for the API.
pub fn to_json(value: &Value) -> Result<Json, String> {
    convert::to_json(value).map_err(|e| e.to_string())
}

/// An object from the API as a template value, converted lazily where a
/// role reads it.
pub fn view(json: Json) -> Value {
    convert::json_view(std::sync::Arc::new(json))
}

/// Maps an API error to Ansible's message shape.
pub fn api_failure(action: &str, err: &KubeError) -> String {
    format!("Failed to {action}: {err}")
}

/// The namespace an object goes to: its own, the module's, the owner's,
/// or `default`; none for cluster-scoped kinds.
pub fn namespace_for(
    resource: &Resource,
    own: Option<&str>,
    arg: Option<&str>,
    owner: Option<&Owner>,
) -> Option<String> {
    if !resource.namespaced {
        return None;
    }
    Some(
        own.or(arg)
            .map(str::to_owned)
            .or_else(|| owner.and_then(|o| o.namespace.clone()))
            .unwrap_or_else(|| "default".to_owned()),
    )
}

/// Whether `object` is the owner itself.
pub fn is_owner(owner: &Owner, resource: &Resource, namespace: Option<&str>, name: &str) -> bool {
    owner.kind == resource.kind
        && owner.group == resource.group
        && owner.name == name
        && owner.namespace.as_deref() == namespace
}

/// Marks `object` as a dependent of `owner`, as upstream's proxy does: an
/// ownerReference when the owner is cluster-scoped or in the same
/// namespace, otherwise the `operator-sdk/primary-resource` annotations.
/// The reference names the owner as controller when the owner asks for it
/// and the object has no controller yet (an object has at most one).
pub fn inject_owner(object: &mut Json, owner: &Owner, namespace: Option<&str>) {
    let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) else {
        return;
    };
    let same_scope = match (&owner.namespace, namespace) {
        (None, _) => true,
        (Some(owner_ns), Some(ns)) => owner_ns == ns,
        (Some(_), None) => false,
    };
    if same_scope {
        let refs = meta
            .entry("ownerReferences")
            .or_insert_with(|| Json::Array(Vec::new()));
        if let Some(list) = refs.as_array_mut()
            && !list
                .iter()
                .any(|r| r.get("uid").and_then(Json::as_str) == Some(owner.uid.as_str()))
        {
            let controlled = list
                .iter()
                .any(|r| r.get("controller").and_then(Json::as_bool) == Some(true));
            let mut reference = json!({
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
            });
            if owner.controller && !controlled {
                reference["controller"] = Json::Bool(true);
            }
            list.push(reference);
        }
    } else {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Json::Object(Map::new()));
        if let Some(map) = annotations.as_object_mut() {
            let primary = format!(
                "{}/{}",
                owner.namespace.as_deref().unwrap_or_default(),
                owner.name
            );
            let kind = if owner.group.is_empty() {
                owner.kind.clone()
            } else {
                format!("{}.{}", owner.kind, owner.group)
            };
            map.insert(
                "operator-sdk/primary-resource".into(),
                Json::String(primary),
            );
            map.insert(
                "operator-sdk/primary-resource-type".into(),
                Json::String(kind),
            );
        }
    }
}

/// Whether `object` is already marked as `owner`'s dependent, by an
/// ownerReference or by upstream's primary-resource annotation.
pub fn owned_by(object: &Json, owner: &Owner) -> bool {
    let by_reference = object
        .pointer("/metadata/ownerReferences")
        .and_then(Json::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Json::as_str) == Some(owner.uid.as_str()))
        });
    let primary = format!(
        "{}/{}",
        owner.namespace.as_deref().unwrap_or_default(),
        owner.name
    );
    let by_annotation = object
        .pointer("/metadata/annotations/operator-sdk~1primary-resource")
        .and_then(Json::as_str)
        == Some(primary.as_str());
    by_reference || by_annotation
}

/// Whether every field of `wanted` already has that value in `actual`
/// (lists must be equal). When true, a patch with `wanted` changes nothing.
pub fn is_subset(wanted: &Json, actual: &Json) -> bool {
    match (wanted, actual) {
        (Json::Object(w), Json::Object(a)) => w.iter().all(|(k, v)| match a.get(k) {
            Some(av) => is_subset(v, av),
            None => v.is_null(),
        }),
        (Json::Array(w), Json::Array(a)) => {
            w.len() == a.len() && w.iter().zip(a).all(|(x, y)| is_subset(x, y))
        }
        (Json::Number(w), Json::Number(a)) => w.as_f64() == a.as_f64(),
        (w, a) => w == a,
    }
}

/// The object without fields that change on every write.
fn comparable(object: &Json) -> Json {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) {
        for key in [
            "resourceVersion",
            "managedFields",
            "generation",
            "creationTimestamp",
        ] {
            meta.remove(key);
        }
    }
    object
}

/// Whether a write changed the object.
pub fn changed(before: &Json, after: &Json) -> bool {
    comparable(before) != comparable(after)
}

/// `wait_condition`: a condition `type` with `status` (and `reason`).
#[derive(Debug, Clone)]
pub struct WaitCondition {
    pub kind: String,
    pub status: String,
    pub reason: Option<String>,
}

/// Whether `object` satisfies the wait: the condition if given, otherwise
/// readiness for the kinds Ansible knows (Deployment, DaemonSet, Pod,
/// StatefulSet), otherwise existence.
pub fn ready(object: &Json, condition: Option<&WaitCondition>) -> bool {
    if let Some(condition) = condition {
        let conditions = object
            .pointer("/status/conditions")
            .and_then(Json::as_array);
        return conditions.is_some_and(|list| {
            list.iter().any(|c| {
                c.get("type").and_then(Json::as_str) == Some(condition.kind.as_str())
                    && c.get("status").and_then(Json::as_str) == Some(condition.status.as_str())
                    && condition
                        .reason
                        .as_deref()
                        .is_none_or(|r| c.get("reason").and_then(Json::as_str) == Some(r))
            })
        });
    }
    let int = |ptr: &str| object.pointer(ptr).and_then(Json::as_i64).unwrap_or(0);
    match object.get("kind").and_then(Json::as_str) {
        Some("Deployment") => {
            let wanted = object
                .pointer("/spec/replicas")
                .and_then(Json::as_i64)
                .unwrap_or(1);
            int("/status/observedGeneration") >= int("/metadata/generation")
                && int("/status/availableReplicas") >= wanted
                && int("/status/updatedReplicas") >= wanted
        }
        Some("StatefulSet") => {
            let wanted = object
                .pointer("/spec/replicas")
                .and_then(Json::as_i64)
                .unwrap_or(1);
            int("/status/readyReplicas") >= wanted
        }
        Some("DaemonSet") => {
            int("/status/desiredNumberScheduled") == int("/status/numberReady")
                && int("/status/observedGeneration") >= int("/metadata/generation")
        }
        Some("Pod") => object
            .pointer("/status/conditions")
            .and_then(Json::as_array)
            .is_some_and(|list| {
                list.iter().any(|c| {
                    c.get("type").and_then(Json::as_str) == Some("Ready")
                        && c.get("status").and_then(Json::as_str) == Some("True")
                })
            }),
        _ => true,
    }
}

/// Reads the wait arguments.
pub fn wait_args(
    args: &super::Args<'_>,
) -> Result<(bool, Duration, Duration, Option<WaitCondition>), String> {
    let wait = args.bool("wait", false)?;
    let timeout = args
        .seconds("wait_timeout")?
        .unwrap_or(Duration::from_secs(120));
    let sleep = args
        .seconds("wait_sleep")?
        .unwrap_or(Duration::from_secs(5));
    let condition = match args.map("wait_condition")? {
        Some(c) => {
            let field = |k: &str| {
                c.get_attr(k)
                    .ok()
                    .filter(|v| !v.is_undefined() && !v.is_none())
                    .map(|v| enka_template::pyrepr::to_text(&v))
            };
            Some(WaitCondition {
                kind: field("type").ok_or("wait_condition needs a type")?,
                status: field("status").unwrap_or_else(|| "True".to_owned()),
                reason: field("reason"),
            })
        }
        None => None,
    };
    Ok((
        wait,
        timeout,
        sleep.max(Duration::from_millis(50)),
        condition,
    ))
}

/// How a wait ended: whether the last check passed, what it read, and the
/// whole seconds since the wait began at that check (kubernetes.core's
/// `duration`).
pub struct Waited<T> {
    /// The last check passed.
    pub ready: bool,
    /// What the last check read (none when the object was not there).
    pub last: Option<T>,
    /// Whole seconds from the start to the last check.
    pub seconds: u64,
}

/// kubernetes.core's waiter: checks at once, then again after each `sleep`
/// while less than `timeout` has passed (so the last sleep may run past the
/// timeout, as its clock does), until a check passes or the run's own
/// deadline comes.
pub async fn wait_for<T, F, Fut>(
    ctx: &mut ModuleContext<'_>,
    timeout: Duration,
    sleep: Duration,
    mut check: F,
) -> Result<Waited<T>, KubeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(bool, Option<T>), KubeError>>,
{
    let began = Instant::now();
    loop {
        let started = Instant::now();
        let (ready, last) = check().await?;
        ctx.api_time += started.elapsed();
        let past_deadline = ctx.deadline.is_some_and(|d| Instant::now() >= d);
        if ready || began.elapsed() >= timeout || past_deadline {
            return Ok(Waited {
                ready,
                last,
                seconds: began.elapsed().as_secs(),
            });
        }
        // The run's deadline may cut the sleep short: one last check then.
        let pause = ctx.deadline.map_or(sleep, |d| {
            sleep.min(d.saturating_duration_since(Instant::now()))
        });
        tokio::time::sleep(pause).await;
    }
}

/// kubernetes.core's failed result when the API server refused `action`
/// (`create object`, `patch object`, …): `msg` quotes the answer's body as
/// Python prints bytes, `reason` is the answer's HTTP reason phrase. A kind
/// the server does not serve, and a request that got no answer, fail with
/// a message alone, as there.
pub fn refused(action: &str, err: &KubeError) -> ModuleError {
    match err {
        KubeError::Api { .. } => ModuleError::result(
            format!("Failed to {action}: {}", python::quoted_body(err)),
            err.http_reason()
                .map(|reason| vec![("reason", Value::from(reason))])
                .unwrap_or_default(),
        ),
        KubeError::UnknownKind { .. } => ModuleError::Failed(err.to_string()),
        KubeError::Transport(_) => ModuleError::Failed(format!("Failed to {action}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(controller: bool) -> Owner {
        Owner {
            api_version: "cache.example.com/v1".into(),
            group: "cache.example.com".into(),
            kind: "Memcached".into(),
            name: "m".into(),
            uid: "u-1".into(),
            namespace: Some("ns".into()),
            controller,
        }
    }

    fn references(object: &Json) -> &Json {
        &object["metadata"]["ownerReferences"]
    }

    #[test]
    fn an_owner_reference_names_the_controller_only_when_asked_and_free() {
        let mut plain = json!({"metadata": {"name": "d"}});
        inject_owner(&mut plain, &owner(false), Some("ns"));
        assert_eq!(
            references(&plain),
            &json!([{"apiVersion": "cache.example.com/v1", "kind": "Memcached", "name": "m", "uid": "u-1"}])
        );

        let mut controlled = json!({"metadata": {"name": "d"}});
        inject_owner(&mut controlled, &owner(true), Some("ns"));
        assert_eq!(references(&controlled)[0]["controller"], json!(true));

        // Another controller already: ours is a plain reference beside it.
        let other = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u-2", "controller": true});
        let mut taken = json!({"metadata": {"name": "d", "ownerReferences": [other]}});
        inject_owner(&mut taken, &owner(true), Some("ns"));
        assert_eq!(references(&taken)[1].get("controller"), None);
        assert_eq!(references(&taken).as_array().map(Vec::len), Some(2));

        // Already ours: unchanged.
        inject_owner(&mut controlled, &owner(true), Some("ns"));
        assert_eq!(references(&controlled).as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn an_owner_elsewhere_is_named_in_annotations() {
        let mut object = json!({"metadata": {"name": "d"}});
        inject_owner(&mut object, &owner(true), Some("other"));
        assert_eq!(object["metadata"].get("ownerReferences"), None);
        assert_eq!(
            object["metadata"]["annotations"],
            json!({
                "operator-sdk/primary-resource": "ns/m",
                "operator-sdk/primary-resource-type": "Memcached.cache.example.com",
            })
        );
    }
}
