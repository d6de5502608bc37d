//! `enka test` on the real control plane: a molecule-style project of ours
//! passes, and fails once its role is broken; upstream's
//! memcached-molecule-operator's own test tasks run unchanged, the one that
//! waits for a Deployment's Pods (no kubelet here) reported as failing with
//! the note that says why.

use std::path::Path;
use std::process::Command;

use kube_env::KubeEnv;

use crate::support::repo_path;

const ROLE: &str = "- name: write the output\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: '{{ ansible_operator_meta.name }}-out'\n        namespace: '{{ ansible_operator_meta.namespace }}'\n      data:\n        size: '{{ size | string }}'\n";

const TEST: &str = r#"---
- name: Create a Sample
  k8s:
    state: present
    namespace: '{{ namespace }}'
    definition: "{{ lookup('template', '/'.join([samples_dir, 'sample.yaml'])) | from_yaml }}"
    wait: yes
    wait_timeout: 60
    wait_condition:
      type: Successful
      status: "True"

- name: Read what the operator wrote
  k8s_info:
    api_version: v1
    kind: ConfigMap
    namespace: '{{ namespace }}'
    name: s1-out
  register: out

- name: The role wrote the size
  assert:
    that: out.resources[0].data.size == greeting_size
"#;

const MOLECULE: &str = "provisioner:\n  name: ansible\n  inventory:\n    group_vars:\n      all:\n        namespace: ${TEST_OPERATOR_NAMESPACE:-osdk-test}\n        greeting_size: '${ENKA_TEST_SIZE:-3}'\n    host_vars:\n      localhost:\n        ansible_python_interpreter: '{{ ansible_playbook_python }}'\n        samples_dir: ${MOLECULE_PROJECT_DIRECTORY}/config/samples\n";

fn enka_test(env: &KubeEnv, watches: &Path, filters: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .arg("test")
        .args(filters)
        .arg("--watches-file")
        .arg(watches)
        .env("KUBECONFIG", env.kubeconfig())
        .output()
        .expect("running enka test");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn enka_test_runs_a_projects_molecule_tasks() {
    let env = KubeEnv::shared().await;
    let dir = std::env::temp_dir().join(format!("enka-test-project-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in [
        "roles/sample/tasks",
        "molecule/default/tasks",
        "config/crd/bases",
        "config/samples",
    ] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("watches.yaml"),
        "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n",
    )
    .unwrap();
    std::fs::copy(
        repo_path("tests/fixtures/crds/enka.test_samples.yaml"),
        dir.join("config/crd/bases/enka.test_samples.yaml"),
    )
    .unwrap();
    std::fs::write(
        dir.join("config/samples/sample.yaml"),
        "apiVersion: enka.test/v1\nkind: Sample\nmetadata:\n  name: s1\nspec:\n  size: 3\n",
    )
    .unwrap();
    std::fs::write(dir.join("roles/sample/tasks/main.yml"), ROLE).unwrap();
    std::fs::write(dir.join("molecule/default/molecule.yml"), MOLECULE).unwrap();
    std::fs::write(dir.join("molecule/default/tasks/sample_test.yml"), TEST).unwrap();
    let watches = dir.join("watches.yaml");

    let (code, out) = enka_test(env, &watches, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("TASK [The role wrote the size]"), "{out}");
    assert!(out.contains("1 passed, 0 failed"), "{out}");

    // A broken role: the operator's runs fail, the test's wait times out
    // on the Failure condition instead of Successful.
    std::fs::write(
        dir.join("roles/sample/tasks/main.yml"),
        ROLE.replace("size | string", "size | nonexistent_filter"),
    )
    .unwrap();
    std::fs::write(
        dir.join("molecule/default/tasks/sample_test.yml"),
        TEST.replace("wait_timeout: 60", "wait_timeout: 5"),
    )
    .unwrap();
    let (code, out) = enka_test(env, &watches, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    assert!(out.contains("FAILED: sample_test.yml"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A control plane of its own: upstream's CRDs and Memcacheds would meet
/// the scaffold test's operator, which watches every namespace of the
/// shared one.
#[tokio::test]
async fn upstreams_memcached_molecule_tests_run_through_enka_test() {
    let env = KubeEnv::start(kube_env::Options::default())
        .await
        .unwrap_or_else(|e| panic!("the control plane could not start: {e}"));
    let project =
        crate::support::ansible_operator_plugins().join("testdata/memcached-molecule-operator");
    let (code, out) = enka_test(&env, &project.join("watches.yaml"), &[]);
    // foo and memfin pass; memcached_test waits for its Deployment's Pods,
    // which only a kubelet runs.
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("2 passed, 1 failed"), "{out}");
    assert!(out.contains("FAILED: memcached_test.yml"), "{out}");
    assert!(
        out.contains("TASK [Wait 2 minutes for memcached deployment]"),
        "{out}"
    );
    assert!(out.contains("this cluster has no nodes"), "{out}");
}

#[tokio::test]
async fn this_repositorys_own_scenario_passes() {
    let env = KubeEnv::shared().await;
    let (code, out) = enka_test(env, &repo_path("watches.yaml"), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 passed, 0 failed"), "{out}");
    assert!(
        out.contains("TASK [The song ends with Zun Zun Zun Zun Doko, once, then one Kiyoshi]"),
        "{out}"
    );
}
