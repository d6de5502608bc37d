//! `plays.yaml`: variable precedence, loops, blocks and task keywords, each
//! a small project run by the engine and compared with what
//! ansible-playbook (ansible-core 2.18) did: the result, localhost's recap
//! and the failure messages upstream's operator would write.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use enka::engine::{self, Entry, RunOptions};
use enka::role::{LoadOptions, Project, RolePaths, Target};
use enka::template::{Options, Semantics, Var, convert, pyrepr};
use libtest_mimic::Trial;
use serde_json::Value as Json;

use super::findings::line_python;
use super::{Outcome, PLAY_LINE_FLOORS, corpus, line_verdict, matches, trial};

/// Which ansible-core a run follows: its semantics and its worker's Python
/// (`None`: the environment's, as `make test` sets it).
#[derive(Clone)]
struct Line {
    semantics: Semantics,
    python: Option<PathBuf>,
    /// The release whose words the run follows where a line's differ.
    release: Option<(u32, u32)>,
    /// The (major, minor) of that Python.
    python_version: Option<(u32, u32)>,
}

/// What one play case produced.
struct Ran {
    outcome: Outcome,
    stats: Option<Json>,
    failure_messages: Option<Json>,
}

pub fn trials() -> Vec<Trial> {
    let (cases, expected) = corpus("plays.yaml", "expected_plays.json");
    let root = std::env::temp_dir().join(format!("enka-plays-{}", std::process::id()));
    let cases: Vec<enka::yaml::Node> = cases.as_seq().unwrap_or_default().to_vec();
    assert!(
        cases.len() >= 30,
        "the play corpus must have at least 30 cases"
    );
    cases
        .into_iter()
        .map(|case| {
            let name = case.get("name").map(|n| n.key_string()).unwrap_or_default();
            let want = expected
                .iter()
                .find(|c| c["name"] == name.as_str())
                .unwrap_or_else(|| panic!("{name} is missing from expected_plays.json; regenerate"))
                .clone();
            let dir = root.join(&name);
            let key = format!("play::{name}");
            trial(key.clone(), key, move || {
                let line = Line {
                    semantics: Semantics::Ansible218,
                    python: None,
                    release: Some((2, 18)),
                    python_version: None,
                };
                let ran = run(&case, &dir, &line)?;
                let _ = std::fs::remove_dir_all(&dir);
                compare(&want, &ran)
            })
        })
        .collect()
}

fn compare(want: &Json, ran: &Ran) -> Result<(), String> {
    let same_stats = want
        .get("stats")
        .is_none_or(|w| Some(w) == ran.stats.as_ref());
    // What upstream's operator writes as the Failure condition.
    let same_failures = want
        .get("failure_messages")
        .is_none_or(|w| Some(w) == ran.failure_messages.as_ref());
    if matches(want, &ran.outcome) && same_stats && same_failures {
        return Ok(());
    }
    // Both sides as JSON, so a long result can be diffed.
    let outcome = match &ran.outcome {
        Ok((type_name, value)) => format!("{type_name:?} {value}"),
        Err(error) => format!("error {error:?}"),
    };
    let json = |value: &Option<Json>| value.as_ref().map_or("null".to_owned(), Json::to_string);
    Err(format!(
        "ansible-playbook: {} {} {} {}\nenka:             {outcome} {} {}",
        want["type"],
        want["value"],
        want["stats"],
        want["failure_messages"],
        json(&ran.stats),
        json(&ran.failure_messages)
    ))
}

/// The play corpus as recorded from each newer ansible-core line
/// (`expected_plays-LINE.json`), run in 2.19 mode with that line's worker
/// (`scripts/ansible-venv.sh LINE`): one trial per line counting the cases
/// that match, failing below the line's floor.
pub fn line_trials() -> Vec<Trial> {
    PLAY_LINE_FLOORS
        .iter()
        .map(|&(line, floor)| {
            Trial::test(format!("line-{line}::plays-pass-the-floor"), move || {
                let python = line_python(line)?;
                let (cases, expected) =
                    corpus("plays.yaml", &format!("expected_plays-{line}.json"));
                let root =
                    std::env::temp_dir().join(format!("enka-plays-{line}-{}", std::process::id()));
                let run_line = Line {
                    semantics: Semantics::Ansible219,
                    python_version: enka::semantics::Installed::of(&python).python,
                    python: Some(python),
                    release: Semantics::release_of(line),
                };
                let mut failing = Vec::new();
                let cases = cases.as_seq().unwrap_or_default().to_vec();
                for case in &cases {
                    let name = case.get("name").map(|n| n.key_string()).unwrap_or_default();
                    let Some(want) = expected.iter().find(|c| c["name"] == name.as_str()) else {
                        failing.push(format!("{name}: not recorded"));
                        continue;
                    };
                    let dir = root.join(&name);
                    let result = run(case, &dir, &run_line).and_then(|ran| compare(want, &ran));
                    let _ = std::fs::remove_dir_all(&dir);
                    if let Err(mismatch) = result {
                        failing.push(format!("play::{name}\n{mismatch}"));
                    }
                }
                line_verdict(line, "plays", cases.len(), floor, &failing)
            })
        })
        .collect()
}

/// Writes the case's project under `dir` and runs its playbook.
fn run(case: &enka::yaml::Node, dir: &Path, line: &Line) -> Result<Ran, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for (path, content) in case
        .get("files")
        .and_then(|f| f.as_map())
        .unwrap_or_default()
    {
        let file = dir.join(path.key_string());
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&file, content.as_str().unwrap_or_default()).map_err(|e| e.to_string())?;
    }
    // A case may bring its own playbook and inventory (several hosts); its
    // last play sets conformance_result on localhost.
    let playbook = match case.get("playbook").and_then(|p| p.as_str()) {
        Some(playbook) => playbook.to_owned(),
        None => format!(
            "- hosts: localhost\n  gather_facts: no\n  roles: [case]\n  post_tasks:\n    - set_fact:\n        conformance_result: {}\n    - debug:\n        var: conformance_result\n",
            serde_json::to_string(
                case.get("result")
                    .and_then(|r| r.as_str())
                    .unwrap_or_default()
            )
            .map_err(|e| e.to_string())?
        ),
    };
    let play = dir.join("play.yml");
    std::fs::write(&play, playbook).map_err(|e| e.to_string())?;
    let mut ansible = enka::worker::Config::from_env();
    if let Some(python) = &line.python {
        ansible.python = python.clone();
    }
    // As an operator runs its worker: with a memory limit, whose handling
    // of a failed module's result then runs too.
    ansible.memory_limit = Some(4 << 30);
    // As generate.py runs ansible-playbook: `-i localhost,` unless the case
    // brings an inventory.
    ansible.inventory = vec![std::path::PathBuf::from("localhost,")];
    if let Some(inventory) = case.get("inventory").and_then(|i| i.as_str()) {
        std::fs::write(dir.join("inventory"), inventory).map_err(|e| e.to_string())?;
        ansible.inventory = vec![dir.join("inventory")];
    }
    let options = LoadOptions {
        role_paths: RolePaths {
            base_dir: dir.to_path_buf(),
            ..RolePaths::default()
        },
        templates: Options {
            semantics: line.semantics,
            release: line.release,
            python: line.python_version,
            ..Options::default()
        },
        origins: Vec::new(),
        lookups: Vec::new(),
        ansible: Some(ansible),
        inventory: enka_project::role::InventoryLoad::Always,
    };
    let (project, diagnostics) = Project::load(&options, &[Target::Playbook(play.clone())]);
    let Some(project) = project else {
        let messages: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
        return Ok(Ran {
            outcome: Err(messages.join("; ")),
            stats: None,
            failure_messages: None,
        });
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    Ok(runtime.block_on(run_playbook(case, &project, play, dir)))
}

async fn run_playbook(
    case: &enka::yaml::Node,
    project: &Arc<Project>,
    play: PathBuf,
    dir: &Path,
) -> Ran {
    let extra: Vec<(Arc<str>, Var)> = case
        .get("extra_vars")
        .and_then(|v| v.as_map())
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| {
            (
                Arc::from(k.key_string().as_str()),
                Var::templated(convert::from_yaml(v)),
            )
        })
        .collect();
    // As generate.py runs ansible-playbook: `-c local`.
    // The command line a case asks for: `tags`, `skip_tags`, `check`.
    let words = |key: &str| -> Vec<String> {
        case.get(key)
            .and_then(|v| v.as_seq())
            .unwrap_or_default()
            .iter()
            .map(|v| v.key_string())
            .collect()
    };
    let options = RunOptions {
        connection: Some("local".to_owned()),
        tags: engine::TagSelection::new(&words("tags"), &words("skip_tags")),
        check_mode: case.get("check").is_some_and(|v| v.key_string() == "True"),
        ..RunOptions::default()
    };
    let run = engine::run(project, &Entry::Playbook(play), extra, None, options).await;
    // Ansible's recap line for localhost.
    let localhost = run
        .hosts
        .iter()
        .find(|(host, _)| host == "localhost")
        .map(|(_, s)| s.clone())
        .unwrap_or_default();
    // The case's directory as generate.py writes it.
    let dir_text = dir.display().to_string();
    let failure_messages = run
        .failed_task_messages
        .iter()
        .map(|m| m.replace(&dir_text, "<dir>"))
        .collect::<Vec<_>>();
    let outcome = match (run.facts.get("conformance_result"), run.failure()) {
        (Some(var), _) => Ok((
            pyrepr::type_name(&var.value).to_owned(),
            convert::to_json(&var.value).unwrap_or(Json::Null),
        )),
        (None, Some(failure)) => Err(failure.to_string()),
        (None, None) => Err("no result".to_owned()),
    };
    Ran {
        outcome,
        stats: Some(recap(&localhost)),
        failure_messages: Some(Json::from(failure_messages)),
    }
}

/// The play recap's counts as upstream's operator reports them in a custom
/// resource's `ansibleResult`.
fn recap(stats: &enka::engine::Stats) -> Json {
    let result = enka::operator::status::ansible_result(stats, "");
    serde_json::json!({
        "ok": result["ok"], "changed": result["changed"],
        "skipped": result["skipped"], "failures": result["failures"],
    })
}
