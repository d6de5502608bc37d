//! Metrics a role makes with `operator_sdk.util.osdk_metric`, kept and
//! served as upstream's ansible-operator does (internal/ansible/metrics):
//! a metric is registered the first time its name is seen, with the type of
//! that request; later requests of another type fail; a counter is served
//! under the name the role gave it (no `_total` added); a histogram has
//! client_golang's default buckets and a summary no quantiles (only `_sum`
//! and `_count`), as `prometheus.NewHistogram`/`NewSummary` make them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use enka_modules::{GaugeOp, MetricKind, MetricUpdate};

/// client_golang's `prometheus.DefBuckets`.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug)]
enum Value {
    Counter(f64),
    Gauge(f64),
    Histogram {
        counts: [u64; 11],
        sum: f64,
        count: u64,
    },
    Summary {
        sum: f64,
        count: u64,
    },
}

impl Value {
    fn new(kind: &MetricKind) -> Value {
        match kind {
            MetricKind::Counter { .. } => Value::Counter(0.0),
            MetricKind::Gauge { .. } => Value::Gauge(0.0),
            MetricKind::Histogram { .. } => Value::Histogram {
                counts: [0; 11],
                sum: 0.0,
                count: 0,
            },
            MetricKind::Summary { .. } => Value::Summary { sum: 0.0, count: 0 },
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Counter(_) => "counter",
            Value::Gauge(_) => "gauge",
            Value::Histogram { .. } => "histogram",
            Value::Summary { .. } => "summary",
        }
    }
}

#[derive(Debug)]
struct Metric {
    help: String,
    value: Value,
}

/// Why an update was refused (upstream's messages).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserMetricError {
    #[error("cannot change metric type of {name}, which is a {kind}")]
    TypeChange { name: String, kind: &'static str },
}

/// The user metrics of one operator, by name.
#[derive(Debug, Default)]
pub struct UserMetrics {
    metrics: BTreeMap<String, Metric>,
}

impl UserMetrics {
    /// Registers the metric if new, then applies the update as client_golang
    /// would.
    pub fn apply(&mut self, update: &MetricUpdate) -> Result<(), UserMetricError> {
        let metric = self
            .metrics
            .entry(update.name.clone())
            .or_insert_with(|| Metric {
                help: update.description.clone(),
                value: Value::new(&update.kind),
            });
        match (&mut metric.value, &update.kind) {
            (Value::Counter(total), MetricKind::Counter { add }) => *total += add,
            (Value::Gauge(value), MetricKind::Gauge { op }) => match op {
                Some(GaugeOp::Set(to)) => *value = *to,
                Some(GaugeOp::Add(by)) => *value += by,
                Some(GaugeOp::SetToCurrentTime) => *value = enka_template::time::unix_seconds(),
                None => {}
            },
            // client_golang's Histogram and Summary share the Observe
            // interface; upstream lets either request observe either.
            (
                Value::Histogram { counts, sum, count },
                MetricKind::Histogram { observe } | MetricKind::Summary { observe },
            ) => {
                for (bucket, bound) in counts.iter_mut().zip(DEFAULT_BUCKETS) {
                    if *observe <= bound {
                        *bucket += 1;
                    }
                }
                *sum += observe;
                *count += 1;
            }
            (
                Value::Summary { sum, count },
                MetricKind::Summary { observe } | MetricKind::Histogram { observe },
            ) => {
                *sum += observe;
                *count += 1;
            }
            (value, _) => {
                return Err(UserMetricError::TypeChange {
                    name: update.name.clone(),
                    kind: value.type_name(),
                });
            }
        }
        Ok(())
    }

    /// The metrics in Prometheus' text format (0.0.4), as client_golang
    /// writes them.
    pub fn encode(&self, out: &mut String) {
        for (name, metric) in &self.metrics {
            let help = metric.help.replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {}", metric.value.type_name());
            match &metric.value {
                Value::Counter(v) | Value::Gauge(v) => {
                    let _ = writeln!(out, "{name} {}", go_float(*v));
                }
                Value::Histogram { counts, sum, count } => {
                    for (bucket, bound) in counts.iter().zip(DEFAULT_BUCKETS) {
                        let _ =
                            writeln!(out, "{name}_bucket{{le=\"{}\"}} {bucket}", go_float(bound));
                    }
                    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
                    let _ = writeln!(out, "{name}_sum {}", go_float(*sum));
                    let _ = writeln!(out, "{name}_count {count}");
                }
                Value::Summary { sum, count } => {
                    let _ = writeln!(out, "{name}_sum {}", go_float(*sum));
                    let _ = writeln!(out, "{name}_count {count}");
                }
            }
        }
    }
}

/// A float as Go's `strconv.FormatFloat(v, 'g', -1, 64)` writes it (what
/// client_golang's text format uses): the shortest digits, in exponent form
/// below 1e-4 and from 1e21 on… and, shortest being asked, from 1e6 on.
pub fn go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits: "1.234567e6".
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    // Plain notation with the same digits.
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let point = exponent + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{whole}.{fraction}")
    };
    if negative { format!("-{body}") } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(name: &str, kind: MetricKind) -> MetricUpdate {
        MetricUpdate {
            name: name.to_owned(),
            description: format!("{name} help"),
            kind,
        }
    }

    #[test]
    fn floats_are_written_as_go_writes_them() {
        for (value, go) in [
            (0.0, "0"),
            (5.0, "5"),
            (-7.0, "-7"),
            (2.5, "2.5"),
            (0.005, "0.005"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1_763_899_123.5, "1.7638991235e+09"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(go_float(value), go, "{value}");
        }
    }

    /// What upstream's molecule test of memcached-molecule-operator asserts
    /// after its role's osdk_metric tasks.
    #[test]
    fn upstreams_metric_sequence_is_served_as_client_golang_serves_it() {
        let mut metrics = UserMetrics::default();
        for (name, kind) in [
            ("sanity_counter", MetricKind::Counter { add: 0.0 }),
            ("sanity_gauge", MetricKind::Gauge { op: None }),
            ("sanity_histogram", MetricKind::Histogram { observe: 0.0 }),
            ("sanity_summary", MetricKind::Summary { observe: 0.0 }),
            ("counter_inc_test", MetricKind::Counter { add: 0.0 }),
            ("counter_inc_test", MetricKind::Counter { add: 1.0 }),
            ("gauge_sub_test", MetricKind::Gauge { op: None }),
            (
                "gauge_sub_test",
                MetricKind::Gauge {
                    op: Some(GaugeOp::Add(-7.0)),
                },
            ),
            ("histogram_test", MetricKind::Histogram { observe: 0.0 }),
            ("histogram_test", MetricKind::Histogram { observe: 2.0 }),
            ("summary_test", MetricKind::Summary { observe: 0.0 }),
            ("summary_test", MetricKind::Summary { observe: 2.0 }),
        ] {
            metrics.apply(&update(name, kind)).unwrap();
        }
        let mut text = String::new();
        metrics.encode(&mut text);
        for line in [
            "sanity_counter 0\n",
            "sanity_gauge 0\n",
            "sanity_histogram_bucket{le=\"0.005\"} 1\n",
            "# TYPE sanity_summary summary\n",
            "counter_inc_test 1\n",
            "gauge_sub_test -7\n",
            "histogram_test_sum 2\n",
            "histogram_test_bucket{le=\"2.5\"} 2\n",
            "histogram_test_bucket{le=\"1\"} 1\n",
            "summary_test_sum 2\n",
            "summary_test_count 2\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }

    #[test]
    fn a_metric_keeps_its_first_type() {
        let mut metrics = UserMetrics::default();
        metrics
            .apply(&update("m", MetricKind::Counter { add: 1.0 }))
            .unwrap();
        assert_eq!(
            metrics
                .apply(&update(
                    "m",
                    MetricKind::Gauge {
                        op: Some(GaugeOp::Set(3.0))
                    }
                ))
                .unwrap_err()
                .to_string(),
            "cannot change metric type of m, which is a counter"
        );
    }
}
