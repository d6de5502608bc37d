//! `enka playbook`: runs playbooks on localhost with enka's engine, as
//! `ansible-playbook` would, printing what Ansible's default callback
//! prints. It is how a role is tried without a cluster, and how
//! ansible-core's own integration targets run against enka
//! (`make ansible-tests`): their `runme.sh` scripts call `ansible-playbook`,
//! and a shim on `PATH` hands the call to this command unchanged.
//!
//! Exit codes are ansible-playbook's: 0 when every task ran, 2 when a task
//! failed, 4 when a playbook did not load, 5 on bad options.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use minijinja::Value;

mod listing;
mod shown;
mod wrap;

pub use listing::Listings;

use crate::engine::{self, Entry, Observer, RunOptions, TaskEvent, TaskStatus};
use crate::role::{LoadOptions, Project, RolePaths, Target, Task};
use crate::template::{Options, Var, convert};
use shown::{censored_loop, dumped, verbose_always, without_items};

/// `enka playbook`'s inputs.
#[derive(Debug, Clone, Default)]
pub struct PlaybookOptions {
    /// The playbooks, run one after the other.
    pub playbooks: Vec<PathBuf>,
    /// `-i`: inventory sources.
    pub inventory: Vec<PathBuf>,
    /// `-e`: extra vars, as ansible-playbook takes them (`k=v k2=v2`,
    /// YAML or JSON text, `@file`).
    pub extra_vars: Vec<String>,
    /// `-v` count.
    pub verbosity: u8,
    /// `--tags`.
    pub tags: Vec<String>,
    /// `--skip-tags`.
    pub skip_tags: Vec<String>,
    /// `--limit`: the host pattern every play's hosts are narrowed to.
    pub limit: Option<String>,
    /// `--vault-password-file`s.
    pub vault_password_files: Vec<PathBuf>,
    /// `--vault-id`s.
    pub vault_ids: Vec<String>,
    /// Where each task's result is appended as a JSON line (for harnesses).
    pub events_file: Option<PathBuf>,
    /// `--check`.
    pub check: bool,
    /// `--diff`.
    pub diff: bool,
    /// `--start-at-task`.
    pub start_at_task: Option<String>,
    /// `--force-handlers`.
    pub force_handlers: bool,
    /// `--list-tasks`, `--list-tags`, `--list-hosts`: print, do not run.
    pub listings: Listings,
    /// `--forks` (Ansible's default: 5).
    pub forks: Option<u32>,
    /// `--connection`: hosts' connection when they name none.
    pub connection: Option<String>,
    /// The cluster Kubernetes tasks and `lookup('k8s')` talk to (`enka
    /// test`); `None`: they fail as they would without a kubeconfig.
    pub cluster: Option<Arc<dyn crate::kube::Cluster>>,
}

/// ansible-playbook's exit codes.
pub mod exit {
    /// Every play ran.
    pub const OK: u8 = 0;
    /// A task failed on a host.
    pub const HOST_FAILED: u8 = 2;
    /// An error of the command itself (an AnsibleError before any play).
    pub const ERROR: u8 = 1;
    /// A host could not be reached.
    pub const HOST_UNREACHABLE: u8 = 4;
    /// A playbook did not parse or load.
    pub const PARSER_ERROR: u8 = 4;
    /// Bad or incomplete options.
    pub const BAD_OPTIONS: u8 = 5;
}

/// Runs the playbooks; returns ansible-playbook's exit code.
pub async fn run(options: PlaybookOptions) -> u8 {
    let extra = match extra_vars(&options.extra_vars) {
        Ok(extra) => extra,
        Err(message) => {
            eprintln!("ERROR! {message}");
            return exit::BAD_OPTIONS;
        }
    };
    let limit = match options
        .limit
        .as_deref()
        .map(crate::inventory::HostLimit::parse)
        .transpose()
    {
        Ok(limit) => limit,
        Err(message) => {
            eprintln!("ERROR! {message}");
            return exit::BAD_OPTIONS;
        }
    };
    let printer = Arc::new(Printer::new(
        options.verbosity,
        options.events_file.as_deref(),
    ));
    let mut stats: Vec<(String, engine::Stats)> = Vec::new();
    let mut code = exit::OK;
    // --start-at-task looks through the playbooks in order, then lets the
    // rest run whole.
    let mut start_at_task = options.start_at_task.clone();
    for path in &options.playbooks {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        let project = match load(&options, &path) {
            Ok(project) => project,
            Err(message) => {
                eprintln!("{message}");
                printer.refused(&path, &message);
                return exit::PARSER_ERROR;
            }
        };
        if limit_leaves_no_host(limit.as_ref(), &project) {
            eprintln!(
                "ERROR! Specified inventory, host pattern and/or --limit leaves us with no hosts to target."
            );
            return exit::ERROR;
        }
        if options.listings.any() {
            print_listing(&options, &project, &path, &extra, limit.as_ref());
            continue;
        }
        if options.verbosity > 1 {
            let plays = project.playbooks.get(&path).map_or(0, |p| p.plays.len());
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
            println!(
                "\n{}",
                banner(&format!("PLAYBOOK: {}", file.unwrap_or_default()))
            );
            println!("{plays} plays in {}", path.display());
        }
        let run_options = run_options(&options, &printer, start_at_task.clone(), limit.clone());
        let outcome = engine::run(
            &project,
            &Entry::Playbook(path),
            extra.clone(),
            options.cluster.clone(),
            run_options,
        )
        .await;
        for (host, counts) in &outcome.hosts {
            match stats.iter_mut().find(|(h, _)| h == host) {
                Some((_, total)) => total.add(counts),
                None => stats.push((host.clone(), counts.clone())),
            }
        }
        let s = &outcome.stats;
        if s.ok + s.changed + s.failed + s.skipped > 0 {
            start_at_task = None;
        }
        if let Some(failure) = outcome.failure() {
            // Raised out of the strategy: the command's own error, no recap.
            if failure.aborts_run {
                // Ansible's excerpt ends its message with its own newline.
                let message = &failure.message;
                let newline = if message.ends_with('\n') { "" } else { "\n" };
                eprint!("ERROR! {message}{newline}");
                return exit::ERROR;
            }
            code = failed_exit(failure, &printer);
            break;
        }
    }
    printer.recap(&stats);
    printer.custom_stats();
    code
}

/// ansible-playbook's exit code for a failed play: 2 for a failed host, 4
/// for an unreachable one; the failure said on stderr unless its task
/// already showed it.
fn failed_exit(failure: &engine::Failure, printer: &Printer) -> u8 {
    if !printer.reported(&failure.location) {
        eprintln!("ERROR! {failure}");
    }
    if failure.is_unreachable() {
        exit::HOST_UNREACHABLE
    } else {
        exit::HOST_FAILED
    }
}

/// CLI.get_host_list: a `--limit` that leaves no host of a non-empty
/// inventory is an error before any play.
fn limit_leaves_no_host(
    limit: Option<&crate::inventory::HostLimit>,
    project: &enka_project::role::Project,
) -> bool {
    let (Some(limit), Some(inventory)) = (limit, &project.inventory) else {
        return false;
    };
    inventory.host_names().next().is_some()
        && inventory
            .select_limited(&["all".to_owned()], "inventory", Some(limit))
            .is_ok_and(|hosts| hosts.is_empty())
}

/// `--list-tasks`, `--list-tags`, `--list-hosts`: the playbook as
/// ansible-playbook lists it, named as the command line named it.
fn print_listing(
    options: &PlaybookOptions,
    project: &enka_project::role::Project,
    path: &std::path::Path,
    extra: &[(Arc<str>, Var)],
    limit: Option<&crate::inventory::HostLimit>,
) {
    if let Some(playbook) = project.playbooks.get(path) {
        let shown = options
            .playbooks
            .iter()
            .find(|p| std::path::absolute(p).ok().as_ref() == Some(&path.to_path_buf()))
            .cloned()
            .unwrap_or_else(|| path.to_path_buf());
        let selection = engine::TagSelection::new(&options.tags, &options.skip_tags);
        print!(
            "{}",
            listing::render(
                project,
                playbook,
                &shown,
                options.listings,
                &selection,
                extra,
                limit,
            )
        );
    }
}

/// How the engine runs one playbook of the command line.
fn run_options(
    options: &PlaybookOptions,
    printer: &Arc<Printer>,
    start_at_task: Option<String>,
    limit: Option<crate::inventory::HostLimit>,
) -> RunOptions {
    RunOptions {
        verbosity: options.verbosity,
        observer: Some(printer.clone()),
        tags: engine::TagSelection::new(&options.tags, &options.skip_tags),
        check_mode: options.check,
        diff: options.diff,
        start_at_task,
        force_handlers: options.force_handlers,
        forks: options.forks.map_or(5, |f| f as usize),
        connection: options.connection.clone(),
        limit,
        ..RunOptions::default()
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

fn load(options: &PlaybookOptions, path: &Path) -> Result<Arc<Project>, String> {
    if !path.is_file() {
        return Err(format!(
            "ERROR! the playbook: {} could not be found",
            path.display()
        ));
    }
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut ansible = crate::worker::Config::from_env();
    ansible.inventory = options
        .inventory
        .iter()
        .map(|p| {
            if p.exists() {
                std::path::absolute(p).unwrap_or_else(|_| p.clone())
            } else {
                p.clone()
            }
        })
        .collect();
    // Hosts of a play run a task in parallel, up to --forks: so many
    // workers may be busy at once.
    ansible.size = ansible.size.max(options.forks.map_or(5, |f| f as usize));
    ansible.vault_password_files = options.vault_password_files.clone();
    ansible.vault_ids = options.vault_ids.clone();
    ansible.verbosity = options.verbosity;
    let load_options = LoadOptions {
        role_paths: RolePaths::from_env(&base_dir).with_playbook_dir(&base_dir),
        // lookup('pipe') runs commands, as under ansible-playbook.
        templates: Options {
            allow_pipe: true,
            ..Options::from_env()
        },
        origins: Vec::new(),
        lookups: options
            .cluster
            .iter()
            .map(|cluster| {
                let lookup: Arc<dyn crate::template::LookupPlugin> =
                    Arc::new(crate::kube::lookup::K8sLookup::new(cluster.clone()));
                ("k8s".to_owned(), lookup)
            })
            .collect(),
        ansible: Some(ansible),
    };
    let (project, diagnostics) =
        Project::load(&load_options, &[Target::Playbook(path.to_path_buf())]);
    // The first error as ansible-playbook words a load error (`ERROR!
    // <message>`, then where), the rest as enka's diagnostics; what Ansible
    // meets only when the task runs (`enka check` refuses it) is said then.
    let mut first_error = true;
    for diagnostic in &diagnostics.0 {
        if diagnostic.severity == crate::role::Severity::WhenRun {
            continue;
        }
        if diagnostic.is_error() && std::mem::take(&mut first_error) {
            eprintln!("ERROR! {}\n", diagnostic.message);
            if let Some(pos) = diagnostic.location.pos {
                eprintln!(
                    "The error appears to be in '{}': line {}, column {}, but may\nbe elsewhere in the file depending on the exact syntax problem.\n",
                    diagnostic.location.file.display(),
                    pos.line,
                    pos.col
                );
            }
        }
        eprintln!("{}\n", diagnostic.render());
    }
    project.ok_or_else(|| format!("ERROR! {} did not load", path.display()))
}

/// Extra vars as ansible-playbook reads `-e`: `@file` (YAML), YAML or JSON
/// text starting with `{` or `[`, else `key=value` pairs (values are
/// strings). Later ones win.
pub fn extra_vars(args: &[String]) -> Result<Vec<(Arc<str>, Var)>, String> {
    let mut vars: Vec<(Arc<str>, Var)> = Vec::new();
    let mut set = |key: &str, value: Value| {
        vars.retain(|(k, _)| &**k != key);
        vars.push((Arc::from(key), Var::templated(value)));
    };
    for arg in args {
        let text = arg.trim();
        let document = if let Some(file) = text.strip_prefix('@') {
            let content = std::fs::read_to_string(file)
                .map_err(|e| format!("the extra vars file {file} could not be read: {e}"))?;
            Some((file.to_owned(), content))
        } else if text.starts_with('{') || text.starts_with('[') {
            Some(("extra vars".to_owned(), text.to_owned()))
        } else {
            None
        };
        match document {
            Some((origin, content)) => {
                let node = crate::yaml::load_one(&content).map_err(|e| format!("{origin}: {e}"))?;
                let Some(node) = node else { continue };
                let Some(map) = node.as_map() else {
                    return Err(format!(
                        "{origin}: extra vars must be a mapping, got {}",
                        node.type_name()
                    ));
                };
                for (key, value) in map {
                    set(&key.key_string(), convert::from_yaml(value));
                }
            }
            None => {
                for word in shlex::split(text)
                    .ok_or_else(|| format!("unbalanced quotes in extra vars: {text}"))?
                {
                    let Some((key, value)) = word.split_once('=') else {
                        return Err(format!(
                            "extra vars must be key=value pairs, YAML, JSON or @file: {word}"
                        ));
                    };
                    set(key, Value::from(value));
                }
            }
        }
    }
    Ok(vars)
}

/// Prints each task's result as Ansible's default stdout callback does, and
/// appends it to the events file as a JSON line.
struct Printer {
    verbosity: u8,
    events: Option<Mutex<std::fs::File>>,
    /// Where the last failed task was, to tell a task's failure (already
    /// printed) from a run's.
    last_failure: Mutex<Option<String>>,
    /// The task whose banner was printed last, and the hosts shown under
    /// it.
    last_banner: Mutex<Option<(String, Vec<String>)>>,
    /// `set_stats` data: per host, or `_run` for the whole run.
    custom_stats: Mutex<BTreeMap<String, serde_json::Map<String, serde_json::Value>>>,
    /// Warnings and deprecations printed so far: Display says each once.
    said: Mutex<std::collections::HashSet<String>>,
}

impl Printer {
    fn new(verbosity: u8, events_file: Option<&Path>) -> Self {
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
            events,
            last_failure: Mutex::new(None),
            last_banner: Mutex::new(None),
            custom_stats: Mutex::new(BTreeMap::new()),
            said: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Records in the events file that a playbook was refused as it loaded:
    /// a run that ends there still checked something (a test may expect
    /// the refusal).
    fn refused(&self, playbook: &Path, message: &str) {
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
        let shown = format!("{}\u{0}{name}", task.location);
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

    fn reported(&self, location: &crate::role::Location) -> bool {
        let last = self.last_failure.lock().ok().and_then(|l| l.clone());
        last.is_some_and(|l| l == location.to_string())
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
            "None".to_owned()
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
            format!("failed: [{host}] (item={label}) => {text}")
        } else if flag("skipped") {
            let mut line = format!("skipping: [{host}] => (item={label}) ");
            if verbose {
                line.push_str(&format!(" => {}", dumped(item, debug, self.verbosity)));
            }
            line
        } else {
            let word = if flag("changed") { "changed" } else { "ok" };
            let mut line = format!("{word}: [{host}] => (item={label})");
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
    fn custom_stats(&self) {
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
    fn recap(&self, hosts: &[(String, engine::Stats)]) {
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

/// `TASK [name] ****…` padded to 80 columns, as Ansible's banner.
fn banner(title: &str) -> String {
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
    fn play_started(&self, name: &str, hosts: usize) {
        if let Ok(mut last) = self.last_banner.lock() {
            *last = None;
        }
        println!("\n{}", banner(&format!("PLAY [{name}]")));
        // A play of no tasks still ran on its hosts (a harness tells it
        // from a run that did nothing).
        self.write_event(|| serde_json::json!({"status": "play", "play": name, "hosts": hosts}));
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
        self.task_banner(&mut out, task, handler, host, false);
        let mut line = format!("included: {} for {host}", file.display());
        if let Some(item) = item {
            line.push_str(&format!(
                " => (item={})",
                crate::template::pyrepr::to_text(item)
            ));
        }
        let _ = writeln!(out, "{line}");
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
        let mut line =
            format!("FAILED - RETRYING: [{host}]: {name} ({retries_left} retries left).");
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
            // A failed include said `included:` under its banner already.
            let is_include = matches!(event.task.action, crate::role::Action::IncludeTasks { .. });
            self.task_banner(&mut out, event.task, event.handler, host, is_include);
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
                // A loop shows a line per item (v2_runner_item_on_*); only a
                // skipped task adds its own line.
                for item in items.try_iter().into_iter().flatten() {
                    let _ = writeln!(out, "{}", self.item_line(host, &item, debug));
                }
                if event.status == TaskStatus::Skipped {
                    let _ = writeln!(out, "skipping: [{host}]");
                } else if censored_loop(event.result) {
                    // A no_log loop's own result is censored too, so it has
                    // no `results` for the callback, which shows it as a
                    // task without a loop.
                    let own = without_items(event.result);
                    let line = self.result_line(host, event.status, &own, debug, verbose);
                    let _ = writeln!(out, "{line}");
                }
            } else {
                // Items shown before one ended the loop, then its failure.
                for item in event.items_before {
                    let _ = writeln!(out, "{}", self.item_line(host, item, debug));
                }
                let line = self.result_line(host, event.status, event.result, debug, verbose);
                let _ = writeln!(out, "{line}");
            }
        }
        if event.status == TaskStatus::Failed
            && let Ok(mut last) = self.last_failure.lock()
        {
            *last = Some(event.task.location.to_string());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(args: &[&str]) -> Vec<(String, String)> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        extra_vars(&args)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k.to_string(), crate::template::pyrepr::to_text(&v.value)))
            .collect()
    }

    #[test]
    fn extra_vars_as_ansible_playbook_reads_them() {
        assert_eq!(
            vars(&["a=1 b='two words'", r#"{"c": [1, 2]}"#, "a=3"]),
            vec![
                ("b".to_owned(), "two words".to_owned()),
                ("c".to_owned(), "[1, 2]".to_owned()),
                ("a".to_owned(), "3".to_owned()),
            ]
        );
        let args = vec!["@/nonexistent/enka-vars.yml".to_owned()];
        assert!(extra_vars(&args).unwrap_err().contains("could not be read"));
        let args = vec!["novalue".to_owned()];
        assert!(extra_vars(&args).unwrap_err().contains("key=value"));
    }
}
