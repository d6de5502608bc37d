//! Prometheus metrics and the health endpoints.
//!
//! Upstream's metric names are kept (`ansible_operator_reconcile_result`,
//! `ansible_operator_reconciles`), but the duration histogram measures the
//! whole run rather than its setup. User metrics from `osdk_metric` are
//! served here too, instead of upstream's separate localhost:5050 endpoint.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::modules::{GaugeOp, MetricKind, MetricUpdate};

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

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

enum UserMetric {
    Counter(Counter<f64, AtomicU64>),
    Gauge(Gauge<f64, AtomicU64>),
    Histogram(Histogram),
}

/// Every metric enka serves.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconcile_result: Family<ResultLabels, Counter>,
    reconcile_duration: HistogramFamily<GvkLabels>,
    api_wait: HistogramFamily<GvkLabels>,
    module_calls: Family<ModuleLabels, Counter>,
    module_duration: HistogramFamily<ModuleLabels>,
    in_flight: Family<GvkLabels, Gauge>,
    waiting_retry: Family<GvkLabels, Gauge>,
    user: Mutex<HashMap<String, UserMetric>>,
    ready: AtomicBool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconcile_result = Family::<ResultLabels, Counter>::default();
        let reconcile_duration: HistogramFamily<GvkLabels> =
            Family::new_with_constructor(duration_histogram);
        let api_wait: HistogramFamily<GvkLabels> = Family::new_with_constructor(duration_histogram);
        let module_calls = Family::<ModuleLabels, Counter>::default();
        let module_duration: HistogramFamily<ModuleLabels> =
            Family::new_with_constructor(duration_histogram);
        let in_flight = Family::<GvkLabels, Gauge>::default();
        let waiting_retry = Family::<GvkLabels, Gauge>::default();
        registry.register(
            "ansible_operator_reconcile_result",
            "Reconciles by result (succeeded or failed)",
            reconcile_result.clone(),
        );
        registry.register(
            "ansible_operator_reconciles",
            "Duration of whole reconciles, in seconds",
            reconcile_duration.clone(),
        );
        registry.register(
            "enka_api_wait_seconds",
            "Time each reconcile spent waiting on the API server, in seconds",
            api_wait.clone(),
        );
        registry.register(
            "enka_module_calls",
            "Module calls by module",
            module_calls.clone(),
        );
        registry.register(
            "enka_module_duration_seconds",
            "Duration of module calls, in seconds",
            module_duration.clone(),
        );
        registry.register(
            "enka_reconciles_in_flight",
            "Reconciles running now",
            in_flight.clone(),
        );
        registry.register(
            "enka_queue_waiting_retry",
            "Objects waiting to be retried after a failure (the backoff queue)",
            waiting_retry.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            reconcile_result,
            reconcile_duration,
            api_wait,
            module_calls,
            module_duration,
            in_flight,
            waiting_retry,
            user: Mutex::new(HashMap::new()),
            ready: AtomicBool::new(false),
        }
    }
}

impl Metrics {
    /// A reconcile of `gvk` started.
    pub fn start(&self, gvk: &str) {
        self.in_flight
            .get_or_create(&GvkLabels {
                GVK: gvk.to_owned(),
            })
            .inc();
    }

    /// A reconcile of `gvk` finished after `elapsed`, of which `api_wait`
    /// went to waiting on the API server.
    pub fn finish(&self, gvk: &str, succeeded: bool, elapsed: Duration, api_wait: Duration) {
        let labels = GvkLabels {
            GVK: gvk.to_owned(),
        };
        self.in_flight.get_or_create(&labels).dec();
        self.reconcile_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.api_wait
            .get_or_create(&labels)
            .observe(api_wait.as_secs_f64());
        let result = if succeeded { "succeeded" } else { "failed" };
        self.reconcile_result
            .get_or_create(&ResultLabels {
                GVK: gvk.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// Module timings and user metrics of one run.
    pub fn record_run(&self, modules: &[(&'static str, Duration)], updates: &[MetricUpdate]) {
        for (module, took) in modules {
            let labels = ModuleLabels {
                module: (*module).to_owned(),
            };
            self.module_calls.get_or_create(&labels).inc();
            self.module_duration
                .get_or_create(&labels)
                .observe(took.as_secs_f64());
        }
        for update in updates {
            self.apply_user(update);
        }
    }

    /// How many objects of `gvk` wait for a retry.
    pub fn set_waiting_retry(&self, gvk: &str, count: usize) {
        self.waiting_retry
            .get_or_create(&GvkLabels {
                GVK: gvk.to_owned(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    fn apply_user(&self, update: &MetricUpdate) {
        let mut user = self.user.lock().unwrap_or_else(|e| e.into_inner());
        if !user.contains_key(&update.name) {
            let metric = match &update.kind {
                MetricKind::Counter { .. } => UserMetric::Counter(Counter::default()),
                MetricKind::Gauge { .. } => UserMetric::Gauge(Gauge::default()),
                MetricKind::Histogram { .. } | MetricKind::Summary { .. } => {
                    UserMetric::Histogram(Histogram::new(exponential_buckets(0.001, 4.0, 12)))
                }
            };
            let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
            match &metric {
                // OpenMetrics serves a counter as `<name>_total`; a name that
                // already ends so is served as written, as upstream does.
                UserMetric::Counter(c) => registry.register(
                    update.name.strip_suffix("_total").unwrap_or(&update.name),
                    update.description.clone(),
                    c.clone(),
                ),
                UserMetric::Gauge(g) => {
                    registry.register(update.name.clone(), update.description.clone(), g.clone())
                }
                UserMetric::Histogram(h) => {
                    registry.register(update.name.clone(), update.description.clone(), h.clone())
                }
            }
            user.insert(update.name.clone(), metric);
        }
        match (user.get(&update.name), &update.kind) {
            (Some(UserMetric::Counter(c)), MetricKind::Counter { add }) => {
                c.inc_by(*add);
            }
            (Some(UserMetric::Gauge(g)), MetricKind::Gauge { op }) => match op {
                GaugeOp::Set(v) => {
                    g.set(*v);
                }
                GaugeOp::Add(v) => {
                    g.inc_by(*v);
                }
                GaugeOp::SetToCurrentTime => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    g.set(now.as_secs_f64());
                }
            },
            (
                Some(UserMetric::Histogram(h)),
                MetricKind::Histogram { observe } | MetricKind::Summary { observe },
            ) => h.observe(*observe),
            _ => {
                tracing::warn!(metric = %update.name, "osdk_metric: the metric was first used as another type; update ignored")
            }
        }
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }

    /// Marks the operator ready (controllers started).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    fn is_ready(&self) -> bool {
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

/// Serves `/metrics` on a bound listener.
pub async fn serve_metrics(
    metrics: Arc<Metrics>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let router = Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    metrics.encode(),
                )
            }
        }),
    );
    tracing::info!(addr = ?listener.local_addr().ok(), "serving metrics on /metrics");
    axum::serve(listener, router).await
}

/// Serves `/healthz` and `/readyz` on a bound listener.
pub async fn serve_health(
    metrics: Arc<Metrics>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    if metrics.is_ready() {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "starting")
                    }
                }
            }),
        );
    tracing::info!(addr = ?listener.local_addr().ok(), "serving /healthz and /readyz");
    axum::serve(listener, router).await
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
        let metrics = Metrics::default();
        metrics.start("g/v, Kind=K");
        metrics.finish(
            "g/v, Kind=K",
            true,
            Duration::from_millis(3),
            Duration::from_millis(2),
        );
        metrics.record_run(
            &[("k8s", Duration::from_millis(1))],
            &[
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
        );
        let text = metrics.encode();
        assert!(text.contains("ansible_operator_reconcile_result_total{GVK=\"g/v, Kind=K\",result=\"succeeded\"} 1"), "{text}");
        assert!(
            text.contains("ansible_operator_reconciles_count{GVK=\"g/v, Kind=K\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("enka_api_wait_seconds_sum{GVK=\"g/v, Kind=K\"} 0.002"),
            "{text}"
        );
        assert!(
            text.contains("enka_module_calls_total{module=\"k8s\"} 1"),
            "{text}"
        );
        assert!(text.contains("my_counter_total 2.0"), "{text}");
        assert!(text.contains("\nmy_runs_total 1.0"), "{text}");
        assert!(!text.contains("my_runs_total_total"), "{text}");
        assert!(
            text.contains("enka_reconciles_in_flight{GVK=\"g/v, Kind=K\"} 0"),
            "{text}"
        );
    }
}
