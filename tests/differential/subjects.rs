//! The operators compared, and what is done to each.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::scenario::{Step, Subject};
use crate::support::{repo_path, shared_operators};

/// The subjects, in the order they run. Those that need `../shared/operators`
/// are left out (with a note) where it is not, outside CI. awx-operator runs
/// only with ENKA_DIFFERENTIAL_FULL=1 (`make differential`): upstream spends
/// minutes on each of its runs, waiting for Pods that never come. Only the
/// subjects `wanted` names are built: building some installs or generates
/// their project (upstream's collection, upstream's generator).
pub fn all(wanted: &dyn Fn(&str) -> bool) -> Vec<Subject> {
    let mut all = Vec::new();
    let shared = shared_operators();
    if let Some(shared) = &shared {
        all.push(memcached_molecule(shared));
    }
    all.push(compat_memcached(shared.as_deref()));
    all.push(compat_advanced(shared.as_deref()));
    if let Some(shared) = &shared
        && wanted("seed-zundoko")
    {
        all.push(seed_zundoko(shared));
    }
    if std::env::var_os("ENKA_DIFFERENTIAL_FULL").is_some()
        && let Some(shared) = &shared
    {
        if wanted("advanced-molecule") {
            all.push(advanced_molecule(shared));
        }
        all.push(awx(shared));
    }
    all.retain(|subject| wanted(subject.name));
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
        args: Vec::new(),
        steps: vec![
            Step::CreateObjects(vec![json!({
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
            })]),
            Step::CreateObjects(vec![awx_sample(&project)]),
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
        args: Vec::new(),
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
        args: Vec::new(),
        steps: vec![
            Step::Create(vec![
                project.join("config/samples/cache_v1alpha1_memcached.yaml"),
            ]),
            Step::CreateObjects(vec![json!({
                "apiVersion": format!("{group}/v1alpha1"), "kind": "Foo",
                "metadata": {"name": "foo-sample"}, "spec": {"foo": "bar"}
            })]),
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

/// The seed's Zundoko operator as the article wrote it
/// (tests/fixtures/zundoko-seed). Its `random` filter is unseeded upstream,
/// so a song sung from nothing differs between any two runs; the song here
/// is already sung (four Zun and a Doko, as the harness's own objects), and
/// the role judges it, asks itself for Kiyoshi through its own spec, says
/// Kiyoshi and marks the Hikawa kiyoshied.
fn seed_zundoko(shared: &std::path::Path) -> Subject {
    const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";
    let mut objects: Vec<serde_json::Value> = ["Zun", "Zun", "Zun", "Zun", "Doko"]
        .iter()
        .enumerate()
        .map(|(i, say)| {
            json!({
                "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Zundoko",
                "metadata": {
                    "name": format!("hikawa-zundoko-{:04}", i + 1),
                    "labels": {format!("hikawa.{GROUP}"): "hikawa"},
                },
                "spec": {"say": say},
            })
        })
        .collect();
    objects.push(json!({
        "apiVersion": format!("{GROUP}/v1beta2"), "kind": "Hikawa",
        "metadata": {"name": "hikawa"},
        "spec": {"intervalMillis": 500, "numZundokos": "5"},
    }));
    Subject {
        name: "seed-zundoko",
        project: repo_path("tests/fixtures/zundoko-seed"),
        crds: vec![repo_path("config/crd/bases")],
        primary: vec![(GROUP.to_owned(), "Hikawa".to_owned())],
        // The role names community.kubernetes, which today's upstream image
        // lacks, and operator_sdk.util; both sides get both (enka runs their
        // tasks natively).
        env: vec![collections_path(&[
            crate::operator::upstream_dir().join("collections"),
            shared.join("collections"),
        ])],
        args: Vec::new(),
        steps: vec![
            Step::CreateObjects(objects),
            Step::Patch {
                api_version: "zundokokiyoshi.kaitoy.github.com/v1beta2",
                kind: "Hikawa",
                name: "hikawa",
                patch: json!({"spec": {"intervalMillis": 100}}),
            },
            // Not watched (watchDependentResources: false): nothing answers.
            Step::Delete {
                api_version: "zundokokiyoshi.kaitoy.github.com/v1beta1",
                kind: "Kiyoshi",
                name: "hikawa-kiyoshi",
            },
            Step::Delete {
                api_version: "zundokokiyoshi.kaitoy.github.com/v1beta2",
                kind: "Hikawa",
                name: "hikawa",
            },
        ],
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
    }
}

/// tests/compat/advanced-operator: our operator in the shape of upstream's
/// advanced-molecule-operator, one object of each watch (a collection role,
/// k8s_status, a core Secret with a selector, snakeCaseParameters: false,
/// requeue_after, cluster-scoped dependents, finalizer vars, include_tasks,
/// k8s_info until). PollTest's go-ahead exists before it, so both sides
/// count one attempt; the namespace the finalizer writes its note to exists
/// too.
fn compat_advanced(shared: Option<&std::path::Path>) -> Subject {
    const GROUP: &str = "test.compat.enka.dev";
    let project = repo_path("tests/compat/advanced-operator");
    let kinds = [
        ("CollectionTest", json!({}), json!({})),
        ("StatusTest", json!({"replicas": 3}), json!({})),
        ("SelectorTest", json!({}), json!({"testLabel": "testValue"})),
        ("CaseTest", json!({"camelCaseVar": "true"}), json!({})),
        ("ReconciliationTest", json!({"field": "value"}), json!({})),
        ("ClusterAnnotationTest", json!({}), json!({})),
        ("FinalizerVarsTest", json!({}), json!({})),
        ("IncludeTest", json!({}), json!({})),
        ("PollTest", json!({}), json!({})),
    ];
    let mut objects = vec![
        // Where the finalizer leaves its note.
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "<namespace>-notes"},
        }),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "polltest-go"}, "data": {"say": "hello"},
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "test-secret", "labels": {"reconcile": "yes"}},
            "data": {"test": "dGVzdA=="},
        }),
    ];
    objects.extend(kinds.iter().map(|(kind, spec, labels)| {
        json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": kind,
            "metadata": {"name": kind.to_lowercase(), "labels": labels},
            "spec": spec,
        })
    }));
    let mut collections = vec![project.join("collections")];
    collections.extend(shared.map(|shared| shared.join("collections")));
    Subject {
        name: "compat-advanced",
        crds: vec![project.join("config/crd/bases")],
        primary: kinds
            .iter()
            .map(|(kind, ..)| (GROUP.to_owned(), (*kind).to_owned()))
            .collect(),
        env: vec![collections_path(&collections)],
        args: Vec::new(),
        steps: vec![
            Step::CreateObjects(objects),
            Step::Patch {
                api_version: "v1",
                kind: "Secret",
                name: "test-secret",
                patch: json!({"data": {"new": "Y29udGVudA=="}}),
            },
            Step::Delete {
                api_version: "test.compat.enka.dev/v1alpha1",
                kind: "FinalizerVarsTest",
                name: "finalizervarstest",
            },
            Step::Delete {
                api_version: "test.compat.enka.dev/v1alpha1",
                kind: "StatusTest",
                name: "statustest",
            },
        ],
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
        project,
    }
}

/// Upstream's advanced-molecule-operator, generated by upstream's own
/// generator (scripts/advanced-molecule.sh): an inventory with group_vars,
/// a filter plugin from ansible.cfg, a Vault-encrypted vars file read with
/// the Deployment's `--ansible-args`, a collection role, snakeCaseParameters,
/// requeue_after, cluster-scoped dependents, a finalizer playbook, and a
/// playbook Ansible refuses (FinalizerConcurrencyTest's task-level `wait`).
/// One object of each sample; SubresourcesTest waits for a Pod on both
/// sides. Run by `make differential` only: upstream spends minutes on it.
fn advanced_molecule(shared: &std::path::Path) -> Subject {
    // The Ansible worker's virtualenv (ENKA_ANSIBLE_PYTHON, which `make`
    // sets) encrypts the Vault file as the image's ansible-vault does.
    let python = std::env::var("ENKA_ANSIBLE_PYTHON")
        .expect("ENKA_ANSIBLE_PYTHON names the Ansible worker's Python");
    let venv_bin = std::path::Path::new(&python)
        .parent()
        .expect("the virtualenv's bin")
        .to_path_buf();
    let script = repo_path("scripts/advanced-molecule.sh");
    let output = std::process::Command::new("bash")
        .arg(&script)
        .arg(&venv_bin)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(output.status.success(), "{} failed", script.display());
    let project = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let samples = project.join("config/samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&samples)
        .unwrap_or_else(|e| panic!("{}: {e}", samples.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("test_v1alpha1_"))
        })
        .collect();
    files.sort();
    let kinds = [
        "ArgsTest",
        "CaseTest",
        "ClusterAnnotationTest",
        "CollectionTest",
        "FinalizerConcurrencyTest",
        "InventoryTest",
        "ReconciliationTest",
        "SelectorTest",
        "SubresourcesTest",
    ];
    Subject {
        name: "advanced-molecule",
        crds: vec![project.join("config/crd/bases")],
        primary: kinds
            .iter()
            .map(|kind| ("test.example.com".to_owned(), (*kind).to_owned()))
            .collect(),
        env: vec![
            collections_path(&[project.join("collections"), shared.join("collections")]),
            (
                "ANSIBLE_CONFIG".to_owned(),
                project.join("ansible.cfg").display().to_string(),
            ),
            (
                "ANSIBLE_INVENTORY".to_owned(),
                project.join("inventory").display().to_string(),
            ),
        ],
        args: vec![format!(
            "--ansible-args=--vault-password-file {}",
            project.join("pwd.yml").display()
        )],
        steps: vec![
            Step::Create(files),
            Step::Delete {
                api_version: "test.example.com/v1alpha1",
                kind: "ReconciliationTest",
                name: "reconciliationtest-sample",
            },
        ],
        limit: Duration::from_secs(300),
        scratch: Vec::new(),
        project,
    }
}
