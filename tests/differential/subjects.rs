//! The operators compared, and what is done to each.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::projects::{self, collections_path, documents};
use crate::scenario::{Step, Subject};
use crate::support::{repo_path, shared_operators};

/// The subjects, in the order they run. Those that need `../shared/operators`
/// are left out (with a note) where it is not, outside CI. awx-operator runs
/// only with ENKA_DIFFERENTIAL_FULL=1 (`make differential`): upstream spends
/// minutes on each of its runs, waiting for Pods that never come. Only the
/// subjects `wanted` names are built: building some installs or generates
/// their project (upstream's collection, upstream's generator).
pub fn all(wanted: &dyn Fn(&str) -> bool) -> Vec<Subject> {
    if let Some(project) = user_project_dir() {
        return vec![user_project(project)];
    }
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
    if let Some(shared) = &shared {
        all.push(failures(shared));
        all.push(surroundings(shared));
    }
    if std::env::var_os("ENKA_DIFFERENTIAL_FULL").is_some()
        && let Some(shared) = &shared
    {
        if wanted("advanced-molecule") {
            all.push(advanced_molecule(shared));
        }
        all.push(awx(shared));
        all.push(long_wait(shared));
    }
    all.retain(|subject| wanted(subject.name));
    all
}

/// tests/differential/failures-operator: roles that fail as real ones do:
/// an object the API server refuses, a failure a rescue takes (and one with
/// no msg, from failed_when), one inside an include, an ignored one, a k8s
/// lookup of a kind nobody serves. Both operators must end with the same
/// objects and the same conditions, messages and counts included.
fn failures(shared: &std::path::Path) -> Subject {
    let project = repo_path("tests/differential/failures-operator");
    let samples = ["refused", "rescued", "included", "ignored", "lookup"]
        .iter()
        .map(|name| project.join(format!("config/samples/{name}.yaml")))
        .collect();
    Subject {
        name: "failures",
        steps: vec![Step::Create(samples)],
        ..failures_project(shared, project)
    }
}

/// tests/differential/surroundings-operator: what a run sees around it,
/// written into a ConfigMap per run: every magic variable (`inventory_file`,
/// `playbook_dir`, `ansible_search_path`, role and play names, …) and
/// `hostvars` of a role, of a playbook's own tasks and of a role it
/// includes.
fn surroundings(shared: &std::path::Path) -> Subject {
    let project = repo_path("tests/differential/surroundings-operator");
    let samples = ["role-run", "playbook-run"]
        .iter()
        .map(|name| project.join(format!("config/samples/{name}.yaml")))
        .collect();
    Subject {
        name: "surroundings",
        watches: project.join("watches.yaml"),
        crds: vec![project.join("config/crd")],
        primary: ["RoleRun", "PlaybookRun"]
            .iter()
            .map(|kind| {
                (
                    "surroundings.compat.enka.dev".to_owned(),
                    (*kind).to_owned(),
                )
            })
            .collect(),
        env: vec![collections_path(&[shared.join("collections")])],
        args: Vec::new(),
        steps: vec![Step::Create(samples)],
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
        project,
    }
}

/// The same project's role that waits longer than five minutes (62
/// attempts, 5 s apart) before it goes on: upstream never cuts a run, and
/// enka must not either. Only with ENKA_DIFFERENTIAL_FULL=1 (each side waits
/// five minutes).
fn long_wait(shared: &std::path::Path) -> Subject {
    let project = repo_path("tests/differential/failures-operator");
    Subject {
        name: "long-wait",
        steps: vec![Step::Create(vec![
            project.join("config/samples/waits.yaml"),
        ])],
        limit: Duration::from_secs(600),
        ..failures_project(shared, project)
    }
}

fn failures_project(shared: &std::path::Path, project: PathBuf) -> Subject {
    Subject {
        name: "",
        watches: project.join("watches.yaml"),
        crds: vec![project.join("config/crd")],
        primary: [
            "Refused", "Rescued", "Included", "Ignored", "Lookup", "Waits",
        ]
        .iter()
        .map(|kind| ("failures.compat.enka.dev".to_owned(), (*kind).to_owned()))
        .collect(),
        env: vec![collections_path(&[shared.join("collections")])],
        args: Vec::new(),
        steps: Vec::new(),
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
        project,
    }
}

/// awx-operator @ 1bc3422 with the database it manages, its own sample
/// unchanged: a Postgres StatefulSet with a claim, then the web and task
/// Deployments, all run by the simulated nodes; the role then execs into the
/// web Pod, which no simulated node can serve, so both operators must end at
/// the same Failure with the same objects.
fn awx(shared: &std::path::Path) -> Subject {
    let project = projects::awx(shared);
    Subject {
        name: "awx",
        steps: vec![Step::Create(project.samples.clone())],
        limit: Duration::from_secs(600),
        ..Subject::of(project)
    }
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
                api_version: "cache.example.com/v1alpha1".into(),
                kind: "Memcached".into(),
                name: "memcached-sample".into(),
                patch: json!({"spec": {"size": 2}}),
            },
            Step::Delete {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "memcached-sample-memcached".into(),
            },
            Step::Delete {
                api_version: "cache.example.com/v1alpha1".into(),
                kind: "Memcached".into(),
                name: "memcached-sample".into(),
            },
        ],
        limit: Duration::from_secs(120),
        // The role bumps its metrics once per machine, marked by this file.
        scratch: vec![PathBuf::from("/tmp/metricsbumped")],
        watches: project.join("watches.yaml"),
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
                api_version: "cache.compat.enka.dev/v1alpha1".into(),
                kind: "Memcached".into(),
                name: "memcached-sample".into(),
                patch: json!({"spec": {"size": 3}}),
            },
            Step::Delete {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "memcached-sample-memcached".into(),
            },
            Step::Delete {
                api_version: "cache.compat.enka.dev/v1alpha1".into(),
                kind: "Memcached".into(),
                name: "memcached-sample".into(),
            },
        ],
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
        watches: project.join("watches.yaml"),
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
    // On 2.19 the seed's role unchanged is refused by the API server on both
    // sides (`numZundokosSaid` becomes an integer, as the migration report
    // says); the repository's role is the seed with that fixed.
    let project = match crate::operator::ansible_line().as_str() {
        "2.18" => repo_path("tests/fixtures/zundoko-seed"),
        _ => repo_path(""),
    };
    Subject {
        name: "seed-zundoko",
        watches: project.join("watches.yaml"),
        project,
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
                api_version: "zundokokiyoshi.kaitoy.github.com/v1beta2".into(),
                kind: "Hikawa".into(),
                name: "hikawa".into(),
                patch: json!({"spec": {"intervalMillis": 100}}),
            },
            // Not watched (watchDependentResources: false): nothing answers.
            Step::Delete {
                api_version: "zundokokiyoshi.kaitoy.github.com/v1beta1".into(),
                kind: "Kiyoshi".into(),
                name: "hikawa-kiyoshi".into(),
            },
            Step::Delete {
                api_version: "zundokokiyoshi.kaitoy.github.com/v1beta2".into(),
                kind: "Hikawa".into(),
                name: "hikawa".into(),
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
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: "test-secret".into(),
                patch: json!({"data": {"new": "Y29udGVudA=="}}),
            },
            Step::Delete {
                api_version: "test.compat.enka.dev/v1alpha1".into(),
                kind: "FinalizerVarsTest".into(),
                name: "finalizervarstest".into(),
            },
            Step::Delete {
                api_version: "test.compat.enka.dev/v1alpha1".into(),
                kind: "StatusTest".into(),
                name: "statustest".into(),
            },
        ],
        limit: Duration::from_secs(120),
        scratch: Vec::new(),
        watches: project.join("watches.yaml"),
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
    let project = projects::advanced_molecule(shared);
    Subject {
        name: "advanced-molecule",
        steps: vec![
            Step::Create(project.samples.clone()),
            Step::Delete {
                api_version: "test.example.com/v1alpha1".into(),
                kind: "ReconciliationTest".into(),
                name: "reconciliationtest-sample".into(),
            },
        ],
        limit: Duration::from_secs(300),
        ..Subject::of(project)
    }
}

/// The project `make differential PROJECT=dir` names, which then runs alone.
fn user_project_dir() -> Option<PathBuf> {
    std::env::var_os("ENKA_DIFFERENTIAL_PROJECT")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// Whether a project of the user's runs instead of enka's own subjects.
pub fn user_project_named() -> bool {
    user_project_dir().is_some()
}

/// A project of the user's (`make differential PROJECT=dir`): its samples
/// created, then deleted, under upstream and under enka. The watches file
/// is `WATCHES` (default `watches.yaml`), the CRDs those in `CRDS` (default
/// `config/crd/bases`) and the samples the files in `SAMPLES` (default every
/// custom resource in `config/samples`), each list separated by `:` and
/// relative to the project.
fn user_project(project: PathBuf) -> Subject {
    let project = project
        .canonicalize()
        .unwrap_or_else(|e| panic!("ENKA_DIFFERENTIAL_PROJECT {}: {e}", project.display()));
    let setting = |name: &str, default: &str| {
        let value = std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| default.to_owned());
        value
            .split(':')
            .filter(|part| !part.is_empty())
            .map(|part| project.join(part))
            .collect::<Vec<PathBuf>>()
    };
    let watches = setting("ENKA_DIFFERENTIAL_WATCHES", "watches.yaml")
        .pop()
        .unwrap_or_else(|| project.join("watches.yaml"));
    let primary = watched_kinds(&watches);
    let mut samples = setting("ENKA_DIFFERENTIAL_SAMPLES", "config/samples");
    if let [dir] = samples.as_slice()
        && dir.is_dir()
    {
        samples = yaml_files(dir);
    }
    let documents: Vec<serde_json::Value> = samples.iter().flat_map(|p| documents(p)).collect();
    let custom_resources: Vec<&serde_json::Value> = documents
        .iter()
        .filter(|doc| {
            let group = doc["apiVersion"]
                .as_str()
                .and_then(|v| v.rsplit_once('/'))
                .map_or("", |(group, _)| group);
            let kind = doc["kind"].as_str().unwrap_or_default();
            primary.iter().any(|(g, k)| g == group && k == kind)
        })
        .collect();
    assert!(
        !custom_resources.is_empty(),
        "no custom resource of the watched kinds in {samples:?}"
    );
    let created: Vec<serde_json::Value> = custom_resources.iter().map(|&d| d.clone()).collect();
    let mut steps = vec![Step::CreateObjects(created)];
    steps.extend(custom_resources.iter().map(|doc| {
        Step::Delete {
            api_version: doc["apiVersion"].as_str().unwrap_or_default().to_owned(),
            kind: doc["kind"].as_str().unwrap_or_default().to_owned(),
            name: doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }));
    let mut collections: Vec<PathBuf> = vec![project.join("collections")];
    collections.extend(shared_operators().map(|shared| shared.join("collections")));
    Subject {
        name: "project",
        crds: setting("ENKA_DIFFERENTIAL_CRDS", "config/crd/bases"),
        primary,
        env: vec![collections_path(&collections)],
        args: Vec::new(),
        steps,
        limit: Duration::from_secs(300),
        scratch: Vec::new(),
        watches,
        project,
    }
}

/// `(group, kind)` of each entry of a watches file.
fn watched_kinds(watches: &std::path::Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(watches)
        .unwrap_or_else(|e| panic!("reading {}: {e}", watches.display()));
    let entries: Vec<serde_json::Value> =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", watches.display()));
    entries
        .iter()
        .map(|entry| {
            let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
            (field("group"), field("kind"))
        })
        .collect()
}

/// The YAML files in `dir`, sorted.
fn yaml_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    files
}
