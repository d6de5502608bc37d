//! The measurements, one method per scenario.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube_env::KubeEnv;
use serde_json::json;

use crate::Plan;
use crate::operator::{Flavour, Operator};
use crate::requests::{self, Requests};
use crate::support::{sum_metric, sum_metric_where};

pub const RESULT: &str = "ansible_operator_reconcile_result";
pub const FAILED: &str = "result=\"failed\"";
use crate::usage::{PeakSampler, Usage};
use crate::workload::{self, Observer, Until, create_many, create_namespace, memcached_resource};

/// How long any one wait may take before the bench gives up loudly.
pub const LIMIT: Duration = Duration::from_secs(1800);
/// How long the machine idles before each latency sample.
pub const IDLE_BEFORE_SAMPLE: Duration = Duration::from_millis(500);
/// Creates in flight during bursts, like a `kubectl apply` of many files.
pub const PARALLEL_CREATES: usize = 32;

pub struct Bench<'a> {
    pub env: &'a KubeEnv,
    pub client: &'a Client,
    pub plan: &'a Plan,
    pub log_dir: &'a Path,
}

/// One operator's figures on the memcached workload.
#[derive(Debug)]
pub struct Side {
    pub latency: Vec<Duration>,
    pub idle: Usage,
    pub idle_window: Duration,
    pub idle_cpu_seconds: f64,
    pub burst: Burst,
    pub after_burst: Usage,
    /// Whole-run averages over the latency phase, where runs do not overlap.
    pub per_reconcile: PerReconcile,
    /// The API server's time on the latency phase's requests.
    pub server: RequestTimes,
}

/// The bare controller's latency samples, its requests as it timed them,
/// and the API server's time on the phase's requests.
#[derive(Debug, Default)]
pub struct BareSide {
    pub latency: Vec<Duration>,
    pub requests: RequestTimes,
    pub server: RequestTimes,
}

#[derive(Debug)]
pub struct Burst {
    pub crs: usize,
    pub seconds: f64,
    pub reconciles: f64,
    pub operator_cpu_seconds: f64,
    pub control_plane_cpu_seconds: f64,
    pub peak_tree_rss_bytes: u64,
}

#[derive(Debug, Default)]
pub struct PerReconcile {
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// enka only: time inside API calls (`enka_api_wait_seconds`).
    pub api_wait_seconds: Option<f64>,
    /// From a trigger (a watch event) to its reconcile's start, on average
    /// (`workqueue_queue_duration_seconds`, which both operators export).
    pub queue_wait_seconds: Option<f64>,
    /// enka only: the API requests of the phase as enka timed them.
    pub requests: RequestTimes,
    /// The runs the averages are over.
    pub runs: f64,
}

/// Requests to the API server by verb: how many and how long each took
/// until its response's headers, summed. enka's come from its
/// `rest_client_request_duration_seconds`, the bare controller's from its
/// own clock around each call.
#[derive(Debug, Default, Clone)]
pub struct RequestTimes(std::collections::BTreeMap<String, (f64, f64)>);

impl RequestTimes {
    pub fn add(&mut self, verb: &str, took: Duration) {
        let entry = self.0.entry(verb.to_owned()).or_default();
        entry.0 += 1.0;
        entry.1 += took.as_secs_f64();
    }

    /// The requests between two scrapes of enka's metrics.
    pub fn between(before: &str, after: &str) -> RequestTimes {
        const NAME: &str = "rest_client_request_duration_seconds";
        let mut times = RequestTimes::default();
        // HTTP methods, as client-go labels them: a list is a GET.
        for verb in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            let label = format!("verb=\"{verb}\"");
            let delta = |name: &str| {
                sum_metric_where(after, name, &label) - sum_metric_where(before, name, &label)
            };
            let count = delta(&format!("{NAME}_count"));
            if count > 0.0 {
                times
                    .0
                    .insert(verb.to_owned(), (count, delta(&format!("{NAME}_sum"))));
            }
        }
        times
    }

    /// `PUT 2.0 × 1.31 ms, …` with counts per `runs`.
    pub fn per_run(&self, runs: f64) -> String {
        self.0
            .iter()
            .map(|(verb, (count, seconds))| {
                format!(
                    "{verb} {:.1} × {:.2} ms",
                    count / runs,
                    seconds / count * 1e3
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Mean milliseconds of one request of `verb`.
    pub fn mean_ms(&self, verb: &str) -> Option<f64> {
        self.0
            .get(verb)
            .map(|(count, seconds)| seconds / count * 1e3)
    }
}

/// The load run on shards of a ring of timebertt's sharder.
#[derive(Debug)]
pub struct ShardedLoad {
    pub shards: usize,
    pub crs: usize,
    /// From the first create to every Memcached Successful.
    pub seconds: f64,
    /// Each replica's RSS before the Memcacheds are created.
    pub idle_rss_bytes: Vec<u64>,
    /// Each replica's peak RSS.
    pub peak_rss_bytes: Vec<u64>,
    /// Each replica's RSS once every Memcached is Successful and nothing
    /// runs: what holding its share costs.
    pub final_rss_bytes: Vec<u64>,
    /// kube-apiserver requests in the run, less the harness's own, per
    /// Memcached.
    pub requests_per_cr: f64,
    /// The same by verb and resource, most first.
    pub requests_each: Vec<(String, f64)>,
    pub reconciles: f64,
    /// Each replica's reconciles: one per Memcached it was assigned.
    pub reconciles_per_replica: Vec<f64>,
    pub failed_reconciles: f64,
}

impl ShardedLoad {
    /// The replica with the most reconciles, and how many it ran.
    pub fn busiest_replica(&self) -> (usize, f64) {
        self.reconciles_per_replica
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, 0.0),
                |best, (i, n)| if n > best.1 { (i, n) } else { best },
            )
    }
}

/// The load run: one cluster-wide enka, Memcacheds over many namespaces.
#[derive(Debug)]
pub struct Load {
    pub namespaces: usize,
    pub crs: usize,
    /// From the first create to every Memcached Successful.
    pub seconds: f64,
    pub peak_rss_bytes: u64,
    pub final_rss_bytes: u64,
    /// kube-apiserver requests in the run, less the harness's own, per
    /// Memcached.
    pub requests_per_cr: f64,
    /// The same by verb and resource, most first.
    pub requests_each: Vec<(String, f64)>,
    pub reconciles: f64,
    pub failed_reconciles: f64,
}

#[derive(Debug)]
pub struct ScalePoint {
    pub crs: usize,
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub cpu_seconds: f64,
    pub converge_seconds: f64,
}

/// One operator on a benches/bridged role.
pub struct BridgedSide {
    pub latency: Vec<Duration>,
    /// RSS of the operator and its child processes (enka's Ansible worker,
    /// upstream's Ansible runs) after the latency run.
    pub tree_rss_bytes: u64,
    /// The same after [`BRIDGED_IDLE`] without a request.
    pub idle_tree_rss_bytes: u64,
}

/// How long the bridged roles' operators stay idle after their run before
/// their memory is read again; enka runs them with its workers' idle exit
/// set a little shorter (it is 60 s by default).
pub const BRIDGED_IDLE: Duration = Duration::from_secs(8);
const BRIDGED_IDLE_EXIT: &str = "5s";

impl Bench<'_> {
    fn memcacheds(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &memcached_resource())
    }

    pub(crate) async fn start(
        &self,
        flavour: Flavour,
        watches: &str,
        namespace: &str,
        env: &[(&str, &str)],
    ) -> Operator {
        Operator::start(
            flavour,
            self.env,
            &crate::support::repo_path(watches),
            namespace,
            env,
            self.log_dir,
        )
        .await
    }

    /// Create-to-Deployment latency of the bare controller, and its
    /// requests' times.
    pub async fn bare_latency(&self) -> BareSide {
        let namespace = "bench-bare";
        create_namespace(self.client, namespace).await;
        let observer = Observer::start(self.client, namespace).await;
        let (controller, requests) =
            crate::bare::spawn(self.client.clone(), namespace.to_owned()).await;
        let server_before = crate::support::apiserver_metrics(self.client).await;
        let latency = self.latency_run(namespace, &observer, None).await;
        let server = server_times(
            &server_before,
            &crate::support::apiserver_metrics(self.client).await,
        );
        controller.abort();
        let requests = requests.lock().expect("bare request times").clone();
        let runs = latency.len() as f64;
        eprintln!(
            "bench: bare      p50 {:?} p99 {:?}; per run {}; the API server's time: {}",
            workload::percentile(&latency, 50.0),
            workload::percentile(&latency, 99.0),
            requests.per_run(runs),
            server.per_run(runs),
        );
        BareSide {
            latency,
            requests,
            server,
        }
    }

    /// Create → Deployment latency of the memcached role with one task that
    /// enka hands to the Ansible worker (benches/bridged/watches-<variant>),
    /// and the operator's memory with its child processes after it.
    pub async fn bridged_latency(&self, flavour: Flavour, variant: &str) -> BridgedSide {
        let namespace = format!("bench-{}-{variant}", flavour.name());
        create_namespace(self.client, &namespace).await;
        let observer = Observer::start(self.client, &namespace).await;
        let watches = format!("benches/bridged/watches-{variant}.yaml");
        let idle_exit = [("ENKA_ANSIBLE_WORKER_IDLE_EXIT", BRIDGED_IDLE_EXIT)];
        let operator = self.start(flavour, &watches, &namespace, &idle_exit).await;
        settle(&operator).await;
        let latency = self
            .latency_run(&namespace, &observer, Some(&operator))
            .await;
        let usage = operator.usage();
        tokio::time::sleep(BRIDGED_IDLE).await;
        let idle = operator.usage();
        eprintln!(
            "bench: {:9} {variant} role: latency p50 {:?} p99 {:?}; {:.1} MiB with child processes, {:.1} MiB after {BRIDGED_IDLE:?} idle",
            flavour.name(),
            workload::percentile(&latency, 50.0),
            workload::percentile(&latency, 99.0),
            mib(usage.tree_rss_bytes),
            mib(idle.tree_rss_bytes)
        );
        operator.stop();
        BridgedSide {
            latency,
            tree_rss_bytes: usage.tree_rss_bytes,
            idle_tree_rss_bytes: idle.tree_rss_bytes,
        }
    }

    /// Latency, burst and resource use of one operator on its own namespace.
    pub async fn side_by_side(&self, flavour: Flavour) -> Side {
        let namespace = format!("bench-{}", flavour.name());
        create_namespace(self.client, &namespace).await;
        let observer = Observer::start(self.client, &namespace).await;
        let operator = self
            .start(flavour, workload::WATCHES, &namespace, &[])
            .await;
        settle(&operator).await;

        let idle_window = if self.plan.docs || self.plan.upstream {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(2)
        };
        let before = operator.usage();
        tokio::time::sleep(idle_window).await;
        let idle = operator.usage();
        let idle_cpu_seconds = idle.cpu_seconds - before.cpu_seconds;
        eprintln!(
            "bench: {:9} idle: {:.1} MiB ({:.1} MiB heap), {:.3} CPU s in {idle_window:?}",
            flavour.name(),
            mib(idle.rss_bytes),
            mib(idle.anon_bytes),
            idle_cpu_seconds
        );

        let metrics_before = operator.metrics().await;
        let cpu_before = operator.usage().cpu_seconds;
        let server_before = crate::support::apiserver_metrics(self.client).await;
        let latency = self
            .latency_run(&namespace, &observer, Some(&operator))
            .await;
        let server = server_times(
            &server_before,
            &crate::support::apiserver_metrics(self.client).await,
        );
        let metrics_after = operator.metrics().await;
        let cpu_after = operator.usage().cpu_seconds;
        let per_reconcile = per_reconcile(&metrics_before, &metrics_after, cpu_after - cpu_before);
        eprintln!(
            "bench: {:9} latency p50 {:?} p99 {:?}; per run {:.2} ms wall ({:.2} ms waiting on the API server), {:.2} ms CPU; {}",
            flavour.name(),
            workload::percentile(&latency, 50.0),
            workload::percentile(&latency, 99.0),
            per_reconcile.wall_seconds * 1e3,
            per_reconcile.api_wait_seconds.unwrap_or(f64::NAN) * 1e3,
            per_reconcile.cpu_seconds * 1e3,
            per_reconcile.requests.per_run(per_reconcile.runs),
        );
        eprintln!(
            "bench: {:9} the API server's time per memcached: {}",
            flavour.name(),
            server.per_run(latency.len() as f64)
        );

        let burst = self.burst(&namespace, &observer, &operator).await;
        let after_burst = operator.usage();
        eprintln!(
            "bench: {:9} burst of {}: {:.2} s, {:.0} reconciles ({:.0}/s), {:.2} CPU s (control plane {:.2}), {:.1} MiB after",
            flavour.name(),
            burst.crs,
            burst.seconds,
            burst.reconciles,
            burst.reconciles / burst.seconds,
            burst.operator_cpu_seconds,
            burst.control_plane_cpu_seconds,
            mib(after_burst.rss_bytes)
        );
        operator.stop();
        Side {
            latency,
            idle,
            idle_window,
            idle_cpu_seconds,
            burst,
            after_burst,
            per_reconcile,
            server,
        }
    }

    /// Creates Memcacheds one at a time; for each, the time from the create
    /// call to the observer seeing its Deployment. The next one is created
    /// once the operator is idle again, so runs never overlap.
    async fn latency_run(
        &self,
        namespace: &str,
        observer: &Observer,
        operator: Option<&Operator>,
    ) -> Vec<Duration> {
        let api = self.memcacheds(namespace);
        let mut samples = Vec::with_capacity(self.plan.latency_crs);
        for i in 0..self.plan.latency_crs {
            let name = format!("latency-{i:04}");
            let started = Instant::now();
            workload::create_memcached(&api, &name, 1).await;
            let names = [name];
            let seen = observer.await_all(&names, Until::Deployment, LIMIT).await;
            samples.push(seen.duration_since(started));
            observer.await_all(&names, Until::Successful, LIMIT).await;
            if let Some(operator) = operator {
                settle(operator).await;
            }
            // Every sample starts from a machine idle for the same time, the
            // bare controller's too: one created straight after the last
            // finished finds the API server's threads awake and its caches
            // warm: in one profile its create alone took 1.2 ms against
            // 3.0 ms for one created after an operator had settled.
            tokio::time::sleep(IDLE_BEFORE_SAMPLE).await;
        }
        samples
    }

    async fn burst(&self, namespace: &str, observer: &Observer, operator: &Operator) -> Burst {
        let api = self.memcacheds(namespace);
        let names: Vec<String> = (0..self.plan.burst_crs)
            .map(|i| format!("burst-{i:05}"))
            .collect();
        let reconciles_before = operator.reconciles().await;
        let cpu_before = operator.usage().cpu_seconds;
        let control_plane_before = self.control_plane_cpu();
        let sampler = PeakSampler::start(operator.pid());
        let started = Instant::now();
        create_many(&api, &names, PARALLEL_CREATES).await;
        let done = observer.await_all(&names, Until::Successful, LIMIT).await;
        let seconds = done.duration_since(started).as_secs_f64();
        // The last run counts itself after the status write the observer saw.
        until_nothing_running(operator).await;
        let reconciles = operator.reconciles().await - reconciles_before;
        let operator_cpu_seconds = operator.usage().cpu_seconds - cpu_before;
        let control_plane_cpu_seconds = self.control_plane_cpu() - control_plane_before;
        settle(operator).await;
        Burst {
            crs: names.len(),
            seconds,
            reconciles,
            operator_cpu_seconds,
            control_plane_cpu_seconds,
            peak_tree_rss_bytes: sampler.finish(),
        }
    }

    fn control_plane_cpu(&self) -> f64 {
        self.env
            .pids()
            .into_iter()
            .filter_map(Usage::of)
            .map(|u| u.cpu_seconds)
            .sum()
    }

    /// A burst on an enka allowed `concurrency` reconciles at once instead
    /// of the default (one per CPU, as upstream): where the API server, not
    /// enka, sets the pace.
    pub async fn enka_wide_burst(&self, concurrency: u16) -> Burst {
        let namespace = format!("bench-enka-x{concurrency}");
        create_namespace(self.client, &namespace).await;
        let observer = Observer::start(self.client, &namespace).await;
        let flag = format!("--max-concurrent-reconciles={concurrency}");
        let operator = Operator::start_with_args(
            Flavour::Enka,
            self.env,
            &crate::support::repo_path(workload::WATCHES),
            &namespace,
            &[],
            &[&flag],
            self.log_dir,
        )
        .await;
        settle(&operator).await;
        let burst = self.burst(&namespace, &observer, &operator).await;
        eprintln!(
            "bench: enka ×{concurrency} burst of {}: {:.2} s, {:.0} reconciles/s, CPU cores: enka {:.2}, control plane {:.2}",
            burst.crs,
            burst.seconds,
            burst.reconciles / burst.seconds,
            burst.operator_cpu_seconds / burst.seconds,
            burst.control_plane_cpu_seconds / burst.seconds,
        );
        operator.stop();
        burst
    }

    /// 5000 Memcacheds over 50 namespaces, created as fast as the harness
    /// can, on one enka watching the whole cluster: time until every one is
    /// Successful, peak memory, and what it cost the API server.
    pub async fn enka_load(&self) -> Load {
        let (namespaces, per_namespace) = self.plan.load;
        let spaces = self.load_namespaces("bench-load").await;
        let operator = self.start(Flavour::Enka, workload::WATCHES, "", &[]).await;
        settle(&operator).await;
        let crs = namespaces * per_namespace;
        let requests_before = Requests::read(self.client).await;
        let reconciles_before = operator.reconciles().await;
        let sampler = PeakSampler::start(operator.pid());
        let started = Instant::now();
        let polls = self
            .create_and_converge(&spaces, per_namespace, &[&operator])
            .await;
        let seconds = started.elapsed().as_secs_f64();
        until_nothing_running(&operator).await;
        let peak_rss_bytes = sampler.finish();
        // Less the harness's own requests in the window: the creates, the
        // polls and the second metrics read.
        let requests = Requests::read(self.client)
            .await
            .since(&requests_before, &requests::harness(crs, polls));
        let metrics = operator.metrics().await;
        let load = Load {
            namespaces,
            crs,
            seconds,
            peak_rss_bytes,
            final_rss_bytes: operator.usage().rss_bytes,
            requests_per_cr: requests.total() / crs as f64,
            requests_each: requests.per(crs),
            reconciles: operator.reconciles().await - reconciles_before,
            failed_reconciles: sum_metric_where(
                &metrics,
                "ansible_operator_reconcile_result",
                "result=\"failed\"",
            ),
        };
        eprintln!(
            "bench: load of {crs} Memcacheds over {namespaces} namespaces: all Successful in {seconds:.1} s, peak RSS {:.1} MiB, {}, {} reconciles, {} failed",
            mib(load.peak_rss_bytes),
            requests::account(&load.requests_each),
            load.reconciles,
            load.failed_reconciles
        );
        operator.stop();
        for namespace in &spaces {
            let _ = self.env.delete_namespace(namespace).await;
        }
        load
    }

    /// The load's namespaces (`<prefix>-00`, `-01`, …), created.
    async fn load_namespaces(&self, prefix: &str) -> Vec<String> {
        let spaces: Vec<String> = (0..self.plan.load.0)
            .map(|i| format!("{prefix}-{i:02}"))
            .collect();
        for namespace in &spaces {
            create_namespace(self.client, namespace).await;
        }
        spaces
    }

    /// Creates `per_namespace` Memcacheds in each of `spaces`, as fast as
    /// PARALLEL_CREATES creates in flight allow, and waits until every one
    /// is Successful; the number of lists that took (the harness's own
    /// requests).
    async fn create_and_converge(
        &self,
        spaces: &[String],
        per_namespace: usize,
        operators: &[&Operator],
    ) -> usize {
        let started = Instant::now();
        let crs = spaces.len() * per_namespace;
        let objects: Vec<(Api<DynamicObject>, String)> = spaces
            .iter()
            .flat_map(|namespace| {
                (0..per_namespace).map(|i| (self.memcacheds(namespace), format!("load-{i:04}")))
            })
            .collect();
        futures::stream::iter(&objects)
            .for_each_concurrent(PARALLEL_CREATES, |(api, name)| {
                workload::create_memcached(api, name, 1)
            })
            .await;
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &memcached_resource());
        let mut polls = 0usize;
        loop {
            polls += 1;
            let list = all
                .list(&ListParams::default())
                .await
                .unwrap_or_else(|e| panic!("listing Memcacheds: {e}"));
            let done = list
                .items
                .iter()
                .filter(|m| {
                    m.metadata
                        .namespace
                        .as_ref()
                        .is_some_and(|ns| spaces.contains(ns))
                })
                .filter(|m| workload::is_successful(m))
                .count();
            if done == crs {
                return polls;
            }
            assert!(
                started.elapsed() < LIMIT,
                "load: {done} of {crs} Successful after {LIMIT:?}:\n{}",
                operators
                    .iter()
                    .map(|o| o.log_tail())
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The load run on `shards` enka replicas as shards of one ring of
    /// timebertt's sharder, each watching the whole cluster: time until
    /// every Memcached is Successful, each replica's peak RSS, and API
    /// requests per Memcached.
    pub async fn enka_sharded_load(&self, shards: usize) -> ShardedLoad {
        let (namespaces, per_namespace) = self.plan.load;
        let spaces = self.load_namespaces(&format!("bench-shard{shards}")).await;
        let sharder = crate::ring::Sharder::start(
            self.env,
            self.client,
            json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": spaces,
            }]}),
        )
        .await;
        let mut operators = Vec::with_capacity(shards);
        for i in 0..shards {
            let name = format!("bench-{shards}-{i}");
            let operator = Operator::start_with_args(
                Flavour::Enka,
                self.env,
                &crate::support::repo_path(workload::WATCHES),
                "",
                &[],
                &[
                    "--sharding-ring",
                    crate::ring::RING,
                    "--shard-name",
                    &name,
                    "--leader-election-namespace=default",
                ],
                self.log_dir,
            )
            .await;
            operators.push(operator);
        }
        sharder.await_available(self.client, shards as i64).await;
        let crs = namespaces * per_namespace;
        let requests_before = Requests::read(self.client).await;
        let idle_rss_bytes: Vec<u64> = operators.iter().map(|o| o.usage().rss_bytes).collect();
        let samplers: Vec<PeakSampler> = operators
            .iter()
            .map(|o| PeakSampler::start(o.pid()))
            .collect();
        let started = Instant::now();
        let refs: Vec<&Operator> = operators.iter().collect();
        let polls = self
            .create_and_converge(&spaces, per_namespace, &refs)
            .await;
        let seconds = started.elapsed().as_secs_f64();
        for operator in &operators {
            until_nothing_running(operator).await;
        }
        let peak_rss_bytes: Vec<u64> = samplers.into_iter().map(PeakSampler::finish).collect();
        let final_rss_bytes: Vec<u64> = operators.iter().map(|o| o.usage().rss_bytes).collect();
        let requests = Requests::read(self.client)
            .await
            .since(&requests_before, &requests::harness(crs, polls));
        let mut reconciles_per_replica = Vec::with_capacity(shards);
        let mut failed_reconciles = 0.0;
        for operator in &operators {
            let metrics = operator.metrics().await;
            reconciles_per_replica.push(sum_metric(&metrics, RESULT));
            failed_reconciles += sum_metric_where(&metrics, RESULT, FAILED);
        }
        let reconciles = reconciles_per_replica.iter().sum();
        let load = ShardedLoad {
            shards,
            crs,
            seconds,
            idle_rss_bytes,
            peak_rss_bytes,
            final_rss_bytes,
            requests_per_cr: requests.total() / crs as f64,
            requests_each: requests.per(crs),
            reconciles,
            reconciles_per_replica,
            failed_reconciles,
        };
        eprintln!(
            "bench: sharded load of {crs} Memcacheds on {shards} shard(s): all Successful in {seconds:.1} s, RSS per replica before {:?}, peak {:?}, after {:?} MiB, {}, {} reconciles ({:?} per replica), {} failed",
            tenths(&load.idle_rss_bytes),
            tenths(&load.peak_rss_bytes),
            tenths(&load.final_rss_bytes),
            requests::account(&load.requests_each),
            load.reconciles,
            load.reconciles_per_replica,
            load.failed_reconciles
        );
        for operator in operators {
            operator.stop();
        }
        for namespace in &spaces {
            let _ = self.env.delete_namespace(namespace).await;
        }
        sharder.delete_ring(self.client).await;
        drop(sharder);
        load
    }

    /// enka's memory and CPU as the number of Memcacheds grows.
    pub async fn enka_scale(&self) -> Vec<ScalePoint> {
        let namespace = "bench-scale";
        create_namespace(self.client, namespace).await;
        let observer = Observer::start(self.client, namespace).await;
        let operator = self
            .start(Flavour::Enka, workload::WATCHES, namespace, &[])
            .await;
        settle(&operator).await;
        let api = self.memcacheds(namespace);
        let idle = operator.usage();
        let mut points = vec![ScalePoint {
            crs: 0,
            rss_bytes: idle.rss_bytes,
            anon_bytes: idle.anon_bytes,
            cpu_seconds: idle.cpu_seconds,
            converge_seconds: 0.0,
        }];
        let mut names: Vec<String> = Vec::new();
        for &target in &self.plan.scale {
            let new: Vec<String> = (names.len()..target)
                .map(|i| format!("scale-{i:05}"))
                .collect();
            let started = Instant::now();
            create_many(&api, &new, PARALLEL_CREATES).await;
            names.extend(new);
            let done = observer.await_all(&names, Until::Successful, LIMIT).await;
            settle(&operator).await;
            let usage = operator.usage();
            let point = ScalePoint {
                crs: target,
                rss_bytes: usage.rss_bytes,
                anon_bytes: usage.anon_bytes,
                cpu_seconds: usage.cpu_seconds,
                converge_seconds: done.duration_since(started).as_secs_f64(),
            };
            eprintln!(
                "bench: enka at {target} Memcacheds: {:.1} MiB ({:.1} MiB heap), {:.2} CPU s in all, converged in {:.1} s",
                mib(point.rss_bytes),
                mib(point.anon_bytes),
                point.cpu_seconds,
                point.converge_seconds
            );
            points.push(point);
        }
        operator.stop();
        points
    }
}

/// MiB to a tenth, for a log line.
fn tenths(bytes: &[u64]) -> Vec<f64> {
    bytes
        .iter()
        .map(|b| (mib(*b) * 10.0).round() / 10.0)
        .collect()
}

/// kube-apiserver's `apiserver_request_total` summed by verb and resource
/// (`PATCH hikawas/status`), over codes and scopes.
/// The value of the label `name` in one sample line of a /metrics text
/// (empty when the sample has no such label).
pub fn label_value(sample: &str, name: &str) -> String {
    let key = format!("{name}=\"");
    sample
        .split_once(&key)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(value, _)| value.to_owned())
        .unwrap_or_default()
}

pub fn requests_by_kind(text: &str) -> std::collections::BTreeMap<String, f64> {
    samples_by_kind(text, "apiserver_request_total")
}

/// The API server's own time on each request, from a request's arrival to
/// its response (`apiserver_request_duration_seconds`), between two scrapes
/// of its metrics: by verb and resource, count and seconds summed; long
/// requests (watches) left out.
pub fn server_times(before: &str, after: &str) -> RequestTimes {
    const NAME: &str = "apiserver_request_duration_seconds";
    let count = |text| samples_by_kind(text, &format!("{NAME}_count"));
    let seconds = |text| samples_by_kind(text, &format!("{NAME}_sum"));
    let (count_before, seconds_before) = (count(before), seconds(before));
    let seconds_after = seconds(after);
    let since = |totals: &std::collections::BTreeMap<String, f64>, kind: &str, now: f64| {
        now - totals.get(kind).copied().unwrap_or(0.0)
    };
    let mut times = RequestTimes::default();
    for (kind, total) in count(after) {
        let requests = since(&count_before, &kind, total);
        if requests > 0.0 && !kind.starts_with("WATCH") {
            let now = seconds_after.get(&kind).copied().unwrap_or(0.0);
            let spent = since(&seconds_before, &kind, now);
            times.0.insert(kind, (requests, spent));
        }
    }
    times
}

/// The samples of the metric `name` summed by verb and resource.
fn samples_by_kind(text: &str, name: &str) -> std::collections::BTreeMap<String, f64> {
    let label = label_value;
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('{'))
    }) {
        let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let resource = label(line, "resource");
        let subresource = label(line, "subresource");
        let kind = if subresource.is_empty() {
            format!("{} {resource}", label(line, "verb"))
        } else {
            format!("{} {resource}/{subresource}", label(line, "verb"))
        };
        *out.entry(kind).or_insert(0.0) += value;
    }
    out
}

/// Lists a freshly installed kind once, so the API server's one-off cost of
/// its first read (about a second, spent readying the kind's watch cache) is
/// not charged to the operator that happens to read it first.
pub async fn warm_up(client: &Client, resource: &ApiResource) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let started = Instant::now();
    api.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing {}: {e}", resource.plural));
    eprintln!(
        "bench: first list of {} took {:.0} ms",
        resource.plural,
        started.elapsed().as_secs_f64() * 1e3
    );
}

/// Requests kube-apiserver has answered so far, of every kind.
fn busy(metrics: &str) -> f64 {
    sum_metric(metrics, "controller_runtime_active_workers")
        + sum_metric(metrics, "workqueue_depth")
}

/// Waits until no reconcile is running or queued at this moment.
async fn until_nothing_running(operator: &Operator) {
    let deadline = Instant::now() + LIMIT;
    while busy(&operator.metrics().await) > 0.0 {
        assert!(
            Instant::now() < deadline,
            "operator never stopped running:\n{}",
            operator.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the operator has had nothing running or queued for half a
/// second: enka's in-flight gauge, controller-runtime's active workers and
/// work-queue depth for upstream.
pub async fn settle(operator: &Operator) {
    let step = Duration::from_millis(100);
    let deadline = Instant::now() + LIMIT;
    let mut quiet = Duration::ZERO;
    let mut last = f64::NAN;
    while quiet < Duration::from_millis(500) {
        assert!(
            Instant::now() < deadline,
            "operator never settled:\n{}",
            operator.log_tail()
        );
        tokio::time::sleep(step).await;
        let text = operator.metrics().await;
        let done = sum_metric(&text, "ansible_operator_reconcile_result");
        quiet = if busy(&text) == 0.0 && done == last {
            quiet + step
        } else {
            Duration::ZERO
        };
        last = done;
    }
}

pub fn per_reconcile(before: &str, after: &str, cpu_seconds: f64) -> PerReconcile {
    let delta = |name: &str| sum_metric(after, name) - sum_metric(before, name);
    // enka's histogram covers whole runs; upstream's of the same name times
    // only the set-up, so controller-runtime's own is used for upstream.
    let histogram = if after.contains("controller_runtime_reconcile_time_seconds_count") {
        "controller_runtime_reconcile_time_seconds"
    } else {
        "ansible_operator_reconciles"
    };
    let runs = delta(&format!("{histogram}_count"));
    if runs == 0.0 {
        return PerReconcile::default();
    }
    let api_wait = delta("enka_api_wait_seconds_sum");
    let queued = delta("workqueue_queue_duration_seconds_count");
    PerReconcile {
        wall_seconds: delta(&format!("{histogram}_sum")) / runs,
        cpu_seconds: cpu_seconds / runs,
        api_wait_seconds: (api_wait > 0.0).then(|| api_wait / runs),
        queue_wait_seconds: (queued > 0.0)
            .then(|| delta("workqueue_queue_duration_seconds_sum") / queued),
        requests: RequestTimes::between(before, after),
        runs,
    }
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
