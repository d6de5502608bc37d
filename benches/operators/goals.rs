//! docs/benchmarks.md's "Against the goals": each goal of the project
//! beside what the run measured.

use std::fmt::Write as _;

use crate::report::{Report, ms};
use crate::scenarios::{Side, mib};
use crate::workload::percentile;

/// The seed and the latency ratio as `make bench` measured them before,
/// for the before-and-after table: (commit and what it had, seed to
/// Kiyoshi, of which between runs, enka p50 ÷ bare p50).
const SEED_HISTORY: &[(&str, f64, f64, f64)] = &[
    ("2026-11-23, main as issue 19 found it", 1.65, 0.47, 1.38),
    (
        "d1c67d8: every read and list sent to the API server",
        1.06,
        0.34,
        0.95,
    ),
];

impl Report {
    /// The project's goals, each against what this run measured.
    pub(crate) fn goals(&self) -> String {
        let mut md = String::from("\n## Against the goals\n\n");
        let p50 = |s: &Side| ms(percentile(&s.latency, 50.0));
        let bare_p50 = ms(percentile(&self.bare.latency, 50.0));
        let caller = |times: &crate::scenarios::RequestTimes, kind: &str| {
            times.mean_ms(kind).unwrap_or(f64::NAN)
        };
        if let (Some(enka), Some(upstream)) = (&self.enka, &self.upstream) {
            let _ = writeln!(
                md,
                "- **Latency p50 at least 100× lower than upstream, within 2× of the bare API calls**: \
                 {:.0}× lower ({:.1} ms against {:.0} ms), {:.2}× the bare calls' {:.1} ms, each Memcached \
                 created after the machine idled {} ms. The same three requests as each caller timed them, \
                 enka against the bare controller: status PUT {:.2} against {:.2} ms, GET {:.2} against {:.2}, \
                 POST {:.2} against {:.2}; the API server's own time on them (its \
                 `apiserver_request_duration_seconds`): {:.2} against {:.2}, {:.2} against {:.2}, {:.2} against \
                 {:.2}. Between the watch event and the run, {:.2} ms in the work queue on average (upstream: \
                 {:.2} ms); enka's own code takes {:.2} ms of a run.",
                p50(upstream) / p50(enka),
                p50(enka),
                p50(upstream),
                p50(enka) / bare_p50,
                bare_p50,
                crate::scenarios::IDLE_BEFORE_SAMPLE.as_millis(),
                caller(&enka.per_reconcile.requests, "PUT"),
                caller(&self.bare.requests, "PUT"),
                caller(&enka.per_reconcile.requests, "GET"),
                caller(&self.bare.requests, "GET"),
                caller(&enka.per_reconcile.requests, "POST"),
                caller(&self.bare.requests, "POST"),
                caller(&enka.server, "PUT memcacheds/status"),
                caller(&self.bare.server, "PUT memcacheds/status"),
                caller(&enka.server, "GET deployments"),
                caller(&self.bare.server, "GET deployments"),
                caller(&enka.server, "POST deployments"),
                caller(&self.bare.server, "POST deployments"),
                enka.per_reconcile.queue_wait_seconds.unwrap_or(f64::NAN) * 1e3,
                upstream
                    .per_reconcile
                    .queue_wait_seconds
                    .unwrap_or(f64::NAN)
                    * 1e3,
                enka.per_reconcile
                    .api_wait_seconds
                    .map_or(f64::NAN, |w| (enka.per_reconcile.wall_seconds - w) * 1e3),
            );
        }
        if let (Some(enka), Some((concurrency, wide))) = (&self.enka, &self.wide_burst) {
            let _ = writeln!(
                md,
                "- **500 reconciles per second on 2 cores, or bounded by the API server**: {:.0}/s with the \
                 default concurrency and {:.0}/s with {concurrency} at once, while kube-apiserver and etcd kept \
                 {:.2} cores busy and enka {:.2}: the control plane is the bound, with enka using about \
                 {:.0}% of what the API server spends on the same reconciles.",
                enka.burst.reconciles / enka.burst.seconds,
                wide.reconciles / wide.seconds,
                wide.control_plane_cpu_seconds / wide.seconds,
                wide.operator_cpu_seconds / wide.seconds,
                100.0 * wide.operator_cpu_seconds / wide.control_plane_cpu_seconds,
            );
        }
        if let Some(at_1000) = self.scale.iter().find(|p| p.crs == 1000) {
            let slopes: Vec<String> = self
                .scale
                .windows(2)
                .map(|w| {
                    let kib = (w[1].rss_bytes as f64 - w[0].rss_bytes as f64)
                        / 1024.0
                        / (w[1].crs - w[0].crs) as f64;
                    format!(
                        "{kib:.1} KiB per Memcached from {} to {}",
                        w[0].crs, w[1].crs
                    )
                })
                .collect();
            let _ = writeln!(
                md,
                "- **RSS under 30 MiB at 1000 CRs, growing linearly**: {:.1} MiB at 1000 ({:.1} MiB of it \
                 anonymous); {}.",
                mib(at_1000.rss_bytes),
                mib(at_1000.anon_bytes),
                slopes.join(", ")
            );
        }
        if let (Some(one), Some(three)) = (
            self.sharded.iter().find(|r| r.shards == 1),
            self.sharded.iter().find(|r| r.shards == 3),
        ) {
            let growth = |run: &crate::scenarios::ShardedLoad, i: usize| {
                mib(run.final_rss_bytes[i].saturating_sub(run.idle_rss_bytes[i]))
            };
            let one_growth = growth(one, 0);
            let replicas: Vec<usize> = (0..three.final_rss_bytes.len()).collect();
            let list = |value: &dyn Fn(usize) -> String| {
                replicas
                    .iter()
                    .map(|&i| value(i))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mean_share = replicas.iter().map(|&i| growth(three, i)).sum::<f64>()
                / replicas.len() as f64
                / one_growth;
            let (busiest, held) = three.busiest_replica();
            let _ = writeln!(
                md,
                "- **Per-replica memory about a third of one replica's at 3 shards**: once settled, the three \
                 replicas, holding {} of {} Memcacheds as the sharder's ring assigned them, grew {} MiB, \
                 against {:.1} MiB for one replica holding all of them: {} of it, **{:.2} on average**; the \
                 busiest (holding {:.0}%) {:.2}. Per Memcached held: {} KiB against {:.1}. What does not \
                 divide is each process's own baseline, {:.1} MiB of RSS before any Memcached (binary, \
                 runtime, clients). Dependents follow their owner: the ring lists Deployments as controlled \
                 resources, a shard's owner references are controller references, so each replica watches only \
                 the Deployments of its own Memcacheds. Together the three replicas hold {:.1} MiB against \
                 one's {:.1}, and finish in {:.1} s against {:.1} s.",
                list(&|i| format!("{:.0}", three.reconciles_per_replica[i])),
                three.crs,
                list(&|i| format!("{:.1}", growth(three, i))),
                one_growth,
                list(&|i| format!("{:.2}", growth(three, i) / one_growth)),
                mean_share,
                100.0 * held / three.crs as f64,
                growth(three, busiest) / one_growth,
                list(&|i| format!(
                    "{:.1}",
                    growth(three, i) * 1024.0 / three.reconciles_per_replica[i]
                )),
                one_growth * 1024.0 / one.reconciles,
                mib(three.idle_rss_bytes[busiest]),
                three.final_rss_bytes.iter().map(|b| mib(*b)).sum::<f64>(),
                mib(one.final_rss_bytes[0]),
                three.seconds,
                one.seconds,
            );
        }
        if let Some(worker) = &self.worker {
            let task = |v: &str| {
                worker
                    .tasks
                    .iter()
                    .find(|t| t.variant == v)
                    .map_or(f64::NAN, |t| ms(percentile(&t.samples, 50.0)))
            };
            let _ = writeln!(
                md,
                "- **A bridged `file` task p50 ≤ 3 ms, `stat` ≤ 8 ms; a worker's start to its first answer \
                 ≤ 150 ms**: {:.1} ms and {:.1} ms through a warm worker (a Python filter {:.2} ms); a worker \
                 forked from the warm fork server answers in {:.0} ms, one started from nothing (the fork \
                 server's Python start and Ansible's imports, as after the idle exit) in {:.0} ms, and has \
                 its first `file` task's result {:.0} ms after the start; a worker holds {:.0} MiB, two with \
                 their fork server {:.0} MiB resident but {:.0} MiB proportional.",
                task("file"),
                task("stat"),
                task("filter"),
                ms(worker.forked_start),
                ms(worker.start),
                ms(worker.first_task),
                mib(worker.rss_bytes),
                mib(worker.pool_rss_bytes),
                mib(worker.pool_pss_bytes)
            );
        }
        let idle: Vec<String> = self
            .bridged
            .iter()
            .map(|run| {
                format!(
                    "{}: {:.1} MiB",
                    run.variant,
                    mib(run.enka.idle_tree_rss_bytes)
                )
            })
            .collect();
        if let (Some(upstream), false) = (&self.upstream, idle.is_empty()) {
            let _ = writeln!(
                md,
                "- **After a bridged reconcile and the idle time, enka's RSS with its children at or below \
                 upstream's idle RSS ({:.1} MiB)**: {} ({} s after the last reconcile, the workers' idle exit \
                 set to 5 s for the run; it is 60 s by default).",
                mib(upstream.idle.tree_rss_bytes),
                idle.join("; "),
                crate::scenarios::BRIDGED_IDLE.as_secs()
            );
        }
        let ratios: Vec<String> = self
            .bridged
            .iter()
            .filter_map(|run| {
                let upstream = run.upstream.as_ref()?;
                let e = ms(percentile(&run.enka.latency, 50.0));
                let u = ms(percentile(&upstream.latency, 50.0));
                Some(format!(
                    "{}: {:.0}× ({e:.1} ms against {u:.0} ms)",
                    run.variant,
                    u / e
                ))
            })
            .collect();
        if !ratios.is_empty() {
            let _ = writeln!(
                md,
                "- **A reconcile with a bridged task at least 40× faster than upstream's on the same role**: {}.",
                ratios.join("; ")
            );
        }
        if let Some(seed) = &self.seed {
            // Each deliberate failure waits enka's first retry delay, which is
            // controller-runtime's rate limiter's first step too.
            let first_retry = enka::operator::controller::backoff(1);
            let backoff_seconds = seed.failed_runs * first_retry.as_secs_f64();
            let _ = writeln!(
                md,
                "- **The seed to Kiyoshi under 1 s**: {:.2} s for {} Zundokos in {} runs: {:.2} s inside runs, \
                 {:.2} s of that waiting on the API server for the requests the role's modules make (below: \
                 `k8s_status` and `k8s` read before they write, `k8s_info` lists; about ten calls per Zundoko, \
                 four of them writes; the reads of the Hikawa and the lists of Zundokos come from enka's \
                 watch caches, as upstream's proxy answers them from its informer cache, and the GET of each \
                 new Zundoko's name is a cache miss, which upstream's proxy too passes to the API server); \
                 {:.2} s of backoff, since {} runs failed on purpose, as the seed's \
                 role does to loop, and each was retried after {} ms, the first step of upstream's rate limiter; \
                 {:.2} s in the work queue past due (a retry's delay ends on tokio's 1 ms timer; a trigger \
                 due now starts at once); \
                 the other {:.2} s is watch events coming back after each run's writes. Per run, the song's \
                 requests and the API server's own time on each: {}.",
                seed.seconds,
                seed.zundokos,
                seed.reconciles,
                seed.run_seconds,
                seed.api_wait_seconds,
                backoff_seconds,
                seed.failed_runs,
                first_retry.as_millis(),
                seed.queue_wait_seconds,
                (seed.seconds - seed.run_seconds - backoff_seconds - seed.queue_wait_seconds)
                    .max(0.0),
                seed.server_times.per_run(seed.reconciles),
            );
            let between = seed.seconds - seed.run_seconds;
            let ratio = self.enka.as_ref().map(|enka| p50(enka) / bare_p50);
            let _ = writeln!(
                md,
                "\nThe seed and the latency ratio before and after the work of issue 19 (earlier rows: \
                 `make bench` on the commit named):\n\n\
                 | | seed to Kiyoshi (s) | of which between runs (s) | enka p50 ÷ bare API calls p50 |\n\
                 |---|---|---|---|"
            );
            for (when, seconds, between, ratio) in SEED_HISTORY {
                let _ = writeln!(md, "| {when} | {seconds:.2} | {between:.2} | {ratio:.2} |");
            }
            let ratio = ratio.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}"));
            let _ = writeln!(
                md,
                "| this run | {:.2} | {between:.2} | {ratio} |",
                seed.seconds
            );
        }
        md
    }
}
