//! prometheus-client writes OpenMetrics; controller-runtime's endpoint
//! serves Prometheus' text format 0.0.4. The two differ in few places, all
//! in comment lines: a counter family is named without `_total` in
//! OpenMetrics and with it in 0.0.4 (the samples are the same), OpenMetrics
//! has `# UNIT`, `# EOF`, `unknown` and `info`, which 0.0.4 spells
//! differently or not at all. prometheus-client also ends every help text
//! with a period of its own; client_golang writes help as given.

/// The 0.0.4 text of an OpenMetrics exposition.
pub fn from_open_metrics(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, help.strip_suffix('.').unwrap_or(help)));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (family, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "unknown" => (name.to_owned(), "untyped"),
                other => (name.to_owned(), other),
            };
            if let Some((_, help)) = pending_help.take().filter(|(n, _)| *n == name) {
                out.push_str(&format!("# HELP {family} {help}\n"));
            }
            out.push_str(&format!("# TYPE {family} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_with_total_and_openmetrics_only_lines_go() {
        let open_metrics = "# HELP controller_runtime_reconcile Total number of reconciliations per controller..\n\
            # TYPE controller_runtime_reconcile counter\n\
            controller_runtime_reconcile_total{controller=\"a\",result=\"success\"} 3\n\
            # HELP process_cpu_seconds Total user and system CPU time spent in seconds..\n\
            # TYPE process_cpu_seconds counter\n\
            # UNIT process_cpu_seconds seconds\n\
            process_cpu_seconds_total 0.5\n\
            # HELP workqueue_depth Current depth of workqueue.\n\
            # TYPE workqueue_depth gauge\n\
            workqueue_depth{name=\"a\",controller=\"a\"} 0\n\
            # EOF\n";
        assert_eq!(
            from_open_metrics(open_metrics),
            "# HELP controller_runtime_reconcile_total Total number of reconciliations per controller.\n\
             # TYPE controller_runtime_reconcile_total counter\n\
             controller_runtime_reconcile_total{controller=\"a\",result=\"success\"} 3\n\
             # HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total 0.5\n\
             # HELP workqueue_depth Current depth of workqueue\n\
             # TYPE workqueue_depth gauge\n\
             workqueue_depth{name=\"a\",controller=\"a\"} 0\n"
        );
    }
}
