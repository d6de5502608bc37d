//! `operator_sdk.util.k8s_event`: records a Kubernetes Event.

use serde_json::json;

use super::k8s_common as common;
use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;
use enka_kube::event;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
    let name = args.required_str("name")?;
    let namespace = args
        .str("namespace")?
        .or_else(|| ctx.owner.and_then(|o| o.namespace.clone()))
        .unwrap_or_else(|| "default".into());
    let state = args
        .one_of("state", &["present", "absent"])?
        .unwrap_or_else(|| "present".into());
    let involved = match args.map("involvedObject")?.or(args.map("involved_object")?) {
        Some(v) => common::to_json(&v)?,
        None => return Err("missing required arguments: involvedObject".into()),
    };
    let cluster = ctx.cluster()?.clone();
    let resource = ctx
        .api(cluster.resource("v1", "Event"))
        .await
        .map_err(|e| common::api_failure("find Events", &e))?;
    if state == "absent" {
        let existing = ctx
            .api(cluster.get(&resource, Some(&namespace), &name))
            .await
            .map_err(|e| common::api_failure("get the event", &e))?;
        let deleted = match existing {
            Some(_) => ctx
                .api(cluster.delete(&resource, Some(&namespace), &name, None))
                .await
                .map_err(|e| common::api_failure("delete the event", &e))?,
            None => false,
        };
        return Ok(Output::changed(deleted));
    }
    let now = enka_template::time::now_rfc3339();
    let message = args.str("message")?;
    let source = match args.map("source")? {
        Some(v) => common::to_json(&v)?,
        None => json!({"component": "enka"}),
    };
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved,
        "message": message.clone().unwrap_or_default(),
        "reason": args.str("reason")?.unwrap_or_default(),
        "type": args.one_of("type", &["Normal", "Warning"])?.unwrap_or_else(|| "Normal".into()),
        "source": source,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "reportingComponent": args.str("reportingComponent")?.unwrap_or_else(|| "enka".into()),
        "reportingInstance": args.str("reportingInstance")?.unwrap_or_default(),
    });
    let written = ctx
        .api(event::record(
            cluster.as_ref(),
            &resource,
            &namespace,
            &name,
            message.as_deref(),
            &now,
            || event,
        ))
        .await
        .map_err(|(step, e)| match step {
            // operator_sdk.util's words for a refused write, the Python
            // client's error after them.
            event::Step::Create | event::Step::Update => format!(
                "Unable to create event: {}",
                enka_kube::python::api_error_text(&e)
            ),
            event::Step::Get => common::api_failure(step.action(), &e),
        })?;
    Ok(Output::changed(true).with("result", common::view(written)))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s_event",
    aliases: &[],
    collections: catalogue::OPERATOR_SDK,
    params: &[
        "state",
        "name",
        "namespace",
        "message",
        "reason",
        "type",
        "source",
        "involvedObject",
        "involved_object",
        "reportingComponent",
        "reportingInstance",
        "appendTimestamp",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: Some("operator_sdk.util.k8s_event"),
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
