//! One worker process: started, spoken to, and killed with everything it
//! started.
//!
//! Each worker leads its own process group (the modules it forks, and what
//! they run, stay in it), so killing the group on a timeout or at shutdown
//! leaves nothing behind. A worker asks for `PR_SET_PDEATHSIG` itself and
//! exits when its stdin closes, so it also dies with enka; it is forked from
//! one long-lived thread because that signal fires when the *thread* that
//! forked it ends.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::protocol::{read_frame, write_frame};
use super::{Config, WorkerError, spawn_error};

/// The Python side, shipped inside the binary.
const SCRIPT: &str = include_str!("enka_worker.py");

/// How long a new worker may take to import Ansible and answer.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

type Frame = std::io::Result<Option<Value>>;

/// A running worker.
pub(super) struct Process {
    child: Child,
    stdin: ChildStdin,
    responses: Receiver<Frame>,
    next_id: u64,
    /// Requests it has answered.
    pub(super) served: u32,
    /// What it said when it started (versions, pid).
    pub(super) hello: Value,
}

impl Process {
    /// Starts a worker and waits for its greeting.
    pub(super) fn start(config: &Config) -> Result<Process, WorkerError> {
        let script = script_path().map_err(|source| spawn_error(&config.python, source))?;
        let mut child = spawn(config, &script)?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(WorkerError::Startup("its pipes were not set up".to_owned()));
        };
        let pid = child.id();
        let (sender, responses) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("ansible-worker-{pid}"))
            .spawn(move || read_responses(stdout, &sender))
            .map_err(|err| WorkerError::Startup(err.to_string()))?;
        let log_tail = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
        let tail = log_tail.clone();
        std::thread::Builder::new()
            .name(format!("ansible-worker-{pid}-log"))
            .spawn(move || log_stderr(pid, stderr, &tail))
            .map_err(|err| WorkerError::Startup(err.to_string()))?;
        let mut process = Process {
            child,
            stdin,
            responses,
            next_id: 0,
            served: 0,
            hello: Value::Null,
        };
        match process.call(serde_json::json!({"op": "hello"}), STARTUP_TIMEOUT) {
            Ok(hello) => {
                tracing::info!(pid, ansible = %hello["ansible"], python = %hello["python"], "Ansible worker started");
                process.hello = hello;
                Ok(process)
            }
            Err(err) => {
                // Give the log thread a moment to collect Python's traceback.
                std::thread::sleep(Duration::from_millis(50));
                let tail = log_tail.lock().map(|t| t.join("\n")).unwrap_or_default();
                let why = match err {
                    WorkerError::Died(status) if !tail.is_empty() => format!("{status}: {tail}"),
                    other => other.to_string(),
                };
                Err(WorkerError::Startup(why))
            }
        }
    }

    /// Sends one request and waits up to `timeout` for its answer. On a
    /// timeout the worker is killed; on any error it is dead.
    pub(super) fn call(
        &mut self,
        mut request: Value,
        timeout: Duration,
    ) -> Result<Value, WorkerError> {
        self.next_id += 1;
        let id = self.next_id;
        request["id"] = Value::from(id);
        if let Err(err) = write_frame(&mut self.stdin, &request) {
            return Err(self.died(format!("writing to it failed: {err}")));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.responses.recv_timeout(left) {
                Ok(Ok(Some(response))) if response["id"] == id => {
                    self.served += 1;
                    return Ok(response);
                }
                // An answer to a request that already timed out cannot
                // happen (that worker was killed); skip anything else.
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) | Err(RecvTimeoutError::Disconnected) => {
                    let status = self.reap();
                    return Err(WorkerError::Died(status));
                }
                Ok(Err(err)) => {
                    self.kill();
                    return Err(WorkerError::Protocol(err.to_string()));
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.kill();
                    return Err(WorkerError::Timeout(timeout));
                }
            }
        }
    }

    /// The worker's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn died(&mut self, why: String) -> WorkerError {
        let status = self.reap();
        WorkerError::Died(format!("{why}; {status}"))
    }

    /// Kills the worker's whole process group and reaps the worker.
    pub(super) fn kill(&mut self) {
        let pid = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            // The worker leads its group; a group already gone is fine.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }

    fn reap(&mut self) -> String {
        // The pipe closed: the process is gone or going. Its group may still
        // hold forked modules, which must not outlive it.
        self.kill();
        match self.child.try_wait() {
            Ok(Some(status)) => status.to_string(),
            _ => "exit status unknown".to_owned(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_responses(stdout: std::process::ChildStdout, sender: &Sender<Frame>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let frame = read_frame(&mut reader);
        let end = !matches!(frame, Ok(Some(_)));
        if sender.send(frame).is_err() || end {
            return;
        }
    }
}

fn log_stderr(pid: u32, stderr: std::process::ChildStderr, tail: &Mutex<Vec<String>>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        tracing::info!(target: "enka::worker", pid, "{line}");
        if let Ok(mut tail) = tail.lock() {
            if tail.len() >= 20 {
                tail.remove(0);
            }
            tail.push(line);
        }
    }
}

/// Writes the embedded script once per content, so tracebacks name a file.
fn script_path() -> std::io::Result<PathBuf> {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = PATH.get() {
        return Ok(path.clone());
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(SCRIPT.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let uid = rustix::process::getuid().as_raw();
    let dir = std::env::temp_dir().join(format!("enka-{uid}"));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("enka_worker-{hex}.py"));
    if !path.is_file() {
        let partial = dir.join(format!(".enka_worker-{hex}.{}", std::process::id()));
        std::fs::write(&partial, SCRIPT)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(PATH.get_or_init(|| path).clone())
}

type SpawnRequest = (Command, Sender<std::io::Result<Child>>);

/// Forks every worker from one thread that lives as long as enka:
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked a child ends, so a
/// worker forked from a short-lived thread would be killed with it.
fn spawner() -> &'static Mutex<Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (sender, requests) = mpsc::channel::<SpawnRequest>();
        let spawned = std::thread::Builder::new()
            .name("ansible-worker-spawner".to_owned())
            .spawn(move || {
                for (mut command, reply) in requests {
                    let _ = reply.send(command.spawn());
                }
            });
        if let Err(err) = spawned {
            tracing::error!("cannot start the worker spawner thread: {err}");
        }
        Mutex::new(sender)
    })
}

fn spawn(config: &Config, script: &Path) -> Result<Child, WorkerError> {
    let spawn_error = |source| spawn_error(&config.python, source);
    let mut command = Command::new(&config.python);
    command
        .arg("-u")
        .arg(script)
        .current_dir(&config.base_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env(
            "ENKA_PLUGIN_DIRS",
            std::env::join_paths(&config.plugin_dirs).unwrap_or_default(),
        )
        .env("ENKA_ANSIBLE_VERBOSITY", config.verbosity.to_string())
        // The same defaults upstream's image runs Ansible with.
        .env("ANSIBLE_GATHERING", "explicit")
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
        .env("ANSIBLE_NOCOLOR", "True")
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    let (reply, answer) = mpsc::channel();
    spawner()
        .lock()
        .map_err(|_| spawn_error(std::io::Error::other("the spawner lock is poisoned")))?
        .send((command, reply))
        .map_err(|_| spawn_error(std::io::Error::other("the spawner thread is gone")))?;
    answer
        .recv()
        .map_err(|_| spawn_error(std::io::Error::other("the spawner thread is gone")))?
        .map_err(spawn_error)
}
