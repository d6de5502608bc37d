//! Which ansible-core's templating and conditionals a project's roles
//! follow: 2.18's (upstream's, the default) or 2.19's (data tagging), chosen
//! with `--ansible-semantics` / `ENKA_ANSIBLE_SEMANTICS`, or, by default,
//! by the ansible-core the project's Ansible worker runs (an image built on
//! ansible-core 2.19 gets 2.19's semantics; one without a worker gets 2.18's).

use std::path::Path;

use clap::Args;

use crate::template::Semantics;

/// The semantics flag of `run`, `playbook` and `template`.
#[derive(Debug, Clone, Args)]
pub struct SemanticsArgs {
    /// Which ansible-core's templating and conditionals roles follow:
    /// `2.18` (upstream's), `2.19` (and later: native results, conditions
    /// that must be booleans), or `auto`: the ansible-core of the Ansible
    /// worker's Python, 2.18 when it has none (enka).
    #[arg(long, env = "ENKA_ANSIBLE_SEMANTICS", default_value = "auto")]
    pub ansible_semantics: String,
}

impl SemanticsArgs {
    /// The semantics to follow, `python` being the worker's interpreter,
    /// and what that interpreter has installed (read once: wording that
    /// differs within a line or between Pythons follows it).
    pub fn resolve(&self, python: &Path) -> anyhow::Result<(Semantics, Installed)> {
        let installed = Installed::of(python);
        let setting = self.ansible_semantics.trim();
        if setting != "auto" {
            let semantics = Semantics::of_version(setting).ok_or_else(|| {
                anyhow::anyhow!(
                    "--ansible-semantics {setting:?}: use auto, 2.18 or 2.19 (or a later 2.x, which follows 2.19)"
                )
            })?;
            return Ok((semantics, installed));
        }
        let semantics = installed
            .ansible_core
            .as_deref()
            .and_then(Semantics::of_version)
            .unwrap_or_default();
        Ok((semantics, installed))
    }
}

/// What the worker's interpreter runs: its ansible-core version and its
/// Python (major, minor), each `None` when unknown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Installed {
    pub ansible_core: Option<String>,
    pub python: Option<(u32, u32)>,
}

impl Installed {
    /// Read from a virtualenv's `lib/python3.X/site-packages` when
    /// `python` is one (no interpreter start), else asked of the
    /// interpreter; nothing for one that cannot be run.
    pub fn of(python: &Path) -> Installed {
        if let Some(installed) = venv_installed(python) {
            return installed;
        }
        let out = std::process::Command::new(python)
            .args([
                "-c",
                "import sys; print('%d.%d' % sys.version_info[:2]); import ansible.release; print(ansible.release.__version__)",
            ])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        let Ok(out) = out else {
            return Installed::default();
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        Installed {
            python: lines.next().and_then(Semantics::release_of),
            ansible_core: lines.next().map(str::to_owned),
        }
    }

    /// The (major, minor) of its ansible-core.
    pub fn release(&self) -> Option<(u32, u32)> {
        self.ansible_core.as_deref().and_then(Semantics::release_of)
    }
}

/// The semantics for a command whose worker interpreter comes from the
/// environment (`ENKA_ANSIBLE_PYTHON`, else the newest `make` installed),
/// or the reason the setting is refused.
pub fn for_command(args: &SemanticsArgs) -> Result<(Semantics, Installed), std::process::ExitCode> {
    args.resolve(&crate::worker::Config::from_env().python)
        .map_err(|err| {
            eprintln!("enka: {err}");
            std::process::ExitCode::from(2)
        })
}

/// A command's templating options (the seed from `ENKA_RANDOM_SEED`, the
/// semantics as [`for_command`] resolves them) and its migration report
/// when one was asked for.
pub fn template_options(
    args: &SemanticsArgs,
    migration: &crate::migration::MigrationArgs,
) -> Result<(crate::template::Options, Option<crate::migration::Report>), std::process::ExitCode> {
    let (semantics, installed) = for_command(args)?;
    let report = migration
        .migration_report
        .as_deref()
        .map(crate::migration::Report::to);
    let options = crate::template::Options {
        semantics,
        migration: report.as_ref().map(|r| r.recorder.clone()),
        release: installed.release(),
        ansible_core: installed.ansible_core.as_deref().map(std::sync::Arc::from),
        python: installed.python,
        ..crate::template::Options::from_env()
    };
    Ok((options, report))
}

/// What `<venv>/bin/python` has installed, read from
/// `<venv>/lib/python3.X/site-packages/ansible/release.py` (`__version__`)
/// and the directory's name.
fn venv_installed(python: &Path) -> Option<Installed> {
    let venv = python.parent()?.parent()?;
    if !venv.join("pyvenv.cfg").is_file() {
        return None;
    }
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    lib.flatten().find_map(|entry| {
        let release = entry.path().join("site-packages/ansible/release.py");
        let text = std::fs::read_to_string(release).ok()?;
        let version = text.lines().find_map(|line| {
            let value = line.strip_prefix("__version__")?.trim_start();
            let value = value.strip_prefix('=')?.trim();
            Some(value.trim_matches(['\'', '"']).to_owned())
        })?;
        let name = entry.file_name();
        Some(Installed {
            ansible_core: Some(version),
            python: name
                .to_str()
                .and_then(|n| n.strip_prefix("python"))
                .and_then(Semantics::release_of),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_settings_and_refusals() {
        let args = |s: &str| SemanticsArgs {
            ansible_semantics: s.to_owned(),
        };
        let none = Path::new("/nonexistent/python");
        assert_eq!(args("2.18").resolve(none).unwrap().0, Semantics::Ansible218);
        assert_eq!(args("2.19").resolve(none).unwrap().0, Semantics::Ansible219);
        assert_eq!(args("2.21").resolve(none).unwrap().0, Semantics::Ansible219);
        assert_eq!(args("auto").resolve(none).unwrap().0, Semantics::Ansible218);
        assert!(args("3.0").resolve(none).is_err());
        assert!(args("newest").resolve(none).is_err());
    }

    #[test]
    fn a_virtualenv_says_its_ansible_core_and_python_without_running() {
        let venv = std::env::temp_dir().join(format!("enka-installed-{}", std::process::id()));
        let ansible = venv.join("lib/python3.13/site-packages/ansible");
        std::fs::create_dir_all(&ansible).unwrap();
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::write(ansible.join("release.py"), "__version__ = '2.21.5'\n").unwrap();
        let installed = Installed::of(&venv.join("bin/python"));
        std::fs::remove_dir_all(&venv).unwrap();
        assert_eq!(installed.ansible_core.as_deref(), Some("2.21.5"));
        assert_eq!(installed.release(), Some((2, 21)));
        assert_eq!(installed.python, Some((3, 13)));
    }
}
