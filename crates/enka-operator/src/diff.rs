//! `enka diff`: what one reconcile of a custom resource would change,
//! without changing anything.
//!
//! The run is the operator's own (the watch's role or playbook, the
//! variables a reconcile gives, owner references), over a
//! [`DryRunCluster`]: every write is a server-side dry run and the run reads
//! back what it would have written. Tasks that go through Ansible run in
//! check mode. No finalizer is added, no Running condition written, no
//! Event recorded. What the run would leave is compared with the live
//! objects, as `kubectl diff` does (server-managed metadata left out), and
//! the custom resource's status is the one the reconcile would write.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use enka_engine::{self as engine, RunOptions};
use enka_kube::client::KubeCluster;
use enka_kube::dry_run::{DryRunCluster, Written};
use enka_kube::{Cluster, Owner, Resource};
use enka_project::role::{LoadOptions, Project};

use enka_project::vars::{VarOptions, extra_vars};

/// Which custom resource to reconcile.
#[derive(Debug, Clone)]
pub enum Subject {
    /// A manifest: the live object with this one's fields over it (as
    /// applying it would make it), or this one as created if none is live.
    File(PathBuf),
    /// A live object of the watched `kind` (may be omitted when only one
    /// kind is watched).
    Live {
        /// The kind.
        kind: Option<String>,
        /// Its name.
        name: String,
        /// Its namespace (the kubeconfig's when omitted).
        namespace: Option<String>,
    },
}

/// `enka diff`'s inputs.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The watches file.
    pub watches_file: PathBuf,
    /// `--ansible-roles-path`.
    pub roles_path: Vec<PathBuf>,
    /// `--ansible-collections-path`.
    pub collections_path: Vec<PathBuf>,
    /// The Ansible worker for tasks enka has no native code for.
    pub ansible: Option<enka_worker::Config>,
    /// The custom resource.
    pub subject: Subject,
    /// How long the run may take.
    pub timeout: Duration,
    /// Templating: semantics, seed, the migration report's recorder.
    pub templates: enka_template::Options,
}

/// Why there is no diff (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The manifest or the arguments.
    #[error("{0}")]
    Input(String),
    /// The watches file or the project does not load.
    #[error("{0}")]
    Load(String),
    /// The API server refused or could not be reached.
    #[error("{0}")]
    Kube(String),
}

/// One object the reconcile would create, change or delete.
#[derive(Debug, Clone)]
pub struct ObjectChange {
    /// `apiVersion`, `kind`, namespace and name, as `kind/name` paths show.
    pub id: String,
    /// `create`, `update` or `delete`.
    pub action: &'static str,
    /// The live object, server-managed metadata left out.
    pub before: Option<Json>,
    /// What the reconcile would leave.
    pub after: Option<Json>,
}

/// What `enka diff` found.
#[derive(Debug, Clone)]
pub struct DiffReport {
    /// Objects that would change, in the order the run wrote them; the
    /// custom resource's own status last.
    pub changes: Vec<ObjectChange>,
    /// The custom resource's status conditions after the reconcile.
    pub conditions: Vec<Json>,
    /// The run's failure, if it failed.
    pub failure: Option<String>,
}

impl DiffReport {
    /// A unified diff per object, then the resulting conditions.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for change in &self.changes {
            let text = |object: &Option<Json>| {
                object
                    .as_ref()
                    .and_then(|o| serde_yaml::to_string(o).ok())
                    .unwrap_or_default()
            };
            let (before, after) = (text(&change.before), text(&change.after));
            let diff = similar::TextDiff::from_lines(&before, &after);
            out.push_str(&format!(
                "{}",
                diff.unified_diff().context_radius(3).header(
                    &format!("live/{}", change.id),
                    &format!("reconciled/{} ({})", change.id, change.action)
                )
            ));
        }
        if let Some(failure) = &self.failure {
            out.push_str(&format!("\nthe reconcile would fail: {failure}\n"));
        }
        if !self.conditions.is_empty() {
            out.push_str("\nstatus conditions after the reconcile:\n");
            for condition in &self.conditions {
                let field = |name: &str| condition[name].as_str().unwrap_or_default().to_owned();
                out.push_str(&format!(
                    "  {}={} {} {}\n",
                    field("type"),
                    field("status"),
                    field("reason"),
                    field("message")
                ));
            }
        }
        if self.changes.is_empty() {
            out.push_str("no changes\n");
        }
        out
    }

    /// The report for machines.
    pub fn to_json(&self) -> Json {
        json!({
            "changes": self.changes.iter().map(|c| json!({
                "id": c.id,
                "action": c.action,
                "before": c.before,
                "after": c.after,
            })).collect::<Vec<_>>(),
            "conditions": self.conditions,
            "failure": self.failure,
        })
    }
}

fn read_manifest(path: &Path) -> Result<Json, DiffError> {
    let input = |message: String| DiffError::Input(format!("{}: {message}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| input(e.to_string()))?;
    match enka_yaml::load_one(&text) {
        Ok(Some(node)) => Ok(node.to_json()),
        Ok(None) => Err(input("empty".to_owned())),
        Err(e) => Err(input(e.to_string())),
    }
}

/// Metadata the API server sets, left out of the comparison as `kubectl
/// diff` leaves out managed fields; a dry-run create also invents a uid and
/// a creation time.
fn normalized(object: &Json) -> Json {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) {
        for field in [
            "managedFields",
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
            "selfLink",
        ] {
            meta.remove(field);
        }
    }
    // When a condition last changed and when a run completed are news of
    // every reconcile, not changes.
    if let Some(conditions) = object
        .pointer_mut("/status/conditions")
        .and_then(Json::as_array_mut)
    {
        for condition in conditions {
            if let Some(map) = condition.as_object_mut() {
                map.remove("lastTransitionTime");
                if let Some(result) = map.get_mut("ansibleResult").and_then(Json::as_object_mut) {
                    result.remove("completion");
                }
            }
        }
    }
    object
}

fn object_id(resource: &Resource, namespace: Option<&str>, name: &str) -> String {
    let api_version = if resource.group.is_empty() {
        resource.version.clone()
    } else {
        format!("{}/{}", resource.group, resource.version)
    };
    match namespace {
        Some(ns) => format!("{api_version}/{}/{ns}/{name}", resource.kind),
        None => format!("{api_version}/{}/{name}", resource.kind),
    }
}

/// The change from `before` to `after`, if they differ.
fn change(id: String, before: Option<&Json>, after: Option<&Json>) -> Option<ObjectChange> {
    let before = before.map(normalized);
    let after = after.map(normalized);
    let action = match (&before, &after) {
        (None, None) => return None,
        (None, Some(_)) => "create",
        (Some(_), None) => "delete",
        (Some(b), Some(a)) if b == a => return None,
        (Some(_), Some(_)) => "update",
    };
    Some(ObjectChange {
        id,
        action,
        before,
        after,
    })
}

fn kube_error(what: &str) -> impl Fn(enka_kube::Error) -> DiffError + '_ {
    move |e| DiffError::Kube(format!("{what}: {e}"))
}

/// Runs one reconcile of `options.subject` as a dry run; see the module
/// docs.
pub async fn diff(options: &DiffOptions, config: kube::Config) -> Result<DiffReport, DiffError> {
    let default_namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config)
        .map_err(|e| DiffError::Kube(format!("cannot build a Kubernetes client: {e}")))?;
    let live = KubeCluster::new(client.clone(), "enka");
    let cluster = Arc::new(DryRunCluster::new(Arc::new(KubeCluster::dry_run(
        client, "enka",
    ))));

    let (watches, diagnostics) = enka_project::watches::load(&options.watches_file);
    if diagnostics.has_errors() {
        let text: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
        return Err(DiffError::Load(text.join("\n")));
    }
    let manifest = match &options.subject {
        Subject::File(path) => Some(read_manifest(path)?),
        Subject::Live { .. } => None,
    };
    let (api_version, kind) = subject_kind(options, manifest.as_ref(), &watches)?;
    let watch = watch_for(options, &watches, &api_version, &kind)?;
    let resource = cluster
        .resource(&api_version, &kind)
        .await
        .map_err(kube_error("discovery"))?;
    let (name, namespace) = subject_name(options, manifest.as_ref())?;
    let namespace = resource
        .namespaced
        .then(|| namespace.unwrap_or(default_namespace));
    let ns = namespace.as_deref();
    let before = live
        .get(&resource, ns, &name)
        .await
        .map_err(kube_error("reading the custom resource"))?;
    // The object the reconcile is for: the live one, with the manifest's
    // fields over it; a manifest of nothing live is created (dry run, so
    // it has a uid for owner references).
    let object = match (before.as_ref(), manifest) {
        (Some(live_object), Some(m)) => enka_kube::memory::merge_patch(live_object, &m),
        (Some(live_object), None) => live_object.clone(),
        (None, Some(m)) => cluster
            .create(&resource, ns, &m)
            .await
            .map_err(kube_error("creating the custom resource (dry run)"))?,
        (None, None) => {
            return Err(DiffError::Input(format!(
                "{kind} {name} not found{}",
                ns.map(|n| format!(" in namespace {n}")).unwrap_or_default()
            )));
        }
    };

    let (project, entry) = load_project(options, watch, &cluster)?;
    let var_options = VarOptions {
        snake_case: watch.snake_case_parameters,
        template_custom_resource: watch.template_custom_resource && !watch.mark_unsafe,
        watch_vars: watch.vars.clone(),
        finalizer_vars: Vec::new(),
    };
    let vars = extra_vars(&object, &watch.gvk.group, &watch.gvk.kind, &var_options);
    let run_options = RunOptions {
        owner: Some(Arc::new(Owner::from_object(
            &object,
            &resource.api_resource(),
        ))),
        deadline: Some(Instant::now() + options.timeout),
        runner_dir: Some(crate::controller::runner_dir(&watch.gvk, &object)),
        dry_run: true,
        ..RunOptions::default()
    };
    let dry: Arc<dyn Cluster> = cluster.clone();
    let outcome = engine::run(&project, &entry, vars, Some(dry), run_options).await;

    let cr_key = (
        resource.group.clone(),
        resource.kind.clone(),
        namespace.clone(),
        name.clone(),
    );
    let (mut changes, cr_after) = written_changes(&cluster, &live, &cr_key).await?;
    let cr_after = with_status(watch, cr_after.unwrap_or_else(|| object.clone()), &outcome);
    let conditions = cr_after
        .pointer("/status/conditions")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    changes.extend(change(
        object_id(&resource, ns, &name),
        before.as_ref(),
        Some(&cr_after),
    ));
    Ok(DiffReport {
        changes,
        conditions,
        failure: outcome.failure().map(ToString::to_string),
    })
}

/// The watch of `kind` in `api_version`.
fn watch_for<'a>(
    options: &DiffOptions,
    watches: &'a [enka_project::watches::Watch],
    api_version: &str,
    kind: &str,
) -> Result<&'a enka_project::watches::Watch, DiffError> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    watches
        .iter()
        .find(|w| w.gvk.group == group && w.gvk.version == version && w.gvk.kind == kind)
        .ok_or_else(|| {
            DiffError::Input(format!(
                "{} watches no {kind} of {api_version}",
                options.watches_file.display()
            ))
        })
}

/// The custom resource as the run leaves it: with the status enka would
/// write when it manages the status.
fn with_status(
    watch: &enka_project::watches::Watch,
    mut cr_after: Json,
    outcome: &engine::RunOutcome,
) -> Json {
    if watch.manage_status {
        let now = enka_template::time::now_rfc3339();
        let status = cr_after
            .as_object_mut()
            .map(|map| map.entry("status").or_insert_with(|| json!({})));
        if let Some(status) = status {
            super::status::mark_done(status, outcome, &now, &now);
        }
    }
    cr_after
}

/// The apiVersion and kind the diff is for: the manifest's, or the watch's
/// (`--kind` picks one when the watches file has several).
fn subject_kind(
    options: &DiffOptions,
    manifest: Option<&Json>,
    watches: &[enka_project::watches::Watch],
) -> Result<(String, String), DiffError> {
    Ok(match (manifest, &options.subject) {
        (Some(m), _) => (
            m["apiVersion"].as_str().unwrap_or_default().to_owned(),
            m["kind"].as_str().unwrap_or_default().to_owned(),
        ),
        (None, Subject::Live { kind, .. }) => {
            let watch = match kind {
                Some(kind) => watches.iter().find(|w| w.gvk.kind == *kind),
                None if watches.len() == 1 => watches.first(),
                None => {
                    return Err(DiffError::Input(
                        "the watches file watches several kinds: say which with --kind".into(),
                    ));
                }
            };
            let watch = watch.ok_or_else(|| {
                DiffError::Input(format!(
                    "no watch for kind {}",
                    kind.as_deref().unwrap_or("")
                ))
            })?;
            (watch.gvk.api_version(), watch.gvk.kind.clone())
        }
        (None, Subject::File(_)) => unreachable!("a file subject has a manifest"),
    })
}

/// The name and namespace of the custom resource the diff is for.
fn subject_name(
    options: &DiffOptions,
    manifest: Option<&Json>,
) -> Result<(String, Option<String>), DiffError> {
    Ok(match (manifest, &options.subject) {
        (Some(m), _) => (
            m.pointer("/metadata/name")
                .and_then(Json::as_str)
                .ok_or_else(|| DiffError::Input("the manifest has no metadata.name".into()))?
                .to_owned(),
            m.pointer("/metadata/namespace")
                .and_then(Json::as_str)
                .map(str::to_owned),
        ),
        (
            None,
            Subject::Live {
                name, namespace, ..
            },
        ) => (name.clone(), namespace.clone()),
        (None, Subject::File(_)) => unreachable!("a file subject has a manifest"),
    })
}

/// The watch's role or playbook, loaded with the dry-run cluster behind its
/// `k8s` lookup, and what to run.
fn load_project(
    options: &DiffOptions,
    watch: &enka_project::watches::Watch,
    cluster: &Arc<DryRunCluster>,
) -> Result<(Arc<Project>, enka_engine::Entry), DiffError> {
    let paths = enka_project::watches::role_paths(
        &options.watches_file,
        &options.roles_path,
        &options.collections_path,
    );
    let k8s_lookup: Arc<dyn enka_template::LookupPlugin> =
        Arc::new(enka_kube::lookup::K8sLookup::new(cluster.clone()));
    let load = LoadOptions {
        role_paths: paths,
        templates: options.templates.clone(),
        origins: vec![(watch.target.clone(), watch.location.clone())],
        lookups: vec![("k8s".to_owned(), k8s_lookup)],
        ansible: options.ansible.clone(),
        inventory: enka_project::role::InventoryLoad::WhenNamed,
    };
    let (project, diagnostics) = Project::load(&load, std::slice::from_ref(&watch.target));
    let project = project
        .filter(|_| !diagnostics.has_errors())
        .ok_or_else(|| {
            let text: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
            DiffError::Load(text.join("\n"))
        })?;
    let entry = super::controller::entry_for(&project, &watch.target)
        .ok_or_else(|| DiffError::Load(format!("{:?} does not load", watch.target)))?;
    Ok((project, entry))
}

/// What the dry run wrote, each object against its live copy; the custom
/// resource apart (its change is reported once, with its status).
async fn written_changes(
    cluster: &DryRunCluster,
    live: &KubeCluster,
    cr_key: &(String, String, Option<String>, String),
) -> Result<(Vec<ObjectChange>, Option<Json>), DiffError> {
    let mut changes = Vec::new();
    let mut cr_after = None;
    for Written {
        resource: written_resource,
        namespace: written_ns,
        name: written_name,
        after,
    } in cluster.written()
    {
        let key = (
            written_resource.group.clone(),
            written_resource.kind.clone(),
            written_ns.clone(),
            written_name.clone(),
        );
        if key == *cr_key {
            // The custom resource is reported once, with its status.
            if let Some(after) = after {
                cr_after = Some(after);
            }
            continue;
        }
        let live_object = live
            .get(&written_resource, written_ns.as_deref(), &written_name)
            .await
            .map_err(kube_error("reading a live object"))?;
        let id = object_id(&written_resource, written_ns.as_deref(), &written_name);
        changes.extend(change(id, live_object.as_ref(), after.as_ref()));
    }
    Ok((changes, cr_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_metadata_and_timestamps_are_not_changes() {
        let before = json!({
            "metadata": {"name": "a", "resourceVersion": "1", "uid": "u", "generation": 1,
                         "managedFields": [{}]},
            "status": {"conditions": [{"type": "Successful", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "ansibleResult": {"ok": 1, "completion": "2026-01-01T00:00:00Z"}}]}
        });
        let mut after = before.clone();
        after["metadata"]["resourceVersion"] = json!("2");
        after["metadata"]["generation"] = json!(2);
        after["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-02-02T00:00:00Z");
        after["status"]["conditions"][0]["ansibleResult"]["completion"] = json!("later");
        assert!(change("x".into(), Some(&before), Some(&after)).is_none());
        after["status"]["conditions"][0]["ansibleResult"]["ok"] = json!(2);
        let changed = change("x".into(), Some(&before), Some(&after)).unwrap();
        assert_eq!(changed.action, "update");
        assert_eq!(
            change("x".into(), None, Some(&after)).unwrap().action,
            "create"
        );
        assert_eq!(
            change("x".into(), Some(&before), None).unwrap().action,
            "delete"
        );
    }

    #[test]
    fn a_report_shows_a_unified_diff_and_the_conditions() {
        let report = DiffReport {
            changes: vec![ObjectChange {
                id: "v1/ConfigMap/ns/a".into(),
                action: "update",
                before: Some(json!({"data": {"x": "1"}})),
                after: Some(json!({"data": {"x": "2"}})),
            }],
            conditions: vec![json!({"type": "Successful", "status": "True",
                "reason": "Successful", "message": "Last reconciliation succeeded"})],
            failure: None,
        };
        let text = report.render();
        assert!(text.contains("--- live/v1/ConfigMap/ns/a"), "{text}");
        assert!(text.contains("-  x: '1'"), "{text}");
        assert!(text.contains("+  x: '2'"), "{text}");
        assert!(
            text.contains("Successful=True Successful Last reconciliation succeeded"),
            "{text}"
        );
    }
}
