//! The sharder as the sharding test and the operators bench run it: its
//! ControllerRing CRD, a serving certificate for its webhook made here, its
//! config pointing the webhook at 127.0.0.1, the process, and one
//! ControllerRing of the Memcached kind.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_env::KubeEnv;
use kube_env::process::{Lifetime, Server};
use serde_json::json;

use crate::support;

/// The ControllerRing enka's replicas join.
pub const RING: &str = "enka-memcached";

/// The label of a shard's Lease that names its ring.
pub const RING_LABEL: &str = "alpha.sharding.timebertt.dev/controllerring";

/// The port controller-runtime's webhook server listens on (the sharder's
/// config cannot change it).
const WEBHOOK_PORT: u16 = 9443;

/// A running sharder, stopped (and its directory removed) when dropped.
pub struct Sharder {
    server: Server,
    work: PathBuf,
}

impl Drop for Sharder {
    fn drop(&mut self) {
        self.server.stop(Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

fn controller_rings(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("sharding.timebertt.dev", "v1alpha1", "ControllerRing"),
        "controllerrings",
    );
    Api::all_with(client.clone(), &resource)
}

/// The sharder's build: scripts/sharder.sh's directory (`make test` sets
/// ENKA_SHARDER_DIR); without it the test fails, it is never skipped.
fn sharder_dir() -> PathBuf {
    let dir = std::env::var_os("ENKA_SHARDER_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!("ENKA_SHARDER_DIR is not set: run `make test`, or set it to the output of scripts/sharder.sh")
    });
    assert!(
        dir.join("sharder").is_file(),
        "no sharder binary in {} (scripts/sharder.sh builds it)",
        dir.display()
    );
    dir
}

/// A CA, and a serving certificate it signed for 127.0.0.1: (CA PEM, cert
/// PEM, key PEM).
fn webhook_certificate() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "enka sharding test CA");
    let ca = ca_params.self_signed(&ca_key).expect("the CA certificate");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().expect("a serving key");
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("serving params");
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let cert = params
        .signed_by(&key, &issuer)
        .expect("the serving certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// Installs the sharder's ControllerRing CRD.
pub fn install_crd(env: &KubeEnv) {
    let crd = sharder_dir().join("crds/sharding.timebertt.dev_controllerrings.yaml");
    support::kubectl(env, &["apply", "-f", &crd.display().to_string()]);
    support::kubectl(
        env,
        &[
            "wait",
            "--for=condition=Established",
            "crd/controllerrings.sharding.timebertt.dev",
        ],
    );
}

impl Sharder {
    /// Installs the ControllerRing CRD, starts the sharder and creates the
    /// ring of the Memcached kind, limited to the namespaces
    /// `namespace_selector` selects.
    pub async fn start(
        env: &KubeEnv,
        client: &Client,
        namespace_selector: serde_json::Value,
    ) -> Sharder {
        let dir = sharder_dir();
        install_crd(env);
        let work = std::env::temp_dir().join(format!("enka-sharder-{}", std::process::id()));
        let certs = work.join("certs");
        std::fs::create_dir_all(&certs).expect("the sharder's directory");
        let (ca, cert, key) = webhook_certificate();
        std::fs::write(certs.join("tls.crt"), cert).expect("tls.crt");
        std::fs::write(certs.join("tls.key"), key).expect("tls.key");
        let health_port = support::free_port();
        let config = json!({
            "apiVersion": "config.sharding.timebertt.dev/v1alpha1",
            "kind": "SharderConfig",
            "leaderElection": {"leaderElect": false},
            "health": {"bindAddress": format!("127.0.0.1:{health_port}")},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "server": {"certDir": certs.display().to_string()},
                "config": {"clientConfig": {
                    "url": format!("https://127.0.0.1:{WEBHOOK_PORT}"),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
                }},
            },
        });
        let config_path = work.join("config.yaml");
        std::fs::write(
            &config_path,
            serde_yaml::to_string(&config).expect("the config as YAML"),
        )
        .expect("config.yaml");
        let server = Server::start_with_env(
            "sharder",
            &dir.join("sharder"),
            &[
                "--config".to_owned(),
                config_path.display().to_string(),
                "--zap-log-level=info".to_owned(),
            ],
            &[(
                "KUBECONFIG".to_owned(),
                env.kubeconfig().display().to_string(),
            )],
            work.join("sharder.log"),
            Lifetime::Tied,
        )
        .expect("starting the sharder");
        let mut sharder = Sharder { server, work };
        support::eventually(
            "the sharder ready",
            Duration::from_secs(60),
            || async move {
                matches!(
                    support::try_http_get(health_port, "/readyz").await,
                    Ok((200, _))
                )
                .then_some(())
            },
        )
        .await;
        assert!(sharder.server.exited().is_none(), "{}", sharder.log());
        let ring: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "sharding.timebertt.dev/v1alpha1",
            "kind": "ControllerRing",
            "metadata": {"name": RING},
            "spec": {
                "resources": [{
                    "group": "cache.bench.enka.dev",
                    "resource": "memcacheds",
                    "controlledResources": [{"group": "apps", "resource": "deployments"}],
                }],
                "namespaceSelector": namespace_selector,
            },
        }))
        .expect("a ControllerRing");
        controller_rings(client)
            .create(&PostParams::default(), &ring)
            .await
            .expect("creating the ControllerRing");
        sharder
    }

    /// Waits until the ring counts `count` available shards.
    pub async fn await_available(&self, client: &Client, count: i64) {
        let rings = controller_rings(client);
        support::eventually(
            &format!("{count} available shards in the ring"),
            Duration::from_secs(60),
            || {
                let rings = rings.clone();
                async move {
                    let ring = rings.get(RING).await.ok()?;
                    (ring.data["status"]["availableShards"].as_i64() == Some(count)).then_some(())
                }
            },
        )
        .await;
    }

    /// Deletes the ring (and so its webhook) and waits until it is gone,
    /// for a ring of the same name after it.
    pub async fn delete_ring(&self, client: &Client) {
        let rings = controller_rings(client);
        let _ = rings.delete(RING, &Default::default()).await;
        support::eventually(
            "the ControllerRing deleted",
            Duration::from_secs(60),
            || {
                let rings = rings.clone();
                async move { matches!(rings.get_opt(RING).await, Ok(None)).then_some(()) }
            },
        )
        .await;
    }

    /// The end of the sharder's log.
    pub fn log(&self) -> String {
        self.server.log_tail(6000)
    }
}
