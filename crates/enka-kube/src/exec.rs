//! `pods/exec` over the API's websocket.

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, AttachParams};
use tokio::io::AsyncReadExt;

use super::{Answer, Error, ExecOutput, api_error};

/// Runs `command` in a container and collects its output and exit code.
pub async fn exec(
    client: &Client,
    namespace: &str,
    pod: &str,
    container: Option<&str>,
    command: &[String],
) -> Result<ExecOutput, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut params = AttachParams::default()
        .stdin(false)
        .stdout(true)
        .stderr(true);
    if let Some(container) = container {
        params = params.container(container);
    }
    let mut attached = pods
        .exec(pod, command.iter().map(String::as_str), &params)
        .await
        .map_err(handshake_refused)?;
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = attached.stdout() {
        let _ = out.read_to_string(&mut stdout).await;
    }
    if let Some(mut err) = attached.stderr() {
        let _ = err.read_to_string(&mut stderr).await;
    }
    let status = match attached.take_status() {
        Some(status) => status.await,
        None => None,
    };
    let return_code = match status {
        Some(status) => Some(exit_code(status)?),
        None => None,
    };
    let _ = attached.join().await;
    Ok(ExecOutput {
        stdout,
        stderr,
        return_code,
    })
}

/// The API server refused the websocket's handshake (no such Pod, no
/// right to exec): the error keeps the answer with the headers of a
/// handshake's refusal, in the order and case the Python client's websocket
/// library shows them. kube hands over the answer's `Status` only, so the
/// request's audit id is not known here and is left empty.
fn handshake_refused(err: kube::Error) -> Error {
    let mut err = api_error(err);
    if let Error::Api { answer, .. } = &mut err {
        let body = answer.take().map(|a| a.body.clone()).unwrap_or_default();
        let date = jiff::Timestamp::now()
            .strftime("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let headers = vec![
            ("audit-id".to_owned(), String::new()),
            ("cache-control".to_owned(), "no-cache, private".to_owned()),
            ("content-type".to_owned(), "application/json".to_owned()),
            ("date".to_owned(), date),
            ("content-length".to_owned(), body.len().to_string()),
        ];
        *answer = Some(std::sync::Arc::new(Answer { headers, body }));
    }
    err
}

/// The command's exit code from the stream's closing status. A failure with
/// no exit code is the API server's, not the command's (a node it cannot
/// reach, a container that is not running): an error, as the Python client
/// raises it.
fn exit_code(status: k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> Result<i32, Error> {
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    let exit = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.parse().ok());
    exit.ok_or_else(|| Error::Api {
        answer: None,
        code: status
            .code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500),
        reason: status.reason.unwrap_or_default(),
        message: status.message.unwrap_or_default(),
    })
}
