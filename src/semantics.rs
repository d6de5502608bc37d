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
    /// and the (major, minor) release its ansible-core is, when it has one
    /// (read once: wording that differs within a line follows it).
    pub fn resolve(&self, python: &Path) -> anyhow::Result<(Semantics, Option<(u32, u32)>)> {
        let version = ansible_core_version(python);
        let release = version.as_deref().and_then(Semantics::release_of);
        let setting = self.ansible_semantics.trim();
        if setting != "auto" {
            let semantics = Semantics::of_version(setting).ok_or_else(|| {
                anyhow::anyhow!(
                    "--ansible-semantics {setting:?}: use auto, 2.18 or 2.19 (or a later 2.x, which follows 2.19)"
                )
            })?;
            return Ok((semantics, release));
        }
        let semantics = version
            .as_deref()
            .and_then(Semantics::of_version)
            .unwrap_or_default();
        Ok((semantics, release))
    }
}

/// The semantics for a command whose worker interpreter comes from the
/// environment (`ENKA_ANSIBLE_PYTHON`, else the newest `make` installed),
/// or the reason the setting is refused.
pub fn for_command(
    args: &SemanticsArgs,
) -> Result<(Semantics, Option<(u32, u32)>), std::process::ExitCode> {
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
    let (semantics, release) = for_command(args)?;
    let report = migration
        .migration_report
        .as_deref()
        .map(crate::migration::Report::to);
    let options = crate::template::Options {
        semantics,
        migration: report.as_ref().map(|r| r.recorder.clone()),
        release,
        ..crate::template::Options::from_env()
    };
    Ok((options, report))
}

/// The ansible-core version `python` has: read from a virtualenv's
/// `site-packages/ansible/release.py` when it is one (no interpreter
/// start), else asked of the interpreter; `None` when it has none.
pub fn ansible_core_version(python: &Path) -> Option<String> {
    if let Some(version) = venv_release(python) {
        return Some(version);
    }
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import ansible.release; print(ansible.release.__version__)",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// `__version__` of `<venv>/lib/python3.*/site-packages/ansible/release.py`
/// for `<venv>/bin/python`.
fn venv_release(python: &Path) -> Option<String> {
    let venv = python.parent()?.parent()?;
    if !venv.join("pyvenv.cfg").is_file() {
        return None;
    }
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    lib.flatten().find_map(|entry| {
        let release = entry.path().join("site-packages/ansible/release.py");
        let text = std::fs::read_to_string(release).ok()?;
        text.lines().find_map(|line| {
            let value = line.strip_prefix("__version__")?.trim_start();
            let value = value.strip_prefix('=')?.trim();
            Some(value.trim_matches(['\'', '"']).to_owned())
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
}
