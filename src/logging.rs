//! Logs as upstream's ansible-operator writes them: zap's JSON lines by
//! default (`level`, `ts`, `logger`, `msg`, then the fields of the event and
//! of its spans, so a reconcile's `job`, `name`, `namespace` and `gvk`), or
//! human text with `--zap-devel` / `--zap-encoder=console`.
//!
//! Spans record their fields with tracing-subscriber's `JsonFields`; the
//! event formatter here only renames the keys to zap's and picks the time
//! encoding, since tracing-subscriber's own JSON format has fixed keys
//! (`timestamp`, `fields.message`, `target`) that zap-reading pipelines do
//! not know.

use std::fmt;

use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::{Map, Value as Json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// `--zap-encoder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Encoder {
    /// One JSON object per line (zap's production encoder).
    Json,
    /// Human text.
    Console,
}

/// `--zap-time-encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeEncoding {
    /// Seconds since the epoch, as a float.
    Epoch,
    /// Milliseconds since the epoch, as a float.
    Millis,
    /// Nanoseconds since the epoch, as an integer.
    Nano,
    /// `2006-01-02T15:04:05.000Z0700`.
    Iso8601,
    /// `2006-01-02T15:04:05Z07:00` (controller-runtime's default).
    #[default]
    Rfc3339,
    /// RFC 3339 with nanoseconds, trailing zeros trimmed.
    Rfc3339nano,
}

/// A zap level: a name, or an integer for logr's verbosity levels
/// (`--zap-log-level=2` is logr's V(2), zap's level -2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZapLevel {
    /// `debug` (zap -1).
    Debug,
    /// `info`.
    Info,
    /// `warn`.
    Warn,
    /// `error`.
    Error,
    /// `dpanic`, `panic` or `fatal`: only what makes enka exit.
    Panic,
    /// logr V(n) for n > 0.
    Verbosity(u8),
}

impl std::str::FromStr for ZapLevel {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "debug" => Ok(ZapLevel::Debug),
            "info" => Ok(ZapLevel::Info),
            "warn" => Ok(ZapLevel::Warn),
            "error" => Ok(ZapLevel::Error),
            "dpanic" | "panic" | "fatal" => Ok(ZapLevel::Panic),
            other => match other.parse::<i64>() {
                Ok(n) if n > 0 => Ok(ZapLevel::Verbosity(u8::try_from(n).unwrap_or(u8::MAX))),
                _ => Err(format!(
                    "invalid log level \"{text}\": use debug, info, error, panic or an integer > 0"
                )),
            },
        }
    }
}

impl ZapLevel {
    /// The most detailed tracing level this zap level lets through; logr's
    /// V(1) is zap's debug, anything beyond is trace.
    fn max_level(self) -> Option<Level> {
        match self {
            ZapLevel::Verbosity(n) if n >= 2 => Some(Level::TRACE),
            ZapLevel::Verbosity(_) | ZapLevel::Debug => Some(Level::DEBUG),
            ZapLevel::Info => Some(Level::INFO),
            ZapLevel::Warn => Some(Level::WARN),
            ZapLevel::Error => Some(Level::ERROR),
            ZapLevel::Panic => None,
        }
    }
}

/// How to log, from the command line.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// `--log`, `ENKA_LOG` or `RUST_LOG`: an `EnvFilter`; wins over
    /// `--zap-log-level`.
    pub filter: Option<String>,
    /// `--zap-devel`: console text at debug level.
    pub devel: bool,
    /// `--zap-encoder`.
    pub encoder: Option<Encoder>,
    /// `--zap-log-level`.
    pub level: Option<ZapLevel>,
    /// `--zap-time-encoding`.
    pub time_encoding: Option<TimeEncoding>,
}

impl LogOptions {
    fn env_filter(&self) -> EnvFilter {
        if let Some(filter) = &self.filter {
            return EnvFilter::new(with_crate_targets(filter));
        }
        if let Ok(filter) = std::env::var(EnvFilter::DEFAULT_ENV)
            && let Ok(filter) = EnvFilter::try_new(with_crate_targets(&filter))
        {
            return filter;
        }
        let level = self.level.unwrap_or(if self.devel {
            ZapLevel::Debug
        } else {
            ZapLevel::Info
        });
        // Levels below info apply to enka's own logs; its libraries'
        // debug output (HTTP frames, TLS) is not what zap's levels mean.
        match level.max_level() {
            None => EnvFilter::new("off"),
            Some(Level::DEBUG) => EnvFilter::new(with_crate_targets("info,enka=debug")),
            Some(Level::TRACE) => EnvFilter::new(with_crate_targets("info,enka=trace")),
            Some(level) => EnvFilter::new(level.as_str().to_ascii_lowercase()),
        }
    }

    /// Installs the global subscriber, writing to stderr as zap does; with
    /// `traces`, spans also go to that tracer provider (see
    /// [`crate::telemetry`]), whatever the log level.
    pub fn init(&self, traces: Option<&SdkTracerProvider>) {
        let filter = self.env_filter();
        let console =
            self.encoder == Some(Encoder::Console) || (self.devel && self.encoder.is_none());
        let logs = if console {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .boxed()
        } else {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .fmt_fields(JsonFields::new())
                .event_format(ZapJson {
                    time: self.time_encoding.unwrap_or_default(),
                })
                .boxed()
        };
        tracing_subscriber::registry()
            .with(logs.with_filter(filter))
            .with(traces.map(crate::telemetry::layer))
            .init();
    }
}

/// zap's production JSON encoder, as an event formatter.
#[derive(Debug, Clone, Copy)]
pub struct ZapJson {
    /// How `ts` is written.
    pub time: TimeEncoding,
}

impl<S, N> FormatEvent<S, N> for ZapJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert("level".into(), Json::from(level_name(*meta.level())));
        line.insert("ts".into(), encode_time(self.time, now));
        line.insert("logger".into(), Json::from(logger_name(meta.target())));
        line.insert("msg".into(), Json::from(""));
        // Outermost span first, so an inner span's field wins.
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                if let Ok(Json::Object(fields)) = serde_json::from_str::<Json>(fields) {
                    for (key, value) in fields {
                        insert_field(&mut line, key, value);
                    }
                }
            }
        }
        let mut visitor = JsonVisitor(&mut line);
        event.record(&mut visitor);
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// A field never replaces zap's own keys.
fn insert_field(line: &mut Map<String, Json>, key: String, value: Json) {
    match key.as_str() {
        "level" | "ts" | "logger" => {
            line.insert(format!("fields.{key}"), value);
        }
        "message" => {
            line.insert("msg".into(), value);
        }
        _ => {
            line.insert(key, value);
        }
    }
}

struct JsonVisitor<'a>(&'a mut Map<String, Json>);

impl Visit for JsonVisitor<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        insert_field(self.0, field.name().to_owned(), Json::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        insert_field(self.0, field.name().to_owned(), Json::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        insert_field(self.0, field.name().to_owned(), Json::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        insert_field(self.0, field.name().to_owned(), Json::from(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        insert_field(self.0, field.name().to_owned(), Json::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        insert_field(
            self.0,
            field.name().to_owned(),
            Json::from(value.to_string()),
        );
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        insert_field(
            self.0,
            field.name().to_owned(),
            Json::from(format!("{value:?}")),
        );
    }
}

/// zap's lowercase level names; logr's V(2) and beyond print as zap does.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "Level(-2)",
    }
}

/// The logger name: upstream names loggers by layer (`cmd`, `controller`,
/// `proxy`); enka's are its module path below the crate (`operator.leader`).
fn logger_name(target: &str) -> String {
    match target.strip_prefix("enka::") {
        Some("cli") => "cmd".to_owned(),
        Some(rest) => rest.replace("::", "."),
        None if target == "enka" => "cmd".to_owned(),
        // A crate of the workspace: `enka_operator::leader` is the
        // `operator.leader` logger, as it was when it was `enka::operator`.
        None => target
            .strip_prefix("enka_")
            .unwrap_or(target)
            .replace("::", "."),
    }
}

/// The workspace's crates whose logs are enka's own.
const CRATES: &[&str] = &[
    "enka_yaml",
    "enka_worker",
    "enka_template",
    "enka_kube",
    "enka_modules",
    "enka_project",
    "enka_engine",
    "enka_operator",
];

/// Modules of the `enka` crate that now live in one of the others (their
/// logs' targets moved with them).
const MOVED: &[(&str, &str)] = &[
    ("catalogue", "enka_modules::catalogue"),
    ("engine", "enka_engine"),
    ("freeform", "enka_template::freeform"),
    ("inventory", "enka_project::inventory"),
    ("kube", "enka_kube"),
    ("modules", "enka_modules"),
    ("operator", "enka_operator"),
    ("paramconv", "enka_project::paramconv"),
    ("role", "enka_project::role"),
    ("template", "enka_template"),
    ("time", "enka_template::time"),
    ("vars", "enka_project::vars"),
    ("version", "enka_operator::version"),
    ("watches", "enka_project::watches"),
    ("worker", "enka_worker"),
    ("yaml", "enka_yaml"),
];

/// A log filter as users write it (`info,enka=debug`,
/// `enka::operator=debug`), with each `enka` target also naming the
/// workspace crate its logs now come from: `enka` is every one of them, a
/// module that moved is its new path.
fn with_crate_targets(filter: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        out.push(directive.to_owned());
        // Span and field filters (`target[span{field}]=level`) stay as written.
        if directive.contains('[') {
            continue;
        }
        let (target, level) = match directive.split_once('=') {
            Some((target, level)) => (target, Some(level)),
            None => (directive, None),
        };
        let with_level = |target: &str| match level {
            Some(level) => format!("{target}={level}"),
            None => target.to_owned(),
        };
        if target == "enka" {
            out.extend(CRATES.iter().map(|c| with_level(c)));
            continue;
        }
        let Some(path) = target.strip_prefix("enka::") else {
            continue;
        };
        let (module, rest) = path.split_once("::").unwrap_or((path, ""));
        if let Some((_, moved)) = MOVED.iter().find(|(m, _)| *m == module) {
            let target = match rest {
                "" => (*moved).to_owned(),
                rest => format!("{moved}::{rest}"),
            };
            out.push(with_level(&target));
        }
    }
    out.join(",")
}

fn encode_time(encoding: TimeEncoding, since_epoch: std::time::Duration) -> Json {
    let secs = since_epoch.as_secs();
    let nanos = since_epoch.subsec_nanos();
    match encoding {
        TimeEncoding::Epoch => Json::from(since_epoch.as_secs_f64()),
        TimeEncoding::Millis => Json::from(since_epoch.as_secs_f64() * 1e3),
        TimeEncoding::Nano => Json::from(u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX)),
        TimeEncoding::Rfc3339 => Json::from(crate::time::format_rfc3339(secs)),
        TimeEncoding::Iso8601 => {
            let base = crate::time::format_rfc3339(secs);
            let base = base.trim_end_matches('Z');
            Json::from(format!("{base}.{:03}Z", nanos / 1_000_000))
        }
        TimeEncoding::Rfc3339nano => {
            let base = crate::time::format_rfc3339(secs);
            let base = base.trim_end_matches('Z');
            let fraction = format!("{nanos:09}");
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                Json::from(format!("{base}Z"))
            } else {
                Json::from(format!("{base}.{fraction}Z"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn zap_levels_parse_as_controller_runtime_takes_them() {
        assert_eq!("debug".parse::<ZapLevel>(), Ok(ZapLevel::Debug));
        assert_eq!("ERROR".parse::<ZapLevel>(), Ok(ZapLevel::Error));
        assert_eq!("3".parse::<ZapLevel>(), Ok(ZapLevel::Verbosity(3)));
        assert!("0".parse::<ZapLevel>().is_err());
        assert!("loud".parse::<ZapLevel>().is_err());
    }

    #[test]
    fn times_are_encoded_as_zap_encodes_them() {
        let t = Duration::new(1_136_214_245, 120_000_000);
        assert_eq!(
            encode_time(TimeEncoding::Rfc3339, t),
            Json::from("2006-01-02T15:04:05Z")
        );
        assert_eq!(
            encode_time(TimeEncoding::Rfc3339nano, t),
            Json::from("2006-01-02T15:04:05.12Z")
        );
        assert_eq!(
            encode_time(TimeEncoding::Iso8601, t),
            Json::from("2006-01-02T15:04:05.120Z")
        );
        assert_eq!(
            encode_time(TimeEncoding::Nano, t),
            Json::from(1_136_214_245_120_000_000u64)
        );
        assert_eq!(
            encode_time(TimeEncoding::Epoch, t),
            Json::from(1_136_214_245.12)
        );
    }

    #[test]
    fn logger_names_follow_the_module() {
        assert_eq!(logger_name("enka::operator::leader"), "operator.leader");
        assert_eq!(logger_name("enka_operator::leader"), "operator.leader");
        assert_eq!(logger_name("enka_engine::exec::walk"), "engine.exec.walk");
        assert_eq!(logger_name("enka"), "cmd");
        assert_eq!(logger_name("enka::cli"), "cmd");
        assert_eq!(logger_name("kube_runtime::watcher"), "kube_runtime.watcher");
    }

    #[test]
    fn enka_targets_name_the_workspace_crates() {
        let expanded = with_crate_targets("info,enka=debug");
        for krate in CRATES {
            assert!(expanded.contains(&format!("{krate}=debug")), "{expanded}");
        }
        assert_eq!(
            with_crate_targets("info,enka::operator=debug"),
            "info,enka::operator=debug,enka_operator=debug"
        );
        assert_eq!(
            with_crate_targets("enka::role::loader=trace,kube=warn"),
            "enka::role::loader=trace,enka_project::role::loader=trace,kube=warn"
        );
    }

    #[test]
    fn every_workspace_crate_is_enkas_own() {
        // The crates `enka` depends on by path are the ones whose logs
        // `enka=debug` must reach.
        let manifest = include_str!("../Cargo.toml");
        for line in manifest.lines() {
            if let Some(name) = line.split(" = { path = \"crates/").next()
                && line.contains(" = { path = \"crates/")
            {
                let krate = name.trim().replace('-', "_");
                assert!(
                    CRATES.contains(&krate.as_str()),
                    "{krate} is missing from CRATES"
                );
            }
        }
    }

    #[test]
    fn fields_never_replace_zap_keys() {
        let mut line = Map::new();
        line.insert("level".into(), Json::from("info"));
        insert_field(&mut line, "level".into(), Json::from(3));
        insert_field(&mut line, "message".into(), Json::from("hello"));
        assert_eq!(line["level"], Json::from("info"));
        assert_eq!(line["fields.level"], Json::from(3));
        assert_eq!(line["msg"], Json::from("hello"));
    }
}
