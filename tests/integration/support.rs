//! Helpers shared by the integration tests.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Error};

/// Root of the repository, for reading `config/` and fixtures.
pub fn repo_path(relative: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Applies a CRD file server-side and waits until it is `Established`.
pub async fn install_crd(client: &Client, relative: &str) -> CustomResourceDefinition {
    let path = repo_path(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    let name = crd.metadata.name.clone().expect("CRD has a name");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply("enka-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("CRD {name} not Established within 30 s"))
    .unwrap_or_else(|e| panic!("watching CRD {name}: {e}"))
    .expect("an established CRD exists")
}

/// Runs the kubectl built with the control plane (never one on PATH) from
/// the repository's root; its output, or a panic with it on failure.
pub fn kubectl(env: &kube_env::KubeEnv, args: &[&str]) -> String {
    let output = std::process::Command::new(env.binaries().path("kubectl"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(args)
        .current_dir(repo_path(""))
        .output()
        .expect("running kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "kubectl {args:?} failed:\n{text}");
    text
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `limit`
/// naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The API server's status for a rejected request, or a panic that says what
/// happened instead.
pub fn expect_api_error<T: std::fmt::Debug>(
    result: Result<T, Error>,
    what: &str,
) -> kube::core::Status {
    match result {
        Err(Error::Api(status)) => *status,
        other => panic!("{what}: expected the API server to reject it, got {other:?}"),
    }
}

/// A free TCP port on 127.0.0.1, for an operator's metrics or probes.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP GET on 127.0.0.1: status code and body.
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    try_http_get(port, path)
        .await
        .unwrap_or_else(|e| panic!("GET 127.0.0.1:{port}{path}: {e}"))
}

/// Like [`http_get`], with connection errors returned: for waiting until a
/// server listens.
pub async fn try_http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    // HTTP/1.0, so the body is not chunked.
    http_exchange(
        port,
        &format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
    )
    .await
}

/// Sends one HTTP/1.0 request and reads the whole answer: status and body.
async fn http_exchange(port: u16, request: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(status_and_body(&response))
}

/// The status code and body of a whole HTTP/1.0 response.
fn status_and_body(response: &str) -> (u16, String) {
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A plain HTTP POST of a JSON body on 127.0.0.1 (etcd's JSON gateway, for
/// tests/faults): status code and body.
#[allow(dead_code)]
pub async fn http_post(port: u16, path: &str, body: &str) -> (u16, String) {
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    http_exchange(port, &request)
        .await
        .unwrap_or_else(|e| panic!("POST 127.0.0.1:{port}{path}: {e}"))
}

/// kube-apiserver's own /metrics text, read with `client`'s credentials.
#[allow(dead_code)]
pub async fn apiserver_metrics(client: &Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("kube-apiserver's metrics: {e}"))
}

/// The sum of every sample of the counter or histogram part `name` (with or
/// without the OpenMetrics `_total` suffix) in a /metrics text.
pub fn sum_metric(text: &str, name: &str) -> f64 {
    sum_metric_where(text, name, "")
}

/// Like [`sum_metric`], over the samples whose labels contain `label`
/// (such as `result="failed"`).
pub fn sum_metric_where(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let rest = rest.strip_prefix("_total").unwrap_or(rest);
            (rest.starts_with('{') || rest.starts_with(' ')).then_some(rest)
        })
        .filter(|sample| sample.contains(label))
        .filter_map(|sample| sample.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        // An empty float sum is -0.0, which prints as "-0".
        + 0.0
}

/// GET `https://127.0.0.1:<port><path>` with an optional bearer token,
/// accepting the server's certificate whatever it is (as a ServiceMonitor
/// with `insecureSkipVerify`, the scaffold's, does): status and body.
#[allow(dead_code)]
pub async fn https_get(
    port: u16,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name =
        rustls::pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    let mut tls = connector.connect(name, tcp).await?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{auth}\r\n");
    tls.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    // A server may close without close_notify; what was read still counts.
    let _ = tls.read_to_end(&mut response).await;
    Ok(status_and_body(&String::from_utf8_lossy(&response)))
}

#[derive(Debug)]
struct AnyCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A token of ServiceAccount `namespace/name`, valid for an hour.
#[allow(dead_code)]
pub async fn service_account_token(client: &Client, namespace: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &kube::api::PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token of {namespace}/{name}: {e}"))
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("no token for {namespace}/{name}"))
}

/// `env`'s kubeconfig with every user's credentials replaced by `token`
/// and its context's namespace set to `namespace`: what a pod of that
/// ServiceAccount sees, from outside the cluster.
#[allow(dead_code)]
pub fn kubeconfig_for_token(
    env: &kube_env::KubeEnv,
    token: &str,
    namespace: Option<&str>,
) -> kube::config::Kubeconfig {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig()).unwrap();
    for user in &mut kubeconfig.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            *auth = kube::config::AuthInfo {
                token: Some(token.to_owned().into()),
                ..Default::default()
            };
        }
    }
    if let Some(namespace) = namespace {
        for context in &mut kubeconfig.contexts {
            if let Some(context) = context.context.as_mut() {
                context.namespace = Some(namespace.to_owned());
            }
        }
    }
    kubeconfig
}

/// The ansible-operator-plugins module's directory, from the Go module proxy
/// (the version tools/upstream pins; never copied into this repository).
pub fn ansible_operator_plugins() -> std::path::PathBuf {
    let out = std::process::Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            "github.com/operator-framework/ansible-operator-plugins",
        ])
        .current_dir(repo_path("tools/upstream"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("running go mod download");
    assert!(
        out.status.success(),
        "go mod download failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("go's JSON");
    std::path::PathBuf::from(info["Dir"].as_str().expect("the module's Dir"))
}

/// The real operators of `../shared/operators` (ENKA_SHARED_OPERATORS
/// overrides the place); `None` outside CI when they are not there.
pub fn shared_operators() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("ENKA_SHARED_OPERATORS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_path("../shared/operators"));
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing: CI always has ../shared/operators",
        dir.display()
    );
    eprintln!(
        "note: {} is not here; the tests of awx-operator are left out (CI runs them)",
        dir.display()
    );
    None
}
