//! CPU and memory of a process tree, read from /proc.

use std::collections::HashMap;
use std::fs;

/// Linux reports times in USER_HZ, which is 100 on every architecture
/// Kubernetes runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// A snapshot of one operator's resource use.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// CPU seconds of the process plus those of its children that have exited
    /// and been waited for: upstream's ansible-runner processes count.
    pub cpu_seconds: f64,
    /// Resident set of the process itself.
    pub rss_bytes: u64,
    /// The anonymous part of it (heap, stacks): what grows with the work,
    /// where the rest is the binary's pages, which the kernel can drop.
    pub anon_bytes: u64,
    /// Resident set of the process and every descendant alive now.
    pub tree_rss_bytes: u64,
    /// CPU seconds of the process and every descendant, alive (enka's
    /// Ansible worker) or exited and waited for.
    pub tree_cpu_seconds: f64,
}

impl Usage {
    /// `None` when the process is gone.
    pub fn of(pid: u32) -> Option<Usage> {
        let cpu_seconds = cpu_with_waited_children(pid)?;
        let rss_bytes = rss_of(pid)?;
        let anon_bytes = status_kib(pid, "RssAnon:")? * 1024;
        let living = descendants(pid);
        let tree_rss_bytes = rss_bytes + living.iter().copied().filter_map(rss_of).sum::<u64>();
        let tree_cpu_seconds = cpu_seconds
            + living
                .iter()
                .copied()
                .filter_map(cpu_with_waited_children)
                .sum::<f64>();
        Some(Usage {
            cpu_seconds,
            rss_bytes,
            anon_bytes,
            tree_rss_bytes,
            tree_cpu_seconds,
        })
    }
}

/// CPU seconds of the process and of its children that have exited and
/// been waited for.
fn cpu_with_waited_children(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&stat)?;
    // cutime and cstime are fields 16 and 17 of stat(5); the slice starts
    // at field 3. They only come in clock ticks.
    let children_ticks: f64 = fields[13..15]
        .iter()
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    Some(own_cpu_seconds(pid)? + children_ticks / TICKS_PER_SECOND)
}

/// CPU time of the process's own threads to the nanosecond, from schedstat:
/// stat's 10 ms ticks are too coarse for runs that take a few milliseconds.
/// Threads that have exited drop out; both operators keep theirs.
fn own_cpu_seconds(pid: u32) -> Option<f64> {
    let mut nanos = 0u64;
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let schedstat = fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        nanos += schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(nanos as f64 / 1e9)
}

/// The fields of /proc/<pid>/stat after the command name, which may itself
/// contain spaces and parentheses.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    (fields.len() > 15).then_some(fields)
}

fn rss_of(pid: u32) -> Option<u64> {
    Some(status_kib(pid, "VmRSS:")? * 1024)
}

/// A `kB` field of /proc/<pid>/status.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(ppid) = stat_fields(&stat).and_then(|f| f[1].parse().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            found.push(child);
            stack.push(child);
        }
    }
    found
}

/// Samples a process tree's resident set in the background and keeps the
/// peak, for upstream, whose children come and go between snapshots.
pub struct PeakSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl PeakSampler {
    pub fn start(pid: u32) -> PeakSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(usage) = Usage::of(pid) {
                    peak = peak.max(usage.tree_rss_bytes);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            peak
        });
        PeakSampler {
            stop,
            handle: Some(handle),
        }
    }

    /// The largest tree resident set seen, in bytes.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}
