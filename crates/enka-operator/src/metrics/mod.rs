//! Prometheus metrics with upstream's names, types and labels, so the
//! operator-sdk dashboards, alerts and ServiceMonitors built for
//! ansible-operator find what they look for:
//!
//! - ansible-operator's: `ansible_operator_build_info`,
//!   `ansible_operator_reconcile_result` (a gauge, as upstream),
//!   `ansible_operator_reconciles`; operator-lib's
//!   `resource_created_at_seconds`; user metrics from `osdk_metric`.
//! - controller-runtime's: `controller_runtime_*` and `workqueue_*` per
//!   controller (named `<kind>-<version>-controller` as upstream names them),
//!   `rest_client_requests_total`, `leader_election_master_status`; and
//!   client-go's `rest_client_request_duration_seconds`, which
//!   controller-runtime leaves out.
//! - the process collector's `process_*`.
//!
//! enka's own extras carry an `enka_` prefix. kube-runtime's scheduler is
//! not client-go's work queue, so the `workqueue_*` figures describe what
//! enka's controller does in the queue's terms: an add is a trigger (a watch
//! event that passed the predicates, a dependent's change, a requeue), the
//! queue time runs from the trigger (or a requeue's due time) to the start
//! of the reconcile.

mod exposition;
mod process;
mod serve;
mod user;

pub use serve::{Serving, serve_health, serve_metrics};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use enka_engine::RunOutcome;
use enka_modules::MetricUpdate;
use user::UserMetrics;

// Upstream labels these `GVK`; the field name is the label name.
#[allow(non_snake_case)]
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    GVK: String,
    result: String,
}

#[allow(non_snake_case)]
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GvkLabels {
    GVK: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModuleLabels {
    module: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    gvk: String,
    role: String,
    task: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    commit: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CreatedLabels {
    name: String,
    namespace: String,
    group: String,
    version: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerResultLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    name: String,
    controller: String,
    priority: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

/// client_golang's default buckets, which upstream's
/// `ansible_operator_reconciles` uses.
fn default_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
fn reconcile_time_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
        15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
    ])
}

/// client-go's `rest_client_request_duration_seconds` buckets.
fn request_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

/// client-go's work queue buckets: 10 ns to about 3 hours.
fn queue_buckets() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// How a reconcile ended, in controller-runtime's `result` label's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done; nothing scheduled.
    Success,
    /// Done, to run again after a delay (`requeue_after`).
    RequeueAfter,
    /// Failed; retried with backoff.
    Error,
}

impl ReconcileResult {
    fn label(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::RequeueAfter => "requeue_after",
            ReconcileResult::Error => "error",
        }
    }
}

/// What the work queue of one controller holds, by object key.
#[derive(Default)]
struct QueueState {
    /// Triggered and not yet started: when each was added.
    pending: HashMap<String, Instant>,
    /// Requeued: when each falls due.
    due: HashMap<String, Instant>,
    /// Reconciles running: when each started.
    running: HashMap<u64, Instant>,
}

/// A reconcile in progress, from [`Metrics::started`] to [`Metrics::finished`].
#[derive(Debug)]
pub struct Running {
    controller: String,
    gvk: String,
    id: u64,
    started: Instant,
}

/// Every metric enka serves.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconcile_result: Family<ResultLabels, Gauge>,
    reconcile_duration: HistogramFamily<GvkLabels>,
    created_at: Family<CreatedLabels, FloatGauge>,
    reconcile_total: Family<ControllerResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    reconcile_panics: Family<ControllerLabels, Counter>,
    reconcile_time: HistogramFamily<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    queue_depth: Family<DepthLabels, Gauge>,
    queue_adds: Family<QueueLabels, Counter>,
    queue_latency: HistogramFamily<QueueLabels>,
    work_duration: HistogramFamily<QueueLabels>,
    unfinished_work: Family<QueueLabels, FloatGauge>,
    longest_running: Family<QueueLabels, FloatGauge>,
    queue_retries: Family<QueueLabels, Counter>,
    rest_requests: Family<RestLabels, Counter>,
    rest_duration: HistogramFamily<VerbLabels>,
    leader_status: Family<NameLabels, Gauge>,
    api_wait: HistogramFamily<GvkLabels>,
    module_calls: Family<ModuleLabels, Counter>,
    module_duration: HistogramFamily<ModuleLabels>,
    task_duration: HistogramFamily<TaskLabels>,
    queues: Mutex<HashMap<String, QueueState>>,
    next_run: AtomicU64,
    user: Mutex<UserMetrics>,
    ready: AtomicBool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    // Long: one registration per metric family, in upstream's order, each
    // with its name and help text as upstream exposes them.
    fn default() -> Self {
        let mut registry = Registry::default();
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                commit: crate::version::COMMIT.to_owned(),
                version: concat!("v", env!("CARGO_PKG_VERSION")).to_owned(),
            })
            .set(1);
        registry.register(
            "ansible_operator_build_info",
            "Build information for the ansible-operator binary",
            build_info,
        );
        registry.register_collector(Box::new(process::ProcessCollector));
        let metrics = Metrics {
            registry: Mutex::new(Registry::default()),
            reconcile_result: Family::default(),
            reconcile_duration: Family::new_with_constructor(default_buckets),
            created_at: Family::default(),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            reconcile_panics: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_buckets),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            queue_depth: Family::default(),
            queue_adds: Family::default(),
            queue_latency: Family::new_with_constructor(queue_buckets),
            work_duration: Family::new_with_constructor(queue_buckets),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            queue_retries: Family::default(),
            rest_requests: Family::default(),
            rest_duration: Family::new_with_constructor(request_buckets),
            leader_status: Family::default(),
            api_wait: Family::new_with_constructor(duration_histogram),
            module_calls: Family::default(),
            module_duration: Family::new_with_constructor(duration_histogram),
            task_duration: Family::new_with_constructor(duration_histogram),
            queues: Mutex::new(HashMap::new()),
            next_run: AtomicU64::new(0),
            user: Mutex::new(UserMetrics::default()),
            ready: AtomicBool::new(false),
        };
        let m = &metrics;
        registry.register(
            "ansible_operator_reconcile_result",
            "Gauge of reconciles and their results.",
            m.reconcile_result.clone(),
        );
        registry.register(
            "ansible_operator_reconciles",
            "How long in seconds a reconcile takes.",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "resource_created_at_seconds",
            "Timestamp at which a resource was created",
            m.created_at.clone(),
        );
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            m.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            m.reconcile_panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            m.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            m.active_workers.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            m.queue_depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.queue_adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            m.queue_latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            m.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
            m.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            m.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.queue_retries.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            m.rest_requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            m.rest_duration.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            m.leader_status.clone(),
        );
        registry.register(
            "enka_api_wait_seconds",
            "Time each reconcile spent waiting on the API server, in seconds",
            m.api_wait.clone(),
        );
        registry.register(
            "enka_module_calls",
            "Module calls by module",
            m.module_calls.clone(),
        );
        registry.register(
            "enka_module_duration_seconds",
            "Duration of module calls, in seconds",
            m.module_duration.clone(),
        );
        registry.register(
            "enka_task_duration_seconds",
            "Duration of each task of a role or playbook, loop items and retries included, in seconds",
            m.task_duration.clone(),
        );
        *metrics.registry.lock().unwrap_or_else(|e| e.into_inner()) = registry;
        metrics
    }
}

fn created_labels(gvk: &enka_project::watches::Gvk, namespace: &str, name: &str) -> CreatedLabels {
    CreatedLabels {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        group: gvk.group.clone(),
        version: gvk.version.clone(),
        kind: gvk.kind.clone(),
    }
}

/// Upstream's controller name for a watch: `<kind>-<version>-controller`.
pub fn controller_name(kind: &str, version: &str) -> String {
    format!(
        "{}-{}-controller",
        kind.to_ascii_lowercase(),
        version.to_ascii_lowercase()
    )
}

/// The queue state of `controller`, made on first use (no key allocated
/// on the hot path once it exists).
fn queue_of<'a>(
    queues: &'a mut HashMap<String, QueueState>,
    controller: &str,
) -> &'a mut QueueState {
    if !queues.contains_key(controller) {
        queues.insert(controller.to_owned(), QueueState::default());
    }
    queues.get_mut(controller).expect("inserted above")
}

fn queue_labels(controller: &str) -> QueueLabels {
    QueueLabels {
        name: controller.to_owned(),
        controller: controller.to_owned(),
    }
}

fn controller_labels(controller: &str) -> ControllerLabels {
    ControllerLabels {
        controller: controller.to_owned(),
    }
}

impl Metrics {
    /// A controller started with room for `concurrency` reconciles at once.
    pub fn controller_started(&self, controller: &str, concurrency: u16) {
        let labels = controller_labels(controller);
        self.max_concurrent
            .get_or_create(&labels)
            .set(i64::from(concurrency));
        self.active_workers.get_or_create(&labels).set(0);
        for family in [
            &self.reconcile_errors,
            &self.terminal_errors,
            &self.reconcile_panics,
        ] {
            let _ = family.get_or_create(&labels);
        }
        let _ = self.queue_adds.get_or_create(&queue_labels(controller));
        let _ = self.queue_retries.get_or_create(&queue_labels(controller));
        self.set_depth(controller, 0);
    }

    fn set_depth(&self, controller: &str, depth: usize) {
        self.queue_depth
            .get_or_create(&DepthLabels {
                name: controller.to_owned(),
                controller: controller.to_owned(),
                priority: String::new(),
            })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// An object was triggered (watch event, dependent, reload): it waits
    /// in the queue until its reconcile starts. A key already waiting is
    /// not added twice, as in client-go's queue, but still counts as an add.
    pub fn queued(&self, controller: &str, key: String) {
        self.queue_adds
            .get_or_create(&queue_labels(controller))
            .inc();
        let depth = {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let queue = queue_of(&mut queues, controller);
            queue.pending.entry(key).or_insert_with(Instant::now);
            queue.pending.len()
        };
        self.set_depth(controller, depth);
    }

    /// A reconcile asked to run again after `after`; a retry after a
    /// failure counts in `workqueue_retries_total` too.
    pub fn requeued(&self, controller: &str, key: String, after: Duration, retry: bool) {
        let labels = queue_labels(controller);
        self.queue_adds.get_or_create(&labels).inc();
        if retry {
            self.queue_retries.get_or_create(&labels).inc();
        }
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let queue = queue_of(&mut queues, controller);
        queue.due.insert(key, Instant::now() + after);
    }

    /// `key` will not be reconciled (deleted, or gone before its turn): it
    /// leaves the queue without a reconcile.
    pub fn forget(&self, controller: &str, key: &str) {
        let depth = {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let Some(queue) = queues.get_mut(controller) else {
                return;
            };
            queue.due.remove(key);
            if queue.pending.remove(key).is_none() {
                return;
            }
            queue.pending.len()
        };
        self.set_depth(controller, depth);
    }

    /// A reconcile of `key` starts.
    pub fn started(&self, controller: &str, gvk: &str, key: &str) -> Running {
        let now = Instant::now();
        let id = self.next_run.fetch_add(1, Ordering::Relaxed);
        let (waited, depth) = {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let queue = queue_of(&mut queues, controller);
            let added = queue.pending.remove(key);
            let due = queue.due.remove(key);
            queue.running.insert(id, now);
            let since = match (added, due) {
                (Some(added), Some(due)) => Some(added.min(due)),
                (one, other) => one.or(other),
            };
            (
                since.map(|t| now.saturating_duration_since(t)),
                queue.pending.len(),
            )
        };
        self.set_depth(controller, depth);
        if let Some(waited) = waited {
            self.queue_latency
                .get_or_create(&queue_labels(controller))
                .observe(waited.as_secs_f64());
        }
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .inc();
        Running {
            controller: controller.to_owned(),
            gvk: gvk.to_owned(),
            id,
            started: now,
        }
    }

    /// A reconcile finished; `api_wait` of it went to waiting on the API
    /// server.
    pub fn finished(&self, run: Running, result: ReconcileResult, api_wait: Duration) {
        let elapsed = run.started.elapsed().as_secs_f64();
        {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(queue) = queues.get_mut(&run.controller) {
                queue.running.remove(&run.id);
            }
        }
        let controller = controller_labels(&run.controller);
        self.active_workers.get_or_create(&controller).dec();
        self.reconcile_time
            .get_or_create(&controller)
            .observe(elapsed);
        self.work_duration
            .get_or_create(&queue_labels(&run.controller))
            .observe(elapsed);
        self.reconcile_total
            .get_or_create(&ControllerResultLabels {
                controller: run.controller.clone(),
                result: result.label().to_owned(),
            })
            .inc();
        if result == ReconcileResult::Error {
            self.reconcile_errors.get_or_create(&controller).inc();
        }
        let gvk = GvkLabels { GVK: run.gvk };
        self.reconcile_duration.get_or_create(&gvk).observe(elapsed);
        self.api_wait
            .get_or_create(&gvk)
            .observe(api_wait.as_secs_f64());
        let upstream_result = if result == ReconcileResult::Error {
            "failed"
        } else {
            "succeeded"
        };
        self.reconcile_result
            .get_or_create(&ResultLabels {
                GVK: gvk.GVK,
                result: upstream_result.to_owned(),
            })
            .inc();
    }

    /// A reconcile of `controller` panicked (and was recovered).
    pub fn panicked(&self, controller: &str) {
        self.reconcile_panics
            .get_or_create(&controller_labels(controller))
            .inc();
    }

    /// An object of a watched kind exists: `resource_created_at_seconds`.
    pub fn resource_seen(
        &self,
        gvk: &enka_project::watches::Gvk,
        namespace: &str,
        name: &str,
        created: f64,
    ) {
        self.created_at
            .get_or_create(&created_labels(gvk, namespace, name))
            .set(created);
    }

    /// An object of a watched kind is gone.
    pub fn resource_gone(&self, gvk: &enka_project::watches::Gvk, namespace: &str, name: &str) {
        self.created_at
            .remove(&created_labels(gvk, namespace, name));
    }

    /// One API request finished with `code` (`<error>` when no response
    /// came, as client-go labels it), `elapsed` after it was sent, until
    /// its response's headers.
    pub fn api_request(&self, method: &str, code: &str, host: &str, elapsed: Duration) {
        self.rest_requests
            .get_or_create(&RestLabels {
                code: code.to_owned(),
                method: method.to_owned(),
                host: host.to_owned(),
            })
            .inc();
        self.rest_duration
            .get_or_create(&VerbLabels {
                verb: method.to_owned(),
                host: host.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Whether this replica holds the Lease `name`.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.leader_status
            .get_or_create(&NameLabels {
                name: name.to_owned(),
            })
            .set(i64::from(leading));
    }

    /// Module and task timings and user metrics of one run of `gvk`.
    pub fn record_run(&self, gvk: &str, run: &RunOutcome) {
        for (module, took) in &run.module_timings {
            let labels = ModuleLabels {
                module: (*module).to_owned(),
            };
            self.module_calls.get_or_create(&labels).inc();
            self.module_duration
                .get_or_create(&labels)
                .observe(took.as_secs_f64());
        }
        for timing in &run.task_timings {
            let labels = TaskLabels {
                gvk: gvk.to_owned(),
                role: timing.role.as_deref().unwrap_or_default().to_owned(),
                task: timing.task.to_string(),
            };
            self.task_duration
                .get_or_create(&labels)
                .observe(timing.took.as_secs_f64());
        }
        for update in &run.metrics {
            self.apply_user(update);
        }
    }

    /// client-go updates these every 500 ms from a loop; computed here at
    /// scrape time instead, which is when anyone reads them.
    fn refresh_running(&self) {
        let now = Instant::now();
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        for (controller, queue) in queues.iter() {
            let ages = queue
                .running
                .values()
                .map(|started| now.saturating_duration_since(*started).as_secs_f64());
            let (total, longest) = ages.fold((0.0, 0.0_f64), |(t, l), age| (t + age, l.max(age)));
            let labels = queue_labels(controller);
            self.unfinished_work.get_or_create(&labels).set(total);
            self.longest_running.get_or_create(&labels).set(longest);
        }
    }

    fn apply_user(&self, update: &MetricUpdate) {
        let mut user = self.user.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(refused) = user.apply(update) {
            // Upstream's proxy answers the module with this error; here the
            // update arrives after the task, so it is logged instead.
            tracing::warn!(metric = %update.name, "osdk_metric: {refused}; update ignored");
        }
    }

    /// The metrics in Prometheus' text format 0.0.4, which
    /// controller-runtime's endpoint serves (it does not offer OpenMetrics):
    /// a counter's family is named with its `_total`, and user counters keep
    /// the names roles gave them.
    pub fn encode(&self) -> String {
        self.refresh_running();
        let mut open_metrics = String::new();
        {
            let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
            if prometheus_client::encoding::text::encode(&mut open_metrics, &registry).is_err() {
                open_metrics.clear();
            }
        }
        let mut out = exposition::from_open_metrics(&open_metrics);
        self.user
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .encode(&mut out);
        out
    }

    /// Marks the operator ready (controllers started).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Marks the operator not ready (a controller stopped).
    pub fn set_unready(&self) {
        self.ready.store(false, Ordering::Relaxed);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// Parses upstream's bind addresses: `:8080`, `0.0.0.0:8080`, `127.0.0.1:0`;
/// `0` disables the endpoint.
pub fn parse_bind(text: &str) -> Result<Option<SocketAddr>, String> {
    if text == "0" || text.is_empty() {
        return Ok(None);
    }
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_owned()
    };
    full.parse()
        .map(Some)
        .map_err(|e| format!("invalid bind address {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses() {
        assert_eq!(
            parse_bind(":8080").unwrap(),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            parse_bind("127.0.0.1:9").unwrap(),
            Some("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(parse_bind("0").unwrap(), None);
        assert!(parse_bind("nope").is_err());
    }

    #[test]
    fn reconciles_modules_and_user_metrics_are_encoded() {
        use enka_engine::TaskTiming;
        use enka_modules::MetricKind;
        let metrics = Metrics::default();
        let controller = controller_name("K", "V1");
        assert_eq!(controller, "k-v1-controller");
        metrics.controller_started(&controller, 4);
        metrics.queued(&controller, "ns/a".into());
        metrics.queued(&controller, "ns/a".into());
        let run = metrics.started(&controller, "g/v, Kind=K", "ns/a");
        metrics.finished(run, ReconcileResult::RequeueAfter, Duration::from_millis(2));
        let run = metrics.started(&controller, "g/v, Kind=K", "ns/b");
        metrics.finished(run, ReconcileResult::Error, Duration::ZERO);
        metrics.requeued(&controller, "ns/b".into(), Duration::from_millis(5), true);
        let run = RunOutcome {
            module_timings: vec![("k8s", Duration::from_millis(1))],
            task_timings: vec![
                TaskTiming {
                    role: Some("memcached".into()),
                    task: "start memcached".into(),
                    took: Duration::from_millis(3),
                },
                TaskTiming {
                    role: None,
                    task: "k8s".into(),
                    took: Duration::from_millis(2),
                },
            ],
            metrics: vec![
                MetricUpdate {
                    name: "my_counter".into(),
                    description: "a user counter".into(),
                    kind: MetricKind::Counter { add: 2.0 },
                },
                MetricUpdate {
                    name: "my_runs_total".into(),
                    description: "named as Prometheus advises".into(),
                    kind: MetricKind::Counter { add: 1.0 },
                },
            ],
            ..RunOutcome::default()
        };
        metrics.record_run("g/v, Kind=K", &run);
        let text = metrics.encode();
        let has = |needle: &str| assert!(text.contains(needle), "{needle} in\n{text}");
        has("# TYPE ansible_operator_reconcile_result gauge");
        has("# TYPE enka_task_duration_seconds histogram");
        has(
            "enka_task_duration_seconds_count{gvk=\"g/v, Kind=K\",role=\"memcached\",task=\"start memcached\"} 1",
        );
        has(
            "enka_task_duration_seconds_bucket{le=\"0.002\",gvk=\"g/v, Kind=K\",role=\"\",task=\"k8s\"} 1",
        );
        has("ansible_operator_reconcile_result{GVK=\"g/v, Kind=K\",result=\"succeeded\"} 1");
        has("ansible_operator_reconcile_result{GVK=\"g/v, Kind=K\",result=\"failed\"} 1");
        has("ansible_operator_reconciles_count{GVK=\"g/v, Kind=K\"} 2");
        has("ansible_operator_build_info{commit=");
        has(
            "controller_runtime_reconcile_total{controller=\"k-v1-controller\",result=\"requeue_after\"} 1",
        );
        has(
            "controller_runtime_reconcile_total{controller=\"k-v1-controller\",result=\"error\"} 1",
        );
        has("controller_runtime_reconcile_errors_total{controller=\"k-v1-controller\"} 1");
        has("controller_runtime_max_concurrent_reconciles{controller=\"k-v1-controller\"} 4");
        has("controller_runtime_active_workers{controller=\"k-v1-controller\"} 0");
        has("controller_runtime_reconcile_time_seconds_count{controller=\"k-v1-controller\"} 2");
        // Two adds of one waiting key: one item, two adds (client-go's dedup);
        // then a retry.
        has("workqueue_adds_total{name=\"k-v1-controller\",controller=\"k-v1-controller\"} 3");
        has("workqueue_retries_total{name=\"k-v1-controller\",controller=\"k-v1-controller\"} 1");
        has(
            "workqueue_queue_duration_seconds_count{name=\"k-v1-controller\",controller=\"k-v1-controller\"} 1",
        );
        has(
            "workqueue_depth{name=\"k-v1-controller\",controller=\"k-v1-controller\",priority=\"\"} 0",
        );
        has(
            "workqueue_longest_running_processor_seconds{name=\"k-v1-controller\",controller=\"k-v1-controller\"} 0.0",
        );
        has("enka_api_wait_seconds_sum{GVK=\"g/v, Kind=K\"} 0.002");
        has("enka_module_calls_total{module=\"k8s\"} 1");
        has("# TYPE process_cpu_seconds_total counter");
        has("# TYPE controller_runtime_reconcile_total counter");
        has("process_resident_memory_bytes ");
        // User counters keep the names their roles gave, as upstream's.
        has("# TYPE my_counter counter\nmy_counter 2\n");
        has("\nmy_runs_total 1\n");
        assert!(!text.contains("my_runs_total_total"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn a_forgotten_key_leaves_the_queue() {
        let metrics = Metrics::default();
        metrics.controller_started("c", 1);
        metrics.queued("c", "ns/gone".into());
        metrics.queued("c", "ns/kept".into());
        metrics.forget("c", "ns/gone");
        let text = metrics.encode();
        assert!(
            text.contains("workqueue_depth{name=\"c\",controller=\"c\",priority=\"\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn created_at_follows_the_objects_and_the_lease_status_its_holder() {
        let metrics = Metrics::default();
        let gvk = enka_project::watches::Gvk {
            group: "cache.example.com".into(),
            version: "v1alpha1".into(),
            kind: "Memcached".into(),
        };
        metrics.resource_seen(&gvk, "default", "memcached-sample", 1_700_000_000.0);
        metrics.set_leader("my-lease", true);
        metrics.api_request("GET", "200", "127.0.0.1:6443", Duration::from_millis(3));
        let text = metrics.encode();
        assert!(text.contains("resource_created_at_seconds{name=\"memcached-sample\",namespace=\"default\",group=\"cache.example.com\",version=\"v1alpha1\",kind=\"Memcached\"} 1700000000.0"), "{text}");
        assert!(
            text.contains("leader_election_master_status{name=\"my-lease\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"127.0.0.1:6443\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rest_client_request_duration_seconds_sum{verb=\"GET\",host=\"127.0.0.1:6443\"} 0.003"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rest_client_request_duration_seconds_bucket{le=\"0.005\",verb=\"GET\",host=\"127.0.0.1:6443\"} 1"
            ),
            "{text}"
        );
        metrics.resource_gone(&gvk, "default", "memcached-sample");
        assert!(!metrics.encode().contains("memcached-sample"));
    }
}
