//! Child processes that cannot outlive the test process.
//!
//! Linux delivers `PR_SET_PDEATHSIG` when the *thread* that forked a child
//! exits, not the process. Tests run on short-lived threads, so every child
//! is forked from one long-lived spawner thread instead: the children then
//! die with the process, whether it exits normally, panics or is killed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::Error;

/// How a child relates to the process that started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Killed when the starting process dies (tests).
    Tied,
    /// Runs on in its own session after the starter exits (`make kube-env`).
    Detached,
}

type SpawnReply = std::io::Result<Child>;
type SpawnRequest = (Command, mpsc::Sender<SpawnReply>);

fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("kube-env-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The sender lives in a static and is never dropped, so this
                // thread parks in `recv` for the life of the process.
            })
            .expect("spawning the kube-env spawner thread");
        Mutex::new(tx)
    })
}

/// A running upstream server with its log file.
#[derive(Debug)]
pub struct Server {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Server {
    /// Starts `program args…`, sending stdout and stderr to `log`.
    pub fn start(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Self, Error> {
        Self::start_with_env(name, program, args, &[], log, lifetime)
    }

    /// Like [`Server::start`], with extra environment variables.
    pub fn start_with_env(
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Self, Error> {
        Self::start_in(name, program, args, env, None, log, lifetime)
    }

    /// Like [`Server::start_with_env`], in the working directory `dir`
    /// (the caller's when `None`), as a container runs in its image's
    /// WORKDIR.
    pub fn start_in(
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        dir: Option<&Path>,
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Self, Error> {
        let io_error = |source: std::io::Error| Error::Spawn {
            name,
            reason: source.to_string(),
        };
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io_error)?;
        let err = out.try_clone().map_err(io_error)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let child = match lifetime {
            Lifetime::Tied => {
                // SAFETY: prctl is async-signal-safe and touches no memory of
                // the parent; it runs in the forked child before exec.
                unsafe {
                    command.pre_exec(|| {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                let (reply_tx, reply_rx) = mpsc::channel();
                spawner()
                    .lock()
                    .map_err(|_| Error::Spawn {
                        name,
                        reason: "spawner lock poisoned".into(),
                    })?
                    .send((command, reply_tx))
                    .map_err(|_| Error::Spawn {
                        name,
                        reason: "spawner thread is gone".into(),
                    })?;
                reply_rx
                    .recv()
                    .map_err(|_| Error::Spawn {
                        name,
                        reason: "spawner thread did not answer".into(),
                    })?
                    .map_err(io_error)?
            }
            Lifetime::Detached => {
                command.process_group(0);
                command.spawn().map_err(io_error)?
            }
        };
        Ok(Server { name, child, log })
    }

    /// The server's name, as used in error messages.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited, and how.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `max` bytes of the log, for error messages.
    pub fn log_tail(&self, max: u64) -> String {
        tail(&self.log, max)
    }

    /// Path of the log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Asks the server to stop, then kills it if it has not within `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Leaves the process running and forgets it (detached servers).
    pub fn release(self) -> u32 {
        let pid = self.child.id();
        std::mem::forget(self);
        pid
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
    }
}

/// The last `max` bytes of a file, lossily decoded.
pub fn tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut buf = Vec::new();
    let _ = file.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
