//! The templating conformance corpus: every case of
//! `tests/conformance/cases.yaml`, rendered by enka and compared — value and
//! type — with what real ansible-core 2.18 produced (`expected.json`,
//! written by `tests/conformance/generate.py`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use enka::template::{Context, Options, TemplarBuilder, Var, VarList, convert, pyrepr};
use minijinja::Value;
use serde_json::Value as Json;

/// The share of cases that must match.
const REQUIRED: f64 = 0.97;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// A corpus file of `tests/conformance` and the cases its generator
/// recorded from ansible-core.
fn corpus(cases: &str, expected: &str) -> (enka::yaml::Node, Vec<Json>) {
    let text = std::fs::read_to_string(dir().join(cases)).unwrap();
    let node = enka::yaml::load_one(&text).unwrap().unwrap();
    let recorded: Json =
        serde_json::from_str(&std::fs::read_to_string(dir().join(expected)).unwrap()).unwrap();
    (node, recorded["cases"].as_array().unwrap().clone())
}

fn template_files(builder: &mut TemplarBuilder, root: &Path) {
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            template_files(builder, &path);
        } else {
            builder
                .add_file(
                    &path.to_string_lossy(),
                    std::fs::read_to_string(&path).unwrap(),
                )
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

/// The outcome of one case: `Ok((type, value))` or `Err(message)`.
type Outcome = Result<(String, Json), String>;

fn run_cases() -> Vec<(Json, Outcome)> {
    let (groups, expected) = corpus("cases.yaml", "expected.json");
    let files = dir().join("files");

    let mut builder = TemplarBuilder::new(Options::default());
    template_files(&mut builder, &files.join("templates"));
    let mut sources = Vec::new();
    for group in groups.as_seq().unwrap() {
        let name = group.get("group").unwrap().key_string();
        let vars: Vec<(String, Var)> = group
            .get("vars")
            .and_then(|v| v.as_map())
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| (k.key_string(), Var::templated(convert::from_yaml(v))))
            .collect();
        let vars = Arc::new(VarList(vars));
        let mut index = 0;
        for (kind, key) in [("template", "templates"), ("condition", "conditions")] {
            for item in group.get(key).and_then(|n| n.as_seq()).unwrap_or_default() {
                let source = item.as_str().unwrap().to_owned();
                let compiled = match kind {
                    "template" => builder.add_template(&source),
                    _ => builder.add_condition(&source),
                };
                sources.push((
                    format!("{name}/{index}"),
                    kind,
                    source,
                    vars.clone(),
                    compiled.err(),
                ));
                index += 1;
            }
        }
    }
    let templar = builder.build();
    let search_path: Arc<[PathBuf]> = Arc::from(vec![files.clone()]);
    let mut results = Vec::new();
    for (id, kind, source, vars, compile_error) in sources {
        let want = expected
            .iter()
            .find(|c| c["id"] == id.as_str())
            .unwrap_or_else(|| {
                panic!("{id} is missing from expected.json; run tests/conformance/generate.py")
            })
            .clone();
        assert_eq!(
            want["source"].as_str(),
            Some(source.as_str()),
            "{id}: cases.yaml and expected.json disagree; regenerate"
        );
        let outcome: Outcome = match compile_error {
            Some(err) => Err(err.to_string()),
            None => {
                let ctx = Context::new(templar.clone(), vars, search_path.clone());
                let rendered = match kind {
                    "template" => templar.template_str(&source, &ctx),
                    _ => templar
                        .evaluate(&Value::from(source.as_str()), &ctx)
                        .map(Value::from),
                };
                rendered.map_err(|e| e.to_string()).and_then(|v| {
                    Ok((
                        pyrepr::type_name(&v).to_owned(),
                        convert::to_json(&v).map_err(|e| e.to_string())?,
                    ))
                })
            }
        };
        results.push((want, outcome));
    }
    results
}

fn matches(want: &Json, got: &Outcome) -> bool {
    match (want["ok"].as_bool(), got) {
        (Some(true), Ok((type_name, value))) => {
            want["type"] == type_name.as_str() && json_eq(&want["value"], value)
        }
        (Some(false), Err(_)) => true,
        _ => false,
    }
}

fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            x.is_f64() == y.is_f64()
                && x.as_f64()
                    .zip(y.as_f64())
                    .is_some_and(|(p, q)| p == q || (p - q).abs() <= 1e-12 * p.abs().max(1.0))
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn corpus_matches_ansible_core() {
    let results = run_cases();
    let total = results.len();
    let mismatches: Vec<&(Json, Outcome)> =
        results.iter().filter(|(w, g)| !matches(w, g)).collect();
    let matched = total - mismatches.len();
    let show =
        std::env::var("ENKA_CONFORMANCE_SHOW").map_or(10, |v| v.parse().unwrap_or(usize::MAX));
    for (want, got) in mismatches.iter().take(show) {
        let expected = if want["ok"] == true {
            format!("{} {}", want["type"], want["value"])
        } else {
            format!("error {}", want["error"])
        };
        let actual = match got {
            Ok((t, v)) => format!("{t} {v}"),
            Err(e) => format!("error {e}"),
        };
        eprintln!(
            "MISMATCH {} {:?}\n  ansible: {expected}\n  enka:    {actual}",
            want["id"],
            want["source"].as_str().unwrap_or_default()
        );
    }
    println!("conformance: {matched} of {total} cases match ansible-core 2.18");
    assert!(
        total >= 400,
        "the corpus must have at least 400 cases, has {total}"
    );
    let ratio = matched as f64 / total as f64;
    assert!(
        ratio >= REQUIRED,
        "conformance {:.1}% is below {:.0}%",
        ratio * 100.0,
        REQUIRED * 100.0
    );
}

/// `tests/conformance/plays.yaml`: precedence, loops, blocks and task
/// keywords, compared with what ansible-playbook (ansible-core 2.18) did.
#[tokio::test]
async fn plays_match_ansible_playbook() {
    use enka::engine::{self, Entry, RunOptions};
    use enka::role::{LoadOptions, Project, RolePaths, Target};

    let (cases, expected) = corpus("plays.yaml", "expected_plays.json");
    let root = std::env::temp_dir().join(format!("enka-plays-{}", std::process::id()));
    let mut total = 0;
    let mut matched = 0;
    for case in cases.as_seq().unwrap() {
        let name = case.get("name").unwrap().key_string();
        let want = expected
            .iter()
            .find(|c| c["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} missing; regenerate"))
            .clone();
        let dir = root.join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let files = case
            .get("files")
            .and_then(|f| f.as_map())
            .unwrap_or_default();
        for (path, content) in files {
            let file = dir.join(path.key_string());
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, content.as_str().unwrap()).unwrap();
        }
        // A case may bring its own playbook and inventory (several hosts);
        // its last play sets conformance_result on localhost.
        let playbook = match case.get("playbook").and_then(|p| p.as_str()) {
            Some(playbook) => playbook.to_owned(),
            None => format!(
                "- hosts: localhost\n  gather_facts: no\n  roles: [case]\n  post_tasks:\n    - set_fact:\n        conformance_result: {}\n    - debug:\n        var: conformance_result\n",
                serde_json::to_string(case.get("result").unwrap().as_str().unwrap()).unwrap()
            ),
        };
        std::fs::write(dir.join("play.yml"), playbook).unwrap();
        let mut ansible = enka::worker::Config::from_env();
        if let Some(inventory) = case.get("inventory").and_then(|i| i.as_str()) {
            std::fs::write(dir.join("inventory"), inventory).unwrap();
            ansible.inventory = vec![dir.join("inventory")];
        }
        let options = LoadOptions {
            role_paths: RolePaths {
                base_dir: dir.clone(),
                ..RolePaths::default()
            },
            templates: Options::default(),
            origins: Vec::new(),
            lookups: Vec::new(),
            ansible: Some(ansible),
        };
        let (project, diagnostics) =
            Project::load(&options, &[Target::Playbook(dir.join("play.yml"))]);
        let mut stats = None;
        let mut failure_messages = None;
        let outcome: Outcome = match project {
            None => Err(diagnostics
                .0
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")),
            Some(project) => {
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
                let run = engine::run(
                    &project,
                    &Entry::Playbook(dir.join("play.yml")),
                    extra,
                    None,
                    // As generate.py runs ansible-playbook: `-c local`.
                    RunOptions {
                        connection: Some("local".to_owned()),
                        ..RunOptions::default()
                    },
                )
                .await;
                // Ansible's recap line for localhost.
                let localhost = run
                    .hosts
                    .iter()
                    .find(|(host, _)| host == "localhost")
                    .map(|(_, s)| s.clone())
                    .unwrap_or_default();
                stats = Some(recap(&localhost));
                // The case's directory as generate.py writes it.
                let dir_text = dir.display().to_string();
                failure_messages = Some(Json::from(
                    run.failed_task_messages
                        .iter()
                        .map(|m| m.replace(&dir_text, "<dir>"))
                        .collect::<Vec<_>>(),
                ));
                match (run.facts.get("conformance_result"), run.failure()) {
                    (Some(var), _) => Ok((
                        pyrepr::type_name(&var.value).to_owned(),
                        convert::to_json(&var.value).unwrap_or(Json::Null),
                    )),
                    (None, Some(failure)) => Err(failure.to_string()),
                    (None, None) => Err("no result".to_owned()),
                }
            }
        };
        total += 1;
        let same_stats = want
            .get("stats")
            .is_none_or(|want| Some(want) == stats.as_ref());
        // What upstream's operator writes as the Failure condition.
        let same_failures = want
            .get("failure_messages")
            .is_none_or(|want| Some(want) == failure_messages.as_ref());
        if matches(&want, &outcome) && same_stats && same_failures {
            matched += 1;
        } else {
            eprintln!(
                "MISMATCH play {name}\n  ansible: {} {} {} {}\n  enka:    {outcome:?} {stats:?} {failure_messages:?}",
                want["type"], want["value"], want["stats"], want["failure_messages"]
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    println!(
        "conformance: {matched} of {total} play cases match ansible-playbook (ansible-core 2.18)"
    );
    assert!(total >= 30);
    assert!(
        matched as f64 / total as f64 >= REQUIRED,
        "{matched} of {total}"
    );
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

/// `enka template` on every case of the corpus, run as a user runs it: each
/// group's vars in a vars file, the case as its argument (`--when` for a
/// condition), from the directory of the corpus's files. It must print what
/// ansible-core 2.18 gave, as the library does, and the seed's own
/// expressions (group `seed`) without exception.
#[test]
fn enka_template_prints_what_ansible_core_gives() {
    let (groups, expected) = corpus("cases.yaml", "expected.json");
    let scratch = std::env::temp_dir().join(format!("enka-template-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let (mut total, mut matched, mut seed_cases) = (0, 0, 0);
    for group in groups.as_seq().unwrap() {
        let name = group.get("group").unwrap().key_string();
        let vars_file = scratch.join(format!("{name}.json"));
        let vars = group.get("vars").map(|v| v.to_json()).unwrap_or(Json::Null);
        std::fs::write(&vars_file, vars.to_string()).unwrap();
        let mut index = 0;
        for (flag, key) in [(None, "templates"), (Some("--when"), "conditions")] {
            for item in group.get(key).and_then(|n| n.as_seq()).unwrap_or_default() {
                let id = format!("{name}/{index}");
                index += 1;
                let source = item.as_str().unwrap();
                let want = expected
                    .iter()
                    .find(|c| c["id"] == id.as_str())
                    .unwrap_or_else(|| panic!("{id} is missing from expected.json"));
                let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_enka"));
                command
                    .current_dir(dir().join("files"))
                    .env("ENKA_CONFORMANCE", "from-env")
                    .env_remove("ENKA_CONFORMANCE_UNSET")
                    .args(["template", "-o", "json", "--vars"])
                    .arg(&vars_file)
                    .args(flag)
                    .arg(source);
                let out = command.output().expect("running enka template");
                let got: Outcome = match out.status.code() {
                    Some(0) => {
                        let printed: Json = serde_json::from_slice(&out.stdout)
                            .unwrap_or_else(|e| panic!("{id}: not JSON ({e}): {out:?}"));
                        Ok((
                            printed["type"].as_str().unwrap_or_default().to_owned(),
                            printed["value"].clone(),
                        ))
                    }
                    Some(1) => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
                    _ => panic!("{id}: enka template did not render or fail: {out:?}"),
                };
                total += 1;
                if matches(want, &got) {
                    matched += 1;
                } else {
                    eprintln!("MISMATCH {id} {source:?}\n  ansible: {want}\n  enka:    {got:?}");
                    assert_ne!(name, "seed", "the seed's expressions must all match");
                }
                if name == "seed" {
                    seed_cases += 1;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    println!(
        "conformance: enka template matches ansible-core 2.18 on {matched} of {total} cases ({seed_cases} of the seed's)"
    );
    assert!(
        seed_cases >= 10,
        "the seed's group is missing from the corpus"
    );
    assert!(
        matched as f64 / total as f64 >= REQUIRED,
        "enka template matches {matched} of {total}"
    );
}
