//! `kubernetes.core.k8s_scale`: sets `spec.replicas`.

use minijinja::Value;
use serde_json::{Value as Json, json};

use super::k8s_common as common;
use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;
use enka_kube::{Error as KubeError, PatchType};

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
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
    let resource = match ctx.api(cluster.resource(&api_version, &kind)).await {
        Ok(resource) => resource,
        Err(KubeError::UnknownKind { api_version, kind }) => {
            return Err(unhandled_not_found(&api_version, &kind));
        }
        Err(err) => return Err(common::refused("find the resource", &err)),
    };
    let ns = common::namespace_for(&resource, namespace.as_deref(), None, ctx.owner);
    let object = ctx
        .api(cluster.get(&resource, ns.as_deref(), &name))
        .await
        .and_then(|found| found.ok_or_else(|| KubeError::not_found(&resource, &name)))
        .map_err(|e| {
            format!(
                "Failed to retrieve requested object: {}",
                enka_kube::python::quoted_body(&e)
            )
        })?;
    let duration = || wait.then_some(0u64);
    let existing = object
        .pointer("/spec/replicas")
        .and_then(Json::as_i64)
        .unwrap_or(1);
    if let Some(current) = current.filter(|c| *c != existing) {
        let warning = format!(
            "current replicas {current} does not match with actual {existing} for object kind={kind} name={name} namespace={}.",
            ns.as_deref().unwrap_or("None")
        );
        let output = Output::changed(false)
            .with("warning", warning)
            .with("result", common::view(Json::Object(Default::default())));
        return Ok(with_duration(output, duration()));
    }
    if existing == replicas {
        let output = Output::changed(false).with("result", common::view(object));
        return Ok(with_duration(output, duration()));
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
        .map_err(|e| {
            format!(
                "Scale request failed: {}",
                enka_kube::python::quoted_body(&e)
            )
        })?;
    if !wait {
        return Ok(Output::changed(true).with("result", common::view(patched)));
    }
    let waited = common::wait_for(ctx, timeout, sleep, || async {
        let object = cluster.get(&resource, ns.as_deref(), &name).await?;
        Ok((
            object.as_ref().is_some_and(|o| common::ready(o, None)),
            object,
        ))
    })
    .await
    .map_err(|e| common::refused("retrieve requested object", &e))?;
    if !waited.ready {
        return Err("Resource scaling timed out".into());
    }
    let result = waited.last.unwrap_or(patched);
    Ok(Output::changed(true)
        .with("result", common::view(result))
        .with("duration", waited.seconds))
}

fn with_duration(output: Output, duration: Option<u64>) -> Output {
    match duration {
        Some(seconds) => output.with("duration", seconds),
        None => output,
    }
}

/// kubernetes.core's k8s_scale does not catch a kind the API server does
/// not serve: the module dies with the Python client's exception, and
/// Ansible reports a module failure whose stderr ends with it.
fn unhandled_not_found(api_version: &str, kind: &str) -> ModuleError {
    let mut stderr = String::from("kubernetes.dynamic.exceptions.ResourceNotFoundError: ");
    stderr.push_str(&enka_kube::python::no_matches(api_version, kind));
    stderr.push('\n');
    ModuleError::result(
        "MODULE FAILURE: No start of json char found\nSee stdout/stderr for the exact error".into(),
        vec![
            ("module_stdout", Value::from("")),
            ("module_stderr", Value::from(stderr)),
            ("rc", Value::from(1)),
        ],
    )
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s_scale",
    aliases: &[],
    collections: catalogue::KUBERNETES,
    params: &[
        "api_version",
        "kind",
        "name",
        "namespace",
        "label_selectors",
        "replicas",
        "current_replicas",
        "resource_version",
        "resource_definition",
        "src",
        "wait",
        "wait_timeout",
        "wait_sleep",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: Some("kubernetes.core.k8s_scale"),
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
