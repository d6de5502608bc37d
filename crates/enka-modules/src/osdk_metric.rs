//! `operator_sdk.util.osdk_metric`: user metrics, served on enka's own
//! `/metrics` as upstream's ansible-operator serves them (see
//! `operator::metrics::user`). The arguments and their meaning are the
//! collection module's and the proxy's: one of `counter`, `gauge`,
//! `histogram` or `summary`, each with its sub-options; `counter: {}` only
//! registers the metric, `histogram: {}` observes 0.

use super::{Args, Output};
use crate::catalogue;

/// What an `osdk_metric` task does to its metric.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricKind {
    /// A counter: `increment` or `add` (0 registers it only).
    Counter { add: f64 },
    /// A gauge: `increment`, `decrement`, `add`, `subtract`, `set`,
    /// `set_to_current_time`, the first one given; `None` registers it only.
    Gauge { op: Option<GaugeOp> },
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

/// The sub-options of each kind, as the collection's argument_spec has them.
const OPTIONS: &[(&str, &[&str])] = &[
    ("counter", &["add", "increment"]),
    (
        "gauge",
        &[
            "add",
            "decrement",
            "increment",
            "set",
            "set_to_current_time",
            "subtract",
        ],
    ),
    ("histogram", &["observe"]),
    ("summary", &["observe"]),
];

/// A `float` sub-option, as AnsibleModule converts it; 0 when absent.
fn float(options: &Args<'_>, kind: &str, name: &str) -> Result<f64, String> {
    let Some(value) = options.get(name) else {
        return Ok(0.0);
    };
    f64::try_from(value.clone())
        .ok()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .ok_or_else(|| {
            format!(
                "argument '{name}' of {kind} is of type {} and we were unable to convert to float",
                enka_template::pyrepr::type_name(&value)
            )
        })
}

pub fn run(args: &Args<'_>) -> Result<Output, crate::ModuleError> {
    let name = args.required_str("name")?;
    let description = args.required_str("description")?;
    let mut given = Vec::new();
    for (kind, allowed) in OPTIONS {
        if let Some(map) = args.map(kind)? {
            let unknown: Vec<String> = Args::new("osdk_metric", &map)
                .names()
                .into_iter()
                .filter(|key| !allowed.contains(&key.as_str()))
                .map(|key| format!("{kind}.{key}"))
                .collect();
            if !unknown.is_empty() {
                return Err(crate::ArgumentError(format!(
                    "Unsupported parameters for (osdk_metric) module: {}. Supported parameters include: {}.",
                    unknown.join(", "),
                    allowed.join(", ")
                ))
                .into());
            }
            given.push((*kind, map));
        }
    }
    let (kind, map) = match given.as_slice() {
        [] => return Err("a request should contain at least one metric".into()),
        [one] => one,
        _ => return Err("only one metric can be processed at a time".into()),
    };
    let options = Args::new("osdk_metric", map);
    let kind = match *kind {
        "counter" => {
            let add = if options.bool("increment", false)? {
                1.0
            } else {
                float(&options, kind, "add")?
            };
            if add < 0.0 {
                return Err("counter metrics cannot decrease in value".into());
            }
            MetricKind::Counter { add }
        }
        "gauge" => {
            let (add, subtract, set) = (
                float(&options, kind, "add")?,
                float(&options, kind, "subtract")?,
                float(&options, kind, "set")?,
            );
            // The proxy's order; a zero `set` does nothing there either.
            let op = if options.bool("increment", false)? {
                Some(GaugeOp::Add(1.0))
            } else if options.bool("decrement", false)? {
                Some(GaugeOp::Add(-1.0))
            } else if add != 0.0 {
                Some(GaugeOp::Add(add))
            } else if subtract != 0.0 {
                Some(GaugeOp::Add(-subtract))
            } else if set != 0.0 {
                Some(GaugeOp::Set(set))
            } else if options.bool("set_to_current_time", false)? {
                Some(GaugeOp::SetToCurrentTime)
            } else {
                None
            };
            MetricKind::Gauge { op }
        }
        "histogram" => MetricKind::Histogram {
            observe: float(&options, kind, "observe")?,
        },
        _ => MetricKind::Summary {
            observe: float(&options, kind, "observe")?,
        },
    };
    let mut output = Output::changed(true).with("name", name.as_str());
    output.metrics.push(MetricUpdate {
        name,
        description,
        kind,
    });
    Ok(output)
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "osdk_metric",
    aliases: &[],
    collections: catalogue::OPERATOR_SDK,
    params: &[
        "name",
        "description",
        "counter",
        "gauge",
        "histogram",
        "summary",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(|args, _| run(args)),
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind_of(arguments: serde_json::Value) -> Result<MetricKind, String> {
        let map = enka_template::convert::from_json(&arguments);
        let output = run(&Args::new("osdk_metric", &map)).map_err(|e| e.to_string())?;
        Ok(output.metrics[0].kind.clone())
    }

    /// The requests of upstream's memcached-molecule role, as its proxy
    /// reads them.
    #[test]
    fn arguments_mean_what_the_collection_and_proxy_make_of_them() {
        let named = |kind: serde_json::Value| {
            let mut arguments = json!({"name": "m", "description": "d"});
            arguments
                .as_object_mut()
                .unwrap()
                .extend(kind.as_object().unwrap().clone());
            kind_of(arguments)
        };
        assert_eq!(
            named(json!({"counter": {}})),
            Ok(MetricKind::Counter { add: 0.0 })
        );
        assert_eq!(
            named(json!({"counter": {"increment": "yes"}})),
            Ok(MetricKind::Counter { add: 1.0 })
        );
        assert_eq!(
            named(json!({"gauge": {}})),
            Ok(MetricKind::Gauge { op: None })
        );
        assert_eq!(
            named(json!({"gauge": {"subtract": 7}})),
            Ok(MetricKind::Gauge {
                op: Some(GaugeOp::Add(-7.0))
            })
        );
        assert_eq!(
            named(json!({"gauge": {"set": "5"}})),
            Ok(MetricKind::Gauge {
                op: Some(GaugeOp::Set(5.0))
            })
        );
        assert_eq!(
            named(json!({"histogram": {}})),
            Ok(MetricKind::Histogram { observe: 0.0 })
        );
        assert_eq!(
            named(json!({"counter": {"add": -1}})),
            Err("counter metrics cannot decrease in value".to_owned())
        );
        assert_eq!(
            named(json!({"counter": {"inc": true}})),
            Err("Unsupported parameters for (osdk_metric) module: counter.inc. Supported parameters include: add, increment.".to_owned())
        );
        assert_eq!(
            named(json!({"counter": {}, "gauge": {}})),
            Err("only one metric can be processed at a time".to_owned())
        );
        assert_eq!(
            kind_of(json!({"name": "m", "counter": {}})),
            Err("missing required arguments: description".to_owned())
        );
    }
}
