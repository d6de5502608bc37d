//! A migration report's findings put to real ansible-core: each template
//! and condition, with the variables the report says it read, asked of the
//! conformance oracle on ansible-core 2.18 and on 2.19, and compared with
//! what the report says each line makes of it. Shared by the conformance
//! fixture and the differential harness (awx-operator, upstream's test
//! operators, the seed).

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

#[path = "../template_fuzz/oracle.rs"]
#[allow(dead_code)] // the fuzzer's trusting `answer` is not used here
mod oracle;

/// What checking a report found.
#[derive(Debug, Default)]
pub struct Held {
    /// Line answers compared (two per finding checked).
    pub checked: usize,
    /// Findings that could not be put to the oracle, with why.
    pub unchecked: Vec<String>,
    /// Findings whose reported answer is not ansible-core's.
    pub wrong: Vec<String>,
}

/// The interpreter of an ansible-core line, as `make` makes it.
pub fn line_python(line: &str) -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ansible-venv.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg(line)
        .output()
        .map_err(|e| format!("running scripts/ansible-venv.sh {line}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "scripts/ansible-venv.sh {line} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Why a `module` finding is not put to the oracle.
pub const MODULE_HANDLING: &str = "a module's own handling";

/// Why a finding cannot be put to the oracle, if it cannot: a module's own
/// handling (the task outcomes check that), variables not all kept, or a
/// lookup that needs the run's cluster or files.
fn uncheckable(finding: &Json) -> Option<&'static str> {
    let source = finding["source"].as_str().unwrap_or_default();
    if finding["kind"] == "module" {
        return Some(MODULE_HANDLING);
    }
    if finding["vars_complete"] != Json::Bool(true) {
        return Some("its variables were too large to keep");
    }
    if source.contains("lookup(") || source.contains("query(") || source.contains("q(") {
        return Some("a lookup, which reads the run's cluster or files");
    }
    None
}

/// Puts every finding of `findings` (a report's `findings` array) to both
/// lines' oracles.
pub fn check(findings: &[Json]) -> Result<Held, String> {
    let mut held = Held::default();
    for finding in findings {
        if let Some(why) = uncheckable(finding) {
            held.unchecked.push(format!("{}: {why}", describe(finding)));
        }
    }
    for line in ["2.18", "2.19"] {
        let python = line_python(line)?;
        let mut oracle = oracle::Oracle::start(
            &python.display().to_string(),
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance"),
        )?;
        for finding in findings.iter().filter(|f| uncheckable(f).is_none()) {
            let kind = finding["kind"].as_str().unwrap_or_default();
            let source = finding["source"].as_str().unwrap_or_default();
            let real = oracle.answer_untrusting(
                kind,
                source,
                &finding["vars"],
                &finding["unsafe_vars"],
            )?;
            held.checked += 1;
            let stable = finding["stable"] != Json::Bool(false);
            if let Some(mismatch) = disagreement(&finding[line], &real, stable) {
                held.wrong.push(format!(
                    "{} on {line}: the report says {}, ansible-core says {real} ({mismatch})",
                    describe(finding),
                    finding[line]
                ));
            }
        }
    }
    Ok(held)
}

fn describe(finding: &Json) -> String {
    format!(
        "{}:{} {} {}",
        finding["file"].as_str().unwrap_or("?"),
        finding["line"],
        finding["kind"].as_str().unwrap_or_default(),
        finding["source"]
    )
}

/// How the report's outcome for a line differs from ansible-core's answer:
/// both fail, or both give the same value of the same type (the same type,
/// for a text that is not `stable`: its values are samples).
fn disagreement(reported: &Json, real: &Json, stable: bool) -> Option<&'static str> {
    match (reported["ok"].as_bool(), real["ok"].as_bool()) {
        (Some(false), Some(false)) => None,
        (Some(true), Some(true)) if reported["type"] != real["type"] => Some("type"),
        (Some(true), Some(true)) if stable && reported["value"] != real["value"] => Some("value"),
        (Some(true), Some(true)) => None,
        (_, None) => Some("ansible-core could not answer"),
        _ => Some("one fails, the other does not"),
    }
}
