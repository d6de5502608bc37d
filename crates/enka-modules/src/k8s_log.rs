//! `kubernetes.core.k8s_log`: reads a pod's log.

use minijinja::Value;
use serde_json::Value as Json;

use super::k8s_common as common;
use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
    let kind = args.str("kind")?.unwrap_or_else(|| "Pod".into());
    let api_version = args.str("api_version")?.unwrap_or_else(|| "v1".into());
    let namespace = args
        .str("namespace")?
        .or_else(|| ctx.owner.and_then(|o| o.namespace.clone()))
        .unwrap_or_else(|| "default".into());
    let cluster = ctx.cluster()?.clone();
    let pod = if kind == "Pod" {
        args.required_str("name")?
    } else {
        // For workloads, the first pod their selector matches.
        let name = args.required_str("name")?;
        let resource = ctx
            .api(cluster.resource(&api_version, &kind))
            .await
            .map_err(|e| common::api_failure("find the resource", &e))?;
        let object = ctx
            .api(cluster.get(&resource, Some(&namespace), &name))
            .await
            .map_err(|e| common::api_failure("get the object", &e))?
            .ok_or_else(|| format!("{kind} {name} was not found"))?;
        let labels = object
            .pointer("/spec/selector/matchLabels")
            .and_then(Json::as_object)
            .ok_or_else(|| format!("{kind} {name} has no spec.selector.matchLabels"))?;
        let selector: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let pods = ctx
            .api(cluster.resource("v1", "Pod"))
            .await
            .map_err(|e| common::api_failure("find pods", &e))?;
        let list = ctx
            .api(cluster.list(&pods, Some(&namespace), Some(&selector.join(",")), None))
            .await
            .map_err(|e| common::api_failure("list pods", &e))?;
        let selector = selector.join(",");
        list.first()
            .and_then(|p| p.pointer("/metadata/name").and_then(Json::as_str))
            .map(str::to_owned)
            .ok_or_else(|| {
                format!("No pods in namespace {namespace} matched selector {selector}")
            })?
    };
    let container = args.str("container")?;
    let log = ctx
        .api(cluster.logs(
            &namespace,
            &pod,
            container.as_deref(),
            args.int("since_seconds")?,
            args.int("tail_lines")?,
            args.bool("previous", false)?,
        ))
        .await
        .map_err(|e| match e.code() {
            // kubernetes.core's own words for a Pod that is not there.
            Some(404) => format!("Pod {namespace}/{pod} not found."),
            _ => format!(
                "Unable to retrieve log from Pod due to: {}",
                api_message(&e)
            ),
        })?;
    let lines: Vec<Value> = log.lines().map(Value::from).collect();
    Ok(Output::changed(false)
        .with("log", log.as_str())
        .with("log_lines", lines))
}

/// The API server's message, as kubernetes.core's `get_exception_message`
/// reads it from the answer's body.
fn api_message(err: &enka_kube::Error) -> String {
    match err {
        enka_kube::Error::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s_log",
    aliases: &[],
    collections: catalogue::KUBERNETES,
    params: &[
        "api_version",
        "kind",
        "name",
        "namespace",
        "label_selectors",
        "container",
        "since_seconds",
        "tail_lines",
        "previous",
        "all_containers",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: None,
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
