//! The operator: one controller per watch with its work queue, dependent
//! watches, status conditions and finalizers, events, reload of an edited
//! project, metrics, leader election and shards; `enka diff`'s dry run.
//!
//! It drives `enka-engine` over a project from `enka-project`, with the
//! cluster of `enka-kube`; only the command line (the `enka` crate) is
//! above it.

#![forbid(unsafe_code)]

pub mod controller;
pub mod dependents;
pub mod diff;
mod error;
mod events;
pub mod leader;
pub mod metrics;
pub mod reload;
pub mod shard;
pub mod status;
pub mod version;
mod workqueue;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::{self, Scope};

use controller::{Settings, WatchContext};
use enka_kube::client::KubeCluster;
use enka_project::role::{LoadOptions, Target};
use enka_project::watches::{role_paths, targets};

/// How long a watch started for a kind roles read is kept with no read
/// answered from it: long enough for the reconcile period's runs of most
/// operators to find it, short enough that a kind read once in a while
/// (a migration step, a finalizer) does not stay in memory for good.
const READ_WATCH_IDLE: Duration = Duration::from_secs(15 * 60);

/// What `enka run` was asked to do.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// The watches file.
    pub watches_file: PathBuf,
    /// Default reconcile period.
    pub reconcile_period: Duration,
    /// Reconciles in flight per watch.
    pub max_concurrent_reconciles: u16,
    /// The longest one reconcile may take, if capped.
    pub reconcile_timeout: Option<Duration>,
    /// How long reconciles in flight may finish after a shutdown signal.
    pub graceful_shutdown_timeout: Duration,
    /// Extra role directories.
    pub roles_path: Vec<PathBuf>,
    /// Extra collection directories.
    pub collections_path: Vec<PathBuf>,
    /// Ansible verbosity.
    pub verbosity: u8,
    /// Namespaces to watch (empty: all).
    pub namespaces: Vec<String>,
    /// Whether created objects get owner references.
    pub inject_owner_ref: bool,
    /// How the Ansible worker starts; `None` with `--native-only`.
    pub ansible: Option<enka_worker::Config>,
    /// Template options (seed, commands).
    pub templates: enka_template::Options,
    /// Where `/metrics` is served (`None`: not served).
    pub metrics_address: Option<std::net::SocketAddr>,
    /// HTTPS and access control of `/metrics`.
    pub metrics_serving: metrics::Serving,
    /// Which task events are logged (`--ansible-log-events`).
    pub log_events: enka_engine::LogEvents,
    /// Where `/healthz` and `/readyz` are served (`None`: not served).
    pub health_address: Option<std::net::SocketAddr>,
    /// Leader election, when more than one replica may run.
    pub leader_election: Option<leader::ElectionConfig>,
    /// This replica as a shard of a ControllerRing (instead of leader
    /// election).
    pub sharding: Option<shard::Sharding>,
}

/// Loads the project and runs every controller until a shutdown signal,
/// against the cluster `config` points at.
pub async fn run(options: OperatorOptions, config: kube::Config) -> anyhow::Result<()> {
    let metrics = Arc::new(metrics::Metrics::default());
    let client = api_client(config, &metrics)?;
    let cluster = Arc::new(KubeCluster::new(client.clone(), "enka"));
    let Loaded {
        watches,
        watch_targets,
        load,
        project,
        unloaded,
    } = load(&options, &cluster)?;
    let reload_state = Arc::new(reload::ReloadState::with_unloaded(unloaded));
    let handle = Arc::new(RwLock::new(project));
    serve_endpoints(&options, &metrics, &client).await?;
    let (changed_tx, changed_rx) = tokio::sync::watch::channel(0u64);
    tokio::spawn(reload::run(
        load,
        watch_targets,
        handle.clone(),
        reload_state.clone(),
        changed_tx,
    ));
    let settings = settings(&options);
    let leadership = lead(&options, &client, &metrics).await;
    // A shard that stops gracefully gives its Lease up, so the sharder
    // moves its objects at once instead of after the Lease expires.
    let releaser = leadership
        .as_ref()
        .filter(|_| options.sharding.is_some())
        .map(|(leadership, _)| leadership.releaser());
    let controlled = controlled_kinds(&options, &client).await;
    let shutdown = shutdown_signal();
    let events = events::Recorder::start(cluster.clone());
    let mut controllers = Vec::new();
    for watch in watches {
        let gvk = GroupVersionKind::gvk(&watch.gvk.group, &watch.gvk.version, &watch.gvk.kind);
        let (resource, caps) = discovery::pinned_kind(&client, &gvk)
            .await
            .with_context(|| {
                format!(
                    "the API server does not serve {} (is its CRD installed?)",
                    watch.gvk
                )
            })?;
        let concurrency = concurrency_for(&watch.gvk, options.max_concurrent_reconciles);
        let namespaced = caps.scope == Scope::Namespaced;
        let gvk_name = watch.gvk.to_string();
        let shared = controller::Shared {
            project: handle.clone(),
            cluster: cluster.clone(),
            settings: settings.clone(),
            reload: reload_state.clone(),
            metrics: metrics.clone(),
            events: events.clone(),
        };
        let triggers = dependents::Triggers::default();
        let dependent_watches = watch.watch_dependent_resources.then(|| {
            dependent_watches(
                &options,
                &watch,
                &resource,
                namespaced,
                &triggers,
                &controlled,
            )
        });
        let ctx = WatchContext::new(watch, resource, namespaced, shared, dependent_watches)
            .with_context(|| format!("the role or playbook of {gvk_name} is not loaded"))?;
        let ctx = Arc::new(ctx);
        for namespace in watch_scopes(&options.namespaces, namespaced) {
            let owners = triggers.stream(namespace.clone());
            controllers.push(tokio::spawn(controller::run_controller(
                ctx.clone(),
                namespace,
                concurrency,
                reload::triggers(changed_rx.clone()),
                owners,
                shutdown.clone(),
            )));
        }
    }
    metrics.set_ready();
    tracing::info!(controllers = controllers.len(), "enka is running");
    let stopped = Stopping {
        shutdown,
        grace: options.graceful_shutdown_timeout,
        leadership,
        releaser,
    };
    run_until_stopped(controllers, stopped, &metrics).await?;
    tracing::info!("enka stopped");
    Ok(())
}

/// How a running enka stops: the shutdown signal and the grace after it,
/// and the Lease whose loss stops it and which it gives up.
struct Stopping {
    shutdown: futures::future::Shared<futures::future::BoxFuture<'static, ()>>,
    grace: Duration,
    leadership: Option<(leader::Leadership, String)>,
    releaser: Option<leader::Releaser>,
}

/// Runs the controllers until a signal (plus the graceful-shutdown time
/// for the reconciles in flight), a controller's end, or the loss of the
/// Lease; a shard then gives its Lease up.
async fn run_until_stopped(
    controllers: Vec<tokio::task::JoinHandle<()>>,
    stopping: Stopping,
    metrics: &Arc<metrics::Metrics>,
) -> anyhow::Result<()> {
    let signalled = stopping.shutdown.clone();
    let all = supervise(controllers, move || signalled.peek().is_some(), metrics);
    let Stopping {
        shutdown,
        grace,
        leadership,
        releaser,
    } = stopping;
    let grace_over = async move {
        shutdown.await;
        tokio::time::sleep(grace).await;
    };
    let leader_metrics = metrics.clone();
    let lost_leadership = async move {
        match leadership {
            Some((leadership, lease_name)) => {
                leadership.keep().await;
                leader_metrics.set_leader(&lease_name, false);
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        result = all => result?,
        () = grace_over => tracing::warn!(
            "reconciles still running {}s after the shutdown signal; stopping anyway",
            grace.as_secs_f64()
        ),
        () = lost_leadership => bail!("leadership lost; stopping so that another replica takes over"),
    }
    if let Some(releaser) = releaser {
        releaser.release().await;
    }
    Ok(())
}

/// The dependent watches of a watch; a shard's watch only the dependents
/// its ring assigns with their owner.
fn dependent_watches(
    options: &OperatorOptions,
    watch: &enka_project::watches::Watch,
    resource: &ApiResource,
    namespaced: bool,
    triggers: &dependents::Triggers,
    controlled: &Option<std::collections::HashSet<shard::GroupResource>>,
) -> Arc<dependents::DependentWatches> {
    let watches = dependents::DependentWatches::new(
        watch,
        resource.clone(),
        namespaced,
        options.namespaces.clone(),
        triggers.clone(),
    );
    Arc::new(match (&options.sharding, controlled) {
        (Some(sharding), Some(kinds)) => watches.assigned(dependents::AssignedKinds {
            selector: sharding.shard.selector(""),
            kinds: kinds.clone(),
        }),
        _ => watches,
    })
}

/// The Lease this replica holds while its controllers run, once acquired:
/// a shard's own, or the leader's; `None` without either.
async fn lead(
    options: &OperatorOptions,
    client: &kube::Client,
    metrics: &Arc<metrics::Metrics>,
) -> Option<(leader::Leadership, String)> {
    // A shard holds a Lease of its own as a leader holds the one Lease:
    // its controllers run only while it does.
    let lease = options
        .sharding
        .as_ref()
        .map(|sharding| sharding.lease.clone())
        .or_else(|| options.leader_election.clone());
    match lease {
        Some(config) => {
            metrics.set_leader(&config.lease_name, false);
            let lease_name = config.lease_name.clone();
            let leadership = leader::acquire(client, config).await;
            metrics.set_leader(&lease_name, true);
            Some((leadership, lease_name))
        }
        None => None,
    }
}

/// The dependents the ring assigns with their owner: only this shard's are
/// watched. Without the ring's list, all are (correct, if larger).
async fn controlled_kinds(
    options: &OperatorOptions,
    client: &kube::Client,
) -> Option<std::collections::HashSet<shard::GroupResource>> {
    // The dependents the ring assigns with their owner: only this shard's
    // are watched. Without the ring's list, all are (correct, if larger).
    match &options.sharding {
        Some(sharding) => match shard::controlled_resources(client, &sharding.shard.ring).await {
            Ok(kinds) => Some(kinds),
            Err(err) => {
                tracing::warn!(ring = %sharding.shard.ring, "cannot read the ControllerRing, so dependents are watched whole: {err}");
                None
            }
        },
        None => None,
    }
}

/// The Kubernetes client, its requests counted in `metrics`.
fn api_client(
    config: kube::Config,
    metrics: &Arc<metrics::Metrics>,
) -> anyhow::Result<kube::Client> {
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let counted = metrics.clone();
    enka_kube::instrument::client(
        config,
        Arc::new(
            move |method: &str, code: &str, elapsed: std::time::Duration| {
                counted.api_request(method, code, &host, elapsed)
            },
        ),
    )
    .context("cannot build a Kubernetes client")
}

/// What `enka run` loaded: the watches and the project that runs them.
struct Loaded {
    watches: Vec<enka_project::watches::Watch>,
    watch_targets: Vec<Target>,
    load: LoadOptions,
    project: Arc<enka_project::role::Project>,
    unloaded: Vec<(Target, String)>,
}

/// Loads the watches file and every role and playbook it names. A broken
/// watches file stops enka, and so does a role or playbook that is not
/// there; one that does not load fails only the watches that run it
/// (upstream starts, and each run of such a watch fails).
fn load(options: &OperatorOptions, cluster: &Arc<KubeCluster>) -> anyhow::Result<Loaded> {
    let (watches, mut diagnostics) = enka_project::watches::load(&options.watches_file);
    let paths = role_paths(
        &options.watches_file,
        &options.roles_path,
        &options.collections_path,
    );
    // Kinds roles read are watched in the operator's namespaces, as
    // upstream's cache informs them.
    cluster
        .watch_caches()
        .inform_reads_in(options.namespaces.clone(), READ_WATCH_IDLE);
    let k8s_lookup: Arc<dyn enka_template::LookupPlugin> =
        Arc::new(enka_kube::lookup::K8sLookup::new(cluster.clone()));
    let load = LoadOptions {
        role_paths: paths,
        templates: options.templates.clone(),
        origins: watches
            .iter()
            .map(|w| (w.target.clone(), w.location.clone()))
            .collect(),
        lookups: vec![("k8s".to_owned(), k8s_lookup)],
        ansible: options.ansible.clone(),
        inventory: enka_project::role::InventoryLoad::WhenNamed,
    };
    let watch_targets = targets(&watches);
    // A broken watches file stops enka; a role or playbook that does not
    // load fails only the watches that run it (upstream starts, and each
    // run of such a watch fails).
    if diagnostics.has_errors() {
        for diagnostic in &diagnostics.0 {
            tracing::error!("{diagnostic}");
        }
        bail!(
            "the watches file has {} error(s); run `enka check` for details",
            diagnostics.errors().count()
        );
    }
    let (project, unloaded, project_diagnostics) = reload::load_each(&load, &watch_targets);
    diagnostics.extend(project_diagnostics);
    for diagnostic in &diagnostics.0 {
        if diagnostic.is_problem() {
            tracing::error!("{diagnostic}");
        } else {
            tracing::warn!("{diagnostic}");
        }
    }
    // A role or playbook that is not there stops enka, as upstream's
    // watches validation stops ansible-operator.
    // So does any load error under --native-only: the user asked enka to
    // refuse what it would not run itself.
    let missing = unloaded.iter().any(|(target, _)| match target {
        Target::Playbook(path) => !path.exists(),
        Target::Role(name) => enka_project::role::resolve_role(&load.role_paths, name).is_err(),
    });
    let strict = load.ansible.is_none() && !unloaded.is_empty();
    let Some(project) = project.filter(|_| !missing && !strict) else {
        bail!(
            "the project has {} error(s); run `enka check` for details",
            diagnostics.errors().count()
        );
    };
    for (target, _) in &unloaded {
        tracing::error!(
            ?target,
            "does not load: the watches that run it fail each reconcile until it is fixed"
        );
    }
    Ok(Loaded {
        watches,
        watch_targets,
        load,
        project,
        unloaded,
    })
}

/// The metrics and health endpoints, when asked for.
async fn serve_endpoints(
    options: &OperatorOptions,
    metrics: &Arc<metrics::Metrics>,
    client: &kube::Client,
) -> anyhow::Result<()> {
    if let Some(addr) = options.metrics_address {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        let serving = metrics::serve_metrics(
            metrics.clone(),
            listener,
            options.metrics_serving.clone(),
            client.clone(),
        );
        tokio::spawn(async move {
            if let Err(err) = serving.await {
                tracing::error!(%addr, "the metrics endpoint stopped: {err}");
            }
        });
    }
    if let Some(addr) = options.health_address {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot serve health probes on {addr}"))?;
        let serving = metrics::serve_health(metrics.clone(), listener);
        tokio::spawn(async move {
            if let Err(err) = serving.await {
                tracing::error!(%addr, "the health endpoint stopped: {err}");
            }
        });
    }
    Ok(())
}

/// The concurrent reconciles of a kind: `MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`
/// (or the deprecated `WORKER_…`), else the flag's.
fn concurrency_for(gvk: &enka_project::watches::Gvk, default: u16) -> u16 {
    std::env::var(controller::env_name("MAX_CONCURRENT_RECONCILES", gvk))
        .or_else(|_| {
            let legacy = controller::env_name("WORKER", gvk);
            std::env::var(&legacy).inspect(|_| {
                tracing::warn!("{legacy} is deprecated; use MAX_CONCURRENT_RECONCILES_…")
            })
        })
        .ok()
        .and_then(|v| v.parse::<u16>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

/// Waits for every controller; the first that ends before shutdown, or
/// panics, fails readiness and stops the operator (as controller-runtime's
/// manager stops when a runnable fails), instead of leaving its kind
/// unreconciled behind a green `/readyz`.
async fn supervise(
    controllers: Vec<tokio::task::JoinHandle<()>>,
    stopping: impl Fn() -> bool,
    metrics: &metrics::Metrics,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let mut running: futures::stream::FuturesUnordered<_> = controllers.into_iter().collect();
    while let Some(ended) = running.next().await {
        let failure = match ended {
            Err(err) if err.is_panic() => Some(format!("a controller panicked: {err}")),
            _ if !stopping() => Some("a controller stopped unexpectedly".to_owned()),
            _ => None,
        };
        if let Some(failure) = failure {
            metrics.set_unready();
            bail!("{failure}");
        }
    }
    Ok(())
}

/// Where a kind is watched: each namespace of `WATCH_NAMESPACE` for a
/// namespaced kind, else (`None`) the whole cluster.
pub(crate) fn watch_scopes(namespaces: &[String], namespaced: bool) -> Vec<Option<String>> {
    if namespaces.is_empty() || !namespaced {
        vec![None]
    } else {
        namespaces.iter().cloned().map(Some).collect()
    }
}

/// A future that completes on SIGTERM or Ctrl-C; cloneable for every
/// controller.
fn shutdown_signal() -> futures::future::Shared<futures::future::BoxFuture<'static, ()>> {
    use futures::FutureExt;
    async {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(_) => {
                        let _ = ctrl_c.await;
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
        tracing::info!("shutting down: letting running reconciles finish");
    }
    .boxed()
    .shared()
}

/// What every controller of this enka runs with.
fn settings(options: &OperatorOptions) -> Settings {
    Settings {
        reconcile_period: options.reconcile_period,
        reconcile_timeout: options.reconcile_timeout,
        verbosity: options.verbosity,
        namespaces: options.namespaces.clone(),
        inject_owner_ref: options.inject_owner_ref,
        log_events: options.log_events,
        shard: options.sharding.as_ref().map(|s| Arc::new(s.shard.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_controller_that_dies_fails_readiness_and_the_operator() {
        let metrics = metrics::Metrics::default();
        metrics.set_ready();
        // The first controller runs on; the second dies. Waiting for them
        // in order would never see it.
        let controllers = vec![
            tokio::spawn(std::future::pending::<()>()),
            tokio::spawn(async {
                if std::hint::black_box(true) {
                    panic!("boom");
                }
            }),
        ];
        let ended = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            supervise(controllers, || false, &metrics),
        )
        .await
        .expect("supervise returns as soon as one controller dies");
        let err = ended.unwrap_err().to_string();
        assert!(err.contains("a controller panicked"), "{err}");
        assert!(!metrics.is_ready());
        let quiet = vec![tokio::spawn(async {})];
        assert!(
            supervise(quiet, || true, &metrics).await.is_ok(),
            "ending after shutdown is fine"
        );
    }
}
