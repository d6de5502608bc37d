//! The Ansible worker: what enka has no native code for runs here, through
//! ansible-core's own code, in Python processes kept warm.
//!
//! A project gets an [`AnsibleWorker`] when it loads; no process starts until
//! the first task (or template plugin) that needs one, so a project that
//! needs none never starts Python. Up to [`Config::size`] processes serve
//! requests at once, so concurrent reconciles do not queue behind one slow
//! task; a process that hangs past its deadline is killed with everything it
//! started, one that dies is replaced on the next request, each is recycled
//! after [`Config::recycle_after`] requests, and one left idle for
//! [`Config::idle_exit_after`] exits (a Python with Ansible imported holds
//! some 50 MiB; upstream's Ansible processes exit after every run).
//!
//! New processes are forked from a fork server (`enka_zygote.py`, a Python
//! with Ansible imported that serves no task) in a few milliseconds; it
//! lives while any process does.
//!
//! - `protocol.rs`: the frames on the pipes;
//! - `memory.rs`: how much each process may hold;
//! - `process.rs`: one process, its start (spawned or forked), deadline and
//!   kill;
//! - `enka_worker_main.py` starts the Python side: `enka_worker.py` serves
//!   requests, `enka_inprocess.py` runs vetted modules in its interpreter,
//!   `enka_zygote.py` forks workers (its packages: `requirements.txt`).

#![forbid(unsafe_code)]

pub mod memory;
mod process;
pub mod protocol;

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use process::Process;

/// Environment variable naming the Python interpreter that has ansible-core.
pub const PYTHON_ENV: &str = "ENKA_ANSIBLE_PYTHON";

/// Extra time the worker gets past a task's own timeout to report it, before
/// enka kills it.
const GRACE: Duration = Duration::from_secs(5);

/// The longest a request without its own deadline may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long an idle process stays by default: long enough for a burst of
/// events (a rollout, a resync) to find it warm, short next to the hours
/// between an operator's periodic reconciles.
pub const DEFAULT_IDLE_EXIT: Duration = Duration::from_secs(60);

/// How a project's workers are started.
#[derive(Debug, Clone)]
pub struct Config {
    /// The interpreter with ansible-core 2.18 installed.
    pub python: PathBuf,
    /// The working directory of the workers (the project).
    pub base_dir: PathBuf,
    /// Directories whose plugin subdirectories Ansible would add (`library/`,
    /// `filter_plugins/`, `module_utils/`, …): the project, its playbooks'
    /// directories and its roles.
    pub plugin_dirs: Vec<PathBuf>,
    /// Extra environment of the workers.
    pub env: Vec<(String, String)>,
    /// Processes at most.
    pub size: usize,
    /// Requests a process serves before it is replaced.
    pub recycle_after: u32,
    /// How long a process may stay idle before it exits; `None` keeps it.
    pub idle_exit_after: Option<Duration>,
    /// The data (heap) each process may hold, in bytes (its modules' forks
    /// included): a task that allocates past it fails, not the operator.
    /// `None`: no limit.
    pub memory_limit: Option<u64>,
    /// Whether processes are forked from a fork server that has Python
    /// started and Ansible imported (a few milliseconds each, their pages
    /// shared), rather than each started from nothing.
    pub fork_server: bool,
    /// Ansible's verbosity inside the workers.
    pub verbosity: u8,
    /// `--vault-password-file`s, as upstream's `--ansible-args` passes them.
    pub vault_password_files: Vec<PathBuf>,
    /// `--vault-id`s.
    pub vault_ids: Vec<String>,
    /// Inventory sources (`ansible-playbook -i`); empty means Ansible's own
    /// (`ANSIBLE_INVENTORY`, ansible.cfg).
    pub inventory: Vec<PathBuf>,
}

impl Config {
    /// A configuration with the interpreter from `ENKA_ANSIBLE_PYTHON`, else
    /// the virtualenv `make` installs (see [`default_python`]); the project
    /// loader fills in the directories.
    pub fn from_env() -> Self {
        Config {
            python: std::env::var_os(PYTHON_ENV)
                .filter(|v| !v.is_empty())
                .map_or_else(default_python, PathBuf::from),
            base_dir: PathBuf::from("."),
            plugin_dirs: Vec::new(),
            env: Vec::new(),
            size: 2,
            recycle_after: 1000,
            idle_exit_after: Some(DEFAULT_IDLE_EXIT),
            memory_limit: None,
            fork_server: true,
            verbosity: 0,
            vault_password_files: Vec::new(),
            vault_ids: Vec::new(),
            inventory: Vec::new(),
        }
    }

    /// Takes what enka's worker can use from upstream's `--ansible-args`
    /// (the arguments ansible-operator hands to ansible-runner): Vault
    /// password files and ids. Returns the arguments it cannot use.
    pub fn take_ansible_args(&mut self, args: &str) -> Vec<String> {
        let words = split_words(args);
        let mut ignored = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
                _ => (word.as_str(), None),
            };
            let takes_value = matches!(
                flag,
                "--vault-password-file" | "--vault-pass-file" | "--vault-id"
            );
            if !takes_value {
                ignored.push(word.clone());
                i += 1;
                continue;
            }
            let value = match inline {
                Some(value) => value,
                None => {
                    i += 1;
                    match words.get(i) {
                        Some(value) => value.clone(),
                        None => {
                            ignored.push(word.clone());
                            break;
                        }
                    }
                }
            };
            if flag == "--vault-id" {
                self.vault_ids.push(value);
            } else {
                let path = PathBuf::from(&value);
                let path = std::path::absolute(&path).unwrap_or(path);
                self.vault_password_files.push(path);
            }
            i += 1;
        }
        ignored
    }
}

/// Splits a command line on whitespace, keeping quoted parts whole.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            None => {
                current.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(current);
    }
    words
}

/// The interpreter when `ENKA_ANSIBLE_PYTHON` is not set: the newest
/// virtualenv that `make test`/`make demo` installed under
/// `~/.cache/enka/ansible` (scripts/ansible-venv.sh), else `python3` from
/// `PATH` (as upstream finds its Ansible on `PATH`; the image sets the
/// variable).
pub fn default_python() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let newest = cache
        .map(|c| c.join("enka/ansible"))
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().join(".complete").is_file())
        .filter_map(|entry| {
            let python = entry.path().join("venv/bin/python");
            let modified = entry.metadata().and_then(|m| m.modified()).ok()?;
            python.is_file().then_some((modified, python))
        })
        .max_by_key(|(modified, _)| *modified);
    newest.map_or_else(|| PathBuf::from("python3"), |(_, python)| python)
}

/// Why a request to the worker did not produce an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "cannot start the Ansible worker with {python}: {source} (set {PYTHON_ENV} to a Python that has ansible-core 2.18)"
    )]
    Spawn {
        python: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("the Ansible worker did not start: {0}")]
    Startup(String),
    #[error("the Ansible worker did not answer within {0:?} and was killed with what it started")]
    Timeout(Duration),
    #[error("the Ansible worker died while serving the request ({0})")]
    Died(String),
    #[error("the Ansible worker broke the protocol: {0}")]
    Protocol(String),
    /// The plugin itself failed; its message.
    #[error("{0}")]
    Plugin(String),
}

impl WorkerError {
    fn spawn(python: String, source: std::io::Error) -> Self {
        WorkerError::Spawn {
            python,
            source: Arc::new(source),
        }
    }
}

/// Counters of one pool, for metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Processes started.
    pub started: u64,
    /// Processes killed at a deadline.
    pub timed_out: u64,
    /// Processes that died on their own.
    pub died: u64,
    /// Processes replaced after `recycle_after` requests.
    pub recycled: u64,
    /// Processes that exited after `idle_exit_after` without a request.
    pub idled: u64,
}

/// A process waiting for a request, since when.
struct Idle {
    process: Process,
    since: Instant,
}

#[derive(Default)]
struct Slots {
    idle: Vec<Idle>,
    busy: usize,
    stats: Stats,
    /// Whether the thread that ends idle processes runs.
    reaping: bool,
}

/// A project's pool of worker processes.
pub struct AnsibleWorker {
    config: Config,
    slots: Mutex<Slots>,
    freed: Condvar,
    /// The pool itself, for the thread that ends its idle processes (which
    /// must not keep it alive).
    this: Weak<AnsibleWorker>,
    /// The fork server new processes come from, while any process lives.
    fork_server: Mutex<Option<Process>>,
}

impl std::fmt::Debug for AnsibleWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnsibleWorker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AnsibleWorker {
    /// A pool; nothing starts until the first request.
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new_cyclic(|this| AnsibleWorker {
            config,
            slots: Mutex::new(Slots::default()),
            freed: Condvar::new(),
            this: this.clone(),
            fork_server: Mutex::new(None),
        })
    }

    /// How the pool starts its processes.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What happened to the pool's processes so far.
    pub fn stats(&self) -> Stats {
        self.slots.lock().map(|s| s.stats).unwrap_or_default()
    }

    /// Process ids of the idle workers (for tests and diagnostics).
    pub fn idle_pids(&self) -> Vec<u32> {
        self.slots
            .lock()
            .map(|s| s.idle.iter().map(|idle| idle.process.pid()).collect())
            .unwrap_or_default()
    }

    /// Sends `request` to a free worker, starting one if none is idle, and
    /// returns its answer. Blocks; from async code use [`Self::call_async`].
    pub fn call(&self, request: Value, timeout: Option<Duration>) -> Result<Value, WorkerError> {
        let mut process = self.checkout()?;
        let limit = timeout.map_or(DEFAULT_TIMEOUT, |t| t + GRACE);
        let answer = process.call(request, limit);
        let failed = answer.as_ref().err().cloned();
        self.checkin(process, failed.as_ref());
        let answer = answer?;
        match answer.get("error").and_then(Value::as_str) {
            Some(message) => Err(WorkerError::Plugin(message.to_owned())),
            None => Ok(answer),
        }
    }

    /// [`Self::call`] on the blocking thread pool, so the async runtime's
    /// threads never wait on Python.
    pub async fn call_async(
        self: &Arc<Self>,
        request: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, WorkerError> {
        let pool = self.clone();
        tokio::task::spawn_blocking(move || pool.call(request, timeout))
            .await
            .unwrap_or_else(|err| {
                Err(WorkerError::Died(format!(
                    "the request thread failed: {err}"
                )))
            })
    }

    fn checkout(&self) -> Result<Process, WorkerError> {
        let mut slots = self
            .slots
            .lock()
            .map_err(|_| WorkerError::Startup("the pool lock is poisoned".to_owned()))?;
        while slots.idle.is_empty() && slots.busy >= self.config.size.max(1) {
            slots = self
                .freed
                .wait(slots)
                .map_err(|_| WorkerError::Startup("the pool lock is poisoned".to_owned()))?;
        }
        slots.busy += 1;
        if let Some(idle) = slots.idle.pop() {
            return Ok(idle.process);
        }
        drop(slots);
        // Started outside the lock: other requests keep being served.
        let started = self.start_process();
        let mut slots = self
            .slots
            .lock()
            .map_err(|_| WorkerError::Startup("the pool lock is poisoned".to_owned()))?;
        match started {
            Ok(process) => {
                slots.stats.started += 1;
                Ok(process)
            }
            Err(err) => {
                slots.busy -= 1;
                self.freed.notify_one();
                Err(err)
            }
        }
    }

    fn checkin(&self, process: Process, failure: Option<&WorkerError>) {
        let Ok(mut slots) = self.slots.lock() else {
            return;
        };
        slots.busy -= 1;
        match failure {
            Some(WorkerError::Timeout(_)) => slots.stats.timed_out += 1,
            Some(WorkerError::Died(_) | WorkerError::Protocol(_)) => slots.stats.died += 1,
            Some(_) => {}
            None if process.served >= self.config.recycle_after => slots.stats.recycled += 1,
            None => {
                slots.idle.push(Idle {
                    process,
                    since: Instant::now(),
                });
                if let Some(after) = self.config.idle_exit_after
                    && !slots.reaping
                {
                    slots.reaping = true;
                    start_reaper(self.this.clone(), after);
                }
            }
        }
        self.freed.notify_one();
    }

    /// A new process: forked from the fork server (started first if need
    /// be), else, when that fails, started from nothing.
    fn start_process(&self) -> Result<Process, WorkerError> {
        if !self.config.fork_server {
            return Process::start(&self.config);
        }
        let Ok(mut server) = self.fork_server.lock() else {
            return Process::start(&self.config);
        };
        // A server that died (killed from outside) fails its fork; a new
        // one is started once.
        for attempt in 0..2 {
            if server.is_none() {
                match Process::start_fork_server(&self.config) {
                    Ok(started) => *server = Some(started),
                    Err(err) => {
                        tracing::warn!(
                            "the Ansible workers' fork server did not start ({err}); starting a worker alone"
                        );
                        return Process::start(&self.config);
                    }
                }
            }
            match server.as_mut().map(Process::forked) {
                Some(Ok(process)) => return Ok(process),
                Some(Err(err)) => {
                    tracing::warn!(
                        attempt,
                        "the fork server could not fork a worker ({err}); it is replaced"
                    );
                    *server = None;
                }
                None => break,
            }
        }
        drop(server);
        Process::start(&self.config)
    }

    /// Ends the processes idle for `after` or longer; returns how long until
    /// the next one is, if any is idle.
    fn end_idle(&self, after: Duration) -> Option<Duration> {
        let Ok(mut slots) = self.slots.lock() else {
            return None;
        };
        let now = Instant::now();
        let (ended, kept): (Vec<Idle>, Vec<Idle>) = std::mem::take(&mut slots.idle)
            .into_iter()
            .partition(|idle| now.duration_since(idle.since) >= after);
        slots.idle = kept;
        slots.stats.idled += ended.len() as u64;
        // With no process left, the fork server goes too; the next request
        // starts it again.
        let server = (slots.idle.is_empty() && slots.busy == 0)
            .then(|| self.fork_server.lock().ok().and_then(|mut s| s.take()))
            .flatten();
        let next = slots
            .idle
            .iter()
            .map(|idle| after.saturating_sub(now.duration_since(idle.since)))
            .min();
        drop(slots);
        // Killed and reaped outside the lock.
        drop(ended);
        drop(server);
        next
    }
}

/// A thread that ends the pool's idle processes while the pool lives.
fn start_reaper(pool: Weak<AnsibleWorker>, after: Duration) {
    let spawned = std::thread::Builder::new()
        .name("enka-worker-idle".to_owned())
        .spawn(move || {
            loop {
                let Some(live) = pool.upgrade() else { return };
                let next = live.end_idle(after);
                drop(live);
                // Woken at the next expiry, at most every `after` (a new
                // idle process expires no sooner than that).
                let pause = next.unwrap_or(after).min(after);
                std::thread::sleep(pause.max(Duration::from_millis(50)));
            }
        });
    if let Err(err) = spawned {
        tracing::warn!("cannot start the thread that ends idle Ansible workers: {err}");
    }
}

/// Builds the spawn error (used by `process.rs`).
pub(crate) fn spawn_error(python: &std::path::Path, source: std::io::Error) -> WorkerError {
    WorkerError::spawn(python.display().to_string(), source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vault_arguments_are_taken_from_ansible_args() {
        let mut config = Config::from_env();
        let ignored = config.take_ansible_args(
            "--vault-password-file /etc/pw -v --vault-id 'dev@/etc/dev pw' --vault-pass-file=/etc/other -e x=1",
        );
        assert_eq!(
            config.vault_password_files,
            vec![PathBuf::from("/etc/pw"), PathBuf::from("/etc/other")]
        );
        assert_eq!(config.vault_ids, vec!["dev@/etc/dev pw".to_owned()]);
        assert_eq!(ignored, vec!["-v", "-e", "x=1"]);
    }
}
