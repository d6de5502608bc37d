//! The operators compared, and what is done to each.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::scenario::{Step, Subject};
use crate::support::{repo_path, shared_operators};

/// The subjects, in the order they run. Those that need `../shared/operators`
/// are left out (with a note) where it is not, outside CI. awx-operator runs
/// only with ENKA_DIFFERENTIAL_FULL=1 (`make differential`): upstream spends
/// minutes on each of its runs, waiting for Pods that never come.
pub fn all() -> Vec<Subject> {
    let mut all = Vec::new();
    let shared = shared_operators();
    if let Some(shared) = &shared {
        all.push(memcached_molecule(shared));
    }
    all.push(compat_memcached(shared.as_deref()));
    if std::env::var_os("ENKA_DIFFERENTIAL_FULL").is_some()
        && let Some(shared) = &shared
    {
        all.push(awx(shared));
    }
    all
}

/// The project's own AWX sample, pointed at the external database.
fn awx_sample(project: &std::path::Path) -> serde_json::Value {
    let path = project.join("config/samples/awx_v1beta1_awx.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut sample: serde_json::Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sample["spec"]["postgres_configuration_secret"] = json!("external-postgres");
    sample
}

/// awx-operator @ 1bc3422 with an external (unmanaged) database: the run goes
/// as far as it can without Pods (its tasks wait for the web and task Pods
/// and give up), and both operators must stop at the same place with the
/// same objects.
fn awx(shared: &std::path::Path) -> Subject {
    let project = shared.join("awx-operator");
    let encode = |text: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(text)
    };
    Subject {
        name: "awx",
        crds: vec![project.join("config/crd/bases")],
        primary: ["AWX", "AWXBackup", "AWXRestore", "AWXMeshIngress"]
            .iter()
            .map(|kind| ("awx.ansible.com".to_owned(), (*kind).to_owned()))
            .collect(),
        env: vec![collections_path(&[shared.join("collections")])],
        steps: vec![
            Step::CreateObject(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "external-postgres"},
                "data": {
                    "host": encode("postgres.example.com"),
                    "port": encode("5432"),
                    "database": encode("awx"),
                    "username": encode("awx"),
                    "password": encode("differential"),
                    "sslmode": encode("prefer"),
                    "type": encode("unmanaged"),
                }
            })),
            Step::CreateObject(awx_sample(&project)),
        ],
        // Past the first run's 300 s wait for the web Pod and its Failure,
        // into the second run: both sides must be at the same place then.
        limit: Duration::from_secs(420),
        scratch: Vec::new(),
        project,
    }
}

fn collections_path(paths: &[PathBuf]) -> (String, String) {
    let joined: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    ("ANSIBLE_COLLECTIONS_PATH".to_owned(), joined.join(":"))
}

/// Upstream's own test operator (ansible-operator-plugins testdata), from
/// the Go module proxy: playbooks, a finalizer role, a blacklisted kind, a
/// core Secret watch, osdk_metric and k8s_status from operator_sdk.util.
fn memcached_molecule(shared: &std::path::Path) -> Subject {
    let project = crate::upstream_testdata("memcached-molecule-operator");
    let samples = project.join("config/samples");
    Subject {
        name: "memcached-molecule",
        crds: vec![project.join("config/crd/bases")],
        primary: ["Memcached", "Foo", "Memfin"]
            .iter()
            .map(|kind| ("cache.example.com".to_owned(), (*kind).to_owned()))
            .collect(),
        env: vec![collections_path(&[shared.join("collections")])],
        steps: vec![
            Step::Create(vec![
                samples.join("cache_v1alpha1_memcached.yaml"),
                samples.join("cache_v1alpha1_foo.yaml"),
                samples.join("cache_v1alpha1_memfin.yaml"),
            ]),
            Step::Patch {
                api_version: "cache.example.com/v1alpha1",
                kind: "Memcached",
                name: "memcached-sample",
                patch: json!({"spec": {"size": 2}}),
            },
            Step::Delete {
                api_version: "apps/v1",
                kind: "Deployment",
                name: "memcached-sample-memcached",
            },
            Step::Delete {
                api_version: "cache.example.com/v1alpha1",
                kind: "Memcached",
                name: "memcached-sample",
            },
        ],
        limit: Duration::from_secs(120),
        // The role bumps its metrics once per machine, marked by this file.
        scratch: vec![PathBuf::from("/tmp/metricsbumped")],
        project,
    }
}

/// tests/compat/memcached-operator: our operator in the shape of upstream's.
fn compat_memcached(shared: Option<&std::path::Path>) -> Subject {
    let project = repo_path("tests/compat/memcached-operator");
    let group = "cache.compat.enka.dev";
    Subject {
        name: "compat-memcached",
        crds: vec![project.join("config/crd/bases")],
        primary: ["Memcached", "Foo", "Memfin"]
            .iter()
            .map(|kind| (group.to_owned(), (*kind).to_owned()))
            .collect(),
        env: shared
            .map(|shared| vec![collections_path(&[shared.join("collections")])])
            .unwrap_or_default(),
        steps: vec![
            Step::Create(vec![
                project.join("config/samples/cache_v1alpha1_memcached.yaml"),
            ]),
            Step::CreateObject(json!({
                "apiVersion": format!("{group}/v1alpha1"), "kind": "Foo",
                "metadata": {"name": "foo-sample"}, "spec": {"foo": "bar"}
            })),
            Step::Patch {
                api_version: "cache.compat.enka.dev/v1alpha1",
                kind: "Memcached",
                name: "memcached-sample",
                patch: json!({"spec": {"size": 3}}),
            },
            Step::Delete {
                api_version: "apps/v1",
                kind: "Deployment",
                name: "memcached-sample-memcached",
            },
            Step::Delete {
                api_version: "cache.compat.enka.dev/v1alpha1",
                kind: "Memcached",
                name: "memcached-sample",
            },
        ],
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
        project,
    }
}
