//! enka and upstream's ansible-operator side by side, on one real control
//! plane, in one run: `make bench` (or `cargo bench --bench operators`).
//!
//! The workload is benches/memcached, a memcached-style role that only uses
//! kubernetes.core modules, so upstream runs it from package registries. The
//! harness measures, for each operator in turn on its own namespace:
//! - latency from creating a Memcached to its Deployment existing, one at a
//!   time, against a bare hand-written controller making the same API calls;
//! - throughput on a burst of Memcacheds created at once;
//! - CPU seconds and resident memory at idle and after the burst.
//!
//! It also runs benches/bridged, the same role with one task that enka hands
//! to its Ansible worker (`stat`, `file`, a Python filter), on both sides,
//! and times those tasks through the worker alone.
//!
//! Then real operators on a control plane with simulated nodes (real.rs):
//! memcached to its Deployment Available, awx-operator and upstream's
//! advanced-molecule-operator from their samples to their end, side by side.
//!
//! For enka only, it also measures memory at larger scales, a load of 5000
//! Memcacheds over 50 namespaces on one cluster-wide enka and on one and three
//! shards of timebertt's sharder, the seed's Zundoko song, and CPU per
//! reconcile against time spent waiting on the API server.
//!
//! Results: target/bench/summary.tsv (metric, enka, upstream, upstream/enka),
//! target/bench/results.json, and with ENKA_BENCH_DOCS=1 (what `make bench`
//! sets) docs/benchmarks.md and docs/benchmarks.png.
//!
//! ENKA_BENCH_SMOKE=1 runs a small enka-only pass, as `make test` does, so the
//! harness cannot rot between full runs. ENKA_BENCH_ONLY=sharded,seed (a
//! comma list of `SCENARIOS`) runs only those, to profile one of them.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../../tests/sharding/ring.rs"]
mod ring;

mod bare;
mod bridged;
mod goals;
mod operator;
#[allow(dead_code)]
#[path = "../../tests/differential/projects.rs"]
mod projects;
mod real;
mod report;
mod requests;
mod scenarios;
mod seed;
mod usage;
mod workload;

use std::time::Instant;

use kube_env::{KubeEnv, Options};

use report::Report;

/// The concurrency of the extra enka burst that finds the API server's limit.
const WIDE: u16 = 32;

/// What to run, from the environment.
#[derive(Clone, Debug)]
pub struct Plan {
    pub latency_crs: usize,
    /// Memcacheds timed from create to Deployment Available, on nodes.
    pub available_crs: usize,
    /// A small enka-only pass (`ENKA_BENCH_SMOKE`).
    pub smoke: bool,
    pub burst_crs: usize,
    /// Timed calls of each bridged task through the worker alone.
    pub bridged_task_runs: usize,
    pub scale: Vec<usize>,
    /// The load run: namespaces, and Memcacheds in each.
    pub load: (usize, usize),
    pub upstream: bool,
    pub docs: bool,
    /// `ENKA_BENCH_ONLY=real` with `ENKA_BENCH_DOCS=1` (`make bench-real`):
    /// the real operators' rows and section of docs/benchmarks.md are
    /// replaced, the rest of the page left as the last `make bench` wrote it.
    pub docs_real: bool,
    /// `ENKA_BENCH_ONLY`: the scenarios to run (all when `None`), for
    /// profiling one of them; such a run never writes the docs (but see
    /// `docs_real`).
    pub only: Option<Vec<String>>,
    pub out_dir: std::path::PathBuf,
}

impl Plan {
    fn from_env() -> Plan {
        let smoke = env_flag("ENKA_BENCH_SMOKE");
        let number = |name: &str, full: usize, small: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(if smoke { small } else { full })
        };
        let scale = std::env::var("ENKA_BENCH_SCALE")
            .ok()
            .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_else(|| if smoke { vec![60] } else { vec![1000, 5000] });
        let only = std::env::var("ENKA_BENCH_ONLY").ok().map(|v| {
            let names: Vec<String> = v.split(',').map(|n| n.trim().to_owned()).collect();
            if let Some(unknown) = names.iter().find(|n| !SCENARIOS.contains(&n.as_str())) {
                eprintln!(
                    "ENKA_BENCH_ONLY: no scenario {unknown:?}; the scenarios are {SCENARIOS:?}"
                );
                std::process::exit(2);
            }
            names
        });
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| support::repo_path("target"));
        Plan {
            latency_crs: number("ENKA_BENCH_LATENCY_CRS", 50, 5),
            available_crs: number("ENKA_BENCH_AVAILABLE_CRS", 10, 2),
            smoke,
            bridged_task_runs: number("ENKA_BENCH_BRIDGED_TASKS", 200, 20),
            burst_crs: number("ENKA_BENCH_BURST_CRS", 200, 20),
            scale,
            load: (
                number("ENKA_BENCH_LOAD_NAMESPACES", 500, 5),
                number("ENKA_BENCH_LOAD_PER_NAMESPACE", 100, 10),
            ),
            upstream: !smoke && !std::env::var("ENKA_BENCH_UPSTREAM").is_ok_and(|v| v == "0"),
            docs: !smoke && env_flag("ENKA_BENCH_DOCS") && only.is_none(),
            docs_real: !smoke
                && env_flag("ENKA_BENCH_DOCS")
                && only.as_deref() == Some(&["real".to_owned()][..]),
            only,
            out_dir: target.join(if smoke { "bench/smoke" } else { "bench" }),
        }
    }
}

/// The scenarios `ENKA_BENCH_ONLY` can name, in the order they run.
const SCENARIOS: [&str; 8] = [
    "load", "sharded", "latency", "wide", "bridged", "scale", "seed", "real",
];

impl Plan {
    /// Whether the scenario named `name` runs.
    pub fn runs(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|n| n == name))
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v == "true")
}

fn main() {
    // `cargo bench` passes --bench; nothing else is accepted.
    if std::env::args().skip(1).any(|a| a != "--bench") {
        eprintln!(
            "usage: cargo bench --bench operators  (settings come from ENKA_BENCH_* variables)"
        );
        std::process::exit(2);
    }
    let plan = Plan::from_env();
    std::fs::create_dir_all(&plan.out_dir).expect("creating the output directory");
    eprintln!("bench: {plan:?}");
    if plan.upstream {
        // Before the control plane starts, so a cold install is not timed
        // against anything.
        eprintln!(
            "bench: upstream is in {}",
            operator::upstream_dir().display()
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let report = runtime.block_on(run(&plan));
    report.check(&plan);
    report
        .write(&plan)
        .unwrap_or_else(|e| panic!("writing the report: {e}"));
    eprintln!(
        "bench: done in {:.0} s; {}",
        started.elapsed().as_secs_f64(),
        plan.out_dir.join("summary.tsv").display()
    );
}

async fn run(plan: &Plan) -> Report {
    // No kube-controller-manager: no Deployment controller, so Deployments
    // stay objects and the API server's load is the operators' alone.
    let env = KubeEnv::start(Options::default().controller_manager(false))
        .await
        .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
    let client = env.client().expect("a client");
    support::install_crd(&client, workload::CRD).await;
    scenarios::warm_up(&client, &workload::memcached_resource()).await;
    let log_dir = plan.out_dir.join("logs");
    std::fs::create_dir_all(&log_dir).expect("creating the log directory");

    let mut report = Report::new(&env);
    let bench = scenarios::Bench {
        env: &env,
        client: &client,
        plan,
        log_dir: &log_dir,
    };
    // First, while its cluster-wide enka has no other Memcacheds to see.
    if plan.runs("load") {
        report.load = Some(bench.enka_load().await);
    }
    // The same load on one and on three shards of the sharder's ring.
    if plan.runs("sharded") {
        for shards in [1, 3] {
            report.sharded.push(bench.enka_sharded_load(shards).await);
        }
    }
    if plan.runs("latency") {
        report.bare = bench.bare_latency().await;
        report.enka = Some(bench.side_by_side(operator::Flavour::Enka).await);
        if plan.upstream {
            report.upstream = Some(bench.side_by_side(operator::Flavour::Upstream).await);
        }
    }
    if plan.runs("wide") {
        report.wide_burst = Some((WIDE, bench.enka_wide_burst(WIDE).await));
    }
    // Tasks that go through the Ansible worker: alone, then in a reconcile
    // of the same role on each side.
    if plan.runs("bridged") {
        report.worker = Some(bridged::task_costs(plan.bridged_task_runs));
        for variant in bridged::VARIANTS {
            let enka = bench
                .bridged_latency(operator::Flavour::Enka, variant)
                .await;
            let upstream = if plan.upstream {
                Some(
                    bench
                        .bridged_latency(operator::Flavour::Upstream, variant)
                        .await,
                )
            } else {
                None
            };
            report.bridged.push(report::BridgedRun {
                variant,
                enka,
                upstream,
            });
        }
    }
    if plan.runs("scale") {
        report.scale = bench.enka_scale().await;
    }
    if plan.runs("seed") {
        report.seed = Some(bench.seed_song().await);
    }
    // Last, on a control plane of its own with nodes.
    if plan.runs("real") {
        report.real = real::run(plan, &log_dir).await;
    }
    report
}
