//! `kubernetes.core.k8s_info` (and the old `k8s_facts`): read objects.

use minijinja::Value;
use serde_json::Value as Json;

use super::k8s_common as common;
use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;
use enka_kube::{Error as KubeError, Resource};
use enka_template::pyrepr;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
    let api_version = args
        .str("api_version")?
        .or(args.str("version")?)
        .unwrap_or_else(|| "v1".into());
    let kind = args.required_str("kind")?;
    let query = Query {
        name: args.str("name")?,
        namespace: args.str("namespace")?,
        labels: texts(&args.list("label_selectors")?),
        fields: texts(&args.list("field_selectors")?),
    };
    let (wait, timeout, sleep, condition) = common::wait_args(args)?;
    let cluster = ctx.cluster()?.clone();
    let resource = match ctx.api(cluster.resource(&api_version, &kind)).await {
        Ok(resource) => resource,
        Err(KubeError::UnknownKind { .. }) => {
            return Ok(Output::changed(false)
                .with("api_found", false)
                .with("resources", Vec::<Value>::new())
                .with(
                    "msg",
                    format!(
                        "Failed to find API for resource with apiVersion \"{api_version}\" and kind \"{kind}\""
                    ),
                ));
        }
        Err(err) => return Err(common::refused("find the resource", &err)),
    };
    let found = |objects: Vec<Json>| {
        Ok(Output::changed(false).with("api_found", true).with(
            "resources",
            objects.into_iter().map(common::view).collect::<Vec<_>>(),
        ))
    };
    if !wait {
        let objects = ctx
            .api(query.fetch(cluster.as_ref(), &resource))
            .await
            .map_err(|e| query.failure(&e))?;
        return found(objects);
    }
    // As kubernetes.core: first wait for something to be there at all; what
    // never comes is an empty answer, not a failure. Then each object found
    // is waited for in turn, each with the whole timeout.
    let there = common::wait_for(ctx, timeout, sleep, || async {
        let objects = query.fetch(cluster.as_ref(), &resource).await?;
        Ok((!objects.is_empty(), Some(objects)))
    })
    .await
    .map_err(|e| query.failure(&e))?;
    let mut ready = Vec::new();
    for object in there.last.unwrap_or_default() {
        let one = Query {
            name: meta(&object, "name"),
            namespace: meta(&object, "namespace"),
            ..Query::default()
        };
        let waited = common::wait_for(ctx, timeout, sleep, || async {
            let object = one.fetch(cluster.as_ref(), &resource).await?.pop();
            let ready = object
                .as_ref()
                .is_some_and(|o| common::ready(o, condition.as_ref()));
            Ok((ready, object))
        })
        .await
        .map_err(|e| query.failure(&e))?;
        if !waited.ready {
            let kind = waited.last.as_ref().and_then(|o| meta_kind(o));
            return Err(format!(
                "Failed to gather information about {}(s) even after waiting for {} seconds",
                kind.unwrap_or("None"),
                waited.seconds
            )
            .into());
        }
        ready.extend(waited.last);
    }
    found(ready)
}

/// What to read: one object by name, or a list by namespace and selectors.
#[derive(Default)]
struct Query {
    name: Option<String>,
    namespace: Option<String>,
    labels: Vec<String>,
    fields: Vec<String>,
}

impl Query {
    /// The objects there are now (none when the named one is not there).
    async fn fetch(
        &self,
        cluster: &dyn enka_kube::Cluster,
        resource: &Resource,
    ) -> Result<Vec<Json>, KubeError> {
        let ns = self.namespace.as_deref().filter(|_| resource.namespaced);
        match &self.name {
            Some(name) => Ok(cluster.get(resource, ns, name).await?.into_iter().collect()),
            None => {
                let join = |list: &[String]| (!list.is_empty()).then(|| list.join(","));
                cluster
                    .list(
                        resource,
                        ns,
                        join(&self.labels).as_deref(),
                        join(&self.fields).as_deref(),
                    )
                    .await
            }
        }
    }

    /// kubernetes.core's words for a read the API server refused.
    fn failure(&self, err: &KubeError) -> ModuleError {
        let optional = |value: &Option<String>| match value {
            Some(text) => pyrepr::repr(&Value::from(text.as_str())),
            None => "None".to_owned(),
        };
        let list = |items: &[String]| {
            pyrepr::repr(&Value::from(
                items
                    .iter()
                    .map(|s| Value::from(s.as_str()))
                    .collect::<Vec<_>>(),
            ))
        };
        format!(
            "Exception '{}' raised while trying to get resource using (name={}, namespace={}, label_selectors={}, field_selectors={})",
            enka_kube::python::api_error_text(err),
            optional(&self.name),
            optional(&self.namespace),
            list(&self.labels),
            list(&self.fields),
        )
        .into()
    }
}

fn texts(values: &[Value]) -> Vec<String> {
    values.iter().map(pyrepr::to_text).collect()
}

fn meta(object: &Json, field: &str) -> Option<String> {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Json::as_str)
        .map(str::to_owned)
}

fn meta_kind(object: &Json) -> Option<&str> {
    object.get("kind").and_then(Json::as_str)
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s_info",
    aliases: &["k8s_facts"],
    collections: catalogue::KUBERNETES,
    params: &[
        "kind",
        "api_version",
        "version",
        "name",
        "namespace",
        "label_selectors",
        "field_selectors",
        "wait",
        "wait_condition",
        "wait_timeout",
        "wait_sleep",
        "hidden_fields",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[catalogue::Requirement::OneOf(&["kind"])],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: None,
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
