//! The HTTP endpoints: `/metrics` (plain, or HTTPS with `--metrics-secure`,
//! optionally behind the API server's authentication and authorization with
//! `--metrics-require-rbac`, as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization`), and `/healthz`, `/readyz`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::Metrics;

/// How `/metrics` is served.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    /// HTTPS instead of HTTP.
    pub secure: bool,
    /// Only for callers the API server authenticates and authorizes.
    pub require_rbac: bool,
    /// `tls.crt` and `tls.key` to serve; `None`: a self-signed pair.
    pub cert_dir: Option<PathBuf>,
}

/// Why the metrics endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The certificate or key could not be read or used.
    #[error("metrics TLS: {0}")]
    Tls(String),
    /// The server stopped.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How long an allowed token is trusted before it is reviewed again
/// (controller-runtime's delegating authenticator caches for 2 minutes and
/// the authorizer for 5; one scrape interval of staleness is enough).
const REVIEW_TTL: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct Access {
    client: kube::Client,
    allowed: Arc<Mutex<HashMap<String, Instant>>>,
}

/// Serves `/metrics` on a bound listener.
pub async fn serve_metrics(
    metrics: Arc<Metrics>,
    listener: tokio::net::TcpListener,
    serving: Serving,
    client: kube::Client,
) -> Result<(), ServeError> {
    let mut router = Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    metrics.encode(),
                )
            }
        }),
    );
    if serving.require_rbac {
        let access = Access {
            client,
            allowed: Arc::default(),
        };
        router = router.layer(middleware::from_fn_with_state(access, authorize));
    }
    let scheme = if serving.secure { "https" } else { "http" };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(%addr, scheme, rbac = serving.require_rbac, "serving metrics on /metrics");
    if !serving.secure {
        return Ok(axum::serve(listener, router).await?);
    }
    let config = tls_config(serving.cert_dir.as_deref())?;
    serve_tls(listener, router, config).await
}

/// Serves `/healthz` and `/readyz` on a bound listener.
pub async fn serve_health(
    metrics: Arc<Metrics>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    if metrics.is_ready() {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "starting")
                    }
                }
            }),
        );
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(%addr, "serving /healthz and /readyz");
    axum::serve(listener, router).await
}

/// controller-runtime's filter: 401 without a token the API server
/// authenticates, 403 when the user may not `get` the request's
/// non-resource URL.
async fn authorize(State(access): State<Access>, request: Request, next: Next) -> Response {
    let Some(token) = bearer_token(request.headers()) else {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    let path = request.uri().path().to_owned();
    let verb = request.method().as_str().to_ascii_lowercase();
    let cache_key = format!("{verb} {path} {token}");
    let cached = {
        let mut allowed = access.allowed.lock().unwrap_or_else(|e| e.into_inner());
        allowed.retain(|_, until| *until > Instant::now());
        allowed.contains_key(&cache_key)
    };
    if !cached {
        match review(&access.client, token, &path, &verb).await {
            Ok(Decision::Allowed) => {
                let mut allowed = access.allowed.lock().unwrap_or_else(|e| e.into_inner());
                allowed.insert(cache_key, Instant::now() + REVIEW_TTL);
            }
            Ok(Decision::Unauthenticated) => {
                return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
            }
            Ok(Decision::Forbidden(user)) => {
                let message = format!("Authorization denied for user {user} to {verb} {path}");
                return (StatusCode::FORBIDDEN, message).into_response();
            }
            Err(err) => {
                tracing::warn!("metrics: could not review a caller's token: {err}");
                return (StatusCode::INTERNAL_SERVER_ERROR, "Authorization error").into_response();
            }
        }
    }
    next.run(request).await
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

enum Decision {
    Allowed,
    Unauthenticated,
    Forbidden(String),
}

async fn review(
    client: &kube::Client,
    token: &str,
    path: &str,
    verb: &str,
) -> Result<Decision, kube::Error> {
    let reviews: Api<TokenReview> = Api::all(client.clone());
    let token_review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            audiences: None,
        },
        ..Default::default()
    };
    let reviewed = reviews
        .create(&PostParams::default(), &token_review)
        .await?;
    let status = reviewed.status.unwrap_or_default();
    let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
        return Ok(Decision::Unauthenticated);
    };
    let access: Api<SubjectAccessReview> = Api::all(client.clone());
    let access_review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some(verb.to_owned()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let decided = access
        .create(&PostParams::default(), &access_review)
        .await?;
    if decided.status.is_some_and(|s| s.allowed) {
        Ok(Decision::Allowed)
    } else {
        Ok(Decision::Forbidden(user.username.unwrap_or_default()))
    }
}

/// The server's certificate: `tls.crt`/`tls.key` from `cert_dir`, else a
/// self-signed one for `localhost`, as controller-runtime makes.
fn tls_config(cert_dir: Option<&std::path::Path>) -> Result<rustls::ServerConfig, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (chain, key) = match cert_dir {
        Some(dir) => {
            let cert_path = dir.join("tls.crt");
            let key_path = dir.join("tls.key");
            let chain = CertificateDer::pem_file_iter(&cert_path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| ServeError::Tls(format!("{}: {e}", cert_path.display())))?;
            let key = PrivateKeyDer::from_pem_file(&key_path)
                .map_err(|e| ServeError::Tls(format!("{}: {e}", key_path.display())))?;
            (chain, key)
        }
        None => {
            let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
            if let Ok(host) = std::fs::read_to_string("/etc/hostname") {
                let host = host.trim();
                if !host.is_empty() {
                    names.push(host.to_owned());
                }
            }
            let generated = rcgen::generate_simple_self_signed(names).map_err(|e| {
                ServeError::Tls(format!("cannot make a self-signed certificate: {e}"))
            })?;
            let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
                .map_err(|e| ServeError::Tls(e.to_string()))?;
            (vec![generated.cert.der().clone()], key)
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| ServeError::Tls(e.to_string()))?;
    // HTTP/1.1 only, as upstream without --enable-http2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts connections and serves each over TLS on its own task, so a
/// client that stalls its handshake holds up no one else.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    config: rustls::ServerConfig,
) -> Result<(), ServeError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::debug!("metrics: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
            let Ok(Ok(tls)) = handshake.await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
            if let Err(err) = connection.await {
                tracing::debug!("metrics: connection ended: {err}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_as_controller_runtime_reads_them() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer abc.def".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc.def"));
        headers.insert(header::AUTHORIZATION, "bearer  xyz ".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("xyz"));
        headers.insert(header::AUTHORIZATION, "Basic Zm9vOmJhcg==".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
    }

    #[test]
    fn a_self_signed_certificate_is_made_without_files() {
        let config = tls_config(None).expect("self-signed");
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_cert_dir_with_tls_crt_and_key_is_served() {
        let dir = std::env::temp_dir().join(format!("enka-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["metrics.example".to_owned()]).unwrap();
        std::fs::write(dir.join("tls.crt"), made.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), made.signing_key.serialize_pem()).unwrap();
        tls_config(Some(&dir)).expect("the pair in the directory");
        std::fs::write(dir.join("tls.key"), "not a key").unwrap();
        let err = tls_config(Some(&dir)).unwrap_err();
        assert!(err.to_string().contains("tls.key"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_cert_dir_is_a_clear_error() {
        let err = tls_config(Some(std::path::Path::new("/nonexistent/certs"))).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/certs/tls.crt"),
            "{err}"
        );
    }
}
