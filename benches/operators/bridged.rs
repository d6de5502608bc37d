//! What a task costs when enka hands it to the Ansible worker.
//!
//! Two views, side by side in the report: the task alone, timed around the
//! worker call in this process (the same `AnsibleWorker` a project gets,
//! with nothing else running), and a whole reconcile of the memcached
//! workload with one such task added (benches/bridged), against upstream on
//! the same role (see `Bench::bridged_latency`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use enka::worker::{AnsibleWorker, Config};
use serde_json::json;

use crate::usage::Usage;

/// The variants of benches/bridged: a module, another, a Python filter.
pub const VARIANTS: &[&str] = &["stat", "file", "filter"];

/// One variant's task, timed.
pub struct TaskCost {
    pub variant: &'static str,
    pub samples: Vec<Duration>,
}

/// The worker's own figures.
pub struct WorkerCost {
    pub tasks: Vec<TaskCost>,
    /// From spawning the worker to its first answer (Ansible imported): the
    /// fork server's start and the first fork, as after the idle exit (the
    /// median of five, the install's first start left out).
    pub start: Duration,
    /// From spawning the worker to its first `file` task's result, as
    /// `start`: what the first bridged task after the idle exit waits for.
    pub first_task: Duration,
    /// From asking for another worker to its first answer, forked from the
    /// warm fork server while the first is busy.
    pub forked_start: Duration,
    /// The worker's resident memory after the runs.
    pub rss_bytes: u64,
    /// Both workers and their fork server, resident and proportional
    /// (shared pages divided among the processes sharing them).
    pub pool_rss_bytes: u64,
    pub pool_pss_bytes: u64,
}

/// Summed resident and proportional set sizes of `pids`, from
/// /proc/<pid>/smaps_rollup.
fn rss_and_pss(pids: &[u32]) -> (u64, u64) {
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib * 1024)
    };
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .fold((0, 0), |(rss, pss), text| {
            (rss + field(&text, "Rss:"), pss + field(&text, "Pss:"))
        })
}

/// The parent of process `pid` (a worker's fork server).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    after.split(' ').nth(1)?.parse().ok()
}

/// Times `runs` of each variant's task through one warm worker.
pub fn task_costs(runs: usize) -> WorkerCost {
    let project = crate::support::repo_path("benches/bridged");
    let scratch = std::env::temp_dir().join(format!("enka-bench-worker-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let config = Config {
        base_dir: project.clone(),
        plugin_dirs: vec![project.join("roles/memcached_filter")],
        size: 2,
        ..Config::from_env()
    };
    let touched = scratch.join("touched").display().to_string();
    let (start, first_task) = cold_start(&config, 5, &touched);
    let worker = AnsibleWorker::new(config);
    worker
        .call(json!({"op": "hello"}), Some(Duration::from_secs(120)))
        .unwrap_or_else(|e| panic!("starting the Ansible worker: {e}"));
    let forked_start = forked_start(&worker);
    let requests = [
        (
            "stat",
            json!({"op": "run", "module": "ansible.builtin.stat", "args": {"path": "/tmp"}}),
        ),
        (
            "file",
            json!({"op": "run", "module": "ansible.builtin.file", "args": {"path": touched, "state": "touch"}}),
        ),
        (
            "filter",
            json!({"op": "filter", "name": "reverse_words", "args": ["latency-0001", "-"], "kwargs": {}}),
        ),
    ];
    let mut tasks = Vec::new();
    for (variant, request) in requests {
        let mut samples = Vec::with_capacity(runs);
        for i in 0..runs + 5 {
            let started = Instant::now();
            let answer = worker
                .call(request.clone(), Some(Duration::from_secs(60)))
                .unwrap_or_else(|e| panic!("{variant}: {e}"));
            let elapsed = started.elapsed();
            if let Some(result) = answer.get("result") {
                assert_ne!(result["failed"], json!(true), "{variant}: {result}");
            }
            // The first few warm the worker's imports of that module.
            if i >= 5 {
                samples.push(elapsed);
            }
        }
        tasks.push(TaskCost {
            variant: VARIANTS
                .iter()
                .find(|v| **v == variant)
                .copied()
                .unwrap_or("?"),
            samples,
        });
    }
    let rss_bytes = worker
        .idle_pids()
        .first()
        .and_then(|pid| Usage::of(*pid))
        .map_or(0, |u| u.rss_bytes);
    let mut pool = worker.idle_pids();
    if let Some(server) = pool.first().and_then(|pid| parent(*pid)) {
        pool.push(server);
    }
    let (pool_rss_bytes, pool_pss_bytes) = rss_and_pss(&pool);
    let _ = std::fs::remove_dir_all(PathBuf::from(&scratch));
    WorkerCost {
        tasks,
        start,
        first_task,
        forked_start,
        rss_bytes,
        pool_rss_bytes,
        pool_pss_bytes,
    }
}

/// A worker's start as after the idle exit, when nothing runs: the
/// medians of `runs` new pools, from asking to its first answer and to its
/// first `file` task's result (the fork server's Python start and Ansible's
/// imports, the first fork, then what a worker's first task makes once).
/// The very first start, which compiles the scripts' bytecode and keeps
/// ansible-core's parses once per install, is left out.
fn cold_start(config: &Config, runs: usize, touched: &str) -> (Duration, Duration) {
    let task = json!({"op": "run", "module": "ansible.builtin.file", "args": {"path": touched, "state": "touch"}});
    let (mut answers, mut tasks): (Vec<Duration>, Vec<Duration>) = (0..=runs)
        .map(|_| {
            let worker = AnsibleWorker::new(config.clone());
            let started = Instant::now();
            worker
                .call(json!({"op": "hello"}), Some(Duration::from_secs(120)))
                .unwrap_or_else(|e| panic!("starting the Ansible worker: {e}"));
            let answered = started.elapsed();
            let result = worker
                .call(task.clone(), Some(Duration::from_secs(60)))
                .unwrap_or_else(|e| panic!("a new worker's first task: {e}"));
            assert_ne!(result["result"]["failed"], json!(true), "{result}");
            (answered, started.elapsed())
        })
        .skip(1)
        .unzip();
    answers.sort();
    tasks.sort();
    (answers[answers.len() / 2], tasks[tasks.len() / 2])
}

/// How long a second worker takes to answer, forked while the first is
/// busy with a task.
fn forked_start(worker: &std::sync::Arc<AnsibleWorker>) -> Duration {
    std::thread::scope(|scope| {
        let busy = scope.spawn(|| {
            worker
                .call(
                    json!({"op": "run", "module": "ansible.builtin.command", "args": {"_raw_params": "sleep 1"}}),
                    Some(Duration::from_secs(60)),
                )
                .unwrap_or_else(|e| panic!("a busy task: {e}"))
        });
        // Let the busy task take the only worker.
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        worker
            .call(json!({"op": "hello"}), Some(Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("a forked worker: {e}"));
        let took = started.elapsed();
        busy.join().expect("the busy task");
        took
    })
}
