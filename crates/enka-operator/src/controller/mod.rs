//! One kube-runtime controller per watch, and the reconcile of one object:
//! finalizers, status conditions, the run itself, and when to come back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Config as WatcherConfig};
use kube::runtime::{Predicate, WatchStreamExt, predicates};
use serde_json::Value as Json;

mod failures;
mod write_back;

use crate::events;
use crate::metrics::ReconcileResult;
use crate::reload::{ProjectHandle, ReloadState};
use crate::status;
use crate::workqueue;
use enka_engine::{self as engine, Entry, RunOptions};
pub use failures::{backoff, error_policy};
use failures::{failed_reconcile, report_undecodable, report_unloaded};
use write_back::{completion, now, set_finalizers, write_status};

pub use crate::error::ReconcileError;
use enka_kube::api_error;
use enka_kube::cache::Holds;
use enka_kube::client::KubeCluster;
use enka_kube::object::{WatchedKind, WatchedObject};
use enka_kube::{Cluster, Owner};
use enka_project::role::{Project, Target};
use enka_project::vars::{VarOptions, extra_vars};
use enka_project::watches::{Gvk, Watch};

/// The annotation that overrides the reconcile period of one object.
pub const RECONCILE_PERIOD_ANNOTATION: &str = "ansible.sdk.operatorframework.io/reconcile-period";

/// The annotation that sets the Ansible verbosity of one object's runs.
pub const VERBOSITY_ANNOTATION: &str = "ansible.sdk.operatorframework.io/verbosity";

/// Settings shared by every controller.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--reconcile-period`: when an unchanged object is reconciled again.
    pub reconcile_period: Duration,
    /// `--reconcile-timeout`: the longest one reconcile may take; none
    /// unless given, as upstream never cuts a run.
    pub reconcile_timeout: Option<Duration>,
    /// `--ansible-verbosity`.
    pub verbosity: u8,
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// `--inject-owner-ref`.
    pub inject_owner_ref: bool,
    /// `--ansible-log-events`.
    pub log_events: engine::LogEvents,
    /// This replica's shard (`--sharding-ring`): it watches and reconciles
    /// only the objects assigned to it.
    pub shard: Option<Arc<super::shard::Shard>>,
}

/// Time a reconcile gets beyond `--reconcile-timeout` (which bounds the
/// run) for its status writes and finalizer.
const STATUS_GRACE: Duration = Duration::from_secs(30);

/// Runs one reconcile so that nothing in it can stop its controller: a
/// panic becomes an error, and so does a reconcile that outlives `limit`
/// (when there is one).
async fn guarded<T>(
    reconcile: impl std::future::Future<Output = Result<T, ReconcileError>>,
    limit: Option<Duration>,
) -> Result<T, ReconcileError> {
    use futures::FutureExt;
    let caught = std::panic::AssertUnwindSafe(reconcile).catch_unwind();
    let outcome = match limit {
        Some(limit) => tokio::time::timeout(limit, caught)
            .await
            .map_err(|_| ReconcileError::TimedOut(limit)),
        None => Ok(caught.await),
    };
    match outcome {
        Err(timed_out) => Err(timed_out),
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            Err(ReconcileError::Panicked(message))
        }
        Ok(Ok(result)) => result,
    }
}

/// What every controller of the operator shares.
#[derive(Clone)]
pub struct Shared {
    /// The loaded project.
    pub project: ProjectHandle,
    /// The cluster.
    pub cluster: Arc<KubeCluster>,
    /// Runtime settings.
    pub settings: Settings,
    /// The state of live reload.
    pub reload: Arc<ReloadState>,
    /// The metrics.
    pub metrics: Arc<super::metrics::Metrics>,
    /// Writes failure Events.
    pub events: events::Recorder,
}

/// What a controller needs to reconcile objects of one watch.
pub struct WatchContext {
    watch: Watch,
    entry: Entry,
    finalizer_entry: Option<Entry>,
    resource: WatchedKind,
    namespaced: bool,
    project: ProjectHandle,
    cluster: Arc<KubeCluster>,
    settings: Settings,
    verbosity: u8,
    failures: Mutex<HashMap<ObjectRef<WatchedObject>, u32>>,
    reload: Arc<ReloadState>,
    metrics: Arc<super::metrics::Metrics>,
    events: events::Recorder,
    gvk_label: String,
    controller_name: String,
    dependents: Option<Arc<super::dependents::DependentWatches>>,
}

pub(crate) fn entry_for(project: &Project, target: &Target) -> Option<Entry> {
    match target {
        // A role that is nowhere yet (it did not load, see reload) is
        // expected where a project keeps its roles: once it is written
        // there, the reload loads it and its watch runs.
        Target::Role(name) => Some(Entry::Role(
            enka_project::role::resolve_role(&project.role_paths, name)
                .unwrap_or_else(|_| project.role_paths.base_dir.join("roles").join(name)),
        )),
        Target::Playbook(path) => Some(Entry::Playbook(path.clone())),
    }
}

/// `ANSIBLE_VERBOSITY_<KIND>_<GROUP>` for a watch, as upstream names it.
pub fn env_name(prefix: &str, gvk: &Gvk) -> String {
    format!("{prefix}_{}_{}", gvk.kind, gvk.group)
        .to_uppercase()
        .replace('.', "_")
}

impl WatchContext {
    /// The API of the watched kind for an object in `namespace`.
    fn api_for(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) if self.namespaced => {
                Api::namespaced_with(self.cluster.client().clone(), ns, &*self.resource)
            }
            _ => Api::all_with(self.cluster.client().clone(), &*self.resource),
        }
    }

    /// Builds the context of one watch.
    pub fn new(
        watch: Watch,
        resource: ApiResource,
        namespaced: bool,
        shared: Shared,
        dependents: Option<Arc<super::dependents::DependentWatches>>,
    ) -> Option<Self> {
        let Shared {
            project,
            cluster,
            settings,
            reload,
            metrics,
            events,
        } = shared;
        let loaded = project.read().unwrap_or_else(|e| e.into_inner()).clone();
        let entry = entry_for(&loaded, &watch.target)?;
        let finalizer_entry = watch
            .finalizer
            .as_ref()
            .and_then(|f| f.target.as_ref())
            .and_then(|t| entry_for(&loaded, t));
        let verbosity = std::env::var(env_name("ANSIBLE_VERBOSITY", &watch.gvk))
            .ok()
            .and_then(|v| v.parse::<u8>().ok())
            .filter(|v| *v <= 7)
            .unwrap_or(settings.verbosity);
        let gvk_label = watch.gvk.to_string();
        let controller_name = super::metrics::controller_name(&watch.gvk.kind, &watch.gvk.version);
        Some(WatchContext {
            watch,
            entry,
            finalizer_entry,
            resource: resource.into(),
            namespaced,
            project,
            cluster,
            settings,
            verbosity,
            failures: Mutex::new(HashMap::new()),
            reload,
            metrics,
            events,
            gvk_label,
            controller_name,
            dependents,
        })
    }

    fn resource_ref(&self) -> enka_kube::Resource {
        enka_kube::Resource {
            group: self.resource.group.clone(),
            version: self.resource.version.clone(),
            kind: self.resource.kind.clone(),
            plural: self.resource.plural.clone(),
            namespaced: self.namespaced,
        }
    }

    fn period_for(&self, object: &Json) -> Result<Option<Duration>, ReconcileError> {
        if let Some(text) = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(RECONCILE_PERIOD_ANNOTATION))
            .and_then(Json::as_str)
        {
            return enka_project::watches::parse_go_duration(text)
                .map(|d| (!d.is_zero()).then_some(d))
                .ok_or_else(|| ReconcileError::InvalidReconcilePeriod(text.to_owned()));
        }
        let period = self
            .watch
            .reconcile_period
            .unwrap_or(self.settings.reconcile_period);
        Ok((!period.is_zero()).then_some(period))
    }
}

/// When a reconcile that succeeded wants to run again.
pub enum Next {
    /// After this long, even if nothing changes.
    After(Duration),
    /// Only when the object changes.
    AwaitChange,
}

/// The key of an object in metrics: `namespace/name`, or `name`.
fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// Reconciles one object, recording metrics; its logs carry upstream's
/// per-reconcile fields (`job`, `name`, `namespace`, `gvk`).
pub async fn reconcile(
    object: Arc<WatchedObject>,
    ctx: Arc<WatchContext>,
) -> Result<Next, ReconcileError> {
    use tracing::Instrument;
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let namespace = object.metadata.namespace.as_deref();
    let key = object_key(namespace, name);
    let job: u64 = rand::random::<u64>() >> 1;
    let span = tracing::info_span!(
        "reconcile",
        job = %job,
        name = %name,
        namespace = namespace.unwrap_or(""),
        gvk = %ctx.gvk_label,
    );
    let running = ctx
        .metrics
        .started(&ctx.controller_name, &ctx.gvk_label, &key);
    let mut api_wait = Duration::ZERO;
    let limit = ctx.settings.reconcile_timeout.map(|t| t + STATUS_GRACE);
    // Where each reconcile starts and ends, for whoever must show that two
    // replicas never reconcile one object at once (sharding).
    span.in_scope(|| tracing::debug!("reconcile started"));
    let result = guarded(
        reconcile_object(object.clone(), ctx.clone(), &mut api_wait).instrument(span.clone()),
        limit,
    )
    .await;
    span.in_scope(|| tracing::debug!(ok = result.is_ok(), "reconcile ended"));
    if let Err(ReconcileError::Panicked(message)) = &result {
        ctx.metrics.panicked(&ctx.controller_name);
        tracing::error!(%name, namespace = namespace.unwrap_or(""), "reconcile panicked: {message}");
    }
    let outcome = match &result {
        Ok(Next::After(_)) => ReconcileResult::RequeueAfter,
        Ok(Next::AwaitChange) => ReconcileResult::Success,
        Err(_) => ReconcileResult::Error,
    };
    ctx.metrics.finished(running, outcome, api_wait);
    if let Ok(Next::After(after)) = &result {
        ctx.metrics
            .requeued(&ctx.controller_name, key, *after, false);
    }
    result
}

/// `api_wait` adds up the time spent waiting on the API server.
async fn reconcile_object(
    object: Arc<WatchedObject>,
    ctx: Arc<WatchContext>,
    api_wait: &mut Duration,
) -> Result<Next, ReconcileError> {
    let started = Instant::now();
    let json = match object.to_json() {
        Ok(json) => Arc::new(json),
        Err(reason) => return Err(report_undecodable(&ctx, &object, reason, api_wait).await),
    };
    let name = object.metadata.name.clone().unwrap_or_default();
    let namespace = object.metadata.namespace.clone();
    let ns = namespace.as_deref();
    if let Some(next) = shard_keeps(&ctx, &object, ns, &name, api_wait).await? {
        return Ok(next);
    }
    let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
    if object.metadata.deletion_timestamp.is_some() {
        return finalize(&ctx, json, ns, &name, &finalizers, api_wait).await;
    }
    let finalizer_name = ctx.watch.finalizer.as_ref().map(|f| f.name.clone());
    let mut json = json;
    if let Some(finalizer) = finalizer_name.filter(|f| !finalizers.contains(f)) {
        let mut list = finalizers.clone();
        list.push(finalizer);
        let started = Instant::now();
        let added = set_finalizers(&ctx, &json, list).await;
        *api_wait += started.elapsed();
        // Continue with the object as it is now.
        json = Arc::new(added?);
    }
    // After the finalizer, as upstream adds it before a run that fails.
    if let Some(reason) = ctx.reload.unloaded(&ctx.watch.target) {
        return Err(report_unloaded(&ctx, ns, &name, json, &reason, api_wait).await);
    }

    let period = reconcile_period(&ctx, ns, &name, &json, api_wait).await?;

    if ctx.watch.manage_status {
        if status::shows_run_in_flight(&json["status"]) {
            // The cached object predates the last run's markDone, so
            // markRunning would look like a no-op and be skipped, and this
            // run's markDone would then meet the last one's conditions and
            // change nothing (upstream reads the live object for every status
            // write; the differential harness saw the stale result).
            let started = Instant::now();
            let fresh = ctx.cluster.get(&ctx.resource_ref(), ns, &name).await;
            *api_wait += started.elapsed();
            match fresh.map_err(|source| ReconcileError::Api {
                action: "read the object",
                source,
            })? {
                Some(fresh) => json = Arc::new(fresh),
                None => return Ok(Next::AwaitChange),
            }
        }
        json = write_status(&ctx, ns, &name, json, api_wait, |s| {
            status::mark_running(s, &now())
        })
        .await?;
    }

    let entry = ctx.entry.clone();
    let outcome = run_once(&ctx, &json, &entry, Vec::new()).await;
    *api_wait += outcome.api_time;
    let broken_edit = ctx.reload.broken();
    if ctx.watch.manage_status {
        let done_at = completion();
        // If the role wrote this object, `json` is stale; the write takes
        // the version the cache remembers.
        write_status(&ctx, ns, &name, json.clone(), api_wait, |s| {
            status::mark_done(s, &outcome, &now(), &done_at);
            if let Some(message) = &broken_edit {
                status::mark_broken(s, message, &now());
            }
        })
        .await?;
    }
    if let Some(message) = &broken_edit {
        ctx.events.failure(&json, "(role reload)", message);
    }
    log_reconciled(&ctx, &name, ns, &outcome, started);
    let key = ObjectRef::from_obj_with(&*object, ctx.resource.clone());
    if let Some(failed) = failed_reconcile(&ctx, &json, &outcome) {
        if let Some(after) = outcome.requeue_after {
            return Ok(Next::After(after));
        }
        return Err(failed);
    }
    ctx.failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&key);
    Ok(match (outcome.requeue_after, period) {
        (Some(after), _) => Next::After(after),
        (None, Some(period)) => Next::After(period),
        (None, None) => Next::AwaitChange,
    })
}

/// An object being deleted: its finalizer's run, when the finalizer is
/// still on it and its role or playbook loads.
async fn finalize(
    ctx: &Arc<WatchContext>,
    json: Arc<Json>,
    ns: Option<&str>,
    name: &str,
    finalizers: &[String],
    api_wait: &mut Duration,
) -> Result<Next, ReconcileError> {
    let Some(finalizer) = ctx
        .watch
        .finalizer
        .as_ref()
        .filter(|f| finalizers.contains(&f.name))
    else {
        return Ok(Next::AwaitChange);
    };
    let target = finalizer.target.as_ref().unwrap_or(&ctx.watch.target);
    if let Some(reason) = ctx.reload.unloaded(target) {
        return Err(report_unloaded(ctx, ns, name, json, &reason, api_wait).await);
    }
    run_finalizer(ctx, json, &finalizer.name, api_wait).await
}

/// What a shard does with an object before reconciling it: nothing, for
/// an object that moved to another shard (a requeue may bring one), or
/// hand it over when the sharder drains it; `None` when it is this shard's
/// to reconcile.
async fn shard_keeps(
    ctx: &WatchContext,
    object: &WatchedObject,
    ns: Option<&str>,
    name: &str,
    api_wait: &mut Duration,
) -> Result<Option<Next>, ReconcileError> {
    let Some(shard) = &ctx.settings.shard else {
        return Ok(None);
    };
    let labels = object.metadata.labels.as_ref();
    // A requeue may bring an object that has moved to another shard.
    if !shard.holds(labels) {
        return Ok(Some(Next::AwaitChange));
    }
    if shard.is_draining(labels) {
        // From here this replica does nothing more with the object: the
        // write below hands it over, and another shard may start on it
        // as soon as the write is done.
        tracing::debug!("handing the object over");
        let started = Instant::now();
        let acknowledged = shard
            .acknowledge_drain(
                &ctx.api_for(ns),
                name,
                object.metadata.resource_version.as_deref(),
            )
            .await;
        *api_wait += started.elapsed();
        acknowledged.map_err(|e| ReconcileError::Api {
            action: "hand the object over to another shard",
            source: api_error(e),
        })?;
        tracing::info!(%name, namespace = ns.unwrap_or(""), shard = %shard.name, "drained: the object moves to another shard");
        return Ok(Some(Next::AwaitChange));
    }
    Ok(None)
}

/// The log line of a reconcile that ran.
fn log_reconciled(
    ctx: &WatchContext,
    name: &str,
    ns: Option<&str>,
    outcome: &engine::RunOutcome,
    started: Instant,
) {
    tracing::info!(
        kind = %ctx.watch.gvk.kind,
        %name,
        namespace = ns.unwrap_or(""),
        ok = outcome.stats.ok,
        changed = outcome.stats.changed,
        failed = outcome.stats.failed,
        skipped = outcome.stats.skipped,
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        api_ms = outcome.api_time.as_secs_f64() * 1e3,
        "reconciled"
    );
}

/// The object's requeue period (its annotation, else the watch's); an
/// annotation that is no duration fails the object, on its status too.
async fn reconcile_period(
    ctx: &WatchContext,
    ns: Option<&str>,
    name: &str,
    json: &Arc<Json>,
    api_wait: &mut Duration,
) -> Result<Option<Duration>, ReconcileError> {
    let refused = match ctx.period_for(json) {
        Ok(period) => return Ok(period),
        Err(refused) => refused,
    };
    if ctx.watch.manage_status {
        let message = refused.to_string();
        write_status(ctx, ns, name, json.clone(), api_wait, |s| {
            status::mark_error(s, &message, &now())
        })
        .await?;
    }
    Err(refused)
}

/// The finalizer's run of an object being deleted, as upstream's
/// reconciler does it: the status says Running, the finalizer's role (or
/// the watch's own, with the finalizer's vars) runs, the finalizer comes off
/// when the run succeeded, and the status says how the run ended while the
/// object is still there (a failed run keeps it, with its Failure
/// condition, and is retried).
async fn run_finalizer(
    ctx: &Arc<WatchContext>,
    json: Arc<Json>,
    finalizer: &str,
    api_wait: &mut Duration,
) -> Result<Next, ReconcileError> {
    let name = json["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = json["metadata"]["namespace"].as_str().map(str::to_owned);
    let ns = namespace.as_deref();
    let mut json = json;
    if ctx.watch.manage_status {
        json = write_status(ctx, ns, &name, json, api_wait, |s| {
            status::mark_running(s, &now())
        })
        .await?;
    }
    let entry = ctx
        .finalizer_entry
        .clone()
        .unwrap_or_else(|| ctx.entry.clone());
    let finalizer_vars = ctx
        .watch
        .finalizer
        .as_ref()
        .map(|f| f.vars.clone())
        .unwrap_or_default();
    let outcome = run_once(ctx, &json, &entry, finalizer_vars).await;
    *api_wait += outcome.api_time;
    // The role may have written the object (its status, say): the
    // finalizer's removal needs the object as it is now.
    let started = Instant::now();
    let fresh = ctx.cluster.get(&ctx.resource_ref(), ns, &name).await;
    *api_wait += started.elapsed();
    let Some(fresh) = fresh.map_err(|source| ReconcileError::Api {
        action: "read the object",
        source,
    })?
    else {
        return Ok(Next::AwaitChange);
    };
    let mut json = Arc::new(fresh);
    if !outcome.fails_reconcile() {
        let remaining: Vec<String> = json["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .filter(|f| *f != finalizer)
            .map(str::to_owned)
            .collect();
        let last = remaining.is_empty();
        let started = Instant::now();
        let removed = set_finalizers(ctx, &json, remaining).await;
        *api_wait += started.elapsed();
        json = Arc::new(removed?);
        tracing::info!(kind = %ctx.watch.gvk.kind, %name, namespace = ns.unwrap_or(""), "finalizer ran; removed {finalizer}");
        if last {
            // The API server deletes the object now: no status to write.
            return Ok(Next::AwaitChange);
        }
    }
    if ctx.watch.manage_status {
        let done_at = completion();
        write_status(ctx, ns, &name, json.clone(), api_wait, |s| {
            status::mark_done(s, &outcome, &now(), &done_at);
        })
        .await?;
    }
    match failed_reconcile(ctx, &json, &outcome) {
        Some(failed) => Err(failed),
        None => Ok(Next::AwaitChange),
    }
}

async fn run_once(
    ctx: &WatchContext,
    object: &Arc<Json>,
    entry: &Entry,
    finalizer_vars: Vec<(String, minijinja::Value)>,
) -> engine::RunOutcome {
    let project = ctx
        .project
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let options = VarOptions {
        snake_case: ctx.watch.snake_case_parameters,
        template_custom_resource: ctx.watch.template_custom_resource && !ctx.watch.mark_unsafe,
        watch_vars: ctx.watch.vars.clone(),
        finalizer_vars,
    };
    let vars = extra_vars(object, &ctx.watch.gvk.group, &ctx.watch.gvk.kind, &options);
    let owner = ctx.settings.inject_owner_ref.then(|| {
        let owner = Owner::from_object(object, &ctx.resource);
        Arc::new(owner.controlling(ctx.settings.shard.is_some()))
    });
    // Only the object's own annotation asks for a line per task: the
    // default verbosity (2, as upstream's) would log every task of every run.
    let annotated = verbosity_for(object);
    let run_options = RunOptions {
        runner_dir: Some(runner_dir(&ctx.watch.gvk, object)),
        verbosity: annotated.unwrap_or(ctx.verbosity),
        profile_tasks: annotated.is_some_and(|v| v >= 1),
        log_events: ctx.settings.log_events,
        deadline: ctx.settings.reconcile_timeout.map(|t| Instant::now() + t),
        owner,
        ..RunOptions::default()
    };
    let cluster: Arc<dyn Cluster> = ctx.cluster.clone();
    let run_started = tokio::time::Instant::now();
    let outcome = engine::run(&project, entry, vars, Some(cluster), run_options).await;
    ctx.metrics.record_run(&ctx.gvk_label, &outcome);
    if let Some(dependents) = &ctx.dependents {
        dependents
            .ensure(&ctx.cluster, &outcome.dependents, object, run_started)
            .await;
    }
    outcome
}

/// The directory upstream's ansible-runner would run a reconcile of
/// `object` in, whose paths the run's magic variables name.
pub(crate) fn runner_dir(
    gvk: &enka_project::watches::Gvk,
    object: &Json,
) -> Arc<engine::RunnerDir> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Json::as_str).unwrap_or("");
    Arc::new(engine::RunnerDir::for_object(
        &gvk.group,
        &gvk.version,
        &gvk.kind,
        text("/metadata/namespace"),
        text("/metadata/name"),
    ))
}

/// The `ansible.sdk.operatorframework.io/verbosity` annotation: this
/// object's runs at another Ansible verbosity, as upstream.
fn verbosity_for(object: &Json) -> Option<u8> {
    let text = object
        .pointer("/metadata/annotations")?
        .get(VERBOSITY_ANNOTATION)?
        .as_str()?;
    match text.trim().parse::<u8>() {
        Ok(level) => Some(level.min(7)),
        Err(_) => {
            tracing::warn!("Unable to parse verbosity value from CR: {text:?}; using the default");
            None
        }
    }
}

/// Runs the controller of one watch until shutdown.
pub async fn run_controller(
    ctx: Arc<WatchContext>,
    namespace: Option<String>,
    concurrency: u16,
    reloads: impl futures::Stream<Item = ()> + Send + Sync + 'static,
    owners: impl futures::Stream<Item = ObjectRef<WatchedObject>> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.cluster.client().clone();
    let api: Api<WatchedObject> = match (&namespace, ctx.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client, ns, &ctx.resource),
        _ => Api::all_with(client, &ctx.resource),
    };
    let mut config = WatcherConfig::default().timeout(enka_kube::WATCH_TIMEOUT_SECONDS);
    let selector = match &ctx.settings.shard {
        Some(shard) => shard.selector(&ctx.watch.selector.to_query()),
        None => ctx.watch.selector.to_query(),
    };
    if !selector.is_empty() {
        config = config.labels(&selector);
    }
    let writer = enka_kube::cache::StoreWriter::new(ctx.resource.clone());
    let reader = writer.as_reader();
    // Roles' reads of their own objects by name come from this cache.
    let caches = ctx.cluster.watch_caches().clone();
    let scope = namespace.clone().filter(|_| ctx.namespaced);
    let holds = if selector.is_empty() {
        Holds::Everything
    } else {
        Holds::Selected
    };
    let _serving = caches.serve(ctx.resource.clone(), scope, reader.clone(), holds);
    let triggers = triggers(&ctx, api, config, writer, caches);
    let owners = {
        let ctx = ctx.clone();
        owners.inspect(move |owner| {
            let key = object_key(owner.namespace.as_deref(), &owner.name);
            ctx.metrics.queued(&ctx.controller_name, key);
        })
    };
    ctx.metrics
        .controller_started(&ctx.controller_name, concurrency);
    tracing::info!(gvk = %ctx.watch.gvk, namespace = namespace.as_deref().unwrap_or("(all)"), "starting controller");
    let sources = workqueue::Sources {
        triggers: futures::stream::select(triggers, owners),
        reloads,
        shutdown,
    };
    let all_keys = {
        let (reader, resource) = (reader.clone(), ctx.resource.clone());
        move || {
            let objects = reader.state();
            let keys = objects.iter();
            keys.map(|object| ObjectRef::from_obj_with(&**object, resource.clone()))
                .collect()
        }
    };
    workqueue::run(sources, all_keys, usize::from(concurrency), move |key| {
        run_key(ctx.clone(), reader.clone(), key)
    })
    .await;
}

/// The watch of the kind as the keys to reconcile, with upstream's
/// predicates: a change of generation (spec, deletion), of annotations when
/// asked, and any change of objects without a generation (a Secret, a
/// ConfigMap); not finalizers: the run that adds its finalizer goes on with
/// the object as updated, and that update must not bring a second run (the
/// differential harness saw one). A shard reacts to the sharder's drain
/// label whatever else changed. Every event also fills the controller's
/// store and the roles' watch cache.
fn triggers(
    ctx: &Arc<WatchContext>,
    api: Api<WatchedObject>,
    config: WatcherConfig,
    mut writer: enka_kube::cache::StoreWriter,
    caches: Arc<enka_kube::cache::WatchCaches>,
) -> impl futures::Stream<Item = ObjectRef<WatchedObject>> + Send + 'static {
    let drain_label = ctx.settings.shard.as_ref().map(|shard| shard.drain_label());
    let draining = move |object: &WatchedObject| {
        let label = drain_label.as_ref()?;
        let labels = object.metadata.labels.as_ref();
        Some(u64::from(labels.is_some_and(|l| l.contains_key(label))))
    };
    let predicate = predicates::generation
        .fallback(predicates::resource_version)
        .combine(draining);
    let resource = ctx.resource.clone();
    let stream = watcher(api, config)
        .default_backoff()
        // (WatchedObject leaves managedFields out as it decodes.)
        .modify(move |object| {
            // Items of a list of a built-in kind carry no apiVersion or kind;
            // roles read both from the object (`__secret.kind`).
            if object.types.is_none() {
                object.types = Some(TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
            }
        })
        .inspect({
            let kind = ctx.resource.clone();
            move |event| {
                if let Ok(event) = event {
                    writer.apply(event);
                    caches.observe(&kind, event);
                }
            }
        })
        .inspect({
            let ctx = ctx.clone();
            move |event| record_presence(&ctx, event)
        })
        .applied_objects();
    let triggers = if ctx.watch.watch_annotations_changes {
        stream
            .predicate_filter(
                predicate.combine(predicates::annotations),
                Default::default(),
            )
            .boxed()
    } else {
        stream
            .predicate_filter(predicate, Default::default())
            .boxed()
    };
    let queued = {
        let ctx = ctx.clone();
        move |object: &Result<WatchedObject, watcher::Error>| {
            if let Ok(object) = object {
                let key = object_key(
                    object.metadata.namespace.as_deref(),
                    object.metadata.name.as_deref().unwrap_or_default(),
                );
                ctx.metrics.queued(&ctx.controller_name, key);
            }
        }
    };
    triggers.inspect(queued).filter_map({
        let resource = ctx.resource.clone();
        move |object| {
            let key = match object {
                Ok(object) => Some(ObjectRef::from_obj_with(&object, resource.clone())),
                Err(err) => {
                    tracing::warn!("watch: {err}");
                    None
                }
            };
            futures::future::ready(key)
        }
    })
}

/// One key's turn in the work queue: its reconcile, once the first list is
/// in the cache, and when to come back.
async fn run_key(
    ctx: Arc<WatchContext>,
    reader: enka_kube::cache::StoreReader,
    key: ObjectRef<WatchedObject>,
) -> Option<Duration> {
    // The first list's objects enter the cache together when it ends:
    // until then no run starts (as kube-runtime's applier).
    if reader.wait_until_ready().await.is_err() {
        return None;
    }
    // A trigger for an object gone before its turn never starts a
    // reconcile; it leaves the queue here.
    let Some(object) = reader.get(&key) else {
        let key = object_key(key.namespace.as_deref(), &key.name);
        tracing::debug!(%key, "a trigger for an object not in the cache: no run");
        ctx.metrics.forget(&ctx.controller_name, &key);
        return None;
    };
    match reconcile(object.clone(), ctx.clone()).await {
        Ok(Next::After(after)) => Some(after),
        Ok(Next::AwaitChange) => None,
        Err(err) => Some(error_policy(object, &err, ctx)),
    }
}

/// `resource_created_at_seconds` follows the watch: set for each object
/// listed or changed, removed when one is deleted.
fn record_presence(
    ctx: &WatchContext,
    event: &Result<watcher::Event<WatchedObject>, watcher::Error>,
) {
    let (object, present) = match event {
        Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => (object, true),
        Ok(watcher::Event::Delete(object)) => (object, false),
        _ => return,
    };
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
    if !present {
        ctx.metrics.resource_gone(&ctx.watch.gvk, namespace, name);
        ctx.metrics
            .forget(&ctx.controller_name, &object_key(Some(namespace), name));
        return;
    }
    if let Some(created) = &object.metadata.creation_timestamp {
        let seconds = created.0.as_second() as f64;
        ctx.metrics
            .resource_seen(&ctx.watch.gvk, namespace, name, seconds);
    }
}

fn watcher(
    api: Api<WatchedObject>,
    config: WatcherConfig,
) -> impl futures::Stream<Item = Result<watcher::Event<WatchedObject>, watcher::Error>> {
    watcher::watcher(api, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_panicking_reconcile_is_an_error_not_a_dead_controller() {
        let panicking = async {
            if std::hint::black_box(true) {
                panic!("index out of bounds");
            }
            Ok::<(), ReconcileError>(())
        };
        match guarded(panicking, Some(Duration::from_secs(5))).await {
            Err(ReconcileError::Panicked(message)) => assert_eq!(message, "index out of bounds"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_reconcile_times_out() {
        let stalled = std::future::pending::<Result<(), ReconcileError>>();
        assert!(matches!(
            guarded(stalled, Some(Duration::from_secs(330))).await,
            Err(ReconcileError::TimedOut(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_limit_a_long_reconcile_runs_to_its_end() {
        let long = async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<u8, ReconcileError>(7)
        };
        assert!(matches!(guarded(long, None).await, Ok(7)));
    }

    #[test]
    fn backoff_doubles_from_5ms_to_1000s() {
        assert_eq!(backoff(1), Duration::from_millis(5));
        assert_eq!(backoff(2), Duration::from_millis(10));
        assert_eq!(backoff(11), Duration::from_millis(5120));
        assert_eq!(backoff(40), Duration::from_secs(1000));
    }

    #[test]
    fn the_verbosity_annotation_sets_one_objects_verbosity() {
        let with =
            |value: &str| json!({"metadata": {"annotations": {VERBOSITY_ANNOTATION: value}}});
        assert_eq!(verbosity_for(&with("4")), Some(4));
        assert_eq!(verbosity_for(&with("12")), Some(7));
        assert_eq!(verbosity_for(&with("loud")), None);
        assert_eq!(verbosity_for(&json!({"metadata": {}})), None);
    }

    #[test]
    fn env_names_follow_upstream() {
        let gvk = Gvk {
            group: "cache.example.com".into(),
            version: "v1".into(),
            kind: "Memcached".into(),
        };
        assert_eq!(
            env_name("MAX_CONCURRENT_RECONCILES", &gvk),
            "MAX_CONCURRENT_RECONCILES_MEMCACHED_CACHE_EXAMPLE_COM"
        );
    }
}
