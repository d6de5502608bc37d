//! The conformance corpus, one named test per recorded case, each compared
//! (value and type, or failure) with what real ansible-core 2.18 produced:
//!
//! - `template::<group>::<source>` and `condition::<group>::<source>`:
//!   `cases.yaml` through enka's templating library (`expected.json`);
//! - `enka-template::<group>::<source>`: the same case through the
//!   `enka template` command, as a user runs it;
//! - `play::<name>`: `plays.yaml`, a small project per case run by the
//!   engine, its result, recap and failure messages (`expected_plays.json`);
//! - `migration::…`: the 2.18 → 2.19 migration report on a fixture playbook,
//!   held to ansible-playbook 2.18 and 2.19 and to each line's oracle.
//!
//! The expected values are written by `tests/conformance/generate.py` from
//! real ansible-core; nothing here is taken from what enka prints. A case
//! that does not match fails on its own, and `cargo test --test conformance
//! <name>` runs one. [`KNOWN_FAILURES`] lists the cases enka does not match
//! yet, each with its reason: they must still fail, so a fix is noticed and
//! the entry removed.

mod findings;
mod json_eq;
mod migration;
#[path = "../play_fuzz/outcome.rs"]
#[allow(dead_code)] // the fuzzer's side: ansible-playbook is not run here
mod outcome;
mod played;
mod plays;
mod templates;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use json_eq::json_eq;
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value as Json;

/// The newer ansible-core lines' corpora, in 2.19 mode: how many cases must
/// match (raise as enka matches more; the goal is all but a listed few).
const LINE_FLOORS: &[(&str, usize)] = &[("2.19", 1896), ("2.21", 1896)];

/// How many of the play corpus' cases must match on each newer line, run
/// with that line's worker: one below what an idle machine measures (244 of
/// 245 on both; kiali_style_status_progress_duration's error names 2.19's
/// tagged int type, which enka's values do not carry), because
/// `async_tasks_wait_or_return_a_job`'s late job races the async wrapper's
/// kill against the poll one second in, as it does in Ansible, and a loaded
/// machine can see either side of it.
const PLAY_LINE_FLOORS: &[(&str, usize)] = &[("2.19", 243), ("2.21", 243)];

/// Cases enka does not match yet, by `<group>::<source>` (templates, both
/// through the library and `enka template`) or `play::<name>`, with why.
const KNOWN_FAILURES: &[(&str, &str)] = &[
    (
        "play::options_debug_in_a_loop",
        "2.18's TaskExecutor returns an action's own argument failure (AnsibleActionFail) for a loop item before it sets `changed`, so those items have none; enka's have `changed: false`",
    ),
    (
        "fuzz::{{ 1 if true else (n | no_such_filter) }}",
        "Jinja resolves filter names while compiling; enka's loader refuses an unknown name at load (`enka check`), its templar alone only when reached",
    ),
    ("fuzz::{{ +n }}", "minijinja has no unary `+`"),
    (
        "fuzz::{{ 0 | rejectattr('b', 'defined') }}",
        "Jinja's select/reject family are generators Ansible turns into [] when the input cannot be iterated; enka refuses the input",
    ),
    (
        "fuzz::{{ (-2) ** 0.5 }}",
        "complex numbers have no counterpart in enka's values",
    ),
    (
        "fuzz::{{ s * -1 }}",
        "Python repeats a string a negative number of times as ''; minijinja refuses it",
    ),
    (
        "fuzz::{{ - b }}",
        "Python negates a boolean as an integer; minijinja refuses it",
    ),
    (
        "fuzz::{{ {'k': nope} | replace('x', 'y') }}",
        "Python's str() of a dict writes the repr of the AnsibleUndefined inside it; enka fails on the undefined value",
    ),
    (
        "fuzz::{{ 3 | default(nope[1:2]) }}",
        "Ansible's undefined slices to itself; minijinja slices it to an empty list, so enka fails on it rather than pass it silently",
    ),
    (
        "fuzz::{{ nope in [] }}",
        "Python's `x in []` compares nothing; enka fails on the undefined operand first",
    ),
    (
        "fuzz::{{ dl | intersect(s) }}",
        "Ansible's fallback `x in b` raises a TypeError for a dict in a string; enka's intersect compares items",
    ),
    (
        "lookups::{{ (lookup('items', 'aB') + 'x') | type_debug }}",
        "type_debug: enka does not carry AnsibleUnsafeText's class through string operations",
    ),
    (
        "lookups::{{ ('x' + lookup('items', 'aB')) | type_debug }}",
        "type_debug: enka does not carry AnsibleUnsafeText's class through string operations",
    ),
    (
        "lookups::{{ (lookup('items', 'aB')[0]) | type_debug }}",
        "type_debug: enka does not carry AnsibleUnsafeText's class through indexing",
    ),
    (
        "lookups::{{ (lookup('items', 'aB')[1:]) | type_debug }}",
        "type_debug: enka does not carry AnsibleUnsafeText's class through slicing",
    ),
    (
        "lookups::{{ (lookup('items', 'aB') * 2) | type_debug }}",
        "type_debug: enka does not carry AnsibleUnsafeText's class through repetition",
    ),
    (
        "lookups::{{ (lookup('items', 'aB') | string) | type_debug }}",
        "type_debug: Jinja's native `string` filter returns NativeJinjaText, which enka does not model",
    ),
    (
        "lookups::{{ (lookup('items', 'aB') | to_json) | type_debug }}",
        "type_debug: `to_json` returns NativeJinjaText under Ansible's native environment, which enka does not model",
    ),
    (
        "string_comparisons::{{ 1 | string | type_debug }}",
        "type_debug: Jinja's native `string` filter returns NativeJinjaText, which enka does not model",
    ),
    (
        "lookups::{{ (lookup('items', 'aB') | e) | type_debug }}",
        "type_debug: `e` returns markupsafe's Markup, which enka does not model",
    ),
    (
        "lookups::{{ ('<a>' | e) | type_debug }}",
        "type_debug: `e` returns markupsafe's Markup, which enka does not model",
    ),
];

/// The outcome of one case: `Ok((type, value))` or `Err(message)`.
type Outcome = Result<(String, Json), String>;

fn main() {
    // `lookup('env', …)` cases read this, as generate.py set it for
    // ansible-core; set before any thread starts.
    // SAFETY: no other thread exists yet, so nothing reads the environment
    // while it changes.
    unsafe {
        std::env::set_var("ENKA_CONFORMANCE", "from-env");
        std::env::remove_var("ENKA_CONFORMANCE_UNSET");
    }
    let args = Arguments::from_args();
    let mut trials = templates::trials();
    trials.extend(plays::trials());
    trials.extend(played::trials());
    trials.extend(templates::line_trials());
    trials.extend(templates::snapshot_trials());
    trials.extend(plays::line_trials());
    trials.extend(migration::trials());
    let names: Vec<&str> = trials.iter().map(|t| t.name()).collect();
    for (known, _) in KNOWN_FAILURES {
        assert!(
            !known.starts_with("seed::"),
            "the seed's own expressions must all match: {known:?}"
        );
        assert!(
            names.iter().any(|n| n.ends_with(known)),
            "KNOWN_FAILURES names {known:?}, which is no case of the corpus"
        );
    }
    libtest_mimic::run(&args, trials).exit();
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// A corpus file of `tests/conformance` and the cases its generator
/// recorded from ansible-core.
fn corpus(cases: &str, expected: &str) -> (enka::yaml::Node, Arc<Vec<Json>>) {
    let (node, cases, _) = corpus_recorded(&dir().join(cases), &dir().join(expected));
    (node, cases)
}

/// What a recording was made with: the (major, minor) of its ansible-core
/// and of its Python (filters that are Python's own functions answer as
/// that Python's do).
#[derive(Debug, Clone, Copy, Default)]
struct RecordedWith {
    release: Option<(u32, u32)>,
    python: Option<(u32, u32)>,
}

/// [`corpus`], and what the recording was made with.
fn corpus_recorded(
    cases: &Path,
    expected: &Path,
) -> (enka::yaml::Node, Arc<Vec<Json>>, RecordedWith) {
    let text = std::fs::read_to_string(cases).expect("the corpus is readable");
    let node = enka::yaml::load_one(&text)
        .expect("the corpus is YAML")
        .expect("the corpus is not empty");
    let recorded: Json =
        serde_json::from_str(&std::fs::read_to_string(expected).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; record it with tests/conformance/generate.py",
                expected.display()
            )
        }))
        .expect("the recording is JSON");
    let mut cases = recorded["cases"].as_array().cloned().unwrap_or_default();
    let files = dir().join("files");
    cases
        .iter_mut()
        .for_each(|case| at_files(case, &files.to_string_lossy()));
    let version = |key: &str| {
        recorded[key]
            .as_str()
            .and_then(enka::template::Semantics::release_of)
    };
    let with = RecordedWith {
        release: version("ansible_core"),
        python: version("python"),
    };
    (node, Arc::new(cases), with)
}

/// The corpus's own directory where the recording wrote `<files>`:
/// values that name a file (`fileglob`, `first_found`) were recorded
/// wherever the repository was checked out.
fn at_files(value: &mut Json, files: &str) {
    match value {
        Json::String(text) if text.contains("<files>") => *text = text.replace("<files>", files),
        Json::Array(items) => items.iter_mut().for_each(|item| at_files(item, files)),
        Json::Object(map) => map.values_mut().for_each(|item| at_files(item, files)),
        _ => {}
    }
}

/// A named case as a test: `check` says whether enka matches; a known
/// failure must still fail.
fn trial(
    name: String,
    key: String,
    check: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Trial {
    let known = KNOWN_FAILURES
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, reason)| *reason);
    Trial::test(name, move || match (check(), known) {
        (Ok(()), None) => Ok(()),
        (Err(mismatch), None) => Err(Failed::from(mismatch)),
        (Err(_), Some(_)) => Ok(()),
        (Ok(()), Some(reason)) => Err(Failed::from(format!(
            "listed in KNOWN_FAILURES ({reason}), but it matches now: take it out of the list"
        ))),
    })
}

/// Whether enka's outcome is ansible-core's: the same type and value, or a
/// failure where Ansible failed.
fn matches(want: &Json, got: &Outcome) -> bool {
    match (want["ok"].as_bool(), got) {
        (Some(true), Ok((type_name, value))) => {
            want["type"] == type_name.as_str() && json_eq(&want["value"], value)
        }
        (Some(false), Err(_)) => true,
        _ => false,
    }
}

/// A line trial's verdict: prints how many of `total` cases of `what`
/// matched, lists the rest when asked (ENKA_CONFORMANCE_SHOW) or when they
/// fall under `floor`.
fn line_verdict(
    line: &str,
    what: &str,
    total: usize,
    floor: usize,
    failing: &[String],
) -> Result<(), Failed> {
    let passed = total - failing.len();
    println!("conformance {line}: {passed} of {total} {what} pass in 2.19 mode (floor {floor})");
    if passed < floor {
        return Err(format!(
            "{passed} of {total} {what} pass, under the floor of {floor}; not matching:\n{}",
            failing.join("\n")
        )
        .into());
    }
    if std::env::var_os("ENKA_CONFORMANCE_SHOW").is_some() {
        println!("{}", failing.join("\n"));
    }
    Ok(())
}

/// What Ansible gave, as a mismatch shows it.
fn shown(want: &Json) -> String {
    if want["ok"] == true {
        format!("{} {}", want["type"], want["value"])
    } else {
        format!("error {}", want["error"])
    }
}
