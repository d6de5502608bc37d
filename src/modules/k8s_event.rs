//! `operator_sdk.util.k8s_event`: records a Kubernetes Event.

use serde_json::json;

use super::k8s_common as common;
use super::{Args, ModuleContext, Output};
use crate::kube::event;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, String> {
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
        None => return Err("missing required arguments: involvedObject".to_owned()),
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
    let now = now_rfc3339();
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
        .map_err(|(step, e)| common::api_failure(step.action(), &e))?;
    Ok(Output::changed(true).with("result", common::view(written)))
}

/// The current time as Kubernetes writes it (`2006-01-02T15:04:05Z`).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn format_rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = if month <= 2 { y + 1 } else { y };
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
