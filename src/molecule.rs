//! `enka test`: a project's molecule tests without molecule, kind or an
//! image build.
//!
//! The tests are the files Operator SDK projects already have,
//! `molecule/<scenario>/tasks/*_test.yml` (create a custom resource, wait
//! with `k8s_info`, `assert`), with the variables the scenario's
//! `molecule.yml` gives its inventory (`${VAR:-default}` and
//! `${MOLECULE_PROJECT_DIRECTORY}` expanded as molecule expands them). The
//! operator runs in this process on a fresh namespace (its CRDs applied from
//! `config/crd/bases`), and each test file runs as a play of its own through
//! `enka playbook`'s runner against the current kubeconfig's cluster, with
//! Ansible's output. A file passes when its play does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as Json, json};

use crate::kube::client::KubeCluster;
use crate::kube::{Cluster, PatchType};

/// `enka test`'s inputs.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// The project's watches file; the project is its directory.
    pub watches_file: PathBuf,
    /// The molecule scenario (`default`).
    pub scenario: String,
    /// Only test files whose name contains one of these.
    pub filters: Vec<String>,
    /// The Ansible worker, for tasks enka has no native code for.
    pub ansible: Option<crate::worker::Config>,
    /// Leave the test namespace for a look afterwards.
    pub keep_namespace: bool,
    /// `-v` count for the tests' output.
    pub verbosity: u8,
    /// Templating: semantics, seed, the migration report's recorder.
    pub templates: crate::template::Options,
}

/// Why the tests could not run (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The project has no tests, or its molecule.yml does not read.
    #[error("{0}")]
    Project(String),
    /// The cluster refused or could not be reached.
    #[error("{0}")]
    Kube(String),
}

/// How the test files went.
#[derive(Debug, Clone, Default)]
pub struct TestSummary {
    /// Test files whose play succeeded.
    pub passed: Vec<String>,
    /// Test files whose play failed.
    pub failed: Vec<String>,
}

/// Molecule's interpolation of `molecule.yml`: `$$` is a `$`, `${NAME}` and
/// `$NAME` the variable (empty when unset), `${NAME:-default}` the default
/// when unset or empty, `${NAME-default}` when unset.
pub fn interpolate(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
        {
            let inner = &braced[..end];
            let value = if let Some((name, default)) = inner.split_once(":-") {
                lookup(name)
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| default.to_owned())
            } else if let Some((name, default)) = inner.split_once('-') {
                lookup(name).unwrap_or_else(|| default.to_owned())
            } else {
                lookup(inner).unwrap_or_default()
            };
            out.push_str(&value);
            rest = &braced[end + 1..];
        } else {
            let name_len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if name_len == 0 {
                out.push('$');
            } else {
                out.push_str(&lookup(&after[..name_len]).unwrap_or_default());
            }
            rest = &after[name_len..];
        }
    }
    out.push_str(rest);
    out
}

/// The variables the scenario's inventory gives localhost: `group_vars.all`
/// then `host_vars.localhost` of `provisioner.inventory`, without
/// `ansible_python_interpreter` (enka's Python is its worker's).
fn scenario_vars(
    scenario_dir: &Path,
    project_dir: &Path,
    scenario: &str,
) -> Result<serde_json::Map<String, Json>, TestError> {
    let path = scenario_dir.join("molecule.yml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(TestError::Project(format!("{}: {e}", path.display()))),
    };
    let lookup = |name: &str| match name {
        "MOLECULE_PROJECT_DIRECTORY" => Some(project_dir.display().to_string()),
        "MOLECULE_SCENARIO_DIRECTORY" => Some(scenario_dir.display().to_string()),
        "MOLECULE_SCENARIO_NAME" => Some(scenario.to_owned()),
        _ => std::env::var(name).ok(),
    };
    let text = interpolate(&text, &lookup);
    let document: Json = match crate::yaml::load_one(&text) {
        Ok(Some(node)) => node.to_json(),
        Ok(None) => Json::Null,
        Err(e) => return Err(TestError::Project(format!("{}: {e}", path.display()))),
    };
    let mut vars = serde_json::Map::new();
    for pointer in [
        "/provisioner/inventory/group_vars/all",
        "/provisioner/inventory/host_vars/localhost",
    ] {
        if let Some(Json::Object(map)) = document.pointer(pointer) {
            vars.extend(map.clone());
        }
    }
    vars.remove("ansible_python_interpreter");
    Ok(vars)
}

/// The scenario's test files, by name, filtered.
fn test_files(tasks_dir: &Path, filters: &[String]) -> Result<Vec<PathBuf>, TestError> {
    let entries = std::fs::read_dir(tasks_dir)
        .map_err(|e| TestError::Project(format!("{}: {e}", tasks_dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_test.yml"))
        })
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(TestError::Project(format!(
            "no *_test.yml files in {}{}",
            tasks_dir.display(),
            if filters.is_empty() {
                String::new()
            } else {
                format!(" matching {}", filters.join(", "))
            }
        )));
    }
    Ok(files)
}

/// The inventory molecule's delegated driver writes: localhost, run
/// locally by the playbook's own Python.
const MOLECULE_INVENTORY: &str = "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n";

/// A play that runs `test` with `vars`, as molecule's verify.yml includes
/// each test file (kubernetes.core's modules by their short names).
fn test_play(test: &Path, vars: &serde_json::Map<String, Json>) -> Json {
    json!([{
        "name": test.file_name().map(|n| n.to_string_lossy().into_owned()),
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": false,
        "collections": ["kubernetes.core", "operator_sdk.util"],
        "vars": vars,
        "tasks": [{"include_tasks": test.display().to_string()}],
    }])
}

/// Applies every CRD manifest under `dir` (server-side apply) and waits
/// until each is established.
async fn apply_crds(cluster: &KubeCluster, dir: &Path) -> Result<(), TestError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let resource = cluster
        .resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        .await
        .map_err(|e| TestError::Kube(format!("discovery: {e}")))?;
    let apply = PatchType::Apply {
        field_manager: "enka-test".to_owned(),
        force: true,
    };
    let mut names = Vec::new();
    for path in paths.iter().filter(|p| {
        p.extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
    }) {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TestError::Project(format!("{}: {e}", path.display())))?;
        let documents = crate::yaml::load_all(&text)
            .map_err(|e| TestError::Project(format!("{}: {e}", path.display())))?;
        for crd in documents.iter().map(|d| d.to_json()) {
            let Some(name) = crd.pointer("/metadata/name").and_then(Json::as_str) else {
                continue;
            };
            cluster
                .patch(&resource, None, name, &crd, &apply, None)
                .await
                .map_err(|e| TestError::Kube(format!("applying {}: {e}", path.display())))?;
            names.push(name.to_owned());
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for name in names {
        loop {
            let crd = cluster
                .get(&resource, None, &name)
                .await
                .map_err(|e| TestError::Kube(format!("reading CRD {name}: {e}")))?;
            let established = crd
                .as_ref()
                .and_then(|c| c.pointer("/status/conditions"))
                .and_then(Json::as_array)
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == "Established" && c["status"] == "True")
                });
            if established {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(TestError::Kube(format!(
                    "CRD {name} not established after 60 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Waits until the in-process operator's readiness probe passes (every
/// watch has listed).
async fn await_ready(
    port: u16,
    operator: &tokio::task::JoinHandle<anyhow::Result<()>>,
) -> Result<(), TestError> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if operator.is_finished() {
            return Err(TestError::Project(
                "the operator stopped before it was ready (its log above says why)".into(),
            ));
        }
        if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            let _ = stream
                .write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .await;
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            if answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.0 200") {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(TestError::Kube(
                "the operator was not ready after 60 s".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn free_port() -> Result<u16, TestError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| TestError::Project(format!("no free local port: {e}")))
}

/// Runs the tests; see the module docs.
pub async fn run(options: &TestOptions, config: kube::Config) -> Result<TestSummary, TestError> {
    let watches_file =
        std::path::absolute(&options.watches_file).unwrap_or_else(|_| options.watches_file.clone());
    let project_dir = watches_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let scenario_dir = project_dir.join("molecule").join(&options.scenario);
    let tests = test_files(&scenario_dir.join("tasks"), &options.filters)?;
    let mut vars = scenario_vars(&scenario_dir, &project_dir, &options.scenario)?;

    let client = kube::Client::try_from(config.clone())
        .map_err(|e| TestError::Kube(format!("cannot build a Kubernetes client: {e}")))?;
    let cluster = Arc::new(KubeCluster::new(client, "enka-test"));
    apply_crds(&cluster, &project_dir.join("config/crd/bases")).await?;
    let namespace = format!("enka-test-{:08x}", rand::random::<u32>());
    let namespaces = cluster
        .resource("v1", "Namespace")
        .await
        .map_err(|e| TestError::Kube(format!("discovery: {e}")))?;
    cluster
        .create(
            &namespaces,
            None,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await
        .map_err(|e| TestError::Kube(format!("creating namespace {namespace}: {e}")))?;
    vars.insert("namespace".to_owned(), json!(namespace));
    println!(
        "enka test: namespace {namespace}, {} test file(s)",
        tests.len()
    );

    let health_port = free_port()?;
    let operator_options = operator_options(options, &watches_file, &namespace, health_port);
    let operator = tokio::spawn(crate::operator::run(operator_options, config));
    let result = async {
        await_ready(health_port, &operator).await?;
        let scratch = std::env::temp_dir().join(format!("{namespace}-plays"));
        std::fs::create_dir_all(&scratch)
            .map_err(|e| TestError::Project(format!("{}: {e}", scratch.display())))?;
        let inventory = scratch.join("inventory.yml");
        std::fs::write(&inventory, MOLECULE_INVENTORY)
            .map_err(|e| TestError::Project(format!("{}: {e}", inventory.display())))?;
        let mut summary = TestSummary::default();
        for test in &tests {
            let name = test
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let play = scratch.join(&name);
            let text = serde_json::to_string_pretty(&test_play(test, &vars))
                .map_err(|e| TestError::Project(e.to_string()))?;
            std::fs::write(&play, text)
                .map_err(|e| TestError::Project(format!("{}: {e}", play.display())))?;
            let code = crate::playbook::run(crate::playbook::PlaybookOptions {
                playbooks: vec![play],
                inventory: vec![inventory.clone()],
                verbosity: options.verbosity,
                cluster: Some(cluster.clone()),
                templates: options.templates.clone(),
                ..Default::default()
            })
            .await;
            if code == crate::playbook::exit::OK {
                summary.passed.push(name);
            } else {
                summary.failed.push(name);
            }
        }
        let _ = std::fs::remove_dir_all(&scratch);
        Ok(summary)
    }
    .await;
    operator.abort();
    if !options.keep_namespace {
        let _ = cluster.delete(&namespaces, None, &namespace, None).await;
    }
    let summary = result?;
    if !summary.failed.is_empty() && no_nodes(&cluster).await {
        println!(
            "\nnote: this cluster has no nodes, so no Pod ever runs: tasks that wait for Pods, Deployments to become available or exec into a Pod cannot pass here"
        );
    }
    Ok(summary)
}

/// The operator `enka test` runs in-process: on the test's namespace alone,
/// its health endpoint on `health_port` to wait for, pipes allowed to the
/// test's lookups.
fn operator_options(
    options: &TestOptions,
    watches_file: &Path,
    namespace: &str,
    health_port: u16,
) -> crate::operator::OperatorOptions {
    crate::operator::OperatorOptions {
        watches_file: watches_file.to_path_buf(),
        reconcile_period: Duration::from_secs(36_000),
        max_concurrent_reconciles: 4,
        reconcile_timeout: None,
        graceful_shutdown_timeout: Duration::from_secs(5),
        roles_path: Vec::new(),
        collections_path: Vec::new(),
        verbosity: 2,
        namespaces: vec![namespace.to_owned()],
        inject_owner_ref: true,
        ansible: options.ansible.clone(),
        templates: crate::template::Options {
            allow_pipe: true,
            ..options.templates.clone()
        },
        metrics_address: None,
        metrics_serving: Default::default(),
        log_events: crate::engine::LogEvents::Tasks,
        health_address: Some(std::net::SocketAddr::from(([127, 0, 0, 1], health_port))),
        leader_election: None,
        sharding: None,
    }
}

/// Whether the cluster has no Node (a bare control plane: nothing runs Pods).
async fn no_nodes(cluster: &KubeCluster) -> bool {
    let Ok(nodes) = cluster.resource("v1", "Node").await else {
        return false;
    };
    cluster
        .list(&nodes, None, None, None)
        .await
        .is_ok_and(|nodes| nodes.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn molecule_interpolation() {
        let env = |name: &str| match name {
            "SET" => Some("value".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(interpolate("a: ${SET}", &env), "a: value");
        assert_eq!(interpolate("a: $SET/x", &env), "a: value/x");
        assert_eq!(interpolate("a: ${UNSET:-osdk-test}", &env), "a: osdk-test");
        assert_eq!(interpolate("a: ${EMPTY:-d}", &env), "a: d");
        assert_eq!(interpolate("a: ${EMPTY-d}", &env), "a: ");
        assert_eq!(interpolate("a: ${UNSET-d}", &env), "a: d");
        assert_eq!(interpolate(r#"a: ${UNSET:-""}"#, &env), r#"a: """#);
        assert_eq!(interpolate("cost: $$5 $", &env), "cost: $5 $");
        assert_eq!(interpolate("a: ${UNSET}", &env), "a: ");
    }

    #[test]
    fn scenario_vars_come_from_the_inventory() {
        let dir = std::env::temp_dir().join(format!("enka-molecule-{}", std::process::id()));
        let scenario = dir.join("molecule/default");
        std::fs::create_dir_all(&scenario).unwrap();
        std::fs::write(
            scenario.join("molecule.yml"),
            "provisioner:\n  inventory:\n    group_vars:\n      all:\n        namespace: ${ENKA_TEST_UNSET_NS:-osdk-test}\n    host_vars:\n      localhost:\n        ansible_python_interpreter: '{{ ansible_playbook_python }}'\n        samples_dir: ${MOLECULE_PROJECT_DIRECTORY}/config/samples\n",
        )
        .unwrap();
        let vars = scenario_vars(&scenario, &dir, "default").unwrap();
        assert_eq!(vars["namespace"], "osdk-test");
        assert_eq!(
            vars["samples_dir"],
            format!("{}/config/samples", dir.display())
        );
        assert!(!vars.contains_key("ansible_python_interpreter"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
