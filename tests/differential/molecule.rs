//! Upstream's own molecule tests of memcached-molecule-operator, run with
//! real `ansible-playbook` (the Ansible worker's virtualenv, kubernetes.core
//! from its `ansible` bundle) against the control plane while enka runs the
//! operator.
//!
//! The test files come from the ansible-operator-plugins module as they are;
//! the harness copies `molecule/default` into target/differential/ and takes
//! out only the tasks listed in [`NEEDS_A_CONTAINER`], which need a real
//! container (the operator's own image, an exec into it); the control
//! plane's nodes are kwok's, which run none. Everything else, waiting for
//! the memcached Deployment's Pods included, runs unchanged.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube_env::KubeEnv;
use serde_yaml::Value as Yaml;

use crate::operator::{Flavour, Operator};

/// The namespace molecule's default scenario uses (`TEST_OPERATOR_NAMESPACE`
/// unset).
const NAMESPACE: &str = "osdk-test";

/// Tasks that need a real container, by file and name, with what the harness
/// does instead. Tasks that wait for Pods to be scheduled, Running or Ready
/// run: the control plane has simulated nodes.
pub const NEEDS_A_CONTAINER: &[(&str, &str, &str)] = &[
    (
        "converge.yml",
        "import_tasks: kustomize.yml",
        "deploys the operator's image and waits for its Pod to be available; enka runs as a local process with config/testing's environment instead, and the harness applies the CRDs and the namespace",
    ),
    (
        "tasks/memcached_test.yml",
        "Search for all running pods",
        "looks for the operator's Pod; replaced by a task that reads enka's /metrics on its local port",
    ),
    (
        "tasks/memcached_test.yml",
        "Curl the metrics from the manager",
        "execs curl in the operator's Pod (k8s_exec); replaced as above, so the metric asserts after it still run",
    ),
];

/// Runs the molecule verify playbook against enka; the summary line.
pub async fn memcached_molecule(env: &KubeEnv, out_dir: &Path) -> Result<String, String> {
    let project = crate::upstream_testdata("memcached-molecule-operator");
    let scenario = project.join("molecule/default");
    crate::support::kubectl(
        env,
        &[
            "apply",
            "--server-side",
            "-f",
            &project.join("config/crd/bases").display().to_string(),
        ],
    );
    crate::support::kubectl(env, &["create", "namespace", NAMESPACE]);
    let _ = std::fs::remove_file("/tmp/metricsbumped");
    let operator = Operator::start(
        Flavour::Enka,
        env,
        &project.join("watches.yaml"),
        NAMESPACE,
        // config/testing/debug_logs_patch.yaml
        &[("ANSIBLE_DEBUG_LOGS", "TRUE")],
        out_dir,
    )
    .await;
    let work = out_dir.join("molecule/default");
    let _ = std::fs::remove_dir_all(&work);
    copy_scenario(&scenario, &work, operator.metrics_port())?;
    let python = ansible_python();
    let playbook = python
        .parent()
        .map(|bin| bin.join("ansible-playbook"))
        .ok_or("no ansible-playbook beside the worker's Python")?;
    let extra = serde_json::json!({
        "namespace": NAMESPACE,
        "config_dir": project.join("config"),
        "samples_dir": project.join("config/samples"),
        "ansible_python_interpreter": python,
        "molecule_yml": {"scenario": {"name": "default"}},
    });
    let vars = work.join("extra-vars.json");
    std::fs::write(&vars, extra.to_string()).map_err(|e| e.to_string())?;
    let log = out_dir.join("molecule.log");
    let output = Command::new(&playbook)
        .args(["-i", "localhost,", "verify.yml", "-e"])
        .arg(format!("@{}", vars.display()))
        .current_dir(&work)
        .env("K8S_AUTH_KUBECONFIG", env.kubeconfig())
        .env("ANSIBLE_FORCE_COLOR", "0")
        .env("ANSIBLE_NOCOLOR", "1")
        .output()
        .map_err(|e| format!("running {}: {e}", playbook.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(&log, &text).map_err(|e| e.to_string())?;
    let recap = text
        .lines()
        .find(|line| line.starts_with("localhost") && line.contains("ok="))
        .unwrap_or("")
        .split_whitespace()
        .skip(2)
        .collect::<Vec<_>>()
        .join(" ");
    let enka_log = operator.log_path().to_owned();
    operator.stop();
    let failed =
        !output.status.success() || !recap.contains("failed=0") || !recap.contains("rescued=0");
    if failed {
        return Err(format!(
            "ansible-playbook exited {} ({recap}); its output is in {}, enka's log in {}:\n{}",
            output.status,
            log.display(),
            enka_log.display(),
            tail(&text, 4000)
        ));
    }
    Ok(format!(
        "molecule: memcached-molecule-operator verify.yml against enka: {recap}; {} tasks that need a real container left out (listed in tests/differential/molecule.rs)",
        NEEDS_A_CONTAINER.len()
    ))
}

fn tail(text: &str, max: usize) -> &str {
    let start = text.len().saturating_sub(max);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

/// The worker's Python (ENKA_ANSIBLE_PYTHON, as `make test` sets it).
fn ansible_python() -> PathBuf {
    std::env::var_os("ENKA_ANSIBLE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let script = crate::support::repo_path("scripts/ansible-venv.sh");
            let out = Command::new("bash")
                .arg(&script)
                .output()
                .expect("running scripts/ansible-venv.sh");
            assert!(out.status.success(), "scripts/ansible-venv.sh failed");
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
}

/// Copies `verify.yml` and `tasks/` of the scenario to `to`, with the
/// tasks that need a real container taken out (the metrics one replaced).
fn copy_scenario(from: &Path, to: &Path, metrics_port: u16) -> Result<(), String> {
    let tasks = to.join("tasks");
    std::fs::create_dir_all(&tasks).map_err(|e| e.to_string())?;
    std::fs::copy(from.join("verify.yml"), to.join("verify.yml")).map_err(|e| e.to_string())?;
    let entries = std::fs::read_dir(from.join("tasks")).map_err(|e| e.to_string())?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(entry.path()).map_err(|e| e.to_string())?;
        let relative = format!("tasks/{name}");
        let bound: Vec<&str> = NEEDS_A_CONTAINER
            .iter()
            .filter(|(file, _, _)| *file == relative)
            .map(|(_, task, _)| *task)
            .collect();
        let text = if bound.is_empty() {
            text
        } else {
            without_tasks(&text, &bound, metrics_port).map_err(|e| format!("{relative}: {e}"))?
        };
        std::fs::write(tasks.join(&name), text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn without_tasks(text: &str, names: &[&str], metrics_port: u16) -> Result<String, String> {
    let tasks: Vec<Yaml> = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let mut kept = Vec::new();
    let mut found = 0;
    for task in tasks {
        let name = task.get("name").and_then(Yaml::as_str).unwrap_or_default();
        if !names.contains(&name) {
            kept.push(task);
            continue;
        }
        found += 1;
        if name == "Curl the metrics from the manager" {
            kept.extend(metrics_from_local_enka(metrics_port));
        }
    }
    if found != names.len() {
        return Err(format!(
            "{} of the {} tasks that need a real container found: upstream's tests changed",
            found,
            names.len()
        ));
    }
    serde_yaml::to_string(&kept).map_err(|e| e.to_string())
}

/// What `Curl the metrics from the manager` registers, read from enka's
/// local metrics port instead of through the Pod.
fn metrics_from_local_enka(port: u16) -> Vec<Yaml> {
    serde_yaml::from_str(&format!(
        r#"
- name: Read the metrics from the manager (enka, a local process)
  ansible.builtin.uri:
    url: http://127.0.0.1:{port}/metrics
    return_content: true
  register: metrics_page
- name: Keep them where the asserts look
  ansible.builtin.set_fact:
    metrics_output:
      stdout: "{{{{ metrics_page.content }}}}"
"#
    ))
    .expect("the replacement tasks are YAML")
}
