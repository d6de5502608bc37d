//! `fuzzed_plays.yaml`: playbooks the play fuzzer (`tests/play_fuzz`)
//! found, or that were written for what it found, each run by `enka
//! playbook` and compared with what ansible-playbook 2.18 printed and
//! exited with (recorded by the fuzzer, `ENKA_PLAY_FUZZ_RECORD=1` or
//! `ENKA_PLAY_FUZZ_RERECORD=1`).

use std::path::Path;

use libtest_mimic::Trial;

use super::outcome::{self, Outcome, Recorded};
use super::{dir, trial};

pub fn trials() -> Vec<Trial> {
    let path = dir().join("fuzzed_plays.yaml");
    let text = std::fs::read_to_string(&path).expect("fuzzed_plays.yaml is readable");
    let cases: Vec<Recorded> = serde_yaml::from_str(&text).expect("fuzzed_plays.yaml is YAML");
    let root = std::env::temp_dir().join(format!("enka-played-{}", std::process::id()));
    cases
        .into_iter()
        .map(|case| {
            let key = format!("played::{}", case.name);
            let dir = root.join(&case.name);
            trial(key.clone(), key, move || {
                let ran = run(&case, &dir);
                let _ = std::fs::remove_dir_all(&dir);
                compare(&case, &ran?)
            })
        })
        .collect()
}

fn run(case: &Recorded, dir: &Path) -> Result<Outcome, String> {
    let files: Vec<(String, String)> = case.files.clone().into_iter().collect();
    outcome::write_files(dir, &files).map_err(|e| e.to_string())?;
    // enka reads no Python setting; the fuzzer's environment keeps the
    // output alike (no colour, 80 columns).
    let env = outcome::environment(Path::new("python3"));
    Ok(outcome::run_enka(
        Path::new(env!("CARGO_BIN_EXE_enka")),
        dir,
        &env,
        &case.args,
    ))
}

fn compare(case: &Recorded, enka: &Outcome) -> Result<(), String> {
    let ansible = Outcome {
        code: case.code,
        stdout: case.stdout.clone(),
        stderr: case.stderr.clone(),
    };
    if outcome::both_refuse_to_load(&ansible, enka) {
        return Ok(());
    }
    match outcome::disagreement(&ansible, enka) {
        None => Ok(()),
        Some(kind) => Err(format!(
            "enka {kind}\n--- ansible-playbook (exit {}):\n{}{}\n--- enka (exit {}):\n{}{}",
            ansible.code, ansible.stdout, ansible.stderr, enka.code, enka.stdout, enka.stderr
        )),
    }
}
