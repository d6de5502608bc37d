//! Where the upstream control-plane binaries come from.
//!
//! They are built by `tools/kube-env/build.sh` from the pinned Go modules
//! into a cache keyed by version. A warm call of the script only checks a
//! stamp file, so asking it every time is cheap and never runs stale binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// Environment variable that points at a directory holding prebuilt binaries,
/// which skips the build script (the Makefile sets it after building once).
pub const BIN_DIR_ENV: &str = "ENKA_KUBE_BIN_DIR";

/// A directory holding etcd, kube-apiserver, kube-controller-manager,
/// kube-scheduler and kubectl.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// Finds the binaries: `$ENKA_KUBE_BIN_DIR` if set, otherwise whatever the
    /// build script prints (building them first on a cold cache).
    pub fn locate() -> Result<Self, Error> {
        let binaries = match std::env::var_os(BIN_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Binaries {
                dir: PathBuf::from(dir),
            },
            _ => Self::build()?,
        };
        binaries.check()?;
        Ok(binaries)
    }

    /// Runs the build script and returns the directory it printed.
    pub fn build() -> Result<Self, Error> {
        Ok(Binaries {
            dir: run_build_script(&build_script())?,
        })
    }

    fn check(&self) -> Result<(), Error> {
        for name in [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubectl",
        ] {
            let path = self.dir.join(name);
            if !path.is_file() {
                return Err(Error::MissingBinary { path });
            }
        }
        Ok(())
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of one binary in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The build script, found relative to this crate so it works from any
/// working directory.
pub fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh")
}

/// Runs a build script of ours (which builds on a cold cache and prints the
/// cached directory as its last line) and returns that directory.
pub(crate) fn run_build_script(script: &Path) -> Result<PathBuf, Error> {
    let output = Command::new("bash")
        .arg(script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|source| Error::Build {
            script: script.to_owned(),
            reason: source.to_string(),
        })?;
    if !output.status.success() {
        return Err(Error::Build {
            script: script.to_owned(),
            reason: format!("exited with {}", output.status),
        });
    }
    let dir = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if dir.is_empty() {
        return Err(Error::Build {
            script: script.to_owned(),
            reason: "printed no directory".into(),
        });
    }
    Ok(PathBuf::from(dir))
}
