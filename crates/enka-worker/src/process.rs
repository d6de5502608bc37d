//! One worker process: started, spoken to, and killed with everything it
//! started.
//!
//! Each worker leads its own process group (the modules it forks, and what
//! they run, stay in it), so killing the group on a timeout or at shutdown
//! leaves nothing behind. A worker asks for `PR_SET_PDEATHSIG` itself and
//! exits when its stdin closes, so it also dies with enka; it is forked from
//! one long-lived thread because that signal fires when the *thread* that
//! forked it ends.
//!
//! A worker is either spawned (a Python started for it) or forked from the
//! pool's fork server (`enka_zygote.py`, itself a spawned process speaking
//! the same frames): a forked one talks over a Unix socket in its own
//! directory, and the server, its parent, waits for it when it ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::protocol::{read_frame, write_frame};
use super::{Config, WorkerError, spawn_error};

/// The Python side, shipped inside the binary: (file name, source). The
/// first is what Python runs; it imports the others, so they (and not it)
/// are compiled once and cached next to them.
const SCRIPTS: &[(&str, &str)] = &[
    ("enka_worker_main.py", include_str!("enka_worker_main.py")),
    ("enka_worker.py", include_str!("enka_worker.py")),
    ("enka_inprocess.py", include_str!("enka_inprocess.py")),
    ("enka_zygote.py", include_str!("enka_zygote.py")),
    ("enka_startup.py", include_str!("enka_startup.py")),
];

/// How long a new worker may take to import Ansible and answer.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

type Frame = std::io::Result<Option<Value>>;

/// How a worker came to be, which says how it ends.
enum Origin {
    /// Started for itself: enka waits for it.
    Spawned(Child),
    /// Forked from the fork server, which waits for it.
    Forked(u32),
}

/// A running worker.
pub(super) struct Process {
    origin: Origin,
    /// The worker's own temporary directory (Ansible's local and remote
    /// temp), removed with it: a module killed mid-task leaves nothing.
    temp: PathBuf,
    stdin: Box<dyn Write + Send>,
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
        Process::spawned(config, false)
    }

    /// Starts the fork server and waits for its greeting.
    pub(super) fn start_fork_server(config: &Config) -> Result<Process, WorkerError> {
        Process::spawned(config, true)
    }

    fn spawned(config: &Config, fork_server: bool) -> Result<Process, WorkerError> {
        let script = script_path().map_err(|source| spawn_error(&config.python, source))?;
        let temp = worker_temp_dir().map_err(|source| spawn_error(&config.python, source))?;
        let mut child = match spawn(config, &script, &temp, fork_server) {
            Ok(child) => child,
            Err(err) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(err);
            }
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(WorkerError::Startup("its pipes were not set up".to_owned()));
        };
        Process::greeted(
            Origin::Spawned(child),
            temp,
            Box::new(stdin),
            stdout,
            stderr,
        )
    }

    /// Asks the fork server `server` for a worker, and waits for its
    /// greeting.
    pub(super) fn forked(server: &mut Process) -> Result<Process, WorkerError> {
        let startup = |err: std::io::Error| WorkerError::Startup(err.to_string());
        let temp = worker_temp_dir().map_err(startup)?;
        let (listener, pid) = match ask_fork(server, &temp) {
            Ok(forked) => forked,
            Err(err) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(err);
            }
        };
        let origin = Origin::Forked(pid);
        let (protocol, log) = match accept_streams(&listener) {
            Ok(streams) => streams,
            Err(err) => {
                drop(Process::orphan(origin, temp));
                return Err(startup(err));
            }
        };
        let writer = protocol.try_clone().map_err(startup)?;
        Process::greeted(origin, temp, Box::new(writer), protocol, log)
    }

    /// A process that never spoke: killed and its directory removed when
    /// dropped.
    fn orphan(origin: Origin, temp: PathBuf) -> Process {
        let (_, responses) = mpsc::channel();
        Process {
            origin,
            temp,
            stdin: Box::new(std::io::sink()),
            responses,
            next_id: 0,
            served: 0,
            hello: Value::Null,
        }
    }

    /// Reads `stdout` and logs `stderr` on threads of their own, then waits
    /// for the process's greeting.
    fn greeted(
        origin: Origin,
        temp: PathBuf,
        stdin: Box<dyn Write + Send>,
        stdout: impl Read + Send + 'static,
        stderr: impl Read + Send + 'static,
    ) -> Result<Process, WorkerError> {
        let mut process = Process::orphan(origin, temp);
        process.stdin = stdin;
        let pid = process.pid();
        let (sender, responses) = mpsc::channel();
        process.responses = responses;
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
        match &self.origin {
            Origin::Spawned(child) => child.id(),
            Origin::Forked(pid) => *pid,
        }
    }

    fn died(&mut self, why: String) -> WorkerError {
        let status = self.reap();
        WorkerError::Died(format!("{why}; {status}"))
    }

    /// Kills the worker's whole process group, and the group of the module
    /// it was running, and reaps the worker.
    pub(super) fn kill(&mut self) {
        let module_group = std::fs::read_to_string(self.temp.join("module.pgid"))
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        let groups = [i32::try_from(self.pid()).ok(), module_group];
        for pid in groups
            .into_iter()
            .flatten()
            .filter_map(rustix::process::Pid::from_raw)
        {
            // Each leads its group; a group already gone is fine.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        // A forked worker's parent, the fork server, waits for it.
        if let Origin::Spawned(child) = &mut self.origin {
            let _ = child.wait();
        }
    }

    fn reap(&mut self) -> String {
        // The pipe closed: the process is gone or going. Its group may still
        // hold forked modules, which must not outlive it.
        self.kill();
        match &mut self.origin {
            Origin::Spawned(child) => match child.try_wait() {
                Ok(Some(status)) => status.to_string(),
                _ => "exit status unknown".to_owned(),
            },
            Origin::Forked(_) => "its connection closed".to_owned(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.temp);
    }
}

/// `$TMPDIR/enka-<uid>`, where the worker's scripts and temporary files
/// live: this user's alone. Created `0700`; refused when it is a symbolic
/// link or another user's, since whoever owns it could plant the scripts the
/// worker runs; one an older enka left group- or world-readable is closed.
pub(crate) fn private_root() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = rustix::process::getuid().as_raw();
    let root = std::env::temp_dir().join(format!("enka-{uid}"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)?;
    let meta = std::fs::symlink_metadata(&root)?;
    if !meta.is_dir() || meta.uid() != uid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory of this user's (uid {uid}); remove it, or set TMPDIR",
                root.display()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(root)
}

/// A fresh private directory for one worker's temporary files.
fn worker_temp_dir() -> std::io::Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = private_root()?.join(format!("worker-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Asks the fork server for a worker that connects to a socket in `temp`:
/// the socket's listener and the worker's pid.
fn ask_fork(server: &mut Process, temp: &Path) -> Result<(UnixListener, u32), WorkerError> {
    let socket = temp.join("enka.sock");
    let listener =
        UnixListener::bind(&socket).map_err(|err| WorkerError::Startup(err.to_string()))?;
    let answer = server.call(
        serde_json::json!({"op": "fork", "socket": socket, "dir": temp}),
        STARTUP_TIMEOUT,
    )?;
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(WorkerError::Startup(error.to_owned()));
    }
    let pid = answer["pid"]
        .as_u64()
        .and_then(|pid| u32::try_from(pid).ok())
        .ok_or_else(|| WorkerError::Protocol(format!("a fork without a pid: {answer}")))?;
    Ok((listener, pid))
}

/// The forked worker's two connections, told apart by the byte each
/// starts with: the protocol's (`P`) and its standard error's (`L`).
fn accept_streams(listener: &UnixListener) -> std::io::Result<(UnixStream, UnixStream)> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let (mut protocol, mut log) = (None, None);
    while protocol.is_none() || log.is_none() {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(STARTUP_TIMEOUT))?;
                let mut tag = [0u8; 1];
                stream.read_exact(&mut tag)?;
                stream.set_read_timeout(None)?;
                match &tag {
                    b"P" => protocol = Some(stream),
                    _ => log = Some(stream),
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the forked worker did not connect",
                    ));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => return Err(err),
        }
    }
    Ok((protocol.expect("set above"), log.expect("set above")))
}

fn read_responses(stdout: impl Read, sender: &Sender<Frame>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let frame = read_frame(&mut reader);
        let end = !matches!(frame, Ok(Some(_)));
        if sender.send(frame).is_err() || end {
            return;
        }
    }
}

fn log_stderr(pid: u32, stderr: impl Read, tail: &Mutex<Vec<String>>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        if is_ansible_warning(&line) {
            tracing::warn!(target: "enka::worker", pid, "{line}");
        } else {
            tracing::info!(target: "enka::worker", pid, "{line}");
        }
        if let Ok(mut tail) = tail.lock() {
            if tail.len() >= 20 {
                tail.remove(0);
            }
            tail.push(line);
        }
    }
}

/// A line of Ansible's Display that warns (`display.warning`,
/// `display.deprecated`): logged as a warning, as ansible-playbook shows
/// it on stderr; the worker prints each on one line.
fn is_ansible_warning(line: &str) -> bool {
    line.starts_with("[WARNING]:") || line.starts_with("[DEPRECATION WARNING]:")
}

/// Writes the embedded scripts once per content, into a directory of their
/// own (so tracebacks name a file, and Python caches their bytecode there);
/// returns the one to run.
fn script_path() -> std::io::Result<PathBuf> {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = PATH.get() {
        return Ok(path.clone());
    }
    use sha2::Digest;
    let mut digest = sha2::Sha256::new();
    for (name, source) in SCRIPTS {
        digest.update(name.as_bytes());
        digest.update(source.as_bytes());
    }
    let hex: String = digest.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = private_root()?.join(format!("scripts-{hex}"));
    std::fs::create_dir_all(&dir)?;
    // Threads of one process may write at once: each its own partial file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    for (name, source) in SCRIPTS {
        let path = dir.join(name);
        if !path.is_file() {
            let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let partial = dir.join(format!(".{name}.{}.{write}", std::process::id()));
            std::fs::write(&partial, source)?;
            std::fs::rename(&partial, &path)?;
        }
    }
    Ok(PATH.get_or_init(|| dir.join(SCRIPTS[0].0)).clone())
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

fn spawn(
    config: &Config,
    script: &Path,
    temp: &Path,
    fork_server: bool,
) -> Result<Child, WorkerError> {
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
        .env(
            "ENKA_VAULT_PASSWORD_FILES",
            std::env::join_paths(&config.vault_password_files).unwrap_or_default(),
        )
        .env("ENKA_VAULT_IDS", config.vault_ids.join(":"))
        // Temporary files go to the worker's own directory, removed with it.
        .env("ANSIBLE_LOCAL_TEMP", temp.join("local"))
        .env("ANSIBLE_REMOTE_TEMP", temp.join("remote"))
        .env("ENKA_WORKER_DIR", temp)
        .env("ENKA_WORKER_ZYGOTE", if fork_server { "1" } else { "0" })
        .env(
            "ENKA_WORKER_MEMORY_LIMIT",
            config.memory_limit.unwrap_or(0).to_string(),
        )
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

#[cfg(test)]
mod tests {
    use super::{is_ansible_warning, private_root};

    /// The directory the worker's scripts run from is this user's alone,
    /// even one an older enka left readable by others.
    #[test]
    fn the_private_root_is_closed_to_other_users() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let root = private_root().expect("the private root");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let again = private_root().expect("the private root again");
        assert_eq!(again, root);
        let mode = std::fs::metadata(&root).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "{mode:o}");
    }

    #[test]
    fn ansible_warnings_are_told_from_other_output() {
        assert!(is_ansible_warning(
            "[WARNING]: Invalid characters were found in group names but not replaced, use -vvvv to see details"
        ));
        assert!(is_ansible_warning(
            "[DEPRECATION WARNING]: x is deprecated. This feature will be removed in version 2.19."
        ));
        assert!(!is_ansible_warning("Traceback (most recent call last):"));
        assert!(!is_ansible_warning(
            "  [WARNING]: indented is a module's own output"
        ));
    }
}
