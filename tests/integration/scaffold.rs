//! An operator-sdk v1.42 Ansible scaffold, as a user makes it, run by enka
//! with nothing changed but the base image: `config/default` applied to a
//! real control plane, and the manager started as a local process with
//! exactly the Deployment's args and env after the image's entrypoint, in
//! the image's working directory, with its ServiceAccount's token. It must
//! start, answer its probes, elect a leader, reconcile a sample, serve
//! metrics over HTTPS only to callers RBAC allows, with upstream's metric
//! names and types, and log nothing but zap JSON.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube_env::KubeEnv;
use kube_env::process::{Lifetime, Server};
use serde_json::{Value as Json, json};

use crate::support::{
    eventually, http_get, https_get, kubeconfig_for_token, kubectl, repo_path,
    service_account_token,
};

pub const PROJECT: &str = "memcached-operator";
const NAMESPACE: &str = "memcached-operator-system";

/// The operator-sdk tutorial's default for its task's variable.
pub const TUTORIAL_DEFAULTS: &str = "---\nsize: 1\n";

/// The operator-sdk tutorial's first task, which a user writes into the
/// generated role: so the run has tasks to log and a dependent to watch.
pub const TUTORIAL_TASK: &str = r#"---
- name: start memcached
  kubernetes.core.k8s:
    definition:
      kind: Deployment
      apiVersion: apps/v1
      metadata:
        name: '{{ ansible_operator_meta.name }}-memcached'
        namespace: '{{ ansible_operator_meta.namespace }}'
      spec:
        replicas: "{{ size }}"
        selector:
          matchLabels:
            app: memcached
        template:
          metadata:
            labels:
              app: memcached
          spec:
            containers:
            - name: memcached
              command:
              - memcached
              - -m=64
              - -o
              - modern
              - -v
              image: "docker.io/memcached:1.4.36-alpine"
              ports:
                - containerPort: 11211
"#;

/// Every metric upstream's operator serves that dashboards and alerts use,
/// with its type, as the `# TYPE` line of controller-runtime's text format
/// (0.0.4) names it: a counter with its `_total`.
const METRICS: &[(&str, &str)] = &[
    ("ansible_operator_build_info", "gauge"),
    ("ansible_operator_reconcile_result", "gauge"),
    ("ansible_operator_reconciles", "histogram"),
    ("resource_created_at_seconds", "gauge"),
    ("controller_runtime_reconcile_total", "counter"),
    ("controller_runtime_reconcile_errors_total", "counter"),
    ("controller_runtime_reconcile_time_seconds", "histogram"),
    ("controller_runtime_max_concurrent_reconciles", "gauge"),
    ("controller_runtime_active_workers", "gauge"),
    ("workqueue_depth", "gauge"),
    ("workqueue_adds_total", "counter"),
    ("workqueue_queue_duration_seconds", "histogram"),
    ("workqueue_work_duration_seconds", "histogram"),
    ("workqueue_unfinished_work_seconds", "gauge"),
    ("workqueue_longest_running_processor_seconds", "gauge"),
    ("workqueue_retries_total", "counter"),
    ("rest_client_requests_total", "counter"),
    ("leader_election_master_status", "gauge"),
    ("process_cpu_seconds_total", "counter"),
    ("process_resident_memory_bytes", "gauge"),
    ("process_virtual_memory_bytes", "gauge"),
    ("process_start_time_seconds", "gauge"),
    ("process_open_fds", "gauge"),
    ("process_max_fds", "gauge"),
];

fn operator_sdk() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_path("scripts/operator-sdk.sh"))
        .output()
        .expect("running scripts/operator-sdk.sh");
    assert!(
        out.status.success(),
        "operator-sdk could not be built from the Go module proxy:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn run_in(dir: &Path, program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{} {args:?}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The scaffold, generated as the operator-sdk tutorial does it.
pub fn scaffold(dir: &Path) {
    let sdk = operator_sdk();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    run_in(
        dir,
        &sdk,
        &[
            "init",
            "--plugins=ansible",
            "--domain=example.com",
            &format!("--project-name={PROJECT}"),
        ],
    );
    run_in(
        dir,
        &sdk,
        &[
            "create",
            "api",
            "--group=cache",
            "--version=v1alpha1",
            "--kind=Memcached",
            "--generate-role",
        ],
    );
}

/// The user's one change: the Dockerfile's FROM line names enka's image.
fn swap_base_image(dir: &Path) {
    swap_base_image_to(dir, "ghcr.io/enka/enka:latest");
}

/// The Dockerfile's FROM line, upstream's base image, replaced by `image`.
pub fn swap_base_image_to(dir: &Path, image: &str) {
    let path = dir.join("Dockerfile");
    let text = std::fs::read_to_string(&path).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    assert!(
        first.starts_with("FROM quay.io/operator-framework/ansible-operator:v1.42"),
        "the scaffold's base image: {first}"
    );
    std::fs::write(&path, format!("FROM {image}\n{rest}")).unwrap();
}

/// The argv of enka's image before a container's `args`: its ENTRYPOINT,
/// read from the Dockerfile, after the init (tini) that runs enka, with the
/// image's binary replaced by the one under test.
fn image_entrypoint() -> Vec<String> {
    let dockerfile = std::fs::read_to_string(repo_path("Dockerfile")).unwrap();
    let line = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("an ENTRYPOINT in the Dockerfile");
    let argv: Vec<String> = serde_json::from_str(line).expect("an exec-form ENTRYPOINT");
    let binary = argv
        .iter()
        .position(|a| a.ends_with("/enka") || a.ends_with("/ansible-operator"))
        .unwrap_or_else(|| panic!("enka in the ENTRYPOINT {argv:?}"));
    argv[binary + 1..].to_vec()
}

fn documents(yaml: &str) -> Vec<Json> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .filter_map(|doc| Json::deserialize(doc).ok())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The scaffold's sample reconciled: its Successful condition, and the
/// tutorial task's Deployment.
pub async fn await_tutorial_sample(
    client: &kube::Client,
    memcacheds: &Api<DynamicObject>,
    ns: &str,
    limit: Duration,
) {
    eventually("the sample's Successful condition", limit, || async {
        let object = memcacheds.get("memcached-sample").await.ok()?;
        let conditions = object.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Successful" && c["status"] == "True")
            .then_some(())
    })
    .await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), ns);
    deployments
        .get("memcached-sample-memcached")
        .await
        .expect("the tutorial task's Deployment");
}

/// The pod spec of the Deployment in rendered manifests, and its manager
/// container.
pub fn manager(manifests: &[Json]) -> (&Json, &Json) {
    let deployment = manifests
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment in config/default");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = pod["containers"]
        .as_array()
        .expect("the pod's containers")
        .iter()
        .find(|c| c["name"] == "manager")
        .expect("the manager container");
    (pod, container)
}

/// The manager container's args and env (fieldRef values resolved as the
/// kubelet would), and the pod's ServiceAccount.
fn manager_container(manifests: &[Json]) -> (Vec<String>, Vec<(String, String)>, String) {
    let (pod, container) = manager(manifests);
    let args = container["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    let env = container["env"]
        .as_array()
        .map(|vars| {
            vars.iter()
                .map(|var| {
                    let value = match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                        Some("metadata.namespace") => NAMESPACE.to_owned(),
                        Some(other) => panic!("fieldRef {other} is not resolved by this test"),
                        None => var["value"].as_str().unwrap_or_default().to_owned(),
                    };
                    (var["name"].as_str().unwrap().to_owned(), value)
                })
                .collect()
        })
        .unwrap_or_default();
    let account = pod["serviceAccountName"].as_str().unwrap().to_owned();
    (args, env, account)
}

fn port_of(args: &[String], flag: &str) -> u16 {
    args.iter()
        .find_map(|a| a.strip_prefix(&format!("{flag}=:")))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{flag} in {args:?}"))
}

/// A ServiceAccount in `ns`, bound to `cluster_role` when given.
async fn account(
    client: &kube::Client,
    ns: &str,
    name: &str,
    cluster_role: Option<&str>,
) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    accounts.create(&PostParams::default(), &sa).await.unwrap();
    if let Some(role) = cluster_role {
        let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{ns}-{name}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        }))
        .unwrap();
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }
    service_account_token(client, ns, name).await
}

#[tokio::test]
async fn an_operator_sdk_scaffold_runs_unchanged_with_secure_rbac_metrics() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    let dir = std::env::temp_dir().join(format!("enka-scaffold-{}", std::process::id()));
    scaffold(&dir);
    swap_base_image(&dir);
    std::fs::write(dir.join("roles/memcached/tasks/main.yml"), TUTORIAL_TASK).unwrap();
    std::fs::write(
        dir.join("roles/memcached/defaults/main.yml"),
        TUTORIAL_DEFAULTS,
    )
    .unwrap();

    // `make deploy` without the image build: kustomize config/default.
    let kubectl_bin = env.binaries().path("kubectl");
    let rendered = run_in(&dir, &kubectl_bin, &["kustomize", "config/default"]);
    let manifests = documents(&rendered);
    let rendered_path = dir.join("rendered.yaml");
    std::fs::write(&rendered_path, &rendered).unwrap();
    kubectl(env, &["apply", "-f", rendered_path.to_str().unwrap()]);
    kubectl(
        env,
        &[
            "wait",
            "--for=condition=established",
            "--timeout=60s",
            "crd/memcacheds.cache.example.com",
        ],
    );

    let (args, container_env, service_account) = manager_container(&manifests);
    for flag in [
        "--metrics-secure",
        "--metrics-require-rbac",
        "--leader-elect",
    ] {
        assert!(
            args.iter().any(|a| a == flag),
            "the scaffold passes {flag}: {args:?}"
        );
    }
    let metrics_port = port_of(&args, "--metrics-bind-address");
    let health_port = port_of(&args, "--health-probe-bind-address");

    // The manager's credentials: its ServiceAccount's token, its
    // namespace as the context's, as a pod of that account sees them.
    let token = service_account_token(&client, NAMESPACE, &service_account).await;
    let kubeconfig = dir.join("manager.kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_yaml::to_string(&kubeconfig_for_token(env, &token, Some(NAMESPACE))).unwrap(),
    )
    .unwrap();
    let mut argv = image_entrypoint();
    argv.extend(args.iter().cloned());
    let mut vars = container_env.clone();
    vars.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    let log = std::env::temp_dir().join(format!("enka-scaffold-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut manager = Server::start_in(
        "enka",
        Path::new(env!("CARGO_BIN_EXE_enka")),
        &argv,
        &vars,
        Some(&dir),
        log.clone(),
        Lifetime::Tied,
    )
    .expect("starting the manager");
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // Probes, as the Deployment's liveness and readiness probes ask.
    eventually("the readiness probe", Duration::from_secs(60), || async {
        match crate::support::try_http_get(health_port, "/readyz").await {
            Ok((200, _)) => Some(()),
            _ => None,
        }
    })
    .await;
    assert_eq!(http_get(health_port, "/healthz").await.0, 200);

    // Leader election: the Lease the scaffold names, held by this replica.
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let lease = eventually("the manager's Lease", Duration::from_secs(30), || async {
        leases.get_opt(PROJECT).await.ok().flatten()
    })
    .await;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(!holder.is_empty(), "the Lease has a holder");

    // The sample reconciles: the tutorial's Deployment and a Successful
    // condition.
    let ns = env.namespace("scaffold").await.unwrap();
    let sample = dir.join("config/samples/cache_v1alpha1_memcached.yaml");
    kubectl(env, &["apply", "-n", &ns, "-f", sample.to_str().unwrap()]);
    let gvk = GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    await_tutorial_sample(&client, &memcacheds, &ns, Duration::from_secs(60)).await;

    // Metrics: HTTPS; no token is 401, a token without the metrics-reader
    // role 403, one bound to it (the scaffold's ClusterRole) 200.
    let reader = account(
        &client,
        &ns,
        "prometheus",
        Some(&format!("{PROJECT}-metrics-reader")),
    )
    .await;
    let stranger = account(&client, &ns, "stranger", None).await;
    let (status, _) = https_get(metrics_port, "/metrics", None)
        .await
        .expect("HTTPS on the metrics port");
    assert_eq!(status, 401, "no token");
    let (status, _) = https_get(metrics_port, "/metrics", Some("not-a-token"))
        .await
        .unwrap();
    assert_eq!(status, 401, "a token the API server does not know");
    let (status, body) = https_get(metrics_port, "/metrics", Some(&stranger))
        .await
        .unwrap();
    assert_eq!(status, 403, "a token without the role: {body}");
    let (status, text) = https_get(metrics_port, "/metrics", Some(&reader))
        .await
        .unwrap();
    assert_eq!(status, 200, "{text}");
    let plain = crate::support::try_http_get(metrics_port, "/metrics").await;
    assert!(
        !matches!(plain, Ok((200, _))),
        "plain HTTP must not serve metrics"
    );
    for (name, kind) in METRICS {
        let line = format!("# TYPE {name} {kind}");
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    let controller = "memcached-v1alpha1-controller";
    for sample in [
        format!("resource_created_at_seconds{{name=\"memcached-sample\",namespace=\"{ns}\",group=\"cache.example.com\",version=\"v1alpha1\",kind=\"Memcached\"}}"),
        format!("controller_runtime_reconcile_total{{controller=\"{controller}\",result=\"requeue_after\"}}"),
        format!("workqueue_adds_total{{name=\"{controller}\",controller=\"{controller}\"}}"),
        format!("controller_runtime_max_concurrent_reconciles{{controller=\"{controller}\"}}"),
        "ansible_operator_reconcile_result{GVK=\"cache.example.com/v1alpha1, Kind=Memcached\",result=\"succeeded\"}".to_owned(),
        format!("leader_election_master_status{{name=\"{PROJECT}\"}} 1"),
        "rest_client_requests_total{code=\"201\",method=\"POST\"".to_owned(),
    ] {
        assert!(text.contains(&sample), "missing {sample} in:\n{text}");
    }

    // Logs: every line zap JSON; the reconcile's lines carry upstream's
    // fields.
    manager.stop(Duration::from_secs(10));
    let logs = log_text();
    let lines: Vec<Json> = logs
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let parsed: Json = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
            for key in ["level", "ts", "logger", "msg"] {
                assert!(parsed.get(key).is_some(), "no {key:?} in {line}");
            }
            parsed
        })
        .collect();
    // The manager watches every namespace of the shared control plane, so
    // it may also meet other tests' Memcacheds: this test's is in `ns`.
    let task_start = lines
        .iter()
        .find(|l| {
            l["event_type"] == "playbook_on_task_start"
                && l["task"] == "start memcached"
                && l["namespace"] == ns.as_str()
        })
        .unwrap_or_else(|| panic!("no task start event in {ns} in:\n{logs}"));
    assert_eq!(task_start["name"], "memcached-sample");
    assert_eq!(
        task_start["gvk"],
        "cache.example.com/v1alpha1, Kind=Memcached"
    );
    assert!(
        task_start["job"].as_str().is_some_and(|j| !j.is_empty()),
        "{task_start}"
    );
    assert!(
        !logs.contains("forbidden") && !logs.contains("Forbidden"),
        "the scaffold's RBAC should be enough:\n{logs}"
    );
    env.delete_namespace(&ns).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
