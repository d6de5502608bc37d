//! `make differential`: enka against upstream's ansible-operator v1.42 on the
//! same operator projects, the same custom resources and the same real
//! control plane, and upstream's own molecule tests run against enka.
//!
//! For each subject (an operator project and a sequence of changes: create
//! its custom resources, edit a spec, delete a dependent, delete a custom
//! resource), upstream runs it on a namespace of its own, then enka on
//! another; after each change the harness waits until the operator has
//! settled and reads every object it made or changed. The two readings are
//! compared object by object (see snapshot.rs for what is left out by design
//! and why), and a line per subject says
//! `differential: <subject>: N objects equal, M differ; settle enka X s, upstream Y s`.
//! A difference nobody explained fails the run; explained ones are listed in
//! [`EXPLAINED`] with their reason.
//!
//! With `ENKA_DIFFERENTIAL_LINE=2.19` (`make differential-2.19`) both sides
//! run on ansible-core 2.19: upstream's Python side on 2.19, enka in 2.19
//! mode with its worker on 2.19 (reports in target/differential-2.19/).
//!
//! enka's run of each subject also writes a migration report
//! (`<subject>-migration.json`), each finding put to real ansible-core 2.18
//! and 2.19 (`../conformance/findings.rs`); a finding that does not hold
//! fails the subject.
//!
//! Reports: target/differential/<subject>.txt (per-object diffs),
//! target/differential/summary.tsv, and the operators' logs beside them.
//! Arguments filter subjects by name (`molecule` for the molecule run).

#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../../benches/operators/operator.rs"]
mod operator;

#[allow(dead_code)]
#[path = "../../benches/operators/usage.rs"]
mod usage;

#[path = "../conformance/findings.rs"]
mod findings;

mod compare;
mod molecule;
mod projects;
mod scenario;
mod snapshot;
mod subjects;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use kube_env::KubeEnv;

use operator::Flavour;

/// Differences between enka and upstream that are right, with the reason:
/// `(subject, object key, JSON pointer into the normalised object, why)`.
/// The field is left out of that object's comparison on both sides (the
/// report says so); everything else of the object is still compared. A key
/// `*` is every object of the subject, a pointer segment `*` every element,
/// `field=value` the elements of an array whose `field` is `value`.
pub const EXPLAINED: &[(&str, &str, &str, &str)] = &[
    (
        "surroundings",
        "*",
        "/data/ansible_playbook_python",
        "each operator's Ansible runs on its own Python: upstream's virtualenv, enka's worker's",
    ),
    (
        "surroundings",
        "*",
        "/data/ansible_python_interpreter",
        "ansible-operator's inventory names the Python of the virtualenv it runs in, enka's the worker's",
    ),
    (
        "advanced-molecule",
        "*",
        "/status/conditions/*/ansibleResult",
        "upstream reads the play recap's counts of a host named `localhost`; this project's inventory names it 127.0.0.1, so upstream reports zeros (failures 0 beside a Failure condition) where enka reports the run's counts",
    ),
    (
        "advanced-molecule",
        "test.example.com/FinalizerConcurrencyTest <namespace>/finalizerconcurrencytest-sample",
        "/status/conditions",
        "its playbook does not load (a task-level `wait:` is a second action, ansible-playbook refuses the file): upstream marks the object Running and never ends the run, enka writes a Failure condition naming the file, line and task",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-admin-password",
        "/data/password",
        "a random password the role generates (lookup('password')); different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-postgres-configuration",
        "/data/password",
        "the managed database's password, which the role generates (lookup('password')); different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-secret-key",
        "/data/secret_key",
        "a random key the role generates; different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-broadcast-websocket",
        "/data/secret",
        "a random secret the role generates; different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-app-credentials",
        "/data/credentials.py",
        "embeds the random BROADCAST_WEBSOCKET_SECRET beside the database settings (which the report showed equal before this entry)",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-receptor-ca",
        "/data/tls.crt",
        "a CA certificate openssl generates in the role's shell task; different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-receptor-ca",
        "/data/tls.key",
        "the CA's private key openssl generates; different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-receptor-work-signing",
        "/data/work-private-key.pem",
        "a key pair openssl generates in the role's shell task; different in any two runs",
    ),
    (
        "awx",
        "/Secret <namespace>/example-awx-receptor-work-signing",
        "/data/work-public-key.pem",
        "the public half of that key pair",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-task",
        "/spec/template/metadata/annotations/checksum-configmaps-config",
        "sha1 of the rendered config template, whose text names the namespace, and each side runs in a namespace of its own (ansible-playbook renders it to upstream's hash with upstream's namespace and to enka's with enka's)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-task",
        "/spec/template/metadata/annotations/checksum-secret-secret_key",
        "sha1 of the generated secret key (random)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-task",
        "/spec/template/metadata/annotations/checksum-secret-receptor_ca",
        "sha1 of the CA openssl generates (random)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-task",
        "/spec/template/metadata/annotations/checksum-secret-receptor_work_signing",
        "sha1 of the key pair openssl generates (random)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-task",
        "/spec/template/metadata/annotations/checksum-secrets-app_credentials",
        "sha1 of the credentials template, which holds the random websocket secret and the namespace",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-web",
        "/spec/template/metadata/annotations/checksum-configmaps-config",
        "sha1 of the rendered config template, whose text names the namespace, and each side runs in a namespace of its own (ansible-playbook renders it to upstream's hash with upstream's namespace and to enka's with enka's)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-web",
        "/spec/template/metadata/annotations/checksum-secret-secret_key",
        "sha1 of the generated secret key (random)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-web",
        "/spec/template/metadata/annotations/checksum-secret-receptor_ca",
        "sha1 of the CA openssl generates (random)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-web",
        "/spec/template/metadata/annotations/checksum-secret-receptor_work_signing",
        "sha1 of the key pair openssl generates (random)",
    ),
    (
        "awx",
        "apps/Deployment <namespace>/example-awx-web",
        "/spec/template/metadata/annotations/checksum-secrets-app_credentials",
        "sha1 of the credentials template, which holds the random websocket secret and the namespace",
    ),
];

/// The objects above whose explained fields kubernetes.core's last-applied
/// annotation (the definition as applied) carries too.
const LAST_APPLIED_EXPLAINED: &[&str] = &[
    "/Secret <namespace>/example-awx-postgres-configuration",
    "apps/Deployment <namespace>/example-awx-task",
    "apps/Deployment <namespace>/example-awx-web",
    "/Secret <namespace>/example-awx-admin-password",
    "/Secret <namespace>/example-awx-secret-key",
    "/Secret <namespace>/example-awx-broadcast-websocket",
    "/Secret <namespace>/example-awx-app-credentials",
    "/Secret <namespace>/example-awx-receptor-ca",
    "/Secret <namespace>/example-awx-receptor-work-signing",
];
const LAST_APPLIED_POINTER: &str =
    "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration";

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let failures = runtime.block_on(async {
        let started = Instant::now();
        let out_dir = support::repo_path(&match operator::ansible_line().as_str() {
            "2.18" => "target/differential".to_owned(),
            line => format!("target/differential-{line}"),
        });
        // Operator logs are appended to: start each run with none.
        let _ = std::fs::remove_dir_all(&out_dir);
        std::fs::create_dir_all(&out_dir).expect("target/differential");
        // Simulated nodes: the operators' Deployments, StatefulSets and Jobs
        // come up, so each run goes as far as it would on a real cluster.
        let env = KubeEnv::start(kube_env::Options::default().nodes(kube_env::SHARED_NODES))
            .await
            .unwrap_or_else(|e| panic!("the control plane could not start: {e}"));
        let client = env.client().expect("a client for the control plane");
        let mut failures = 0;
        let mut summary = String::from(
            "subject\tobjects_equal\tobjects_differ\tsettle_enka_s\tsettle_upstream_s\n",
        );
        for subject in subjects::all(&wanted) {
            match differential(&env, &client, &subject, &out_dir).await {
                Ok((line, row, unexplained)) => {
                    println!("{line}");
                    summary.push_str(&row);
                    if unexplained > 0 {
                        failures += 1;
                    }
                }
                Err(reason) => {
                    println!("differential: {}: FAILED: {reason}", subject.name);
                    failures += 1;
                }
            }
        }
        std::fs::write(out_dir.join("summary.tsv"), &summary).expect("summary.tsv");
        if wanted("molecule") && !subjects::user_project_named() {
            match molecule::memcached_molecule(&env, &out_dir).await {
                Ok(line) => println!("{line}"),
                Err(reason) => {
                    println!("molecule: memcached-molecule-operator: FAILED: {reason}");
                    failures += 1;
                }
            }
        }
        println!(
            "differential: {} ({:.0} s)",
            if failures == 0 {
                "all as upstream"
            } else {
                "differences or failures above"
            },
            started.elapsed().as_secs_f64()
        );
        failures
    });
    drop(runtime);
    if failures > 0 {
        std::process::exit(1);
    }
}

/// Runs one subject under upstream and then enka, compares, writes its
/// report; the summary line, its TSV row and the unexplained differences.
async fn differential(
    env: &KubeEnv,
    client: &kube::Client,
    subject: &scenario::Subject,
    out_dir: &std::path::Path,
) -> Result<(String, String, usize), String> {
    projects::install_crds(env, &subject.crds, snapshot::HARNESS_MANAGER);
    let kinds = snapshot::Kinds::discover(client).await;
    let mut upstream =
        scenario::run(env, client, &kinds, subject, Flavour::Upstream, out_dir).await?;
    let mut enka = scenario::run(env, client, &kinds, subject, Flavour::Enka, out_dir).await?;
    let explained: Vec<&(&str, &str, &str, &str)> = EXPLAINED
        .iter()
        .filter(|(name, ..)| *name == subject.name)
        .collect();
    for settled in upstream.iter_mut().chain(enka.iter_mut()) {
        for (_, key, pointer, _) in &explained {
            for (object_key, object) in settled.snapshot.objects.iter_mut() {
                if *key != "*" && object_key != key {
                    continue;
                }
                remove_pointer(object, pointer);
                if LAST_APPLIED_EXPLAINED.contains(key) {
                    remove_pointer(object, LAST_APPLIED_POINTER);
                }
            }
        }
    }
    // Explained fields are gone from both sides: what differs now is
    // unexplained.
    let comparison = compare::compare(&upstream, &enka);
    for (side, settled) in [("upstream", &upstream), ("enka", &enka)] {
        write_snapshots(out_dir, subject.name, side, settled)?;
    }
    let unexplained = comparison.differing.len();
    let mut report = String::new();
    let _ = writeln!(report, "# {} ({})", subject.name, subject.project.display());
    let _ = writeln!(report, "\nLeft out of every comparison:");
    for (what, why) in snapshot::BY_DESIGN {
        let _ = writeln!(report, "- {what}: {why}");
    }
    for (_, key, pointer, why) in &explained {
        let _ = writeln!(report, "- {key} {pointer}: {why}");
    }
    report.push('\n');
    report.push_str(&comparison.report);
    let path = out_dir.join(format!("{}.txt", subject.name));
    std::fs::write(&path, &report).map_err(|e| format!("{}: {e}", path.display()))?;
    if unexplained > 0 {
        eprintln!("{report}");
    }
    let settle = format!(
        "settle enka {:.1} s, upstream {:.1} s",
        comparison.settle_enka, comparison.settle_upstream
    );
    let unsettled = if comparison.unsettled.is_empty() {
        String::new()
    } else {
        format!("; not settled: {}", comparison.unsettled.join(", "))
    };
    let (migration, wrong) = migration_report(out_dir, subject.name)?;
    let line = format!(
        "differential: {}: {} objects equal, {unexplained} differ; {settle}{unsettled}\n{migration}",
        subject.name, comparison.equal,
    );
    let row = format!(
        "{}\t{}\t{unexplained}\t{:.1}\t{:.1}\n",
        subject.name, comparison.equal, comparison.settle_enka, comparison.settle_upstream
    );
    Ok((line, row, unexplained + wrong))
}

/// enka's migration report of the subject's run, each finding put to real
/// ansible-core 2.18 and 2.19: a line saying what it found and how much of
/// it held, and how many findings did not.
fn migration_report(out_dir: &std::path::Path, subject: &str) -> Result<(String, usize), String> {
    let path = scenario::migration_report_path(out_dir, subject);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("enka wrote no migration report at {}: {e}", path.display()))?;
    let report: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let found = report["findings"].as_array().cloned().unwrap_or_default();
    let held = findings::check(&found)?;
    for wrong in &held.wrong {
        eprintln!("differential: {subject}: migration report: {wrong}");
    }
    let mut line = format!(
        "differential: {subject}: migration report: {} finding{}, {} line answers put to ansible-core 2.18 and 2.19, {} wrong",
        found.len(),
        if found.len() == 1 { "" } else { "s" },
        held.checked,
        held.wrong.len()
    );
    for unchecked in &held.unchecked {
        line.push_str(&format!("\n  not checked: {unchecked}"));
    }
    Ok((line, held.wrong.len()))
}

/// Every step's normalised objects of one side, as compared:
/// `<subject>-<side>.json` beside the report.
fn write_snapshots(
    out_dir: &std::path::Path,
    subject: &str,
    side: &str,
    settled: &[scenario::Settled],
) -> Result<(), String> {
    let steps: Vec<serde_json::Value> = settled
        .iter()
        .map(|s| serde_json::json!({"step": s.step, "objects": s.snapshot.objects}))
        .collect();
    let path = out_dir.join(format!("{subject}-{side}.json"));
    let text = serde_json::to_string_pretty(&steps).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Removes the field at a JSON pointer (`/data/password`).
fn remove_pointer(object: &mut serde_json::Value, pointer: &str) {
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    remove_path(object, &segments);
}

/// Removes what `path` names under `value`; a `*` segment is every element
/// of an array or value of a mapping, `field=value` the array elements whose
/// `field` is `value`.
fn remove_path(value: &mut serde_json::Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        if let Some(map) = value.as_object_mut() {
            map.remove(first);
        }
        return;
    }
    match (first.as_str(), value) {
        ("*", serde_json::Value::Array(items)) => {
            items.iter_mut().for_each(|item| remove_path(item, rest));
        }
        ("*", serde_json::Value::Object(map)) => {
            map.values_mut().for_each(|item| remove_path(item, rest));
        }
        (filter, serde_json::Value::Array(items)) if filter.contains('=') => {
            let (field, value) = filter.split_once('=').unwrap_or_default();
            items
                .iter_mut()
                .filter(|item| item.get(field).and_then(|v| v.as_str()) == Some(value))
                .for_each(|item| remove_path(item, rest));
        }
        (index, serde_json::Value::Array(items)) => {
            if let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                remove_path(item, rest);
            }
        }
        (field, serde_json::Value::Object(map)) => {
            if let Some(item) = map.get_mut(field) {
                remove_path(item, rest);
            }
        }
        _ => {}
    }
}

/// The ansible-operator-plugins module's testdata project `name`.
pub fn upstream_testdata(name: &str) -> PathBuf {
    support::ansible_operator_plugins()
        .join("testdata")
        .join(name)
}
