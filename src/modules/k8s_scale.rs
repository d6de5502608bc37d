//! `kubernetes.core.k8s_scale`: sets `spec.replicas`.

use serde_json::{Value as Json, json};

use super::k8s_common as common;
use super::{Args, ModuleContext, Output};
use crate::kube::PatchType;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, String> {
    let (api_version, kind, name, namespace) = match args.map("resource_definition")? {
        Some(def) => {
            let def = common::to_json(&def)?;
            let get = |p: &str| def.pointer(p).and_then(Json::as_str).map(str::to_owned);
            (
                get("/apiVersion").unwrap_or_else(|| "v1".into()),
                get("/kind").ok_or("resource_definition has no kind")?,
                get("/metadata/name").ok_or("resource_definition has no name")?,
                get("/metadata/namespace"),
            )
        }
        None => (
            args.str("api_version")?.unwrap_or_else(|| "v1".into()),
            args.required_str("kind")?,
            args.required_str("name")?,
            args.str("namespace")?,
        ),
    };
    let replicas = args
        .int("replicas")?
        .ok_or("missing required arguments: replicas")?;
    let current = args.int("current_replicas")?;
    let (wait, timeout, sleep, _) = common::wait_args(args)?;
    let wait = wait || !args.has("wait");
    let cluster = ctx.cluster()?.clone();
    let resource = ctx
        .api(cluster.resource(&api_version, &kind))
        .await
        .map_err(|e| common::api_failure("find the resource", &e))?;
    let ns = common::namespace_for(&resource, namespace.as_deref(), None, ctx.owner);
    let object = ctx
        .api(cluster.get(&resource, ns.as_deref(), &name))
        .await
        .map_err(|e| common::api_failure("get the object", &e))?
        .ok_or_else(|| format!("{kind} {name} was not found"))?;
    let existing = object
        .pointer("/spec/replicas")
        .and_then(Json::as_i64)
        .unwrap_or(1);
    if current.is_some_and(|c| c != existing) {
        return Ok(Output::changed(false)
            .with(
                "msg",
                "Resource not scaled as current_replicas didn't match",
            )
            .with("result", common::view(object)));
    }
    if existing == replicas {
        return Ok(Output::changed(false).with("result", common::view(object)));
    }
    let patch = json!({"spec": {"replicas": replicas}});
    let patched = ctx
        .api(cluster.patch(
            &resource,
            ns.as_deref(),
            &name,
            &patch,
            &PatchType::Merge,
            None,
        ))
        .await
        .map_err(|e| common::api_failure("scale", &e))?;
    let result = if wait {
        let found = common::poll(ctx, timeout, sleep, || {
            let cluster = cluster.clone();
            let resource = resource.clone();
            let ns = ns.clone();
            let name = name.clone();
            async move {
                let object = cluster.get(&resource, ns.as_deref(), &name).await?;
                Ok(object.filter(|o| {
                    let ready = o
                        .pointer("/status/readyReplicas")
                        .and_then(Json::as_i64)
                        .unwrap_or(0);
                    let seen = o
                        .pointer("/status/replicas")
                        .and_then(Json::as_i64)
                        .unwrap_or(0);
                    ready == replicas || (replicas == 0 && seen == 0)
                }))
            }
        })
        .await?;
        found.ok_or_else(|| {
            format!(
                "Resource scaling timed out after {} seconds",
                timeout.as_secs()
            )
        })?
    } else {
        patched
    };
    Ok(Output::changed(true).with("result", common::view(result)))
}
