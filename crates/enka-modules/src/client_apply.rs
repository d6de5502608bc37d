//! kubernetes.core's client-side apply (`k8s` with `apply: true` and no
//! `server_side_apply`), as its `module_utils/apply.py` does it: the object
//! carries its last applied definition in an annotation, and an apply sends
//! a JSON merge patch computed three ways (last applied, desired, actual),
//! with lists merged by key where Kubernetes' strategic merge would
//! (containers by name, Service ports by port), other lists replaced.
//! Expected values: tests/conformance/expected_apply.json, recorded from
//! kubernetes.core by tests/conformance/apply.py.

use serde_json::{Map, Value as Json};

/// The annotation that holds the last applied definition.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Pod template paths whose lists merge by key, and the key.
const POD_SPEC_SUFFIXES: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("volumes", "name"),
    ("imagePullSecrets", "name"),
    ("containers.volumeMounts", "mountPath"),
    ("containers.volumeDevices", "devicePath"),
    ("containers.env", "name"),
    ("containers.ports", "containerPort"),
    ("initContainers.volumeMounts", "mountPath"),
    ("initContainers.volumeDevices", "devicePath"),
    ("initContainers.env", "name"),
    ("initContainers.ports", "containerPort"),
    ("ephemeralContainers.volumeMounts", "mountPath"),
    ("ephemeralContainers.volumeDevices", "devicePath"),
    ("ephemeralContainers.env", "name"),
    ("ephemeralContainers.ports", "containerPort"),
];

/// Where a pod template sits, by kind (kubernetes.core spells `Cronjob` so,
/// and so a CronJob's lists are replaced, not merged).
const POD_SPEC_PREFIXES: &[&str] = &[
    "Pod.spec",
    "Deployment.spec.template.spec",
    "DaemonSet.spec.template.spec",
    "StatefulSet.spec.template.spec",
    "Job.spec.template.spec",
    "Cronjob.spec.jobTemplate.spec.template.spec",
];

/// Other lists that merge by key.
const OTHER_MERGE_KEYS: &[(&str, &str)] = &[
    ("Service.spec.ports", "port"),
    ("ServiceAccount.secrets", "name"),
    ("ValidatingWebhookConfiguration.webhooks", "name"),
    ("MutatingWebhookConfiguration.webhooks", "name"),
];

/// The merge key of the list at `position` (`Kind.path.to.list`), if it
/// merges by key.
fn merge_key(position: &str) -> Option<&'static str> {
    if let Some((_, key)) = OTHER_MERGE_KEYS.iter().find(|(p, _)| *p == position) {
        return Some(key);
    }
    POD_SPEC_PREFIXES.iter().find_map(|prefix| {
        let suffix = position.strip_prefix(prefix)?.strip_prefix('.')?;
        POD_SPEC_SUFFIXES
            .iter()
            .find(|(s, _)| *s == suffix)
            .map(|(_, key)| *key)
    })
}

/// `desired` with its last-applied annotation: what is created when the
/// object does not exist yet.
pub fn annotated(desired: &Json) -> Json {
    dict_merge(desired, &annotation(desired))
}

/// The merge patch an apply of `desired` sends to `actual`; `None` when
/// nothing is to be sent. Fails as kubernetes.core does on a last-applied
/// annotation that is not JSON, or a keyed list item without its key.
pub fn patch_for(actual: &Json, desired: &Json) -> Result<Option<Json>, String> {
    let last_applied = actual
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Json::as_str)
        .filter(|text| !text.is_empty());
    let Some(text) = last_applied else {
        return Ok(Some(annotated(desired)));
    };
    let last: Json = serde_json::from_str(text)
        .map_err(|e| format!("the {LAST_APPLIED} annotation is not JSON: {e}"))?;
    let kind = desired["kind"].as_str().unwrap_or_default().to_owned();
    let patch = merge(&annotated(&last), &annotated(desired), actual, &kind)?;
    Ok(match &patch {
        Json::Object(map) if map.is_empty() => None,
        _ => Some(patch),
    })
}

fn annotation(desired: &Json) -> Json {
    let mut annotations = Map::new();
    annotations.insert(LAST_APPLIED.to_owned(), Json::String(python_json(desired)));
    let mut metadata = Map::new();
    metadata.insert("annotations".to_owned(), Json::Object(annotations));
    let mut out = Map::new();
    out.insert("metadata".to_owned(), Json::Object(metadata));
    Json::Object(out)
}

/// Ansible's `dict_merge`: `b` over `a`, mappings merged recursively.
fn dict_merge(a: &Json, b: &Json) -> Json {
    let (Json::Object(a), Json::Object(b)) = (a, b) else {
        return b.clone();
    };
    let mut result = a.clone();
    for (key, value) in b {
        let merged = match result.get(key) {
            Some(existing @ Json::Object(_)) => dict_merge(existing, value),
            _ => value.clone(),
        };
        result.insert(key.clone(), merged);
    }
    Json::Object(result)
}

fn empty() -> Json {
    Json::Object(Map::new())
}

fn is_empty(value: &Json) -> bool {
    match value {
        Json::Object(map) => map.is_empty(),
        Json::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// Deletions (what `last_applied` had and `desired` dropped) and the delta
/// from `actual` to `desired`, as one patch.
fn merge(
    last_applied: &Json,
    desired: &Json,
    actual: &Json,
    position: &str,
) -> Result<Json, String> {
    let deletions = deletions(last_applied, desired);
    let delta = delta(last_applied, actual, desired, position)?;
    Ok(dict_merge(&deletions, &delta))
}

fn deletions(last_applied: &Json, desired: &Json) -> Json {
    let mut patch = Map::new();
    if let Json::Object(last) = last_applied {
        for (key, last_value) in last {
            let desired_value = desired.get(key).unwrap_or(&Json::Null);
            if last_value.is_object() && desired_value.is_object() {
                let nested = deletions(last_value, desired_value);
                if !is_empty(&nested) {
                    patch.insert(key.clone(), nested);
                }
            } else if last_value != desired_value {
                patch.insert(key.clone(), desired_value.clone());
            }
        }
    }
    Json::Object(patch)
}

fn delta(
    last_applied: &Json,
    actual: &Json,
    desired: &Json,
    position: &str,
) -> Result<Json, String> {
    let mut patch = Map::new();
    let Json::Object(desired) = desired else {
        return Ok(Json::Object(patch));
    };
    for (key, desired_value) in desired {
        let here = format!("{position}.{key}");
        let actual_value = actual.get(key).unwrap_or(&Json::Null);
        if actual_value.is_null() {
            patch.insert(key.clone(), desired_value.clone());
        } else if desired_value.is_object() {
            let last = last_applied.get(key).cloned().unwrap_or_else(empty);
            let nested = delta(&last, actual_value, desired_value, &here)?;
            if !is_empty(&nested) {
                patch.insert(key.clone(), nested);
            }
        } else if let Json::Array(desired_items) = desired_value {
            let last = last_applied
                .get(key)
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default();
            let actual_items = actual_value.as_array().cloned().unwrap_or_default();
            let merged = list_merge(&last, &actual_items, desired_items, &here)?;
            if !merged.is_empty() {
                let kept: Vec<Json> = merged.into_iter().filter(|item| !item.is_null()).collect();
                patch.insert(key.clone(), Json::Array(kept));
            }
        } else if actual_value != desired_value {
            patch.insert(key.clone(), desired_value.clone());
        }
    }
    Ok(Json::Object(patch))
}

/// A list keyed by `key`, in order.
fn by_key<'a>(
    items: &'a [Json],
    key: &str,
    position: &str,
) -> Result<Vec<(&'a Json, &'a Json)>, String> {
    items
        .iter()
        .map(|item| {
            item.get(key)
                .map(|k| (k, item))
                .ok_or_else(|| format!("Expected key '{key}' not found in position {position}"))
        })
        .collect()
}

fn find<'a>(list: &[(&Json, &'a Json)], key: &Json) -> Option<&'a Json> {
    list.iter().find(|(k, _)| *k == key).map(|(_, item)| *item)
}

fn list_merge(
    last_applied: &[Json],
    actual: &[Json],
    desired: &[Json],
    position: &str,
) -> Result<Vec<Json>, String> {
    let Some(key) = merge_key(position).filter(|_| !last_applied.is_empty()) else {
        return Ok(desired.to_vec());
    };
    let last = by_key(last_applied, key, position)?;
    let actual = by_key(actual, key, position)?;
    let desired = by_key(desired, key, position)?;
    let mut result = Vec::new();
    for (k, desired_item) in &desired {
        match (find(&actual, k), find(&last, k)) {
            (Some(actual_item), Some(last_item)) => {
                let patch = merge(last_item, desired_item, actual_item, position)?;
                result.push(dict_merge(actual_item, &patch));
            }
            _ => result.push((*desired_item).clone()),
        }
    }
    for (k, actual_item) in &actual {
        if find(&desired, k).is_none() && find(&last, k).is_none() {
            result.push((*actual_item).clone());
        }
    }
    Ok(result)
}

/// Python's `json.dumps(value, separators=(",", ":"), sort_keys=True)`:
/// compact, keys sorted, everything outside printable ASCII escaped.
pub fn python_json(value: &Json) -> String {
    let mut out = String::new();
    write_python_json(value, &mut out);
    out
}

fn write_python_json(value: &Json, out: &mut String) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(&n.to_string()),
        Json::String(s) => enka_template::json_string(out, s, true),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_python_json(item, out);
            }
            out.push(']');
        }
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                enka_template::json_string(out, key, true);
                out.push(':');
                write_python_json(&map[key.as_str()], out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value as Json;

    /// Every case recorded from kubernetes.core gives the same object to
    /// create, or the same patch (or none) to send.
    #[test]
    fn matches_kubernetes_core() {
        let recorded: Json = serde_json::from_str(include_str!(
            "../../../tests/conformance/expected_apply.json"
        ))
        .expect("expected_apply.json");
        let cases: Json =
            serde_yaml::from_str(include_str!("../../../tests/conformance/apply_cases.yaml"))
                .expect("apply_cases.yaml");
        let cases = cases.as_array().expect("a list of cases");
        let expected = recorded["cases"].as_array().expect("recorded cases");
        assert_eq!(
            cases.len(),
            expected.len(),
            "run tests/conformance/apply.py"
        );
        for (case, want) in cases.iter().zip(expected) {
            let name = want["name"].as_str().unwrap_or_default();
            let desired = &case["desired"];
            if let Some(created) = want.get("create") {
                assert_eq!(&super::annotated(desired), created, "{name}");
                continue;
            }
            let got = super::patch_for(&want["actual"], desired).expect(name);
            assert_eq!(
                got.as_ref(),
                want["patch"].as_object().map(|_| &want["patch"]),
                "{name}"
            );
        }
    }

    #[test]
    fn python_json_escapes_as_python_does() {
        let value = serde_json::json!({"b": "é😀\u{7f}", "a": [1, null, true]});
        assert_eq!(
            super::python_json(&value),
            r#"{"a":[1,null,true],"b":"\u00e9\ud83d\ude00\u007f"}"#
        );
    }

    #[test]
    fn an_annotation_that_is_not_json_fails_the_apply() {
        let actual = serde_json::json!({"metadata": {"annotations": {super::LAST_APPLIED: "{"}}});
        let desired = serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(super::patch_for(&actual, &desired).is_err());
    }
}
