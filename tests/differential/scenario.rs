//! One operator project driven through the same steps by one operator
//! (enka or upstream's ansible-operator) on a namespace of its own: each step
//! changes the cluster, then the harness waits until the operator has
//! settled and reads what it left.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube_env::KubeEnv;
use serde_json::{Value as Json, json};

use crate::operator::{Flavour, Operator};
use crate::projects::resource;
use crate::snapshot::{self, HARNESS_MANAGER, Kinds, RunScope, Snapshot};

/// An operator project and what is done to it.
pub struct Subject {
    pub name: &'static str,
    /// The project's directory, where the operators run.
    pub project: PathBuf,
    /// The watches file, in `project` (upstream's default: `watches.yaml`).
    pub watches: PathBuf,
    /// CRD manifests to apply before the runs.
    pub crds: Vec<PathBuf>,
    /// The watched kinds, `(group, kind)`: their status is compared.
    pub primary: Vec<(String, String)>,
    /// Extra environment for both operators.
    pub env: Vec<(String, String)>,
    /// Extra flags for both operators (the project's Deployment's).
    pub args: Vec<String>,
    pub steps: Vec<Step>,
    /// How long one step may take to settle.
    pub limit: Duration,
    /// Files the project's roles leave outside the cluster (`/tmp/…`),
    /// removed before each run so both start alike.
    pub scratch: Vec<PathBuf>,
}

impl Subject {
    /// A subject of a real operator's project; its name, steps and limit
    /// to be set.
    pub fn of(project: crate::projects::Project) -> Subject {
        Subject {
            name: "",
            project: project.dir,
            watches: project.watches,
            crds: project.crds,
            primary: project.primary,
            env: project.env,
            args: project.args,
            steps: Vec::new(),
            limit: Duration::from_secs(120),
            scratch: Vec::new(),
        }
    }
}

/// A change made to the cluster.
pub enum Step {
    /// Create each document of these manifest files in the run's namespace.
    Create(Vec<PathBuf>),
    /// Create objects given inline, in order.
    CreateObjects(Vec<Json>),
    /// Merge-patch an object.
    Patch {
        api_version: String,
        kind: String,
        name: String,
        patch: Json,
    },
    /// Delete an object (a dependent, or a custom resource).
    Delete {
        api_version: String,
        kind: String,
        name: String,
    },
}

impl Step {
    pub fn describe(&self) -> String {
        match self {
            Step::Create(paths) => format!(
                "create {}",
                paths
                    .iter()
                    .map(|p| p.file_name().unwrap_or_default().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Step::CreateObjects(objects) => format!(
                "create {}",
                objects
                    .iter()
                    .map(|o| format!(
                        "{} {}",
                        o["kind"].as_str().unwrap_or("?"),
                        o["metadata"]["name"].as_str().unwrap_or("?")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Step::Patch { kind, name, .. } => format!("edit {kind} {name}"),
            Step::Delete { kind, name, .. } => format!("delete {kind} {name}"),
        }
    }
}

/// What one step left, and how long the operator took to settle.
pub struct Settled {
    pub step: String,
    pub snapshot: Snapshot,
    /// From the step's change to the last change of what is compared.
    pub seconds: f64,
    /// False when the step's limit passed with the operator still working.
    pub quiet: bool,
}

/// How long nothing may change before a step counts as settled.
const QUIET: Duration = Duration::from_secs(5);

/// Runs `subject` under `flavour` on a fresh namespace; what each step left.
pub async fn run(
    env: &KubeEnv,
    client: &Client,
    kinds: &Kinds,
    subject: &Subject,
    flavour: Flavour,
    out_dir: &Path,
) -> Result<Vec<Settled>, String> {
    let namespace = format!("diff-{}-{}", subject.name, flavour.name());
    for file in &subject.scratch {
        let _ = std::fs::remove_file(file);
    }
    let since = now_rfc3339();
    create_namespace(client, &namespace).await?;
    let scope = RunScope {
        namespace: namespace.clone(),
        since,
        primary: subject.primary.clone(),
    };
    // enka's reconciles at debug level: the log says why each one ran.
    let mut env_vars: Vec<(&str, &str)> = vec![("ENKA_LOG", "info,enka=debug")];
    // enka's run also reports what would differ under ansible-core 2.19,
    // each finding then put to real ansible-core (`migration_report`).
    let report = migration_report_path(out_dir, subject.name);
    let report = report.display().to_string();
    if flavour == Flavour::Enka {
        let _ = std::fs::remove_file(&report);
        env_vars.push(("ENKA_MIGRATION_REPORT", &report));
    }
    // On another line than 2.18, enka follows it with that line's worker,
    // as upstream runs on that line's ansible-core.
    let line = crate::operator::ansible_line();
    let line_python = match line.as_str() {
        "2.18" => None,
        other => Some(crate::findings::line_python(other)?.display().to_string()),
    };
    if flavour == Flavour::Enka
        && let Some(python) = &line_python
    {
        env_vars.push(("ENKA_ANSIBLE_SEMANTICS", &line));
        env_vars.push(("ENKA_ANSIBLE_PYTHON", python));
    }
    env_vars.extend(subject.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let args: Vec<&str> = subject.args.iter().map(String::as_str).collect();
    let operator = Operator::start_with_args(
        flavour,
        env,
        &subject.watches,
        &namespace,
        &env_vars,
        &args,
        out_dir,
    )
    .await;
    let mut settled = Vec::new();
    for step in &subject.steps {
        let began = Instant::now();
        apply(client, step, &namespace)
            .await
            .map_err(|e| format!("{}: {e}", step.describe()))?;
        let (snapshot, seconds, quiet) = settle(
            client,
            kinds,
            &scope,
            operator.metrics_port(),
            began,
            subject.limit,
        )
        .await;
        settled.push(Settled {
            step: step.describe(),
            snapshot,
            seconds,
            quiet,
        });
    }
    let log = operator.log_path().to_owned();
    operator.stop();
    clean_up(client, kinds, &scope).await?;
    eprintln!(
        "differential: {} under {}: {} steps, log {}",
        subject.name,
        flavour.name(),
        settled.len(),
        log.display()
    );
    Ok(settled)
}

/// Waits until nothing the run covers has changed for [`QUIET`], no
/// reconcile is in flight and every workload the operator made is at its
/// end (what a user waits for), or until `limit`. In flight: a `Running/Running`
/// condition (manageStatus), or the operator's own metrics showing a busy
/// worker or a queued request (what tells for a watch without managed
/// status, where upstream spends seconds starting ansible-runner before a
/// run's first write).
///
/// A role that fails for ever (awx-operator exec-ing into a Pod no
/// simulated node serves) is retried, and under upstream one retry follows
/// another (35 s each on awx-operator): a step whose custom resources are at
/// a Failure has also ended once nothing has changed for [`RETRIED_QUIET`],
/// retries in flight or not.
async fn settle(
    client: &Client,
    kinds: &Kinds,
    scope: &RunScope,
    metrics_port: u16,
    began: Instant,
    limit: Duration,
) -> (Snapshot, f64, bool) {
    let mut last = snapshot::take(client, kinds, scope).await;
    let mut changed_at = began.elapsed();
    let mut content = content_digest(&last);
    let mut content_changed_at = changed_at;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = snapshot::take(client, kinds, scope).await;
        if now.fingerprint != last.fingerprint {
            changed_at = began.elapsed();
        }
        let digest = content_digest(&now);
        if digest != content {
            (content, content_changed_at) = (digest, began.elapsed());
        }
        last = now;
        let at_end = !last.running && last.workloads_pending.is_empty();
        if at_end && began.elapsed() - changed_at >= QUIET && !operator_busy(metrics_port).await {
            return (last, content_changed_at.as_secs_f64(), true);
        }
        if at_end && last.retrying && began.elapsed() - content_changed_at >= RETRIED_QUIET {
            return (last, content_changed_at.as_secs_f64(), true);
        }
        if began.elapsed() >= limit {
            return (last, changed_at.as_secs_f64(), false);
        }
    }
}

/// How long the objects must stay the same while a failed custom resource
/// is retried: longer than a retry that changes something takes to do so.
const RETRIED_QUIET: Duration = Duration::from_secs(30);

/// A digest of the normalised objects (what the comparison sees).
fn content_digest(snapshot: &Snapshot) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&snapshot.objects)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// Whether the operator's controllers have a reconcile running or waiting
/// (controller-runtime's `controller_runtime_active_workers` and
/// `workqueue_depth`, which enka serves too). An unreadable endpoint counts
/// as busy: the step then waits for its limit and says so.
async fn operator_busy(metrics_port: u16) -> bool {
    match crate::support::try_http_get(metrics_port, "/metrics").await {
        Ok((200, text)) => {
            crate::support::sum_metric(&text, "controller_runtime_active_workers") > 0.0
                || crate::support::sum_metric(&text, "workqueue_depth") > 0.0
        }
        _ => true,
    }
}

fn now_rfc3339() -> String {
    // Seconds, as creationTimestamp has them; one second earlier, so an
    // object made in the same second still counts.
    let at = std::time::SystemTime::now() - Duration::from_secs(1);
    let seconds = at
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    k8s_openapi::jiff::Timestamp::from_second(seconds as i64)
        .expect("a timestamp")
        .to_string()
}

async fn create_namespace(client: &Client, name: &str) -> Result<(), String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("v1", "Namespace"));
    let object: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .map_err(|e| e.to_string())?;
    api.create(&post_params(), &object)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating namespace {name}: {e}"))
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(HARNESS_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

fn api(client: &Client, api_version: &str, kind: &str, namespace: &str) -> Api<DynamicObject> {
    let resource = resource(api_version, kind);
    if kind == "Namespace" {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), namespace, &resource)
    }
}

async fn apply(client: &Client, step: &Step, namespace: &str) -> Result<(), String> {
    match step {
        Step::Create(paths) => {
            for path in paths {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                for document in serde_yaml::Deserializer::from_str(&text) {
                    let value: Json = serde::Deserialize::deserialize(document)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    if !value.is_null() {
                        create(client, value, namespace).await?;
                    }
                }
            }
            Ok(())
        }
        Step::CreateObjects(objects) => {
            for object in objects {
                create(client, object.clone(), namespace).await?;
            }
            Ok(())
        }
        Step::Patch {
            api_version,
            kind,
            name,
            patch,
        } => api(client, api_version, kind, namespace)
            .patch(
                name,
                &PatchParams {
                    field_manager: Some(HARNESS_MANAGER.to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Merge(patch),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Step::Delete {
            api_version,
            kind,
            name,
        } => api(client, api_version, kind, namespace)
            .delete(name, &DeleteParams::background())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}

/// Creates `value` in `namespace`; `<namespace>` in any string of it stands
/// for the run's namespace (a role's `{{ meta.namespace }}-notes`).
async fn create(client: &Client, value: Json, namespace: &str) -> Result<(), String> {
    let text = value.to_string().replace("<namespace>", namespace);
    let mut value: Json = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    value["metadata"]["namespace"] = json!(namespace);
    let api_version = value["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = value["kind"].as_str().unwrap_or_default().to_owned();
    let object: DynamicObject = serde_json::from_value(value).map_err(|e| e.to_string())?;
    api(client, &api_version, &kind, namespace)
        .create(&post_params(), &object)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating {kind}: {e}"))
}

/// Removes what a run made outside its namespace (which goes with the
/// namespace), and waits until it is gone, so the other operator starts from
/// the same cluster.
async fn clean_up(client: &Client, kinds: &Kinds, scope: &RunScope) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left: Vec<(String, Json)> = snapshot::take(client, kinds, scope)
            .await
            .objects
            .into_iter()
            .filter(|(key, _)| !key.contains(" <namespace>/"))
            .collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let keys: Vec<&String> = left.iter().map(|(key, _)| key).collect();
            return Err(format!("still there a minute after deletion: {keys:?}"));
        }
        for (key, object) in &left {
            let Some((_, place)) = key.split_once(' ') else {
                continue;
            };
            // Keys name the run's namespace as a placeholder.
            let place = place.replace("<namespace>", &scope.namespace);
            let (namespace, name) = place.split_once('/').unwrap_or(("-", &place));
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let kind = object["kind"].as_str().unwrap_or_default();
            let api = if namespace == "-" {
                Api::all_with(client.clone(), &resource(api_version, kind))
            } else {
                api(client, api_version, kind, namespace)
            };
            match api.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(format!("deleting {key}: {e}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let namespaces: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("v1", "Namespace"));
    namespaces
        .delete(&scope.namespace, &DeleteParams::background())
        .await
        .map(|_| ())
        .map_err(|e| format!("deleting namespace {}: {e}", scope.namespace))
}

/// Where enka's run of `subject` writes its migration report.
pub fn migration_report_path(out_dir: &Path, subject: &str) -> std::path::PathBuf {
    out_dir.join(format!("{subject}-migration.json"))
}
