//! The Prometheus process collector's `process_*` metrics, read from
//! `/proc/self` at each scrape as client_golang's collector does.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What `/proc/self` says about this process.
#[derive(Debug, Default, Clone, PartialEq)]
struct ProcessStats {
    cpu_seconds: f64,
    start_time_seconds: f64,
    virtual_memory_bytes: f64,
    resident_memory_bytes: f64,
    open_fds: f64,
    max_fds: f64,
}

/// Registers nothing itself; reads `/proc` on every scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = read_stats() else {
            return Ok(());
        };
        let counter = ConstCounter::new(stats.cpu_seconds);
        counter.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            MetricType::Counter,
        )?)?;
        let gauges = [
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                stats.start_time_seconds,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stats.virtual_memory_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stats.resident_memory_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                stats.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                stats.max_fds,
            ),
        ];
        for (name, help, value) in gauges {
            ConstGauge::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                None,
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}

fn read_stats() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot_time = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| boot_time(&text))?;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count());
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let page = rustix::param::page_size() as f64;
    let mut stats = parse_stat(&stat, ticks, page, boot_time)?;
    stats.open_fds = open_fds as f64;
    stats.max_fds = max_open_files(&limits).unwrap_or(0.0);
    Some(stats)
}

/// Fields of `/proc/self/stat` after the command name (which may hold
/// spaces and parentheses, so the split is at its last `)`).
fn parse_stat(text: &str, ticks: f64, page: f64, boot_time: f64) -> Option<ProcessStats> {
    let after_name = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, so fields[11].
    let number = |field: usize| fields.get(field - 3)?.parse::<f64>().ok();
    Some(ProcessStats {
        cpu_seconds: (number(14)? + number(15)?) / ticks,
        start_time_seconds: boot_time + number(22)? / ticks,
        virtual_memory_bytes: number(23)?,
        resident_memory_bytes: number(24)? * page,
        open_fds: 0.0,
        max_fds: 0.0,
    })
}

fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn max_open_files(limits: &str) -> Option<f64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 1000 123456789 512 18446744073709551615";
        let stats = parse_stat(stat, 100.0, 4096.0, 1_700_000_000.0).unwrap();
        assert_eq!(stats.cpu_seconds, 3.0);
        assert_eq!(stats.start_time_seconds, 1_700_000_010.0);
        assert_eq!(stats.virtual_memory_bytes, 123_456_789.0);
        assert_eq!(stats.resident_memory_bytes, 512.0 * 4096.0);
    }

    #[test]
    fn limits_and_boot_time_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
        assert_eq!(max_open_files(limits), Some(1_048_576.0));
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000.0)
        );
    }

    #[test]
    fn this_process_is_read() {
        let stats = read_stats().expect("/proc is readable on Linux");
        assert!(stats.resident_memory_bytes > 0.0);
        assert!(stats.open_fds > 0.0);
        assert!(stats.start_time_seconds > 1_600_000_000.0);
    }
}
