//! One playbook run's outcome, as the play fuzzer compares it and the
//! conformance tests replay a recorded one: the exit code and what was
//! printed, the case's directory and a command's times normalised. Shared
//! by `tests/play_fuzz` and `tests/conformance` (`#[path]`).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How long one run may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What one run printed, its case directory written as `<dir>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The environment both sides run with: no colour, no warnings that only
/// say where the inventory came from, modules on the venv's Python.
pub fn environment(python: &Path) -> Vec<(&'static str, String)> {
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

/// Writes a case's files (`play.yml` and its task files) into a fresh `dir`.
pub fn write_files(dir: &Path, files: &[(String, String)]) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// The inventory a case runs on: its `inventory` file when it has one
/// (several hosts, all on the local connection), else localhost.
fn inventory(dir: &Path) -> &'static str {
    if dir.join("inventory").is_file() {
        "inventory"
    } else {
        "localhost,"
    }
}

/// `ansible-playbook play.yml` in `dir`, with the case's own `args`.
pub fn run_ansible(
    ansible_playbook: &Path,
    dir: &Path,
    env: &[(&'static str, String)],
    args: &[String],
) -> Outcome {
    let mut command = Command::new(ansible_playbook);
    command.args(["-i", inventory(dir), "-c", "local", "play.yml"]);
    command.args(args);
    run(command, dir, env)
}

/// `enka playbook play.yml` in `dir`, with the case's own `args`.
pub fn run_enka(
    enka: &Path,
    dir: &Path,
    env: &[(&'static str, String)],
    args: &[String],
) -> Outcome {
    let mut command = Command::new(enka);
    command.args(["playbook", "play.yml", "-i", inventory(dir), "-c", "local"]);
    command.args(args);
    run(command, dir, env)
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

/// Whether both refused the playbook before running anything (exit 4,
/// nothing on stdout): enka words its load errors its own way (file, line,
/// column and a caret, as `enka check` does), so only that is compared.
pub fn both_refuse_to_load(ansible: &Outcome, enka: &Outcome) -> bool {
    ansible.code == 4
        && enka.code == 4
        && ansible.stdout.trim().is_empty()
        && enka.stdout.trim().is_empty()
}

/// A recorded case: its files and ansible-playbook's answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Recorded {
    pub name: String,
    pub files: std::collections::BTreeMap<String, String>,
    /// Options of both commands beyond the inventory and connection
    /// (`--diff`, `--forks 1` for hosts in a fixed order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default)]
    pub code: i32,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
}
