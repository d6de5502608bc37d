//! `operator_sdk.util.osdk_metric`: user metrics, served on enka's own
//! `/metrics` (see docs/compatibility.md).

use super::{Args, Output};

/// What an `osdk_metric` task does to its metric.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricKind {
    /// A counter: `inc` or `add`.
    Counter { add: f64 },
    /// A gauge: `set`, `inc`, `dec`, `add`, `sub`, `set_to_current_time`.
    Gauge { op: GaugeOp },
    /// A histogram observation.
    Histogram { observe: f64 },
    /// A summary observation.
    Summary { observe: f64 },
}

/// A gauge operation.
#[derive(Debug, Clone, PartialEq)]
pub enum GaugeOp {
    /// Set to a value.
    Set(f64),
    /// Add (negative to subtract).
    Add(f64),
    /// Set to the current Unix time.
    SetToCurrentTime,
}

/// One metric change recorded by a run.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricUpdate {
    /// Metric name.
    pub name: String,
    /// Help text.
    pub description: String,
    /// The change.
    pub kind: MetricKind,
}

fn number(value: &minijinja::Value, what: &str) -> Result<f64, String> {
    f64::try_from(value.clone())
        .ok()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .ok_or_else(|| format!("osdk_metric: {what} must be a number"))
}

pub fn run(args: &Args<'_>) -> Result<Output, String> {
    let name = args.required_str("name")?;
    let description = args.str("description")?.unwrap_or_default();
    let field = |map: &minijinja::Value, key: &str| {
        map.get_attr(key)
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_none())
    };
    let kind = if let Some(counter) = args.map("counter")? {
        let add = match (field(&counter, "inc"), field(&counter, "add")) {
            (_, Some(add)) => number(&add, "counter.add")?,
            (Some(inc), None) if inc.is_true() => 1.0,
            _ => return Err("osdk_metric: counter needs inc or add".to_owned()),
        };
        if add < 0.0 {
            return Err("osdk_metric: a counter cannot decrease".to_owned());
        }
        MetricKind::Counter { add }
    } else if let Some(gauge) = args.map("gauge")? {
        let op = if let Some(v) = field(&gauge, "set") {
            GaugeOp::Set(number(&v, "gauge.set")?)
        } else if let Some(v) = field(&gauge, "add") {
            GaugeOp::Add(number(&v, "gauge.add")?)
        } else if let Some(v) = field(&gauge, "sub") {
            GaugeOp::Add(-number(&v, "gauge.sub")?)
        } else if field(&gauge, "inc").is_some_and(|v| v.is_true()) {
            GaugeOp::Add(1.0)
        } else if field(&gauge, "dec").is_some_and(|v| v.is_true()) {
            GaugeOp::Add(-1.0)
        } else if field(&gauge, "set_to_current_time").is_some_and(|v| v.is_true()) {
            GaugeOp::SetToCurrentTime
        } else {
            return Err(
                "osdk_metric: gauge needs one of set, add, sub, inc, dec, set_to_current_time"
                    .to_owned(),
            );
        };
        MetricKind::Gauge { op }
    } else if let Some(histogram) = args.map("histogram")? {
        let observe = field(&histogram, "observe").ok_or("osdk_metric: histogram needs observe")?;
        MetricKind::Histogram {
            observe: number(&observe, "histogram.observe")?,
        }
    } else if let Some(summary) = args.map("summary")? {
        let observe = field(&summary, "observe").ok_or("osdk_metric: summary needs observe")?;
        MetricKind::Summary {
            observe: number(&observe, "summary.observe")?,
        }
    } else {
        return Err(
            "osdk_metric: one of counter, gauge, histogram or summary is required".to_owned(),
        );
    };
    let mut output = Output::changed(false).with("name", name.as_str());
    output.metrics.push(MetricUpdate {
        name,
        description,
        kind,
    });
    Ok(output)
}
