//! `enka run --trace-otlp-endpoint`: the spans enka makes (a reconcile,
//! each task in it, each API call a task makes) exported over OTLP/HTTP, so
//! a slow reconcile shows its slow task and request in any tracing backend.
//!
//! tracing-opentelemetry turns tracing's spans into OpenTelemetry spans; the
//! SDK's batch processor sends them from a Tokio task, so exporting never
//! waits on a reconcile nor a reconcile on the collector. Only spans inside
//! a reconcile are kept: kube's per-request `HTTP` spans outside one (watches,
//! leases) would each be a trace of their own.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::dynamic_filter_fn;
use tracing_subscriber::registry::LookupSpan;

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not an `http://` URL.
    #[error("--trace-otlp-endpoint {0:?}: expected an http:// URL of an OTLP/HTTP collector")]
    Endpoint(String),
    /// The SDK refused the configuration.
    #[error("--trace-otlp-endpoint: {0}")]
    Build(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The traces path of an OTLP/HTTP collector: a bare `http://host:4318`
/// gets the standard `/v1/traces`, a URL with a path is used as given.
pub fn traces_url(endpoint: &str) -> Result<String, TelemetryError> {
    let uri: http::Uri = endpoint
        .parse()
        .map_err(|_| TelemetryError::Endpoint(endpoint.to_owned()))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(TelemetryError::Endpoint(endpoint.to_owned()));
    }
    Ok(match uri.path() {
        "" | "/" => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
        _ => endpoint.to_owned(),
    })
}

/// A tracer provider exporting to `endpoint` in batches; must be built
/// inside the Tokio runtime that will carry the exports.
pub fn otlp_provider(endpoint: &str) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(traces_url(endpoint)?)
        .build()?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("enka")
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build())
}

/// The layer that hands spans to `provider`: enka's own spans and info
/// events, and kube's request spans made inside one of them.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let tracer = provider.tracer("enka");
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(dynamic_filter_fn(|meta, cx| {
            let target = meta.target();
            if target.starts_with("enka") {
                meta.is_span() || *meta.level() <= Level::INFO
            } else if target.starts_with("kube_client") && meta.is_span() {
                cx.lookup_current().is_some()
            } else {
                false
            }
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_base_gets_the_traces_path() {
        assert_eq!(
            traces_url("http://collector:4318").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/custom/traces").unwrap(),
            "http://collector:4318/custom/traces"
        );
        assert!(traces_url("collector:4318").is_err());
        assert!(traces_url("https://collector:4318").is_err());
        assert!(traces_url("not a url").is_err());
    }
}
