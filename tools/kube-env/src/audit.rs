//! The requests of one user, counted by the API server itself.
//!
//! An operator's own request metrics miss what it does not send through its
//! client library: upstream's ansible-operator forwards its roles' requests
//! through a reverse proxy whose transport counts nothing, so its
//! `rest_client_requests_total` holds only its informers' and its status
//! writes. And the API server's `apiserver_request_total` mixes in every
//! controller and kwok. So the control plane knows a second user,
//! [`AUDITED_USER`], whose every request the API server writes to its audit
//! log as it arrives (one `RequestReceived` event each; nobody else's): an
//! operator started with [`crate::KubeEnv::audited_kubeconfig`] is counted
//! whole, whatever client or proxy sends its requests.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::{Error, io_error};

/// The user whose requests are audited (in `system:masters`, as the admin).
pub const AUDITED_USER: &str = "operator-under-measure";

/// Only the audited user's requests, at arrival, without bodies.
const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
  - level: Metadata
    users: ["operator-under-measure"]
  - level: None
"#;

/// The policy and log files of a control plane's audit.
#[derive(Debug, Clone)]
pub(crate) struct AuditFiles {
    policy: PathBuf,
    pub(crate) log: PathBuf,
}

/// Writes the policy into `dir`.
pub(crate) fn write_policy(dir: &Path) -> Result<AuditFiles, Error> {
    let files = AuditFiles {
        policy: dir.join("audit-policy.yaml"),
        log: dir.join("audit.log"),
    };
    std::fs::write(&files.policy, POLICY).map_err(io_error("write audit-policy.yaml"))?;
    Ok(files)
}

/// kube-apiserver's flags for the audit log. Blocking mode: an event is in
/// the file before its request is served, so a count taken after a
/// response has it.
pub(crate) fn apiserver_args(files: &AuditFiles) -> Vec<String> {
    vec![
        format!("--audit-policy-file={}", files.policy.display()),
        format!("--audit-log-path={}", files.log.display()),
        "--audit-log-format=json".into(),
        "--audit-log-mode=blocking".into(),
        "--audit-log-maxsize=0".into(),
    ]
}

/// A place in the audit log: requests after it are counted.
#[derive(Debug, Clone, Copy)]
pub struct AuditMark(u64);

/// Where the audit log ends now (its start when there is none yet).
pub(crate) fn mark(log: &Path) -> AuditMark {
    AuditMark(std::fs::metadata(log).map_or(0, |m| m.len()))
}

/// The audited user's requests since `since`, by `VERB resource` as
/// client-go names them (`GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`,
/// `DELETE`; `resource/subresource`), or `VERB /path` for a request that
/// names no resource (discovery).
pub(crate) fn requests_since(log: &Path, since: AuditMark) -> Result<BTreeMap<String, u64>, Error> {
    let text = events_since(log, since)?;
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(key) = request_key(&event) {
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

/// The audit log's whole events since `since`, one JSON object a line. The
/// last line may be half written (a request being served): it is left out.
pub(crate) fn events_since(log: &Path, since: AuditMark) -> Result<String, Error> {
    let mut text = String::new();
    if log.exists() {
        let mut file = std::fs::File::open(log).map_err(io_error("open the audit log"))?;
        file.seek(SeekFrom::Start(since.0))
            .map_err(io_error("seek in the audit log"))?;
        file.read_to_string(&mut text)
            .map_err(io_error("read the audit log"))?;
    }
    let whole = text.rfind("}\n").map_or(0, |end| end + 2);
    text.truncate(whole);
    Ok(text)
}

/// `VERB resource[/subresource]` of one audit event.
fn request_key(event: &serde_json::Value) -> Option<String> {
    if event["user"]["username"].as_str()? != AUDITED_USER {
        return None;
    }
    let verb = event["verb"].as_str()?;
    let Some(object) = event.get("objectRef") else {
        let uri = event["requestURI"].as_str()?;
        let path = uri.split('?').next().unwrap_or(uri);
        return Some(format!("{} {path}", verb.to_uppercase()));
    };
    let verb = match verb {
        "create" => "POST".to_owned(),
        "update" => "PUT".to_owned(),
        other => other.to_uppercase(),
    };
    resource_key(&verb, object)
}

fn resource_key(verb: &str, object: &serde_json::Value) -> Option<String> {
    let resource = object["resource"].as_str()?;
    Some(match object["subresource"].as_str() {
        Some(sub) if !sub.is_empty() => format!("{verb} {resource}/{sub}"),
        _ => format!("{verb} {resource}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(verb: &str, object: Option<serde_json::Value>, uri: &str) -> serde_json::Value {
        let mut event = json!({
            "kind": "Event", "stage": "RequestReceived", "verb": verb, "requestURI": uri,
            "user": {"username": AUDITED_USER, "groups": ["system:masters"]},
        });
        if let Some(object) = object {
            event["objectRef"] = object;
        }
        event
    }

    #[test]
    fn requests_are_named_as_client_go_names_them() {
        let status = json!({"resource": "hikawas", "subresource": "status", "name": "a"});
        let pods = json!({"resource": "pods", "namespace": "n"});
        assert_eq!(
            request_key(&event("update", Some(status), "/apis/x/v1/…")).as_deref(),
            Some("PUT hikawas/status")
        );
        assert_eq!(
            request_key(&event("create", Some(pods.clone()), "/api/v1/…")).as_deref(),
            Some("POST pods")
        );
        assert_eq!(
            request_key(&event("list", Some(pods), "/api/v1/…")).as_deref(),
            Some("LIST pods")
        );
        assert_eq!(
            request_key(&event("get", None, "/apis/apps/v1?timeout=32s")).as_deref(),
            Some("GET /apis/apps/v1")
        );
    }

    #[test]
    fn other_users_and_half_written_lines_are_not_counted() {
        let dir = std::env::temp_dir().join(format!("kube-env-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("audit.log");
        let mut other = event("get", Some(json!({"resource": "pods"})), "/api/v1/pods");
        other["user"]["username"] = json!("admin");
        let counted = event("get", Some(json!({"resource": "pods"})), "/api/v1/pods/a");
        std::fs::write(&log, format!("{other}\n")).unwrap();
        let start = mark(&log);
        std::fs::write(&log, format!("{other}\n{counted}\n{counted}\n{{\"kind\":")).unwrap();
        let counts = requests_since(&log, start).unwrap();
        assert_eq!(counts, BTreeMap::from([("GET pods".to_owned(), 2)]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
