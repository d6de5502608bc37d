//! `kubernetes.core.k8s_info` (and the old `k8s_facts`): read objects.

use minijinja::Value;
use serde_json::Value as Json;

use super::k8s_common as common;
use super::{Args, ModuleContext, Output};
use crate::kube::Error as KubeError;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, String> {
    let api_version = args
        .str("api_version")?
        .or(args.str("version")?)
        .unwrap_or_else(|| "v1".into());
    let kind = args.required_str("kind")?;
    let name = args.str("name")?;
    let namespace = args.str("namespace")?;
    let labels: Vec<String> = args
        .list("label_selectors")?
        .iter()
        .map(crate::template::pyrepr::to_text)
        .collect();
    let fields: Vec<String> = args
        .list("field_selectors")?
        .iter()
        .map(crate::template::pyrepr::to_text)
        .collect();
    let (wait, timeout, sleep, condition) = common::wait_args(args)?;
    let cluster = ctx.cluster()?.clone();
    let resource = match ctx.api(cluster.resource(&api_version, &kind)).await {
        Ok(resource) => resource,
        Err(KubeError::UnknownKind { .. }) => {
            return Ok(Output::changed(false)
                .with("api_found", false)
                .with("resources", Vec::<Value>::new()));
        }
        Err(err) => return Err(common::api_failure("find the resource", &err)),
    };
    let ns = if resource.namespaced {
        namespace.clone()
    } else {
        None
    };
    let label_selector = (!labels.is_empty()).then(|| labels.join(","));
    let field_selector = (!fields.is_empty()).then(|| fields.join(","));
    let fetch = |cluster: std::sync::Arc<dyn crate::kube::Cluster>| {
        let resource = resource.clone();
        let ns = ns.clone();
        let name = name.clone();
        let label_selector = label_selector.clone();
        let field_selector = field_selector.clone();
        async move {
            match &name {
                Some(name) => Ok::<Vec<Json>, KubeError>(
                    cluster
                        .get(&resource, ns.as_deref(), name)
                        .await?
                        .into_iter()
                        .collect(),
                ),
                None => {
                    cluster
                        .list(
                            &resource,
                            ns.as_deref(),
                            label_selector.as_deref(),
                            field_selector.as_deref(),
                        )
                        .await
                }
            }
        }
    };
    let resources = if wait {
        let found = common::poll(ctx, timeout, sleep, || {
            let fetch = fetch(cluster.clone());
            let condition = condition.clone();
            async move {
                let items = fetch.await?;
                let all_ready =
                    !items.is_empty() && items.iter().all(|o| common::ready(o, condition.as_ref()));
                Ok(all_ready.then_some(items))
            }
        })
        .await?;
        match found {
            Some(items) => items,
            None => {
                return Err(format!(
                    "Failed to gather information about {kind}(s) even after waiting for {} seconds",
                    timeout.as_secs()
                ));
            }
        }
    } else {
        ctx.api(fetch(cluster.clone()))
            .await
            .map_err(|e| common::api_failure("list objects", &e))?
    };
    Ok(Output::changed(false).with("api_found", true).with(
        "resources",
        resources.into_iter().map(common::view).collect::<Vec<_>>(),
    ))
}
