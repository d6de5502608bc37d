//! `enka playbook`: runs playbooks on localhost with enka's engine, as
//! `ansible-playbook` would, printing what Ansible's default callback
//! prints. It is how a role is tried without a cluster, and how
//! ansible-core's own integration targets run against enka
//! (`make ansible-tests`): their `runme.sh` scripts call `ansible-playbook`,
//! and a shim on `PATH` hands the call to this command unchanged.
//!
//! Exit codes are ansible-playbook's: 0 when every task ran, 2 when a task
//! failed, 4 when a playbook did not load, 5 on bad options.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::Value;

mod diff;
mod failure;
mod listing;
mod printer;
mod shown;
mod wrap;

pub use listing::Listings;

use crate::engine::{self, Entry, Observer, RunOptions};
use crate::role::{LoadOptions, Project, RolePaths, Target};
use crate::template::{Options, Var, convert};
use printer::{Printer, banner};

/// `enka playbook`'s inputs.
#[derive(Debug, Clone, Default)]
pub struct PlaybookOptions {
    /// Templating: which ansible-core's semantics the plays follow, the
    /// random seed, the migration report's recorder.
    pub templates: Options,
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
        options.diff,
        options.events_file.as_deref(),
        options.templates.semantics,
    ));
    let mut stats: Vec<(String, engine::Stats)> = Vec::new();
    let mut code = exit::OK;
    // --start-at-task looks through the playbooks in order, then lets the
    // rest run whole.
    let mut start_at_task = options.start_at_task.clone();
    for (index, path) in options.playbooks.iter().enumerate() {
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
        if index == 0 {
            warn_of_inventory(&options, &project, printer.as_ref());
        }
        if options.listings.any() {
            print_listing(&options, &project, &path, &extra, limit.as_ref(), &printer);
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
                printer.flush();
                return raised_exit(failure);
            }
            code = failed_exit(failure, &printer);
            break;
        }
    }
    // A listing runs nothing: it has no recap.
    if !options.listings.any() {
        printer.recap(&stats);
        printer.custom_stats();
    }
    code
}

/// An error raised out of the strategy ends the command: `ERROR!`, no
/// recap, exit 1 (4 for a parser error).
fn raised_exit(failure: &engine::Failure) -> u8 {
    // Ansible's excerpt ends its message with its own newline.
    let message = &failure.message;
    let newline = if message.ends_with('\n') { "" } else { "\n" };
    eprint!("ERROR! {message}{newline}");
    match failure.parser_error {
        true => exit::PARSER_ERROR,
        false => exit::ERROR,
    }
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

/// What ansible-playbook warns of as it reads the inventory, and when the
/// inventory holds no host: the implicit localhost alone, which `all` does
/// not match.
fn warn_of_inventory(options: &PlaybookOptions, project: &Project, printer: &Printer) {
    let Some(inventory) = &project.inventory else {
        return;
    };
    for warning in inventory.warnings() {
        printer.warning(warning);
    }
    let sources: Vec<String> = options
        .inventory
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let base_dir = &project.base_dir;
    let setting = |variable, key, default| {
        enka_project::ansible_config::flag(base_dir, variable, key, default)
    };
    if enka_project::inventory::reader::nothing_parsed(&sources, base_dir)
        && setting(
            "ANSIBLE_INVENTORY_UNPARSED_WARNING",
            "inventory_unparsed_warning",
            true,
        )
    {
        printer.warning("No inventory was parsed, only implicit localhost is available");
    }
    if inventory
        .select(&["all".to_owned()], "inventory")
        .is_ok_and(|h| h.is_empty())
        && setting("ANSIBLE_LOCALHOST_WARNING", "localhost_warning", true)
    {
        printer.warning("provided hosts list is empty, only localhost is available. Note that the implicit localhost does not match 'all'");
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
    printer: &Printer,
) {
    listing::warn_unmatched(project, path, |message| printer.warning(message));
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
    // The worker runs in the playbook's directory: files named on the
    // command line are where the command was given.
    let absolute = |path: &PathBuf| std::path::absolute(path).unwrap_or_else(|_| path.clone());
    ansible.vault_password_files = options.vault_password_files.iter().map(absolute).collect();
    ansible.vault_ids = options
        .vault_ids
        .iter()
        .map(|id| match id.split_once('@') {
            Some((label, source)) if source != "prompt" => {
                format!("{label}@{}", absolute(&PathBuf::from(source)).display())
            }
            Some(_) => id.clone(),
            None if id == "prompt" => id.clone(),
            None => absolute(&PathBuf::from(id)).display().to_string(),
        })
        .collect();
    ansible.verbosity = options.verbosity;
    let load_options = LoadOptions {
        role_paths: RolePaths::from_env(&base_dir).with_playbook_dir(&base_dir),
        // lookup('pipe') runs commands, as under ansible-playbook.
        templates: Options {
            allow_pipe: true,
            ..options.templates.clone()
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
        inventory: crate::role::InventoryLoad::Always,
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
