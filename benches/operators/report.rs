//! The bench's outputs: summary.tsv and results.json under target/bench, and,
//! for `make bench`, docs/benchmarks.md with its chart.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use kube_env::KubeEnv;
use serde_json::json;

use crate::Plan;
use crate::bridged::WorkerCost;
use crate::scenarios::{BareSide, BridgedSide, Burst, Load, ScalePoint, Side, mib};
use crate::seed::Seed;
use crate::workload::percentile;

#[derive(Default)]
pub struct Report {
    pub bare: BareSide,
    pub enka: Option<Side>,
    pub upstream: Option<Side>,
    pub scale: Vec<ScalePoint>,
    /// enka's burst with a higher concurrency, and that concurrency.
    pub wide_burst: Option<(u16, Burst)>,
    pub seed: Option<Seed>,
    pub load: Option<Load>,
    pub sharded: Vec<crate::scenarios::ShardedLoad>,
    /// Bridged tasks through the worker alone.
    pub worker: Option<WorkerCost>,
    /// The benches/bridged roles on each side.
    pub bridged: Vec<BridgedRun>,
    /// Real operators on simulated nodes.
    pub real: Vec<crate::real::RealRun>,
    kubernetes: String,
}

/// One benches/bridged variant, on enka and (in a full run) upstream.
pub struct BridgedRun {
    pub variant: &'static str,
    pub enka: BridgedSide,
    pub upstream: Option<BridgedSide>,
}

/// One line of the table: a figure for each system.
pub struct Row {
    pub metric: String,
    pub what: String,
    pub enka: Option<f64>,
    pub upstream: Option<f64>,
}

impl Row {
    /// The row as a line of the page's table.
    pub fn table_line(&self) -> String {
        format!(
            "| {} | {} | {} | {} |",
            self.what,
            cell(self.enka),
            cell(self.upstream),
            cell(self.ratio())
        )
    }

    fn ratio(&self) -> Option<f64> {
        match (self.enka, self.upstream) {
            (Some(e), Some(u)) if e > 0.0 => Some(u / e),
            _ => None,
        }
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn cell(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 0.1 => format!("{v:.2}"),
        Some(v) => format!("{v:.4}"),
    }
}

impl Report {
    pub fn new(env: &KubeEnv) -> Report {
        let kubernetes = std::process::Command::new(env.binaries().path("kube-apiserver"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        Report {
            kubernetes,
            ..Report::default()
        }
    }

    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut both = |metric: &str, what: &str, f: &dyn Fn(&Side) -> f64| {
            rows.push(Row {
                metric: metric.into(),
                what: what.into(),
                enka: self.enka.as_ref().map(f),
                upstream: self.upstream.as_ref().map(f),
            });
        };
        both("latency_p50_ms", "create → Deployment, p50 (ms)", &|s| {
            ms(percentile(&s.latency, 50.0))
        });
        both("latency_p99_ms", "create → Deployment, p99 (ms)", &|s| {
            ms(percentile(&s.latency, 99.0))
        });
        both(
            "wall_ms_per_reconcile",
            "wall time per reconcile (ms)",
            &|s| s.per_reconcile.wall_seconds * 1e3,
        );
        both(
            "queue_wait_ms",
            "watch event → reconcile start: time in the work queue (ms)",
            &|s| s.per_reconcile.queue_wait_seconds.unwrap_or(f64::NAN) * 1e3,
        );
        both(
            "cpu_ms_per_reconcile",
            "operator CPU per reconcile (ms)",
            &|s| s.per_reconcile.cpu_seconds * 1e3,
        );
        both(
            "burst_seconds",
            "burst: all Deployed and Successful (s)",
            &|s| s.burst.seconds,
        );
        both(
            "burst_reconciles_per_second",
            "burst: reconciles per second",
            &|s| s.burst.reconciles / s.burst.seconds,
        );
        both("burst_cpu_seconds", "burst: operator CPU (s)", &|s| {
            s.burst.operator_cpu_seconds
        });
        both(
            "burst_control_plane_cpu_seconds",
            "burst: kube-apiserver + etcd CPU (s)",
            &|s| s.burst.control_plane_cpu_seconds,
        );
        both(
            "burst_operator_cores",
            "burst: operator CPU cores busy",
            &|s| s.burst.operator_cpu_seconds / s.burst.seconds,
        );
        both(
            "burst_control_plane_cores",
            "burst: kube-apiserver + etcd CPU cores busy",
            &|s| s.burst.control_plane_cpu_seconds / s.burst.seconds,
        );
        both("idle_rss_mib", "idle RSS (MiB)", &|s| mib(s.idle.rss_bytes));
        both(
            "idle_heap_mib",
            "idle anonymous RSS: heap and stacks (MiB)",
            &|s| mib(s.idle.anon_bytes),
        );
        both(
            "heap_after_burst_mib",
            "anonymous RSS after the burst (MiB)",
            &|s| mib(s.after_burst.anon_bytes),
        );
        both(
            "idle_cpu_seconds_per_minute",
            "idle CPU (s per minute)",
            &|s| s.idle_cpu_seconds * 60.0 / s.idle_window.as_secs_f64(),
        );
        both("rss_after_burst_mib", "RSS after the burst (MiB)", &|s| {
            mib(s.after_burst.rss_bytes)
        });
        both(
            "peak_tree_rss_burst_mib",
            "peak RSS with child processes, burst (MiB)",
            &|s| mib(s.burst.peak_tree_rss_bytes),
        );
        for run in &self.bridged {
            let v = run.variant;
            let p = |side: &BridgedSide, q: f64| ms(percentile(&side.latency, q));
            rows.push(Row {
                metric: format!("bridged_{v}_latency_p50_ms"),
                what: format!("role with a bridged {v}: create → Deployment, p50 (ms)"),
                enka: Some(p(&run.enka, 50.0)),
                upstream: run.upstream.as_ref().map(|u| p(u, 50.0)),
            });
            rows.push(Row {
                metric: format!("bridged_{v}_latency_p99_ms"),
                what: format!("role with a bridged {v}: create → Deployment, p99 (ms)"),
                enka: Some(p(&run.enka, 99.0)),
                upstream: run.upstream.as_ref().map(|u| p(u, 99.0)),
            });
            rows.push(Row {
                metric: format!("bridged_{v}_tree_rss_mib"),
                what: format!("role with a bridged {v}: RSS with child processes after it (MiB)"),
                enka: Some(mib(run.enka.tree_rss_bytes)),
                upstream: run.upstream.as_ref().map(|u| mib(u.tree_rss_bytes)),
            });
            rows.push(Row {
                metric: format!("bridged_{v}_idle_tree_rss_mib"),
                what: format!(
                    "role with a bridged {v}: RSS with child processes {} s idle after it (MiB)",
                    crate::scenarios::BRIDGED_IDLE.as_secs()
                ),
                enka: Some(mib(run.enka.idle_tree_rss_bytes)),
                upstream: run.upstream.as_ref().map(|u| mib(u.idle_tree_rss_bytes)),
            });
        }
        let enka_only = |metric: &str, what: &str, value: Option<f64>| Row {
            metric: metric.into(),
            what: what.into(),
            enka: value,
            upstream: None,
        };
        if let Some(worker) = &self.worker {
            for task in &worker.tasks {
                let v = task.variant;
                rows.push(enka_only(
                    &format!("worker_{v}_task_p50_ms"),
                    &format!("a bridged {v} through the worker alone, p50 (ms)"),
                    Some(ms(percentile(&task.samples, 50.0))),
                ));
                rows.push(enka_only(
                    &format!("worker_{v}_task_p99_ms"),
                    &format!("a bridged {v} through the worker alone, p99 (ms)"),
                    Some(ms(percentile(&task.samples, 99.0))),
                ));
            }
            rows.push(enka_only(
                "worker_start_ms",
                "Ansible worker start from nothing (fork server and first worker), to its first answer (ms)",
                Some(ms(worker.start)),
            ));
            rows.push(enka_only(
                "worker_start_first_task_ms",
                "Ansible worker start from nothing, to its first bridged task's result (a file task; ms)",
                Some(ms(worker.first_task)),
            ));
            rows.push(enka_only(
                "worker_forked_start_ms",
                "another Ansible worker, forked from the warm fork server, to its first answer (ms)",
                Some(ms(worker.forked_start)),
            ));
            rows.push(enka_only(
                "workers_rss_mib",
                "two Ansible workers and their fork server: RSS summed (MiB)",
                Some(mib(worker.pool_rss_bytes)),
            ));
            rows.push(enka_only(
                "workers_pss_mib",
                "two Ansible workers and their fork server: PSS summed, shared pages counted once (MiB)",
                Some(mib(worker.pool_pss_bytes)),
            ));
            rows.push(enka_only(
                "worker_rss_mib",
                "one Ansible worker's RSS (MiB)",
                Some(mib(worker.rss_bytes)),
            ));
        }
        let bare_p50 = ms(percentile(&self.bare.latency, 50.0));
        rows.push(enka_only(
            "bare_api_latency_p50_ms",
            "bare API calls of the role, create → Deployment, p50 (ms)",
            Some(bare_p50),
        ));
        rows.push(enka_only(
            "latency_p50_over_bare_api",
            "enka p50 latency ÷ bare API calls p50",
            self.enka
                .as_ref()
                .map(|s| ms(percentile(&s.latency, 50.0)) / bare_p50),
        ));
        if let Some(side) = &self.enka {
            let p = &side.per_reconcile;
            if let Some(wait) = p.api_wait_seconds {
                rows.push(enka_only(
                    "api_wait_ms_per_reconcile",
                    "time waiting on the API server per reconcile (ms)",
                    Some(wait * 1e3),
                ));
                rows.push(enka_only(
                    "engine_ms_per_reconcile",
                    "time in enka's own code per reconcile: wall minus API wait (ms)",
                    Some((p.wall_seconds - wait) * 1e3),
                ));
            }
        }
        if let Some((concurrency, burst)) = &self.wide_burst {
            let per_second = burst.reconciles / burst.seconds;
            rows.push(enka_only(
                &format!("burst_x{concurrency}_reconciles_per_second"),
                &format!("burst, {concurrency} reconciles at once: reconciles per second"),
                Some(per_second),
            ));
            rows.push(enka_only(
                &format!("burst_x{concurrency}_operator_cores"),
                &format!("burst, {concurrency} at once: enka CPU cores busy"),
                Some(burst.operator_cpu_seconds / burst.seconds),
            ));
            rows.push(enka_only(
                &format!("burst_x{concurrency}_control_plane_cores"),
                &format!("burst, {concurrency} at once: kube-apiserver + etcd CPU cores busy"),
                Some(burst.control_plane_cpu_seconds / burst.seconds),
            ));
        }
        for point in &self.scale {
            rows.push(enka_only(
                &format!("rss_mib_at_{}", point.crs),
                &format!("RSS at {} Memcacheds (MiB)", point.crs),
                Some(mib(point.rss_bytes)),
            ));
        }
        for point in &self.scale {
            rows.push(enka_only(
                &format!("heap_mib_at_{}", point.crs),
                &format!("anonymous RSS at {} Memcacheds (MiB)", point.crs),
                Some(mib(point.anon_bytes)),
            ));
        }
        for point in self.scale.iter().filter(|p| p.crs > 0) {
            rows.push(enka_only(
                &format!("converge_seconds_to_{}", point.crs),
                &format!("create and converge up to {} Memcacheds (s)", point.crs),
                Some(point.converge_seconds),
            ));
        }
        if let Some(load) = &self.load {
            let what = format!(
                "load, {} Memcacheds over {} namespaces",
                load.crs, load.namespaces
            );
            for (metric, label, value) in [
                ("load_seconds", "all Successful (s)", load.seconds),
                (
                    "load_peak_rss_mib",
                    "peak RSS (MiB)",
                    mib(load.peak_rss_bytes),
                ),
                (
                    "load_final_rss_mib",
                    "RSS after (MiB)",
                    mib(load.final_rss_bytes),
                ),
                (
                    "load_api_requests_per_cr",
                    "kube-apiserver requests per Memcached",
                    load.requests_per_cr,
                ),
                ("load_reconciles", "reconciles", load.reconciles),
                (
                    "load_failed_reconciles",
                    "failed reconciles",
                    load.failed_reconciles,
                ),
            ] {
                rows.push(enka_only(metric, &format!("{what}: {label}"), Some(value)));
            }
        }
        for run in &self.sharded {
            let what = format!(
                "sharded load, {} Memcacheds on {} shard{}",
                run.crs,
                run.shards,
                if run.shards == 1 { "" } else { "s" }
            );
            let peaks: Vec<f64> = run.peak_rss_bytes.iter().map(|b| mib(*b)).collect();
            let largest = peaks.iter().copied().fold(0.0, f64::max);
            // What the objects cost a replica: its peak over its RSS before
            // they were created (a process's own baseline does not shrink
            // with its share).
            let growth = |to: &[u64]| {
                to.iter()
                    .zip(&run.idle_rss_bytes)
                    .map(|(rss, idle)| mib(rss.saturating_sub(*idle)))
                    .fold(0.0, f64::max)
            };
            let held = growth(&run.final_rss_bytes);
            let growth = growth(&run.peak_rss_bytes);
            for (metric, label, value) in [
                ("seconds", "all Successful (s)", run.seconds),
                (
                    "peak_rss_mib_per_replica",
                    "largest replica's peak RSS (MiB)",
                    largest,
                ),
                (
                    "peak_rss_mib_total",
                    "replicas' peak RSS together (MiB)",
                    peaks.iter().sum(),
                ),
                (
                    "rss_growth_mib_per_replica",
                    "largest replica's RSS growth under the load (MiB)",
                    growth,
                ),
                (
                    "rss_held_mib_per_replica",
                    "largest replica's RSS growth once settled (MiB)",
                    held,
                ),
                (
                    "api_requests_per_cr",
                    "kube-apiserver requests per Memcached",
                    run.requests_per_cr,
                ),
                ("reconciles", "reconciles", run.reconciles),
                (
                    "most_reconciles_per_replica",
                    "reconciles on the busiest replica (one per Memcached assigned)",
                    run.busiest_replica().1,
                ),
            ] {
                rows.push(enka_only(
                    &format!("sharded{}_{metric}", run.shards),
                    &format!("{what}: {label}"),
                    Some(value),
                ));
            }
        }
        if let Some(seed) = &self.seed {
            rows.push(enka_only(
                "seed_kiyoshi_seconds",
                "seed: Hikawa created → kiyoshied (s)",
                Some(seed.seconds),
            ));
            rows.push(enka_only(
                "seed_reconciles",
                "seed: reconciles to Kiyoshi",
                Some(seed.reconciles),
            ));
            rows.push(enka_only(
                "seed_zundokos",
                "seed: Zundokos sung",
                Some(seed.zundokos as f64),
            ));
            rows.push(enka_only(
                "seed_run_seconds",
                "seed: time inside runs (s)",
                Some(seed.run_seconds),
            ));
            rows.push(enka_only(
                "seed_api_wait_seconds",
                "seed: of which waiting on the API server (s)",
                Some(seed.api_wait_seconds),
            ));
            rows.push(enka_only(
                "seed_failed_runs",
                "seed: runs failed on purpose, each retried after 5 ms",
                Some(seed.failed_runs),
            ));
            rows.push(enka_only(
                "seed_queue_wait_seconds",
                "seed: time runs waited in the work queue past due (s)",
                Some(seed.queue_wait_seconds),
            ));
        }
        rows.extend(crate::real::rows(&self.real));
        rows
    }

    /// Panics when a figure cannot be right: a measurement that broke (a
    /// renamed metric reading as zero, a phase that measured nothing) must
    /// fail the run, not land in the table.
    pub fn check(&self, plan: &Plan) {
        crate::real::check(&self.real, plan);
        for run in &self.bridged {
            for (name, side) in [
                ("enka", Some(&run.enka)),
                ("upstream", run.upstream.as_ref()),
            ] {
                let Some(side) = side else { continue };
                assert_eq!(
                    side.latency.len(),
                    plan.latency_crs,
                    "{name}: {} role latency samples",
                    run.variant
                );
                assert!(
                    side.tree_rss_bytes > 0 && side.idle_tree_rss_bytes > 0,
                    "{name}: no RSS for the {} role",
                    run.variant
                );
            }
        }
        if let Some(worker) = &self.worker {
            for task in &worker.tasks {
                assert_eq!(
                    task.samples.len(),
                    plan.bridged_task_runs,
                    "{} samples",
                    task.variant
                );
            }
            assert!(worker.rss_bytes > 0, "no worker RSS");
            assert!(
                worker.pool_pss_bytes > 0 && worker.pool_rss_bytes >= worker.pool_pss_bytes,
                "the workers' RSS {} and PSS {}",
                worker.pool_rss_bytes,
                worker.pool_pss_bytes
            );
        }
        if plan.runs("latency") {
            assert_eq!(
                self.bare.latency.len(),
                plan.latency_crs,
                "bare latency samples"
            );
        }
        for (name, side) in [("enka", &self.enka), ("upstream", &self.upstream)] {
            let Some(side) = side else { continue };
            assert_eq!(
                side.latency.len(),
                plan.latency_crs,
                "{name}: latency samples"
            );
            assert!(
                side.latency.iter().all(|d| !d.is_zero()),
                "{name}: a zero latency"
            );
            assert!(
                side.burst.reconciles >= side.burst.crs as f64,
                "{name}: {} reconciles for {} Memcacheds; is ansible_operator_reconcile_result read?",
                side.burst.reconciles,
                side.burst.crs
            );
            assert!(
                side.per_reconcile.wall_seconds > 0.0,
                "{name}: no reconcile duration"
            );
            assert!(side.per_reconcile.cpu_seconds > 0.0, "{name}: no CPU time");
            assert!(
                side.idle.rss_bytes > 0 && side.after_burst.rss_bytes > 0,
                "{name}: no RSS"
            );
        }
        if let Some(enka) = &self.enka {
            assert!(
                enka.per_reconcile
                    .api_wait_seconds
                    .is_some_and(|w| w <= enka.per_reconcile.wall_seconds),
                "enka: API wait {:?} missing or above the run's wall time",
                enka.per_reconcile.api_wait_seconds
            );
        }
        if plan.runs("scale") {
            assert_eq!(self.scale.len(), plan.scale.len() + 1, "scale points");
        }
        if let Some(load) = &self.load {
            assert_eq!(
                load.failed_reconciles, 0.0,
                "load: failed reconciles: {load:?}"
            );
            assert!(load.reconciles >= load.crs as f64, "load: {load:?}");
            // The role makes at least a GET and a create per Memcached, plus
            // the status writes; a figure outside this range is a broken count.
            assert!(
                (2.0..100.0).contains(&load.requests_per_cr),
                "load: {} requests per Memcached",
                load.requests_per_cr
            );
        }
        for run in &self.sharded {
            assert_eq!(run.failed_reconciles, 0.0, "sharded: {run:?}");
            assert!(run.reconciles >= run.crs as f64, "sharded: {run:?}");
            assert_eq!(run.peak_rss_bytes.len(), run.shards, "sharded: {run:?}");
            assert_eq!(
                run.reconciles_per_replica.len(),
                run.shards,
                "sharded: {run:?}"
            );
            assert!(
                run.peak_rss_bytes.iter().all(|b| *b > 0),
                "sharded: {run:?}"
            );
        }
        if let Some(seed) = &self.seed {
            // Each Zundoko takes at least a run that sings it and one that
            // judges the song.
            assert!(
                seed.zundokos >= 5,
                "{} Zundokos before Kiyoshi",
                seed.zundokos
            );
            assert!(seed.reconciles >= 2.0 * seed.zundokos as f64, "{seed:?}");
        }
    }

    pub fn write(&self, plan: &Plan) -> std::io::Result<()> {
        let rows = self.rows();
        let mut tsv = String::from("metric\tenka\tupstream\tupstream/enka\n");
        for row in &rows {
            let _ = writeln!(
                tsv,
                "{}\t{}\t{}\t{}",
                row.metric,
                cell(row.enka),
                cell(row.upstream),
                cell(row.ratio())
            );
        }
        std::fs::write(plan.out_dir.join("summary.tsv"), &tsv)?;
        print!("{tsv}");

        let results = plan.out_dir.join("results.json");
        std::fs::write(&results, serde_json::to_string_pretty(&self.json())?)?;
        if plan.docs {
            let docs = crate::support::repo_path("docs");
            let chart = docs.join("benchmarks.png");
            draw_chart(&results, &chart)?;
            std::fs::write(docs.join("benchmarks.md"), self.markdown(&rows, plan))?;
        }
        if plan.docs_real {
            let path = crate::support::repo_path("docs/benchmarks.md");
            let doc = std::fs::read_to_string(&path)?;
            let spliced = crate::real::splice(&doc, &self.real).ok_or_else(|| {
                std::io::Error::other(
                    "docs/benchmarks.md has no real-operator rows or section to replace: run `make bench`",
                )
            })?;
            std::fs::write(path, spliced)?;
        }
        Ok(())
    }

    fn json(&self) -> serde_json::Value {
        let latency = |samples: &[Duration]| samples.iter().map(|d| ms(*d)).collect::<Vec<_>>();
        let side = |side: &Option<Side>| {
            side.as_ref().map(|s| {
                json!({
                    "latency_ms": latency(&s.latency),
                    "idle_rss_mib": mib(s.idle.rss_bytes),
                    "burst_crs": s.burst.crs,
                    "burst_seconds": s.burst.seconds,
                    "rss_after_burst_mib": mib(s.after_burst.rss_bytes),
                })
            })
        };
        json!({
            "bare": {"latency_ms": latency(&self.bare.latency)},
            "enka": side(&self.enka),
            "upstream": side(&self.upstream),
            "scale": self.scale.iter().map(|p| json!({"crs": p.crs, "rss_mib": mib(p.rss_bytes), "heap_mib": mib(p.anon_bytes)})).collect::<Vec<_>>(),
        })
    }

    fn markdown(&self, rows: &[Row], plan: &Plan) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "# Benchmarks: enka and upstream ansible-operator, side by side\n"
        );
        let _ = writeln!(
            md,
            "Generated by `make bench` (benches/operators); do not edit by hand. Both operators ran the \
             same role (benches/memcached: a Memcached becomes a Deployment of `spec.size` replicas, \
             `manageStatus: true`, only kubernetes.core modules) on the same real kube-apiserver + etcd, \
             one after the other, each on its own namespace, in one run. Figures from one run on a shared \
             machine are noisy: read the ratios. In the last column, above 1 means enka needs less (time, \
             CPU, memory); for reconciles per second, below 1 means enka does more.\n"
        );
        let _ = writeln!(
            md,
            "The `role with a bridged …` rows run benches/bridged: the same role with one task before the \
             Deployment that enka has no native code for and hands to its Ansible worker (`stat`, `file`, \
             or a Python filter from the role's `filter_plugins/`). In enka such a task is sent to a warm \
             Python process that has ansible-core imported: the action plugin runs there, and `file` and \
             `stat`, like the other modules enka has vetted, run in that interpreter itself (what a module \
             may change in it is saved and put back, its output captured, its exit caught), where other \
             modules run in a fork of it; no task pays a Python start-up. Where a bridged task's time \
             goes now: `file` is its action plugin and module code (under a millisecond each) and the \
             frames to and from the worker; `stat` also runs `lsattr` and `file` for the path's \
             attributes and MIME type, each spawned without copying the worker (a fork of the 50 MiB \
             worker costs some 3.5 ms, which every forked module pays). A worker started from nothing, \
             as after the idle exit, is Python's start (some 10 ms), ansible-core's imports and \
             configuration (some 355 modules, 120 ms), a fork and its first answer (5 ms), then its first \
             task's making of the `local` connection and its plugins (15 to 20 ms); what ansible-core \
             parses or compiles at every start (its config definitions, ansible.builtin's routing, its \
             defaults' templates) is kept next to the worker's scripts, and what no task needs at once \
             (the facts collectors, vault's cryptography) is imported at its first use. Upstream runs \
             the whole role through ansible-runner as always. The `through the worker alone` rows time the same tasks \
             around the worker call with nothing else running; the RSS rows count the operator and its \
             child processes (enka's workers, upstream's Ansible).\n"
        );
        let _ = writeln!(md, "![latency and memory](benchmarks.png)\n");
        let _ = writeln!(
            md,
            "| figure | enka | upstream | upstream ÷ enka |\n|---|---:|---:|---:|"
        );
        for row in rows {
            let _ = writeln!(md, "{}", row.table_line());
        }
        md.push_str(&self.goals());
        md.push_str(&crate::real::markdown(&self.real));
        if let Some(seed) = self.seed.as_ref().filter(|s| !s.requests.is_empty()) {
            let listed: Vec<String> = seed
                .requests
                .iter()
                .map(|(kind, n)| format!("{kind} {n:.0}"))
                .collect();
            let _ = writeln!(
                md,
                "\nThe seed song's kube-apiserver requests by verb and resource ({} reconciles; the harness's \
                 create of the Hikawa and its watch are among them): {}.",
                seed.reconciles,
                listed.join(", ")
            );
        }
        for (what, each) in self
            .load
            .iter()
            .map(|l| {
                (
                    format!("the load of {} Memcacheds", l.crs),
                    &l.requests_each,
                )
            })
            .chain(self.sharded.iter().map(|r| {
                (
                    format!("the sharded load on {} shard(s)", r.shards),
                    &r.requests_each,
                )
            }))
        {
            let _ = writeln!(
                md,
                "\nkube-apiserver requests of {what}, accounted: {}.",
                crate::requests::account(each)
            );
        }
        let _ = writeln!(md, "\n## How it was measured\n");
        let _ = writeln!(
            md,
            "- **Latency**: {n} Memcacheds created one at a time; the time from the create call to the \
             harness's own watch seeing the Deployment. The next one is created when the operator is idle \
             (enka's in-flight gauge, controller-runtime's active workers and queue depth) and the machine \
             has then idled {pause} ms, the bare controller's samples too: a create straight after the last \
             sample finds the API server's threads awake and its caches warm, and answers every request \
             faster than the idle machine an operator's sample starts from. The bare row is a hand-written controller \
             in the harness making the same API calls with no engine: status `Running`, GET the \
             Deployment, create it; it times each request around the call, as enka's \
             `rest_client_request_duration_seconds` does.\n\
             - **Burst**: {b} Memcacheds created at once ({p} creates in flight); done when every one has \
             its Deployment and a `Successful` condition. Reconciles from `ansible_operator_reconcile_result`: one \
             per Memcached for both operators, since creating a dependent does not send its owner back \
             (upstream's dependent predicate, which enka keeps).\n\
             - **CPU and memory**: /proc of the operator's process. Upstream's CPU includes the \
             ansible-runner and ansible-playbook children it waited for; its peak RSS with children is \
             sampled every 100 ms. Idle: {idle} s with nothing to do.\n\
             - **Per reconcile**: over the latency phase, where runs do not overlap: wall time from \
             the reconcile histograms, CPU from /proc divided by the runs.\n\
             - **Wide burst (enka)**: the same burst on an enka run with \
             `--max-concurrent-reconciles={wide}` instead of the default of one per CPU (upstream's \
             default too), with the CPU cores enka and the control plane kept busy: on two cores, \
             that shows which of them sets the pace.\n\
             - **Scale (enka)**: Memcacheds added in one namespace up to each step, then RSS once settled.\n\
             - **Load (enka)**: {load_crs} Memcacheds over {load_ns} namespaces created as fast as {p} \
             creates in flight allow, on one enka watching the whole cluster (default concurrency); time \
             until every one is `Successful`, peak RSS sampled every 100 ms, and kube-apiserver's \
             `apiserver_request_total` over the run less the harness's own requests (the creates, one \
             list per second, a metrics read), per Memcached. Run first, before any other Memcached exists.\n\
             - **Sharded load (enka)**: the same load in fresh namespaces on one, then three, enka replicas \
             started with `--sharding-ring`, each watching the whole cluster but only the Memcacheds \
             timebertt's sharder (v0.11.0, tools/sharder) assigned to it; each replica's peak RSS sampled \
             every 100 ms; API requests counted as above, so the shards' Lease renewals and the \
             sharder's own requests are in them.\n\
             - **Seed**: the seed's Zundoko operator (tests/fixtures/zundoko-seed, unchanged) with \
             `ENKA_RANDOM_SEED=42`, from creating the Hikawa to `status.kiyoshied`.\n",
            n = plan.latency_crs,
            b = plan.burst_crs,
            p = crate::scenarios::PARALLEL_CREATES,
            pause = crate::scenarios::IDLE_BEFORE_SAMPLE.as_millis(),
            idle = self.enka.as_ref().map_or(0, |s| s.idle_window.as_secs()),
            wide = self.wide_burst.as_ref().map_or(0, |(c, _)| *c),
            load_crs = plan.load.0 * plan.load.1,
            load_ns = plan.load.0,
        );
        let _ = writeln!(md, "## Machine and versions\n");
        let _ = writeln!(md, "- {}", machine());
        let _ = writeln!(
            md,
            "- control plane: {} (tools/kube-env), no kube-controller-manager, etcd with \
             `--unsafe-no-fsync` (as in the tests: writes cost API-server time, not disk flushes)",
            self.kubernetes
        );
        let _ = writeln!(md, "- enka: release build of {}", git_describe());
        let _ = writeln!(
            md,
            "- upstream: ansible-operator {} with ansible-core 2.18, ansible-runner 2.4, \
             kubernetes.core from the ansible 11 bundle and ansible-runner-http 1.0.0 \
             (scripts/upstream-ansible-operator.sh)",
            upstream_version(),
        );
        md
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cores} cores ({model}), {mem_gib:.0} GiB, Linux {}",
        kernel.trim()
    )
}

/// The commit measured, `-dirty` when files other than this report's own
/// outputs (written before it asks) differ from it.
fn git_describe() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let commit = git(&["describe", "--always"]);
    let changed = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":(exclude)docs/benchmarks.md",
        ":(exclude)docs/benchmarks.png",
    ]);
    if changed.is_empty() {
        commit
    } else {
        format!("{commit}-dirty")
    }
}

fn upstream_version() -> String {
    let binary = crate::operator::upstream_dir().join("bin/ansible-operator");
    std::process::Command::new(binary)
        .arg("version")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.split('"').nth(1).map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Draws the chart with benches/operators/chart.py (matplotlib, installed into
/// a cached virtualenv on first use).
fn draw_chart(results: &Path, chart: &Path) -> std::io::Result<()> {
    let script = crate::support::repo_path("benches/operators/chart.py");
    let status = std::process::Command::new("python3")
        .arg(&script)
        .arg(results)
        .arg(chart)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "{} failed: {status}",
            script.display()
        )))
    }
}
