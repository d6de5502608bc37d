//! A stand-in for Galaxy during `docker build`s (tests/image/galaxy.py):
//! an operator's Dockerfile runs `ansible-galaxy collection install`, and
//! galaxy.ansible.com is not reachable here. Builds run on the host's
//! network with galaxy.ansible.com resolved to 127.0.0.1, where the
//! stand-in answers with a certificate the image's local base trusts
//! (scripts/image/base.sh, ENKA_BASE_EXTRA_CA).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::support::repo_path;

/// The Galaxy stand-in, stopped on drop.
pub struct Galaxy {
    child: Child,
    workdir: PathBuf,
}

impl Galaxy {
    /// Serves Galaxy's install API on 127.0.0.1:443 as galaxy.ansible.com,
    /// with operator_sdk.util from `collections` when given (published only
    /// on Galaxy: ../shared/operators has it).
    pub fn start(collections: Option<&Path>) -> Galaxy {
        let python = std::env::var("ENKA_ANSIBLE_PYTHON")
            .expect("ENKA_ANSIBLE_PYTHON: the worker's Python, with ansible-galaxy");
        let ansible_galaxy = Path::new(&python).with_file_name("ansible-galaxy");
        let workdir = std::env::temp_dir().join(format!("enka-galaxy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&workdir);
        std::fs::create_dir_all(&workdir).unwrap();
        let ready = workdir.join("ready");
        let log = std::fs::File::create(workdir.join("log")).unwrap();
        let child = Command::new(&python)
            .arg(repo_path("tests/image/galaxy.py"))
            .args(["serve", "--port", "443"])
            .args(
                collections
                    .map(|c| [Path::new("--source"), c])
                    .into_iter()
                    .flatten(),
            )
            .arg("--ansible-galaxy")
            .arg(&ansible_galaxy)
            .arg("--workdir")
            .arg(&workdir)
            .arg("--ready")
            .arg(&ready)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting the Galaxy stand-in");
        let mut galaxy = Galaxy { child, workdir };
        let started = std::time::Instant::now();
        while !ready.exists() {
            if let Ok(Some(status)) = galaxy.child.try_wait() {
                panic!("the Galaxy stand-in exited ({status}):\n{}", galaxy.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "the Galaxy stand-in did not start:\n{}",
                galaxy.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        galaxy
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.workdir.join("log")).unwrap_or_default()
    }
}

impl Drop for Galaxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}
