//! `operator_sdk.util.k8s_status`: writes a custom resource's status, as
//! the upstream collection (0.5.0) does: merged, compared as a subset, and
//! written only when something changes.

use minijinja::Value;
use minijinja::value::ValueKind;
use serde_json::{Map, Value as Json, json};

use super::k8s_common as common;
use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;
use enka_kube::{Error as KubeError, PatchType};

const CONDITION_KEYS: &[&str] = &[
    "type",
    "status",
    "reason",
    "message",
    "lastHeartbeatTime",
    "lastTransitionTime",
];

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
    let api_version = args.str("api_version")?.unwrap_or_else(|| "v1".into());
    let kind = args.required_str("kind")?;
    let name = args.required_str("name")?;
    let namespace = args.str("namespace")?;
    let replace = args.bool("replace", false)? || args.bool("force", false)?;
    let replace_lists = args.bool("replace_lists", false)?;
    let mut status = match args.map("status")? {
        Some(s) => common::to_json(&s)?,
        None => json!({}),
    };
    let conditions = args.list("conditions")?;
    if !conditions.is_empty() {
        if status.get("conditions").is_some() {
            return Err(
                "You cannot specify conditions in both the 'status' and 'conditions' parameters"
                    .into(),
            );
        }
        let checked: Result<Vec<Json>, String> =
            conditions.iter().map(validate_condition).collect();
        let checked = checked.map_err(|error| {
            ModuleError::result(
                "The specified conditions failed to validate".into(),
                vec![("error", Value::from(error))],
            )
        })?;
        status["conditions"] = Json::Array(checked);
    }
    let cluster = ctx.cluster()?.clone();
    let resource = ctx
        .api(cluster.resource(&api_version, &kind))
        .await
        .map_err(|e| common::refused("find the resource", &e))?;
    let ns = if resource.namespaced {
        namespace.as_deref()
    } else {
        None
    };
    let instance = ctx
        .api(cluster.get(&resource, ns, &name))
        .await
        .and_then(|found| found.ok_or_else(|| KubeError::not_found(&resource, &name)))
        .map_err(|e| refused("Failed to retrieve requested object".into(), &e))?;
    let old_status = instance.get("status").cloned().unwrap_or_else(|| json!({}));

    if replace {
        if old_status == status {
            return Ok(Output::changed(false).with("result", common::view(instance)));
        }
        let mut object = instance.clone();
        object["status"] = status;
        let written = ctx
            .api(cluster.replace(&resource, ns, &name, &object, Some("status")))
            .await
            .map_err(|e| status_refused(&e))?;
        return Ok(Output::changed(true).with("result", common::view(written)));
    }

    if status.as_object().is_none_or(Map::is_empty) {
        return Ok(Output::changed(false).with("result", common::view(instance)));
    }
    let mut new_status = status.clone();
    if let Some(new_conditions) = status.get("conditions").and_then(Json::as_array) {
        let old_conditions = old_status
            .get("conditions")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        new_status["conditions"] = Json::Array(merge_conditions(&old_conditions, new_conditions));
    }
    if is_subset(&new_status, &old_status, replace_lists) {
        return Ok(Output::changed(false).with("result", common::view(instance)));
    }
    let patch = json!({ "status": new_status });
    let written = ctx
        .api(cluster.patch(
            &resource,
            ns,
            &name,
            &patch,
            &PatchType::Merge,
            Some("status"),
        ))
        .await
        .map_err(|e| status_refused(&e))?;
    Ok(Output::changed(true).with("result", common::view(written)))
}

/// operator_sdk.util's words for a refused status write (a patch too).
fn status_refused(err: &KubeError) -> ModuleError {
    let msg = format!(
        "Failed to replace status: {}",
        enka_kube::python::api_error_text(err)
    );
    refused(msg, err)
}

/// operator_sdk.util's failed result for a refused call: `msg`, and the
/// answer's status, reason phrase and body under `error`.
fn refused(msg: String, err: &KubeError) -> ModuleError {
    let body = match err {
        KubeError::Api {
            answer: Some(answer),
            ..
        } => answer.body.clone(),
        other => other.to_string(),
    };
    let error = Value::from_pairs([
        (Value::from("status"), Value::from(err.code().unwrap_or(0))),
        (
            Value::from("reason"),
            Value::from(err.http_reason().unwrap_or_default()),
        ),
        (Value::from("body"), Value::from(body)),
    ]);
    ModuleError::result(msg, vec![("error", error)])
}

fn validate_condition(value: &Value) -> Result<Json, String> {
    if value.kind() != ValueKind::Map {
        return Err("each condition must be a mapping".to_owned());
    }
    let mut out = Map::new();
    for key in value.try_iter().map_err(|e| e.to_string())? {
        let k = enka_template::pyrepr::to_text(&key);
        if !CONDITION_KEYS.contains(&k.as_str()) {
            return Err(format!(
                "condition key {k} is not one of {}",
                CONDITION_KEYS.join(", ")
            ));
        }
        let v = value.get_item(&key).unwrap_or_default();
        if v.is_none() || v.is_undefined() {
            continue;
        }
        let json = match (k.as_str(), v.kind()) {
            ("status", ValueKind::Bool) => {
                Json::String(if v.is_true() { "True" } else { "False" }.into())
            }
            _ => common::to_json(&v)?,
        };
        out.insert(k, json);
    }
    for required in ["type", "status"] {
        if !out.contains_key(required) {
            return Err(format!("conditions require {required}"));
        }
    }
    if let Some(status) = out.get("status").and_then(Json::as_str)
        && !matches!(status, "True" | "False" | "Unknown")
    {
        return Err(format!(
            "condition status must be True, False or Unknown, got {status}"
        ));
    }
    if let Some(reason) = out.get("reason").and_then(Json::as_str)
        && !reason.chars().all(|c| c.is_ascii_alphabetic())
    {
        return Err(format!(
            "condition reason must be CamelCase letters, got {reason:?}"
        ));
    }
    Ok(Json::Object(out))
}

/// Merges conditions by type: an existing condition is replaced only when a
/// field other than `lastTransitionTime` differs; new types are appended.
fn merge_conditions(old: &[Json], new: &[Json]) -> Vec<Json> {
    let mut out = old.to_vec();
    for condition in new {
        let kind = condition.get("type");
        match out.iter_mut().find(|c| c.get("type") == kind) {
            Some(existing) => {
                let differs = condition
                    .as_object()
                    .into_iter()
                    .flatten()
                    .any(|(k, v)| k != "lastTransitionTime" && existing.get(k) != Some(v));
                if differs {
                    *existing = condition.clone();
                }
            }
            None => out.push(condition.clone()),
        }
    }
    out
}

/// The collection's subset test: dicts recursively, lists as "every new
/// item is in the old list" unless `replace_lists`.
fn is_subset(new: &Json, old: &Json, replace_lists: bool) -> bool {
    match (new, old) {
        (Json::Object(n), Json::Object(o)) => n
            .iter()
            .all(|(k, v)| o.get(k).is_some_and(|ov| is_subset(v, ov, replace_lists))),
        (Json::Array(n), Json::Array(o)) => {
            if replace_lists {
                n == o
            } else {
                n.iter().all(|item| o.contains(item))
            }
        }
        (n, o) => n == o,
    }
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s_status",
    aliases: &[],
    collections: catalogue::OPERATOR_SDK,
    params: &[
        "api_version",
        "kind",
        "name",
        "namespace",
        "status",
        "conditions",
        "replace_lists",
        "force",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[catalogue::Requirement::Each(&[
        "api_version",
        "kind",
        "name",
    ])],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: Some("operator_sdk.util.k8s_status"),
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_merge_by_type() {
        let old = vec![json!({"type": "A", "status": "True", "lastTransitionTime": "t1"})];
        let same = vec![json!({"type": "A", "status": "True", "lastTransitionTime": "t2"})];
        assert_eq!(merge_conditions(&old, &same), old);
        let flipped = vec![json!({"type": "A", "status": "False"})];
        assert_eq!(merge_conditions(&old, &flipped), flipped);
        let other = vec![json!({"type": "B", "status": "True"})];
        assert_eq!(merge_conditions(&old, &other).len(), 2);
    }

    #[test]
    fn subset_rules() {
        assert!(is_subset(&json!({"a": 1}), &json!({"a": 1, "b": 2}), false));
        assert!(!is_subset(&json!({"a": 2}), &json!({"a": 1}), false));
        assert!(is_subset(&json!({"l": [1]}), &json!({"l": [1, 2]}), false));
        assert!(!is_subset(&json!({"l": [1]}), &json!({"l": [1, 2]}), true));
        assert!(!is_subset(&json!({"new": true}), &json!({}), false));
    }
}
