//! One operator image deployed as its project's `config/default` says:
//! the manifests applied, the manager container run by Docker with the
//! Deployment's spec and its ServiceAccount's token, then the checks every
//! deployed operator must pass (probes, leader election, metrics over
//! HTTPS behind RBAC, a clean stop).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use serde_json::{Value as Json, json};

use crate::Ctx;
use crate::container::{Container, Identity};
use crate::integration_scaffold::manager;
use crate::support::{eventually, https_get, kubectl, service_account_token, try_http_get};

pub struct Deployed {
    pub container: Container,
    pub manifests: Vec<Json>,
    /// The namespace the manager runs in.
    pub namespace: String,
}

/// The YAML documents of `text`, as JSON.
pub fn documents(text: &str) -> Vec<Json> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|doc| Json::deserialize(doc).ok())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// `kubectl apply -k <project>/config/default`, then the manager of
/// `image` started as its Deployment with its ServiceAccount's token;
/// returns once its probes answer.
pub async fn deploy(ctx: &Ctx, project: &Path, image: &str, extra_args: &[String]) -> Deployed {
    let manifests = render(ctx, project);
    apply(ctx, &manifests);
    let (pod, _) = manager(&manifests);
    let namespace = deployment_namespace(&manifests);
    let account = pod["serviceAccountName"]
        .as_str()
        .expect("the pod's serviceAccountName");
    let identity = Identity {
        token: service_account_token(&ctx.client, &namespace, account).await,
        namespace,
        ca_pem: ctx.ca_pem.clone(),
    };
    start(ctx, manifests, image, identity, extra_args).await
}

/// `kubectl kustomize <project>/config/default`, as documents.
pub fn render(ctx: &Ctx, project: &Path) -> Vec<Json> {
    let kustomization = project.join("config/default");
    documents(&kubectl(
        &ctx.env,
        &["kustomize", kustomization.to_str().expect("a UTF-8 path")],
    ))
}

fn deployment_namespace(manifests: &[Json]) -> String {
    let deployment = manifests
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    deployment["metadata"]["namespace"]
        .as_str()
        .expect("the Deployment's namespace")
        .to_owned()
}

/// Applies the manifests and waits for their CRDs.
fn apply(ctx: &Ctx, manifests: &[Json]) {
    let path = std::env::temp_dir().join(format!("enka-image-{}.json", std::process::id()));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": manifests});
    std::fs::write(&path, list.to_string()).expect("writing the manifests");
    kubectl(&ctx.env, &["apply", "-f", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    for crd in manifests
        .iter()
        .filter(|m| m["kind"] == "CustomResourceDefinition")
    {
        let name = format!("crd/{}", crd["metadata"]["name"].as_str().unwrap());
        kubectl(
            &ctx.env,
            &[
                "wait",
                "--for=condition=established",
                "--timeout=60s",
                &name,
            ],
        );
    }
}

/// The manager of `image` started as the rendered Deployment runs it, with
/// `identity`'s credentials; returns once its probes answer.
pub async fn start(
    ctx: &Ctx,
    manifests: Vec<Json>,
    image: &str,
    identity: Identity,
    extra_args: &[String],
) -> Deployed {
    let (pod, spec) = manager(&manifests);
    let started = std::time::Instant::now();
    let container =
        Container::run_as_deployment(image, pod, spec, &identity, ctx.api_port, extra_args);
    let deployed = Deployed {
        container,
        namespace: identity.namespace,
        manifests,
    };
    deployed.await_probes().await;
    eprintln!(
        "image: {image} ready {:.2} s after docker run",
        started.elapsed().as_secs_f64()
    );
    deployed
}

impl Deployed {
    fn spec(&self) -> &Json {
        manager(&self.manifests).1
    }

    /// The container port named `name`.
    fn port(&self, name: &str) -> u16 {
        self.spec()["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("no port named {name}")) as u16
    }

    /// The port of a `--flag=:port` argument of the manager.
    fn flag_port(&self, flag: &str) -> u16 {
        let prefix = format!("{flag}=:");
        self.spec()["args"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|a| a.as_str()?.strip_prefix(&prefix)?.parse().ok())
            .unwrap_or_else(|| panic!("no {flag} in the manager's args"))
    }

    /// The readiness and liveness probes answer 200, as the kubelet asks.
    async fn await_probes(&self) {
        for probe in ["readinessProbe", "livenessProbe"] {
            let get = &self.spec()[probe]["httpGet"];
            let path = get["path"].as_str().expect("an httpGet probe").to_owned();
            let port = match &get["port"] {
                Json::Number(n) => n.as_u64().unwrap() as u16,
                Json::String(name) => self.port(name),
                other => panic!("a probe port {other}"),
            };
            let state = || self.container.state();
            eventually(&format!("the {probe}"), Duration::from_secs(60), || {
                let path = path.clone();
                async move {
                    let running = state()["Running"] == true;
                    assert!(running, "the container stopped: {}", self.container.logs());
                    matches!(try_http_get(port, &path).await, Ok((200, _))).then_some(())
                }
            })
            .await;
        }
    }

    /// The leader election Lease `id` in the manager's namespace is held by
    /// this container (its hostname is the pod's name).
    pub async fn assert_leader(&self, ctx: &Ctx, id: &str) {
        let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &self.namespace);
        let holder = eventually("the manager's Lease", Duration::from_secs(30), || async {
            leases
                .get_opt(id)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
        })
        .await;
        assert!(
            holder.starts_with(&self.container.name),
            "the Lease {id} is held by {holder}, not the container"
        );
    }

    /// /metrics: HTTPS only, 401 without a token, 403 for a ServiceAccount
    /// without `reader_role`, 200 for one bound to it; returns the text.
    pub async fn assert_metrics_behind_rbac(&self, ctx: &Ctx, reader_role: &str) -> String {
        let port = self.flag_port("--metrics-bind-address");
        let reader = account(
            ctx,
            &self.namespace,
            "image-metrics-reader",
            Some(reader_role),
        )
        .await;
        let stranger = account(ctx, &self.namespace, "image-stranger", None).await;
        let (status, _) = https_get(port, "/metrics", None)
            .await
            .expect("HTTPS on the metrics port");
        assert_eq!(status, 401, "no token");
        let (status, body) = https_get(port, "/metrics", Some(&stranger)).await.unwrap();
        assert_eq!(status, 403, "a token without the role: {body}");
        let (status, text) = https_get(port, "/metrics", Some(&reader)).await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(
            !matches!(try_http_get(port, "/metrics").await, Ok((200, _))),
            "plain HTTP must not serve metrics"
        );
        text
    }

    /// SIGTERM through tini: enka ends its reconciles and exits 0 within the
    /// grace period; its log has no RBAC refusal.
    pub fn assert_clean_stop(&self) {
        let state = self.container.state();
        assert_eq!(state["OOMKilled"], false, "{}", self.container.logs());
        let logs = self.container.logs();
        let (took, code) = self.container.stop();
        assert_eq!(code, 0, "exit code after SIGTERM:\n{logs}");
        assert!(
            !logs.contains("forbidden") && !logs.contains("Forbidden"),
            "the project's RBAC should be enough:\n{logs}"
        );
        eprintln!("image: stopped in {:.1} s", took.as_secs_f64());
    }
}

/// A ServiceAccount in `ns` (bound to `cluster_role` when given) and a
/// token of it.
pub async fn account(ctx: &Ctx, ns: &str, name: &str, cluster_role: Option<&str>) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), ns);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match accounts.create(&PostParams::default(), &sa).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating ServiceAccount {ns}/{name}: {e}"),
    }
    if let Some(role) = cluster_role {
        let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{ns}-{name}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        }))
        .unwrap();
        match bindings.create(&PostParams::default(), &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("binding {ns}/{name} to {role}: {e}"),
        }
    }
    service_account_token(&ctx.client, ns, name).await
}
