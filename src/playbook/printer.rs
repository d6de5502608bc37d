//! What `enka playbook` prints: each task's result as Ansible's default
//! stdout callback shows it, warnings as Display writes them, the recap,
//! and each result as a JSON line in the events file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use minijinja::Value;

use super::shown::{censored_loop, dumped, verbose_always, without_items};
use super::wrap;
use crate::engine::{self, Observer, TaskEvent, TaskStatus};
use crate::role::Task;
use crate::template::convert;

/// Prints each task's result as Ansible's default stdout callback does, and
/// appends it to the events file as a JSON line.
pub(super) struct Printer {
    verbosity: u8,
    /// The ansible-core line whose default callback is followed.
    semantics: crate::template::Semantics,
    /// `--diff`: a changed result's diff is shown.
    diff: bool,
    events: Option<Mutex<std::fs::File>>,
    /// Where the failed tasks shown were, to tell a task's failure
    /// (already printed) from a run's.
    shown_failures: Mutex<std::collections::HashSet<String>>,
    /// The task whose banner was printed last, and the hosts shown under
    /// it.
    last_banner: Mutex<Option<(String, Vec<String>)>>,
    /// `set_stats` data: per host, or `_run` for the whole run.
    custom_stats: Mutex<BTreeMap<String, serde_json::Map<String, serde_json::Value>>>,
    /// Warnings and deprecations printed so far: Display says each once.
    said: Mutex<std::collections::HashSet<String>>,
    /// The banner key of the task whose background job's wait was shown
    /// (its banner came with the first `ASYNC` line).
    waited: Mutex<Option<String>>,
    /// The `included:` lines of the include task running now, merged
    /// across hosts; printed before anything else is.
    pending_includes: Mutex<PendingIncludes>,
}

/// `included:` lines waiting for every host of the round (the strategy
/// gathers the round's includes, IncludedFile.process_include_results).
#[derive(Default)]
struct PendingIncludes {
    /// The include task's banner key.
    task: String,
    /// Each included file (and item) with the hosts it is for, in order.
    lines: Vec<(String, Vec<String>)>,
}

impl PendingIncludes {
    /// Adds `host`'s include of `what` (file and item): to the first line
    /// of it that `host` is not on yet, else a new line.
    fn add(&mut self, what: String, host: &str) {
        let mut from = 0;
        while let Some(at) = self.lines[from..].iter().position(|(w, _)| *w == what) {
            let hosts = &mut self.lines[from + at].1;
            if !hosts.iter().any(|h| h == host) {
                hosts.push(host.to_owned());
                return;
            }
            from += at + 1;
        }
        self.lines.push((what, vec![host.to_owned()]));
    }
}

impl Printer {
    pub(super) fn new(
        verbosity: u8,
        diff: bool,
        events_file: Option<&Path>,
        semantics: crate::template::Semantics,
    ) -> Self {
        let events = events_file.and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| eprintln!("[WARNING]: cannot write {}: {e}", path.display()))
                .ok()
                .map(Mutex::new)
        });
        Printer {
            verbosity,
            semantics,
            diff,
            events,
            shown_failures: Mutex::default(),
            last_banner: Mutex::new(None),
            custom_stats: Mutex::new(BTreeMap::new()),
            said: Mutex::new(std::collections::HashSet::new()),
            pending_includes: Mutex::default(),
            waited: Mutex::default(),
        }
    }

    /// Records in the events file that a playbook was refused as it loaded:
    /// a run that ends there still checked something (a test may expect
    /// the refusal).
    pub(super) fn refused(&self, playbook: &Path, message: &str) {
        self.write_event(|| {
            serde_json::json!({
                "status": "refused",
                "playbook": playbook.display().to_string(),
                "message": message,
            })
        });
    }

    /// Appends one JSON line to the events file, if there is one.
    fn write_event(&self, line: impl FnOnce() -> serde_json::Value) {
        if let Some(events) = &self.events
            && let Ok(mut file) = events.lock()
        {
            let _ = writeln!(file, "{}", line());
        }
    }

    /// The strategy runs meta tasks itself: a line at -vv, and a result
    /// only when skipped. Whether that was all.
    /// Under `--diff` (or a task's `diff`), the diff of a changed result
    /// or loop item (v2_on_file_diff), before its own line.
    fn file_diff(&self, out: &mut impl Write, event: &TaskEvent<'_>, result: &Value) {
        let wanted = self.diff
            || event
                .task
                .settings
                .get(crate::role::Setting::Diff)
                .is_some();
        let flag = |key: &str| result.get_attr(key).is_ok_and(|v| v.is_true());
        let shown = flag("changed") && !flag("failed") && !flag("skipped");
        let Some(diff) = result.get_attr("diff").ok().filter(|d| d.is_true()) else {
            return;
        };
        let text = super::diff::shown(&diff);
        if wanted && shown && !text.is_empty() {
            // Display.display ends what it prints with one newline.
            let newline = if text.ends_with('\n') { "" } else { "\n" };
            let _ = write!(out, "{text}{newline}");
        }
    }

    /// A loop's lines: one per item (v2_runner_item_on_*), each after its
    /// diff; then the task's own line where the callback shows one.
    fn loop_lines(
        &self,
        out: &mut impl Write,
        event: &TaskEvent<'_>,
        items: &Value,
        debug: bool,
        verbose: bool,
    ) {
        let host = event.host;
        // A loop shows a line per item (v2_runner_item_on_*); only a
        // skipped task adds its own line.
        for item in items.try_iter().into_iter().flatten() {
            self.file_diff(out, event, &item);
            if item.get_attr("failed").is_ok_and(|f| f.is_true()) {
                self.error_section(out, event.task, &item);
            }
            let _ = writeln!(out, "{}", self.item_line(host, &item, debug));
        }
        if event.status == TaskStatus::Skipped {
            let _ = writeln!(out, "skipping: [{host}]");
        } else if (censored_loop(event.result)
            && self.semantics == crate::template::Semantics::Ansible218)
            || (debug
                && matches!(event.status, TaskStatus::Failed | TaskStatus::Ignored)
                && event
                    .result
                    .get_attr("msg")
                    .is_ok_and(|m| !m.is_undefined()))
        {
            // A no_log loop's own result is censored too, and a
            // failed debug loop's keeps only its `msg` (the
            // failure's _clean_results runs before the items are
            // looked for): either has no `results` for the
            // callback, which shows it as a task without a loop.
            let own = without_items(event.result);
            let line = self.result_line(host, event.status, &own, debug, verbose);
            let _ = writeln!(out, "{line}");
        }
    }

    /// 2.19's `[ERROR]` section before a failure's line.
    fn error_section(&self, out: &mut impl Write, task: &Task, result: &Value) {
        if self.semantics != crate::template::Semantics::Ansible219 {
            return;
        }
        if let Some(text) = super::failure::error_section(task, result) {
            let _ = write!(out, "{text}");
        }
    }

    fn meta_said(&self, out: &mut impl Write, event: &TaskEvent<'_>) -> bool {
        if self.verbosity >= 2 {
            let header = ["skip_reason", "msg"].iter().find_map(|key| {
                event
                    .result
                    .get_attr(key)
                    .ok()
                    .filter(|v| !v.is_undefined())
            });
            if let Some(header) = header {
                let _ = writeln!(out, "META: {header}");
            }
        }
        event.status == TaskStatus::Ok
    }

    /// `TASK [name] ****` once for the hosts that run a task in turn;
    /// `same_host_again`: not again for a host already under this banner.
    fn task_banner(
        &self,
        out: &mut impl Write,
        task: &Task,
        handler: bool,
        host: &str,
        same_host_again: bool,
    ) {
        let name = task.title();
        let shown = banner_key(task);
        self.flush_includes_unless(out, Some(&shown));
        let repeated = self
            .last_banner
            .lock()
            .is_ok_and(|mut last| match &mut *last {
                Some((task, hosts)) if *task == shown && !hosts.iter().any(|h| h == host) => {
                    hosts.push(host.to_owned());
                    true
                }
                Some((task, _)) if same_host_again && *task == shown => true,
                _ => {
                    *last = Some((shown, vec![host.to_owned()]));
                    false
                }
            });
        if !repeated {
            let kind = if handler { "RUNNING HANDLER" } else { "TASK" };
            let _ = writeln!(out, "\n{}", banner(&format!("{kind} [{name}]")));
        }
    }

    /// Prints the pending `included:` lines, unless they are of the task
    /// whose banner key is `task` (its round is still going on).
    fn flush_includes_unless(&self, out: &mut impl Write, task: Option<&str>) {
        let Ok(mut pending) = self.pending_includes.lock() else {
            return;
        };
        if pending.lines.is_empty() || task == Some(pending.task.as_str()) {
            return;
        }
        for (what, hosts) in std::mem::take(&mut pending.lines) {
            let (file, item) = what.split_once('\u{0}').unwrap_or((&what, ""));
            let mut line = format!("included: {file} for {}", hosts.join(", "));
            if let Some(item) = item.strip_prefix('\u{1}') {
                line.push_str(&format!(" => (item={item})"));
            }
            let _ = writeln!(out, "{line}");
        }
    }

    /// Prints what is pending before output of another kind.
    pub(super) fn flush(&self) {
        self.flush_includes_unless(&mut std::io::stdout().lock(), None);
    }

    pub(super) fn reported(&self, location: &crate::role::Location) -> bool {
        self.shown_failures
            .lock()
            .is_ok_and(|shown| shown.contains(&location.to_string()))
    }

    /// A task's line, as the default callback's `v2_runner_on_*` print it.
    fn result_line(
        &self,
        host: &str,
        status: TaskStatus,
        result: &Value,
        debug: bool,
        verbose: bool,
    ) -> String {
        let word = status.word();
        // A skipped line names the host alone (v2_runner_on_skipped).
        let host = match status {
            TaskStatus::Skipped => host.to_owned(),
            _ => host_label(host, result),
        };
        match status {
            TaskStatus::Failed | TaskStatus::Ignored => {
                let text = dumped(result, debug, self.verbosity);
                let unreachable = result.get_attr("unreachable").is_ok_and(|v| v.is_true());
                let what = if unreachable {
                    "UNREACHABLE!"
                } else {
                    "FAILED!"
                };
                format!("{word}: [{host}]: {what} => {text}")
            }
            _ if verbose => {
                let text = dumped(result, debug, self.verbosity);
                format!("{word}: [{host}] => {text}")
            }
            _ => format!("{word}: [{host}]"),
        }
    }

    /// One loop item's line, as the default callback's item hooks print it.
    fn item_line(&self, host: &str, item: &Value, debug: bool) -> String {
        let flag = |key: &str| item.get_attr(key).is_ok_and(|v| v.is_true());
        // An item not to be shown (the task's no_log, or its action's own
        // `_ansible_no_log`) is censored, and its label with it: the clean
        // copy the callback gets has no item, so 2.18 labels it `None`.
        let censored;
        let item = if flag("_ansible_no_log") {
            censored = crate::engine::censored_item(item);
            &censored
        } else {
            item
        };
        let label = if flag("_ansible_no_log") {
            // 2.19's callback says why there is no label.
            match self.semantics {
                crate::template::Semantics::Ansible218 => "None".to_owned(),
                crate::template::Semantics::Ansible219 => "(censored due to no_log)".to_owned(),
            }
        } else {
            let label = item
                .get_attr("_ansible_item_label")
                .ok()
                .filter(|v| !v.is_undefined())
                .or_else(|| {
                    let var = item.get_attr("ansible_loop_var").ok()?;
                    item.get_item(&var).ok()
                })
                .unwrap_or_default();
            crate::template::pyrepr::to_text(&label)
        };
        let verbose = self.verbosity > 0 || verbose_always(item);
        // An item whose host could not be reached is a failed item to the
        // callback (v2_runner_item_on_failed).
        if flag("failed") || flag("unreachable") {
            let text = dumped(item, debug, self.verbosity);
            format!(
                "failed: [{}] (item={label}) => {text}",
                host_label(host, item)
            )
        } else if flag("skipped") {
            let mut line = format!("skipping: [{host}] => (item={label}) ");
            if verbose {
                line.push_str(&format!(" => {}", dumped(item, debug, self.verbosity)));
            }
            line
        } else {
            let word = if flag("changed") { "changed" } else { "ok" };
            let mut line = format!("{word}: [{}] => (item={label})", host_label(host, item));
            if verbose {
                line.push_str(&format!(" => {}", dumped(item, debug, self.verbosity)));
            }
            line
        }
    }

    /// Keeps the `ansible_stats` a `set_stats` result carries, as Ansible's
    /// strategy does: per host or for the run, each key replaced or (with
    /// `aggregate`, the default) added to what earlier results set.
    fn collect_stats(&self, host: &str, result: &serde_json::Value) {
        let Some(stats) = result.get("ansible_stats") else {
            return;
        };
        let Some(data) = stats.get("data").and_then(|d| d.as_object()) else {
            return;
        };
        let flag =
            |key: &str, default: bool| stats.get(key).and_then(|v| v.as_bool()).unwrap_or(default);
        let owner = if flag("per_host", false) {
            host
        } else {
            "_run"
        };
        let Ok(mut custom) = self.custom_stats.lock() else {
            return;
        };
        let kept = custom.entry(owner.to_owned()).or_default();
        for (key, value) in data {
            match kept.get_mut(key) {
                Some(old) if flag("aggregate", true) => aggregate_stat(old, value),
                _ => {
                    kept.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// `CUSTOM STATS` after the recap, when ANSIBLE_SHOW_CUSTOM_STATS asks
    /// for them (the default callback's `show_custom_stats`).
    pub(super) fn custom_stats(&self) {
        let shown = std::env::var("ANSIBLE_SHOW_CUSTOM_STATS")
            .is_ok_and(|v| crate::template::to_bool(&Value::from(v)));
        let Ok(custom) = self.custom_stats.lock() else {
            return;
        };
        if !shown || custom.is_empty() {
            return;
        }
        // json.dumps(indent=1, sort_keys=True) with its newlines removed.
        let dumped = |data: &serde_json::Map<String, serde_json::Value>| {
            crate::template::python_json(
                &convert::from_json(&serde_json::Value::Object(data.clone())),
                Some(1),
            )
            .unwrap_or_default()
            .replace('\n', "")
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "\n{}", banner("CUSTOM STATS: "));
        for (host, data) in custom.iter().filter(|(h, _)| *h != "_run") {
            let _ = writeln!(out, "\t{host}: {}", dumped(data));
        }
        if let Some(run) = custom.get("_run") {
            let _ = writeln!(out, "\n\tRUN: {}", dumped(run));
        }
        let _ = writeln!(out);
    }

    /// The play recap: a line per host, sorted by name as Ansible's.
    pub(super) fn recap(&self, hosts: &[(String, engine::Stats)]) {
        self.flush();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "\n{}", banner("PLAY RECAP"));
        // AggregateStats lists the hosts it counted something for: a host
        // that only ran meta tasks is not in the recap.
        let mut hosts: Vec<&(String, engine::Stats)> = hosts
            .iter()
            .filter(|(_, s)| {
                s.ok + s.changed + s.unreachable + s.failed + s.skipped + s.rescued + s.ignored > 0
            })
            .collect();
        hosts.sort_by(|a, b| a.0.cmp(&b.0));
        for (host, stats) in hosts {
            let _ = writeln!(
                out,
                "{:<27}: ok={:<4} changed={:<4} unreachable={:<4} failed={:<4} skipped={:<4} rescued={:<4} ignored={:<4}",
                host,
                stats.ok,
                stats.changed,
                stats.unreachable,
                stats.failed,
                stats.skipped,
                stats.rescued,
                stats.ignored
            );
        }
        let _ = writeln!(out);
    }
}

/// The host a result's line names: `host -> delegate` for a task
/// delegated to another host, with the delegate's address when it has
/// another (CallbackBase.host_label).
fn host_label(host: &str, result: &Value) -> String {
    let delegated = result
        .get_attr("_ansible_delegated_vars")
        .ok()
        .filter(|v| !v.is_undefined());
    let Some(delegated) = delegated else {
        return host.to_owned();
    };
    let text = |key: &str| {
        delegated
            .get_attr(key)
            .ok()
            .filter(|v| !v.is_undefined())
            .map(|v| crate::template::pyrepr::to_text(&v))
    };
    let Some(delegate) = text("ansible_delegated_host").filter(|d| d != host) else {
        return host.to_owned();
    };
    match text("ansible_host").filter(|address| *address != delegate) {
        Some(address) => format!("{host} -> {delegate}({address})"),
        None => format!("{host} -> {delegate}"),
    }
}

/// A result that failed before its task's `delegate_to` was templated (its
/// loop, say) names the delegate as written, as the task the callback gets
/// still holds it so.
fn with_written_delegate(event: &TaskEvent<'_>) -> Value {
    let result = event.result;
    let marked = result
        .get_attr("_ansible_delegated_vars")
        .is_ok_and(|v| !v.is_undefined());
    let written = event.task.settings.get(crate::role::Setting::DelegateTo);
    let (false, Some(written)) = (marked, written) else {
        return result.clone();
    };
    let delegated = Value::from_pairs(vec![(
        Value::from("ansible_delegated_host"),
        Value::from(crate::template::pyrepr::to_text(written)),
    )]);
    crate::template::convert::with_entry(result, "_ansible_delegated_vars", delegated)
}

/// Whether `task` is a meta action the linear strategy runs for each host
/// (the others run once for all).
fn per_host_meta(task: &Task) -> bool {
    let crate::role::Action::Module { module, args } = &task.action else {
        return false;
    };
    if module.name().rsplit('.').next() != Some("meta") {
        return false;
    }
    let action = args.get_attr("_raw_params").ok();
    action
        .as_ref()
        .and_then(|a| a.as_str())
        .is_some_and(|a| !crate::modules::meta::runs_once_for_batch(a))
}

/// `TASK [name] ****…` padded to 80 columns, as Ansible's banner.
pub(super) fn banner(title: &str) -> String {
    let stars = 79usize.saturating_sub(title.len()).max(3);
    format!("{title} {}", "*".repeat(stars))
}

fn module_name(task: &Task) -> &str {
    match &task.action {
        crate::role::Action::Module { module, .. } => module.name(),
        crate::role::Action::IncludeTasks { .. } => "include_tasks",
        crate::role::Action::IncludeRole(_) => "include_role",
        crate::role::Action::ImportRole { .. } => "import_role",
        crate::role::Action::Block { .. } => "block",
    }
}

impl Observer for Printer {
    fn async_event(
        &self,
        task: &Task,
        handler: bool,
        host: &str,
        event: &crate::modules::AsyncEvent,
    ) {
        use crate::modules::AsyncEventKind;
        let mut out = std::io::stdout().lock();
        self.task_banner(&mut out, task, handler, host, true);
        if let Ok(mut waited) = self.waited.lock() {
            *waited = Some(banner_key(task));
        }
        let jid = &event.jid;
        let line = match event.kind {
            AsyncEventKind::Poll => format!(
                "ASYNC POLL on {host}: jid={jid} started={} finished={}",
                crate::template::pyrepr::to_text(&event.started),
                crate::template::pyrepr::to_text(&event.finished)
            ),
            AsyncEventKind::Ok => format!("ASYNC OK on {host}: jid={jid}"),
            AsyncEventKind::Failed => format!("ASYNC FAILED on {host}: jid={jid}"),
        };
        let _ = writeln!(out, "{line}");
    }

    fn play_started(&self, name: &str, hosts: usize) {
        self.flush();
        if let Ok(mut last) = self.last_banner.lock() {
            *last = None;
        }
        println!("\n{}", banner(&format!("PLAY [{name}]")));
        // A play of no tasks still ran on its hosts (a harness tells it
        // from a run that did nothing).
        self.write_event(|| serde_json::json!({"status": "play", "play": name, "hosts": hosts}));
    }

    fn no_hosts_remaining(&self) {
        self.flush();
        println!("\n{}", banner("NO MORE HOSTS LEFT"));
    }

    fn no_hosts_matched(&self) {
        println!("skipping: no hosts matched");
    }

    fn warning(&self, message: &str) {
        self.say(format!("[WARNING]: {message}"));
    }

    fn deprecation(&self, message: &str, version: &str) {
        if let Some(text) = deprecation_text(message, Some(version)) {
            self.say(text);
        }
    }

    fn included(&self, task: &Task, handler: bool, host: &str, file: &Path, item: Option<&Value>) {
        let mut out = std::io::stdout().lock();
        self.task_banner(&mut out, task, handler, host, true);
        // An item (even an empty one) is marked, to be told from none.
        let item = item
            .map(|item| format!("\u{1}{}", crate::template::pyrepr::to_text(item)))
            .unwrap_or_default();
        if let Ok(mut pending) = self.pending_includes.lock() {
            pending.task = format!("{}\u{0}{}", task.location, task.title());
            pending.add(format!("{}\u{0}{item}", file.display()), host);
        }
    }

    fn include_item_skipped(&self, task: &Task, handler: bool, host: &str, result: &Value) {
        let mut out = std::io::stdout().lock();
        self.task_banner(&mut out, task, handler, host, true);
        let _ = writeln!(out, "{}", self.item_line(host, result, false));
    }

    fn error(&self, message: &str) {
        eprintln!("ERROR! {message}");
    }

    fn task_retrying(
        &self,
        task: &Task,
        handler: bool,
        host: &str,
        retries_left: u64,
        result: &minijinja::Value,
    ) {
        let mut out = std::io::stdout().lock();
        self.task_banner(&mut out, task, handler, host, true);
        // The task's result follows under the same banner.
        if let Ok(mut last) = self.last_banner.lock()
            && let Some((_, hosts)) = &mut *last
        {
            hosts.retain(|h| h != host);
        }
        let name = task.display_name();
        // v2_runner_retry: the attempt's result too at -vv, or when the
        // action shows its results always (debug, assert).
        let mut line = format!(
            "FAILED - RETRYING: [{}]: {name} ({retries_left} retries left).",
            host_label(host, result)
        );
        if self.verbosity >= 2 || verbose_always(result) {
            line.push_str(&format!(
                "Result was: {}",
                dumped(result, false, self.verbosity)
            ));
        }
        let _ = writeln!(out, "{line}");
    }

    fn task_raised(&self, task: &Task, handler: bool, host: &str) {
        let mut out = std::io::stdout().lock();
        self.task_banner(&mut out, task, handler, host, false);
    }

    fn task_finished(&self, event: &TaskEvent<'_>) {
        let module = module_name(event.task);
        let debug = module == "debug";
        let verbose = self.verbosity > 0 || verbose_always(event.result);
        let mut out = std::io::stdout().lock();
        let name = event.task.display_name();
        let host = event.host;
        // An include that ran said so before its tasks (`included: …`).
        let announced = matches!(
            event.task.action,
            crate::role::Action::IncludeTasks { .. } | crate::role::Action::IncludeRole(_)
        ) && event.status == TaskStatus::Ok;
        if !announced {
            // A meta action each host runs by itself is a task of its own
            // to the callback: its banner comes again for each host.
            if per_host_meta(event.task)
                && let Ok(mut last) = self.last_banner.lock()
            {
                *last = None;
            }
            // A failed include said `included:` under its banner already.
            let is_include = matches!(event.task.action, crate::role::Action::IncludeTasks { .. });
            // Nor again after its background job's wait.
            let waited = self
                .waited
                .lock()
                .ok()
                .and_then(|mut w| w.take())
                .is_some_and(|key| key == banner_key(event.task));
            self.task_banner(
                &mut out,
                event.task,
                event.handler,
                host,
                is_include || waited,
            );
        }
        self.result_warnings(event.result);
        if module == "meta" && self.meta_said(&mut out, event) {
            return;
        }
        if !announced {
            let items = event
                .task
                .looping
                .as_ref()
                .and_then(|_| event.result.get_attr("results").ok())
                .filter(|r| r.kind() == minijinja::value::ValueKind::Seq);
            if let Some(items) = items {
                self.loop_lines(&mut out, event, &items, debug, verbose);
            } else {
                // Items shown before one ended the loop, then its failure.
                for item in event.items_before {
                    let _ = writeln!(out, "{}", self.item_line(host, item, debug));
                }
                self.file_diff(&mut out, event, event.result);
                if matches!(event.status, TaskStatus::Failed | TaskStatus::Ignored) {
                    self.error_section(&mut out, event.task, event.result);
                }
                let result = with_written_delegate(event);
                let line = self.result_line(host, event.status, &result, debug, verbose);
                let _ = writeln!(out, "{line}");
            }
        }
        if event.status == TaskStatus::Failed
            && let Ok(mut shown) = self.shown_failures.lock()
        {
            shown.insert(event.task.location.to_string());
        }
        if event.status == TaskStatus::Ignored {
            let _ = writeln!(out, "...ignoring");
        }
        let result = convert::to_json(event.result).unwrap_or(serde_json::Value::Null);
        if !matches!(event.status, TaskStatus::Failed | TaskStatus::Skipped) {
            self.collect_stats(host, &result);
        }
        self.write_event(|| {
            serde_json::json!({
                "task": name,
                "host": host,
                "location": event.task.location.to_string(),
                "file": event.task.location.file.display().to_string(),
                "line": event.task.location.pos.map(|p| p.line),
                "module": module,
                "status": match event.status {
                    TaskStatus::Skipped => "skipped",
                    TaskStatus::Failed => "failed",
                    TaskStatus::Ignored => "ignored",
                    TaskStatus::Changed => "changed",
                    TaskStatus::Ok => "ok",
                },
                "message": event.message,
                "assertion": result.get("assertion"),
                "duration_ms": event.duration.as_secs_f64() * 1000.0,
            })
        });
    }
}

/// Display.deprecated's line, or `None` when deprecation warnings are off
/// (`ANSIBLE_DEPRECATION_WARNINGS=false`).
fn deprecation_text(message: &str, version: Option<&str>) -> Option<String> {
    let enabled = std::env::var("ANSIBLE_DEPRECATION_WARNINGS")
        .ok()
        .and_then(|v| crate::template::strict_boolean(&Value::from(v)))
        .unwrap_or(true);
    if !enabled {
        return None;
    }
    let mut message = message.trim().to_owned();
    if !message.ends_with(['!', '?', '.']) {
        message.push('.');
    }
    let removal = match version {
        Some(version) => format!("This feature will be removed in version {version}."),
        None => "This feature will be removed in a future release.".to_owned(),
    };
    Some(format!(
        "[DEPRECATION WARNING]: {message} {removal} Deprecation warnings can be disabled by setting deprecation_warnings=False in ansible.cfg."
    ))
}

impl Printer {
    /// A warning or deprecation on stderr, wrapped as Display wraps it,
    /// once per run.
    fn say(&self, text: String) {
        let first = self
            .said
            .lock()
            .map(|mut said| said.insert(text.clone()))
            .unwrap_or(true);
        if first {
            eprintln!("{}", wrap::wrap(&text, wrap::display_columns()).join("\n"));
        }
    }

    /// The `warnings` and `deprecations` a result carries, printed as the
    /// default callback's `_handle_warnings` prints them.
    fn result_warnings(&self, result: &Value) {
        result_warnings(result, |text| self.say(text));
    }
}

/// Each of the `warnings` and `deprecations` a result carries, as the line
/// Display prints for it.
fn result_warnings(result: &Value, mut say: impl FnMut(String)) {
    let list = |key: &str| -> Vec<Value> {
        result
            .get_attr(key)
            .ok()
            .filter(|v| v.kind() == minijinja::value::ValueKind::Seq)
            .map(|v| v.try_iter().into_iter().flatten().collect())
            .unwrap_or_default()
    };
    for warning in list("warnings") {
        say(format!(
            "[WARNING]: {}",
            crate::template::pyrepr::to_text(&warning)
        ));
    }
    for deprecation in list("deprecations") {
        let field = |key: &str| {
            deprecation
                .get_attr(key)
                .ok()
                .filter(|v| !v.is_undefined() && !v.is_none())
                .map(|v| crate::template::pyrepr::to_text(&v))
        };
        let message = field("msg").unwrap_or_default();
        if let Some(text) = deprecation_text(&message, field("version").as_deref()) {
            say(text);
        }
    }
}

/// Ansible's `AggregateStats.update_custom_stats`: mappings merge, numbers,
/// strings and lists add; a value of another type than the kept one is
/// dropped.
fn aggregate_stat(kept: &mut serde_json::Value, value: &serde_json::Value) {
    use serde_json::Value as J;
    match (&mut *kept, value) {
        (J::Object(_), J::Object(_)) => {
            let merged =
                crate::template::merge_hash(&convert::from_json(kept), &convert::from_json(value));
            if let Ok(merged) = convert::to_json(&merged) {
                *kept = merged;
            }
        }
        (J::Number(old), J::Number(new)) => {
            *kept = match (old.as_i64(), new.as_i64()) {
                (Some(a), Some(b)) => J::from(a.saturating_add(b)),
                _ => J::from(old.as_f64().unwrap_or(0.0) + new.as_f64().unwrap_or(0.0)),
            };
        }
        (J::String(old), J::String(new)) => old.push_str(new),
        (J::Array(old), J::Array(new)) => old.extend(new.iter().cloned()),
        _ => {}
    }
}

/// What tells one task's banner from another's: where it is and its title.
fn banner_key(task: &Task) -> String {
    format!("{}\u{0}{}", task.location, task.title())
}
