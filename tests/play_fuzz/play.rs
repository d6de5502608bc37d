//! Running one playbook both ways and comparing what came out; recording a
//! disagreement with ansible-playbook's answer.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::generate::{Playbook, files};

/// How long one run may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What one run printed, its case directory written as `<dir>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs playbooks with ansible-playbook and with `enka playbook`.
pub struct Runner {
    ansible_playbook: PathBuf,
    python: PathBuf,
    enka: PathBuf,
    root: PathBuf,
}

/// The environment both sides run with: no colour, no warnings that only
/// say where the inventory came from, modules on the venv's Python.
fn environment(python: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("ANSIBLE_NOCOLOR", "1".into()),
        ("ANSIBLE_FORCE_COLOR", "0".into()),
        ("ANSIBLE_LOCALHOST_WARNING", "False".into()),
        ("ANSIBLE_INVENTORY_UNPARSED_WARNING", "False".into()),
        ("ANSIBLE_DEPRECATION_WARNINGS", "False".into()),
        ("ANSIBLE_RETRY_FILES_ENABLED", "False".into()),
        ("ANSIBLE_PYTHON_INTERPRETER", python.display().to_string()),
        ("ANSIBLE_STDOUT_CALLBACK", "default".into()),
        ("COLUMNS", "80".into()),
    ]
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
        let ansible_dir = self.root.join("ansible");
        let enka_dir = self.root.join("enka");
        let written = [&ansible_dir, &enka_dir]
            .iter()
            .try_for_each(|dir| write_files(dir, playbook));
        if let Err(e) = written {
            panic!("play_fuzz: writing a playbook: {e}");
        }
        let env = environment(&self.python);
        std::thread::scope(|scope| {
            let ansible = scope.spawn(|| {
                let mut command = Command::new(&self.ansible_playbook);
                command.args(["-i", "localhost,", "-c", "local", "play.yml"]);
                run(command, &ansible_dir, &env)
            });
            let mut command = Command::new(&self.enka);
            command.args(["playbook", "play.yml", "-i", "localhost,", "-c", "local"]);
            let enka = run(command, &enka_dir, &env);
            let ansible = ansible
                .join()
                .unwrap_or_else(|_| panic!("play_fuzz: a runner thread panicked"));
            (ansible, enka)
        })
    }
}

fn write_files(dir: &Path, playbook: &Playbook) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    for (name, text) in files(playbook) {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

fn run(mut command: Command, dir: &Path, env: &[(&'static str, String)]) -> Outcome {
    command
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("play_fuzz: starting {command:?}: {e}"));
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (out, err) = std::thread::scope(|scope| {
        let out = scope.spawn(move || read_all(stdout.as_mut()));
        let err = scope.spawn(move || read_all(stderr.as_mut()));
        let started = Instant::now();
        let code = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status.code().unwrap_or(-1),
                Ok(None) if started.elapsed() > TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break -2;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("play_fuzz: waiting for {command:?}: {e}"),
            }
        };
        (
            (code, out.join().unwrap_or_default()),
            err.join().unwrap_or_default(),
        )
    });
    let dir_text = dir.display().to_string();
    let clean = |text: String| {
        let text = text.replace(&dir_text, "<dir>");
        ["delta", "start", "end"]
            .iter()
            .fold(text, |text, key| mask_field(&text, key))
    };
    Outcome {
        code: out.0,
        stdout: clean(out.1),
        stderr: clean(err),
    }
}

/// `text` with the value of every `"key": "…"` written as `<key>`: the
/// times a command's result carries.
fn mask_field(text: &str, key: &str) -> String {
    let opening = format!("\"{key}\": \"");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&opening) {
        let value_start = at + opening.len();
        out.push_str(&rest[..value_start]);
        let Some(length) = rest[value_start..].find('"') else {
            rest = &rest[value_start..];
            break;
        };
        out.push_str(&format!("<{key}>"));
        rest = &rest[value_start + length..];
    }
    out.push_str(rest);
    out
}

fn read_all(pipe: Option<&mut impl Read>) -> String {
    let mut text = String::new();
    if let Some(pipe) = pipe {
        let _ = pipe.read_to_string(&mut text);
    }
    text
}

/// What kind of disagreement two outcomes are (kept while shrinking);
/// `None` when they agree.
pub fn disagreement(ansible: &Outcome, enka: &Outcome) -> Option<String> {
    if ansible.code != enka.code {
        return Some(format!(
            "exits {} where ansible-playbook exits {}",
            enka.code, ansible.code
        ));
    }
    let first_difference = |a: &str, b: &str| {
        a.lines()
            .zip(b.lines().chain(std::iter::repeat("")))
            .find(|(x, y)| x != y)
            .or_else(|| b.lines().nth(a.lines().count()).map(|y| ("", y)))
            .map(|(x, _)| x.split_whitespace().next().unwrap_or("").to_owned())
    };
    if let Some(word) = first_difference(&ansible.stdout, &enka.stdout) {
        return Some(format!("prints otherwise at a line starting {word:?}"));
    }
    first_difference(&ansible.stderr, &enka.stderr)
        .map(|word| format!("writes otherwise on stderr at {word:?}"))
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

/// A recorded case: its files and ansible-playbook's answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Recorded {
    pub name: String,
    pub files: std::collections::BTreeMap<String, String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
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
            code: ansible.code,
            stdout: ansible.stdout.clone(),
            stderr: ansible.stderr.clone(),
        });
    }
    let text = serde_yaml::to_string(&cases).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| e.to_string())
}
