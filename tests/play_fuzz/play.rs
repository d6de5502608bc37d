//! Running one playbook both ways and comparing what came out; recording a
//! disagreement with ansible-playbook's answer.

use std::path::{Path, PathBuf};

use crate::generate::{ARGS, Playbook, files};
use crate::outcome::{Outcome, Recorded, environment, run_ansible, run_enka, write_files};

/// Runs playbooks with ansible-playbook and with `enka playbook`.
pub struct Runner {
    ansible_playbook: PathBuf,
    python: PathBuf,
    enka: PathBuf,
    root: PathBuf,
}

impl Runner {
    pub fn new(python: &str, enka: &Path) -> Result<Self, String> {
        let python = PathBuf::from(python);
        let ansible_playbook = python
            .parent()
            .map(|bin| bin.join("ansible-playbook"))
            .filter(|p| p.exists())
            .ok_or_else(|| format!("no ansible-playbook next to {}", python.display()))?;
        let root = std::env::temp_dir().join(format!("enka-play-fuzz-{}", std::process::id()));
        Ok(Runner {
            ansible_playbook,
            python,
            enka: enka.to_path_buf(),
            root,
        })
    }

    /// Both outcomes of `playbook`, run side by side.
    pub fn both(&self, playbook: &Playbook) -> (Outcome, Outcome) {
        let files = files(playbook);
        let ansible_dir = self.root.join("ansible");
        let enka_dir = self.root.join("enka");
        for dir in [&ansible_dir, &enka_dir] {
            write_files(dir, &files)
                .unwrap_or_else(|e| panic!("play_fuzz: writing a playbook: {e}"));
        }
        let env = environment(&self.python);
        let args = fuzz_args();
        std::thread::scope(|scope| {
            let ansible =
                scope.spawn(|| run_ansible(&self.ansible_playbook, &ansible_dir, &env, &args));
            let enka = run_enka(&self.enka, &enka_dir, &env, &args);
            let ansible = ansible
                .join()
                .unwrap_or_else(|_| panic!("play_fuzz: a runner thread panicked"));
            (ansible, enka)
        })
    }

    /// ansible-playbook's outcome of a recorded case's files and options.
    pub fn ansible(&self, files: &[(String, String)], args: &[String]) -> Outcome {
        let dir = self.root.join("ansible");
        write_files(&dir, files).unwrap_or_else(|e| panic!("play_fuzz: writing a playbook: {e}"));
        run_ansible(
            &self.ansible_playbook,
            &dir,
            &environment(&self.python),
            args,
        )
    }
}

/// [`ARGS`] as the commands take them.
fn fuzz_args() -> Vec<String> {
    ARGS.iter().map(|a| (*a).to_owned()).collect()
}

/// A disagreement as a reader wants it: the playbook, then a diff of what
/// each printed.
pub fn report(playbook: &Playbook, ansible: &Outcome, enka: &Outcome) -> String {
    let mut out = String::new();
    for (name, text) in files(playbook) {
        out.push_str(&format!("--- {name}\n{text}"));
    }
    out.push_str(&format!(
        "exit: ansible-playbook {}, enka {}\n",
        ansible.code, enka.code
    ));
    for (what, a, e) in [
        ("stdout", &ansible.stdout, &enka.stdout),
        ("stderr", &ansible.stderr, &enka.stderr),
    ] {
        if a == e {
            continue;
        }
        out.push_str(&format!("{what} (- ansible-playbook, + enka):\n"));
        let diff = similar::TextDiff::from_lines(a.as_str(), e.as_str());
        for change in diff.iter_all_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => "-",
                similar::ChangeTag::Insert => "+",
                similar::ChangeTag::Equal => " ",
            };
            out.push_str(&format!("{sign}{change}"));
        }
    }
    out
}

/// Adds `found` to the recorded cases at `path`, named by seed and index.
pub fn record(
    path: &Path,
    seed: u64,
    found: &[(Playbook, Outcome, Outcome)],
) -> Result<(), String> {
    let mut cases: Vec<Recorded> = match std::fs::read_to_string(path) {
        Ok(text) => serde_yaml::from_str(&text).map_err(|e| e.to_string())?,
        Err(_) => Vec::new(),
    };
    for (index, (playbook, ansible, _)) in found.iter().enumerate() {
        let files = files(playbook).into_iter().collect();
        if cases.iter().any(|c| c.files == files) {
            continue;
        }
        cases.push(Recorded {
            name: format!("seed{seed}_{index}"),
            files,
            args: fuzz_args(),
            code: ansible.code,
            stdout: ansible.stdout.clone(),
            stderr: ansible.stderr.clone(),
        });
    }
    let text = serde_yaml::to_string(&cases).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| e.to_string())
}

/// Records ansible-playbook's outcome anew for the cases at `path` whose
/// name has `which` (all without it; a case written by hand needs only its
/// name and files).
pub fn rerecord(path: &Path, runner: &Runner, which: Option<&str>) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut cases: Vec<Recorded> = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
    let mut count = 0;
    for case in &mut cases {
        if which.is_some_and(|which| !case.name.contains(which)) {
            continue;
        }
        count += 1;
        let files: Vec<(String, String)> = case.files.clone().into_iter().collect();
        let ansible = runner.ansible(&files, &case.args);
        case.code = ansible.code;
        case.stdout = ansible.stdout;
        case.stderr = ansible.stderr;
    }
    let text = serde_yaml::to_string(&cases).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| e.to_string())?;
    Ok(count)
}
