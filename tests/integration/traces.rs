//! Per-task timings and traces: with `--trace-otlp-endpoint`, a reconcile is
//! one trace holding a span per task, the API calls of a task inside its
//! span; `/metrics` has `enka_task_duration_seconds` per task; a custom
//! resource at verbosity 1 logs each task's outcome and duration.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::{Request, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_env::KubeEnv;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;

use crate::enka::Enka;
use crate::support::{eventually, install_crd};

const ROLE: &str = r#"
- name: compute the size
  set_fact:
    doubled: "{{ size * 2 }}"
- name: say it
  debug:
    msg: "doubled is {{ doubled }}"
- name: write the output
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-out'
        namespace: '{{ ansible_operator_meta.namespace }}'
      data:
        doubled: '{{ doubled }}'
"#;

/// The tasks of [`ROLE`], in order.
const TASKS: [&str; 3] = ["compute the size", "say it", "write the output"];

/// A one-endpoint OTLP/HTTP collector: every span it was sent.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    /// Listens on a free local port; the endpoint to give enka.
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let collector = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let collector = collector.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let collector = collector.clone();
                        async move { collector.receive(request).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        format!("http://{address}")
    }

    async fn receive(
        &self,
        request: Request<Incoming>,
    ) -> Result<Response<http_body_util::Full<bytes::Bytes>>, hyper::Error> {
        assert_eq!(request.uri().path(), "/v1/traces");
        let body = request.into_body().collect().await?.to_bytes();
        let export = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
        let mut spans = self.spans.lock().unwrap();
        for resource in export.resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        Ok(Response::new(http_body_util::Full::default()))
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            AnyValue::StringValue(text) => Some(text.as_str()),
            _ => None,
        })
}

fn sample_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("enka.test", "v1", "Sample"),
        "samples",
    )
}

#[tokio::test]
async fn a_reconcile_is_a_trace_with_a_span_per_task() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/fixtures/crds/enka.test_samples.yaml").await;
    let ns = env.namespace("traces").await.unwrap();
    let dir = std::env::temp_dir().join(format!("enka-project-traces-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("roles/sample/tasks")).unwrap();
    std::fs::write(
        dir.join("watches.yaml"),
        "- version: v1\n  group: enka.test\n  kind: Sample\n  role: sample\n  reconcilePeriod: 0s\n",
    )
    .unwrap();
    std::fs::write(dir.join("roles/sample/tasks/main.yml"), ROLE).unwrap();
    let collector = Collector::default();
    let endpoint = collector.start().await;
    let watches = dir.join("watches.yaml").display().to_string();
    let mut enka = Enka::start_with_args(
        env,
        &watches,
        &ns,
        &[("OTEL_BSP_SCHEDULE_DELAY", "200"), ("ENKA_LOG", "info")],
        &["--trace-otlp-endpoint", &endpoint],
        "",
    );
    let samples: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &sample_resource());
    let mut sample = DynamicObject::new("s1", &sample_resource());
    sample.metadata.annotations = Some(
        [(
            "ansible.sdk.operatorframework.io/verbosity".to_owned(),
            "1".to_owned(),
        )]
        .into(),
    );
    sample.data = json!({ "spec": { "size": 21 } });
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    eventually("the role to write", Duration::from_secs(30), || {
        let config_maps = config_maps.clone();
        async move {
            let cm = config_maps.get_opt("s1-out").await.unwrap()?;
            (cm.data?.get("doubled")?.as_str() == "42").then_some(())
        }
    })
    .await;

    // The histogram has each task of the role.
    let port = enka.metrics_port;
    let text = eventually(
        "the task histogram",
        Duration::from_secs(10),
        || async move {
            let (_, text) = crate::support::http_get(port, "/metrics").await;
            text.contains("enka_task_duration_seconds_count{")
                .then_some(text)
        },
    )
    .await;
    for task in TASKS {
        let series = format!(
            "enka_task_duration_seconds_count{{gvk=\"enka.test/v1, Kind=Sample\",role=\"sample\",task=\"{task}\"}}"
        );
        assert!(text.contains(&series), "{series} in\n{text}");
    }

    // One trace per reconcile: its reconcile span holds one span per task,
    // in order, and the k8s task's API calls are inside that task's span.
    let spans = eventually(
        "the first reconcile's trace",
        Duration::from_secs(20),
        || {
            let collector = collector.clone();
            async move {
                let spans = collector.spans();
                let tasks = spans.iter().filter(|s| s.name == "task").count();
                (tasks >= TASKS.len()).then_some(spans)
            }
        },
    )
    .await;
    let by_id: HashMap<&[u8], &Span> = spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    let reconcile = spans
        .iter()
        .find(|s| s.name == "reconcile" && attribute(s, "name") == Some("s1"))
        .unwrap_or_else(|| {
            panic!(
                "no reconcile span among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    let mut tasks: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "task" && s.parent_span_id == reconcile.span_id)
        .collect();
    tasks.sort_by_key(|s| s.start_time_unix_nano);
    let names: Vec<&str> = tasks
        .iter()
        .filter_map(|s| attribute(s, "task_name"))
        .collect();
    assert_eq!(names, TASKS, "task spans of the reconcile");
    for task in &tasks {
        assert_eq!(task.trace_id, reconcile.trace_id);
        assert_eq!(attribute(task, "role"), Some("sample"));
        assert_eq!(attribute(task, "via"), Some("native"));
        assert!(task.end_time_unix_nano >= task.start_time_unix_nano);
        let location = attribute(task, "code_location").unwrap_or_default();
        assert!(
            location.contains("roles/sample/tasks/main.yml:"),
            "{location}"
        );
    }
    assert_eq!(attribute(tasks[2], "outcome"), Some("changed"));
    assert_eq!(attribute(tasks[0], "outcome"), Some("ok"));
    let requests: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == tasks[2].span_id)
        .collect();
    assert!(
        !requests.is_empty(),
        "no API call span inside the k8s task; spans: {:?}",
        spans
            .iter()
            .map(|s| (
                &s.name,
                by_id.get(s.parent_span_id.as_slice()).map(|p| &p.name)
            ))
            .collect::<Vec<_>>()
    );
    // No span of a task outside a reconcile (watches are not traced).
    assert!(
        spans.iter().filter(|s| s.name == "task").all(|s| by_id
            .get(s.parent_span_id.as_slice())
            .is_some_and(|p| p.name == "reconcile")),
        "a task span without its reconcile"
    );

    // Verbosity 1 on the object: each task logged with its duration.
    enka.terminate(Duration::from_secs(10));
    let log = enka.log();
    for task in TASKS {
        assert!(
            log.lines().any(|l| l.contains("task finished")
                && l.contains(task)
                && l.contains("duration_ms")),
            "no timing line for {task:?} in\n{log}"
        );
    }
    drop(enka);
    let _ = std::fs::remove_dir_all(&dir);
    env.delete_namespace(&ns).await.unwrap();
}
