//! The migration report (`--migration-report`) against real ansible-core.
//!
//! `migration/playbook.yml` is run by `enka playbook` with a report, from
//! each side (2.18 semantics with the 2.18 worker, 2.19 semantics with the
//! 2.19 worker), and the report is held to what ansible-playbook 2.18 and
//! 2.19 did with the same playbook (`migration/expected.json`, written by
//! `migration/record.py`):
//!
//! - the tasks it names are exactly those that end differently under the
//!   two lines (status, registered value, or whether failed_when decided);
//! - each template and condition it reports, put to the conformance oracle
//!   of each line with the variables the report says it read, gets from
//!   real ansible-core the answer the report gives for that line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::Trial;
use serde_json::Value as Json;

use super::findings::{self, line_python};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/migration")
}

/// The trials: for each side the run is made from, the tasks named and
/// each finding against each line's oracle.
pub fn trials() -> Vec<Trial> {
    ["2.18", "2.19"]
        .into_iter()
        .flat_map(|side| {
            [
                Trial::test(
                    format!("migration::from-{side}::names-the-tasks-that-differ"),
                    move || names_the_tasks_that_differ(side).map_err(Into::into),
                ),
                Trial::test(
                    format!("migration::from-{side}::findings-hold-on-real-ansible-core"),
                    move || findings_hold(side).map_err(Into::into),
                ),
            ]
        })
        .collect()
}

/// Runs the fixture from `side` and returns the report's findings.
fn report(side: &str) -> Result<Vec<Json>, String> {
    let python = line_python(side)?;
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_dir = std::env::temp_dir().join(format!(
        "enka-migration-{side}-{}-{run}",
        std::process::id()
    ));
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let path = out_dir.join("report.json");
    let ran = Command::new(env!("CARGO_BIN_EXE_enka"))
        .current_dir(fixture())
        .args([
            "playbook",
            "-i",
            "localhost,",
            "playbook.yml",
            "--ansible-semantics",
            side,
        ])
        .arg("--migration-report")
        .arg(&path)
        .env("ENKA_ANSIBLE_PYTHON", &python)
        .output()
        .map_err(|e| format!("cannot run enka playbook: {e}"))?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "no report at {} ({e}); enka playbook said:\n{}{}",
            path.display(),
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr)
        )
    })?;
    let _ = std::fs::remove_dir_all(&out_dir);
    let report: Json = serde_json::from_str(&text).map_err(|e| format!("the report: {e}"))?;
    Ok(report["findings"].as_array().cloned().unwrap_or_default())
}

fn expected() -> Result<Json, String> {
    let text = std::fs::read_to_string(fixture().join("expected.json"))
        .map_err(|e| format!("migration/expected.json: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("migration/expected.json: {e}"))
}

fn names_the_tasks_that_differ(side: &str) -> Result<(), String> {
    let expected = expected()?;
    let (old, new) = (&expected["2.18"], &expected["2.19"]);
    let differ: BTreeSet<String> = old
        .as_object()
        .ok_or("expected.json has no 2.18 tasks")?
        .iter()
        .filter(|(task, outcome)| new.get(task.as_str()) != Some(outcome))
        .map(|(task, _)| task.clone())
        .collect();
    if differ.is_empty() {
        return Err("expected.json records no task that differs: nothing is tested".into());
    }
    let named: BTreeSet<String> = report(side)?
        .iter()
        .filter_map(|f| f["task"].as_str().map(str::to_owned))
        .collect();
    let missed: Vec<_> = differ.difference(&named).collect();
    let extra: Vec<_> = named.difference(&differ).collect();
    if missed.is_empty() && extra.is_empty() {
        return Ok(());
    }
    Err(format!(
        "tasks that end differently under ansible-core 2.18 and 2.19 but are not in the report: {missed:?}\ntasks in the report that end the same under both: {extra:?}"
    ))
}

fn findings_hold(side: &str) -> Result<(), String> {
    let held = findings::check(&report(side)?)?;
    if held.checked == 0 {
        return Err("no finding was checked".into());
    }
    // A module's own handling is held to the recorded task outcomes by
    // the other trial; everything else must be checked here.
    let unchecked: Vec<_> = held
        .unchecked
        .iter()
        .filter(|u| !u.ends_with(findings::MODULE_HANDLING))
        .collect();
    if !unchecked.is_empty() {
        return Err(format!("findings not checked: {unchecked:?}"));
    }
    if held.wrong.is_empty() {
        Ok(())
    } else {
        Err(held.wrong.join("\n"))
    }
}
