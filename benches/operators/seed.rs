//! The seed's Zundoko operator, unchanged, timed from creating the Hikawa to
//! its Kiyoshi, with where its requests and time go.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

use crate::operator::Flavour;
use crate::scenarios::{
    Bench, FAILED, LIMIT, RESULT, RequestTimes, requests_by_kind, server_times, warm_up,
};
use crate::support::{sum_metric, sum_metric_where};
use crate::workload::create_namespace;

#[derive(Debug)]
pub struct Seed {
    pub seconds: f64,
    pub reconciles: f64,
    pub zundokos: usize,
    /// Time inside runs, and the part of it spent waiting on the API server.
    pub run_seconds: f64,
    pub api_wait_seconds: f64,
    /// Runs that failed on purpose (the seed's `fail` task) and so were
    /// retried after the rate limiter's first step, 5 ms, as upstream does.
    pub failed_runs: f64,
    /// Time runs waited in the work queue past their due time (a watch
    /// event's arrival, or the end of a failed run's backoff).
    pub queue_wait_seconds: f64,
    /// kube-apiserver requests during the song by verb and resource, most
    /// first.
    pub requests: Vec<(String, f64)>,
    /// enka's requests by verb, timed on its side, and the API server's
    /// time on every request of the song.
    pub client_times: RequestTimes,
    pub server_times: RequestTimes,
}

impl Bench<'_> {
    /// The seed's Zundoko operator, unchanged, with a fixed random seed: time
    /// from creating the Hikawa to it saying it is kiyoshied.
    pub async fn seed_song(&self) -> Seed {
        const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";
        let namespace = "bench-seed";
        create_namespace(self.client, namespace).await;
        for crd in ["hikawas", "zundokos", "kiyoshis"] {
            crate::support::install_crd(
                self.client,
                &format!("config/crd/bases/{GROUP}_{crd}.yaml"),
            )
            .await;
        }
        let resource = |version: &str, kind: &str, plural: &str| {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
        };
        for (version, kind, plural) in [
            ("v1beta2", "Hikawa", "hikawas"),
            ("v1beta1", "Zundoko", "zundokos"),
            ("v1beta1", "Kiyoshi", "kiyoshis"),
        ] {
            warm_up(self.client, &resource(version, kind, plural)).await;
        }
        let operator = self
            .start(
                Flavour::Enka,
                "tests/fixtures/zundoko-seed/watches.yaml",
                namespace,
                &[("ENKA_RANDOM_SEED", "42")],
            )
            .await;
        let hikawa_resource = resource("v1beta2", "Hikawa", "hikawas");
        let hikawas: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &hikawa_resource);
        let mut events = watcher::watcher(hikawas.clone(), watcher::Config::default()).boxed();
        let metrics_before = operator.metrics().await;
        let server_before = crate::support::apiserver_metrics(self.client).await;
        let requests_before = requests_by_kind(&server_before);
        let mut hikawa = DynamicObject::new("hikawa", &hikawa_resource);
        // The seed role ignores the interval; the CRD requires one.
        hikawa.data = json!({"spec": {"intervalMillis": 500}});
        let started = Instant::now();
        hikawas
            .create(&PostParams::default(), &hikawa)
            .await
            .expect("creating the Hikawa");
        let sung = tokio::time::timeout(LIMIT, async {
            while let Ok(Some(event)) = events.try_next().await {
                if let Event::Apply(h) | Event::InitApply(h) = event
                    && h.data["status"]["kiyoshied"] == json!(true)
                {
                    return Instant::now();
                }
            }
            panic!("the Hikawa watch ended:\n{}", operator.log_tail());
        })
        .await
        .unwrap_or_else(|_| panic!("no Kiyoshi:\n{}", operator.log_tail()));
        let metrics_after = operator.metrics().await;
        let server_after = crate::support::apiserver_metrics(self.client).await;
        let requests_after = requests_by_kind(&server_after);
        let mut requests: Vec<(String, f64)> = requests_after
            .iter()
            .map(|(kind, after)| {
                (
                    kind.clone(),
                    after - requests_before.get(kind).copied().unwrap_or(0.0),
                )
            })
            .filter(|(_, n)| *n > 0.0)
            .collect();
        requests.sort_by(|a, b| b.1.total_cmp(&a.1));
        let delta =
            |name: &str| sum_metric(&metrics_after, name) - sum_metric(&metrics_before, name);
        let zundokos: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            namespace,
            &resource("v1beta1", "Zundoko", "zundokos"),
        );
        let zundokos = zundokos
            .list(&ListParams::default())
            .await
            .expect("listing Zundokos")
            .items
            .len();
        operator.stop();
        let seed = Seed {
            seconds: sung.duration_since(started).as_secs_f64(),
            reconciles: delta("ansible_operator_reconcile_result"),
            zundokos,
            run_seconds: delta("ansible_operator_reconciles_sum"),
            api_wait_seconds: delta("enka_api_wait_seconds_sum"),
            failed_runs: sum_metric_where(&metrics_after, RESULT, FAILED)
                - sum_metric_where(&metrics_before, RESULT, FAILED),
            queue_wait_seconds: delta("workqueue_queue_duration_seconds_sum"),
            requests,
            client_times: RequestTimes::between(&metrics_before, &metrics_after),
            server_times: server_times(&server_before, &server_after),
        };
        eprintln!(
            "bench: seed song: Kiyoshi in {:.2} s after {} Zundokos, {} reconciles ({} failed on purpose); {:.2} s in runs, {:.2} s of it waiting on the API server",
            seed.seconds,
            seed.zundokos,
            seed.reconciles,
            seed.failed_runs,
            seed.run_seconds,
            seed.api_wait_seconds
        );
        eprintln!(
            "bench: seed song: kube-apiserver requests by verb and resource (the harness's create and watch included): {:?}",
            seed.requests
        );
        eprintln!(
            "bench: seed song: enka's requests, per reconcile: {}; the API server's time on all requests, per reconcile: {}",
            seed.client_times.per_run(seed.reconciles),
            seed.server_times.per_run(seed.reconciles)
        );
        seed
    }
}
