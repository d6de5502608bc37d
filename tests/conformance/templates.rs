//! `cases.yaml`: templates and conditions, through the library and through
//! `enka template`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use enka::template::{
    Context, Options, Semantics, Templar, TemplarBuilder, Var, VarList, convert, pyrepr,
};
use libtest_mimic::Trial;
use minijinja::Value;
use serde_json::Value as Json;

use super::{LINE_FLOORS, Outcome, corpus_recorded, dir, line_verdict, matches, shown, trial};

/// One case of the corpus.
struct Case {
    group: String,
    /// Where a snapshot corpus' case comes from (`path:line` in its
    /// repository), the name its known failures are listed by.
    origin: Option<String>,
    kind: &'static str,
    source: String,
    vars: Arc<VarList>,
    /// The group's vars as `enka template --vars` reads them.
    vars_json: Arc<Json>,
    compile_error: Option<String>,
    want: Json,
}

/// Every case, twice: through the library and through `enka template`.
pub fn trials() -> Vec<Trial> {
    let (cases, templar) = cases(
        &dir().join("cases.yaml"),
        "expected.json",
        Semantics::Ansible218,
    );
    let search_path: Arc<[PathBuf]> = Arc::from(vec![dir().join("files")]);
    let scratch = std::env::temp_dir().join(format!("enka-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    assert!(
        cases.len() >= 400,
        "the corpus must have at least 400 cases, has {}",
        cases.len()
    );
    for case in &cases {
        let vars_file = scratch.join(format!("{}.json", case.group));
        std::fs::write(&vars_file, case.vars_json.to_string()).expect("writing a vars file");
    }
    let mut trials = Vec::with_capacity(cases.len() * 2);
    for case in cases.into_iter().map(Arc::new) {
        let key = format!("{}::{}", case.group, case.source);
        let (library, templar, search_path) = (case.clone(), templar.clone(), search_path.clone());
        trials.push(trial(
            format!("{}::{key}", case.kind),
            key.clone(),
            move || check(&library.want, &render(&library, &templar, &search_path)),
        ));
        let vars_file = scratch.join(format!("{}.json", case.group));
        trials.push(trial(format!("enka-template::{key}"), key, move || {
            check(&case.want, &through_command(&case, &vars_file)?)
        }));
    }
    trials
}

fn check(want: &Json, got: &Outcome) -> Result<(), String> {
    match matches(want, got) {
        true => Ok(()),
        false => Err(format!(
            "ansible-core: {}\nenka:         {got:?}",
            shown(want)
        )),
    }
}

/// A corpus' cases (`corpus`, with its recording `expected` beside it)
/// with what ansible-core gave, and one templar with every template
/// compiled, as a project compiles its own.
fn cases(corpus: &Path, expected: &str, semantics: Semantics) -> (Vec<Case>, Arc<Templar>) {
    let recording = corpus.with_file_name(expected);
    let (groups, expected, with) = corpus_recorded(corpus, &recording);
    let recorded: HashMap<(&str, &str), &Json> = expected
        .iter()
        .filter_map(|c| {
            let group = c["id"].as_str()?.split('/').next()?;
            Some(((group, c["source"].as_str()?), c))
        })
        .collect();
    let mut builder = TemplarBuilder::new(Options {
        semantics,
        release: with.release,
        python: with.python,
        ..Options::default()
    });
    add_template_files(&mut builder, &dir().join("files/templates"));
    let mut cases = Vec::new();
    for group in groups.as_seq().unwrap_or_default() {
        let name = group
            .get("group")
            .map(|g| g.key_string())
            .unwrap_or_default();
        let vars: Vec<(String, Var)> = group
            .get("vars")
            .and_then(|v| v.as_map())
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| (k.key_string(), Var::templated(convert::from_yaml(v))))
            .collect();
        let vars = Arc::new(VarList(vars));
        let vars_json = Arc::new(group.get("vars").map(|v| v.to_json()).unwrap_or(Json::Null));
        for (kind, key) in [("template", "templates"), ("condition", "conditions")] {
            for item in group.get(key).and_then(|n| n.as_seq()).unwrap_or_default() {
                let source = item.as_str().unwrap_or_default().to_owned();
                let compiled = match kind {
                    "template" => builder.add_template(&source),
                    _ => builder.add_condition(&source),
                };
                let want = Json::clone(
                    recorded.get(&(name.as_str(), source.as_str())).unwrap_or_else(|| {
                        panic!("{name}::{source} is missing from expected.json; run tests/conformance/generate.py")
                    }),
                );
                cases.push(Case {
                    group: name.clone(),
                    origin: want["origin"].as_str().map(str::to_owned),
                    kind,
                    source,
                    vars: vars.clone(),
                    vars_json: vars_json.clone(),
                    compile_error: compiled.err().map(|e| e.to_string()),
                    want,
                });
            }
        }
    }
    (cases, builder.build())
}

fn add_template_files(builder: &mut TemplarBuilder, root: &std::path::Path) {
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            add_template_files(builder, &path);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            builder
                .add_file(&path.to_string_lossy(), text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

/// The corpus as recorded from each newer ansible-core line
/// (`expected-2.19.json`, `expected-2.21.json`), through the library in
/// 2.19 mode: one trial per line, which counts the cases that match and
/// fails below the line's floor ([`LINE_FLOORS`]), listing what does not
/// match. (The 2.18 corpus is a named test per case; these become so once
/// the mode matches nearly all of them.)
pub fn line_trials() -> Vec<Trial> {
    LINE_FLOORS
        .iter()
        .map(|&(line, floor)| {
            Trial::test(format!("line-{line}::cases-pass-the-floor"), move || {
                let (cases, templar) = cases(
                    &dir().join("cases.yaml"),
                    &format!("expected-{line}.json"),
                    Semantics::Ansible219,
                );
                let search_path: Arc<[PathBuf]> = Arc::from(vec![dir().join("files")]);
                let mut failing = Vec::new();
                for case in &cases {
                    let got = render(case, &templar, &search_path);
                    if !matches(&case.want, &got) {
                        failing.push(format!(
                            "{}::{}::{}\n  ansible-core {line}: {}\n  enka:         {got:?}",
                            case.kind,
                            case.group,
                            case.source,
                            shown(&case.want)
                        ));
                    }
                }
                line_verdict(line, "cases", cases.len(), floor, &failing)
            })
        })
        .collect()
}

/// The case through the library, as a task's template or condition.
fn render(case: &Case, templar: &Arc<Templar>, search_path: &Arc<[PathBuf]>) -> Outcome {
    if let Some(err) = &case.compile_error {
        return Err(err.clone());
    }
    let ctx = Context::new(templar.clone(), case.vars.clone(), search_path.clone());
    let rendered = match case.kind {
        "template" => templar.template_str(&case.source, &ctx),
        _ => templar
            .evaluate(&Value::from(case.source.as_str()), &ctx)
            .map(Value::from),
    };
    let value = rendered.map_err(|e| e.to_string())?;
    // JSON has no infinity or NaN; the recorder writes their Python repr.
    let non_finite = f64::try_from(value.clone()).is_ok_and(|f| !f.is_finite());
    let json = if non_finite && !value.is_integer() {
        Json::String(pyrepr::to_text(&value))
    } else {
        convert::to_json(&value).map_err(|e| e.to_string())?
    };
    // Ansible stores no lazy sequence: a task would keep what minijinja left
    // as an iterator, so it is told apart from the list Ansible makes.
    let type_name = if value.kind() == minijinja::value::ValueKind::Iterable {
        "iterator"
    } else {
        pyrepr::type_name(&value)
    };
    Ok((type_name.to_owned(), json))
}

/// The case through `enka template`, run as a user runs it: the group's
/// vars in a file, the case as its argument (`--when` for a condition),
/// from the directory of the corpus's files.
fn through_command(case: &Case, vars_file: &std::path::Path) -> Result<Outcome, String> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_enka"));
    command
        .current_dir(dir().join("files"))
        .args(["template", "-o", "json", "--vars"])
        .arg(vars_file)
        .args((case.kind == "condition").then_some("--when"))
        .arg(&case.source);
    let out = command
        .output()
        .map_err(|e| format!("running enka template: {e}"))?;
    match out.status.code() {
        Some(0) => {
            let printed: Json = serde_json::from_slice(&out.stdout)
                .map_err(|e| format!("enka template printed no JSON ({e}): {out:?}"))?;
            Ok(Ok((
                printed["type"].as_str().unwrap_or_default().to_owned(),
                printed["value"].clone(),
            )))
        }
        Some(1) => Ok(Err(String::from_utf8_lossy(&out.stderr).into_owned())),
        _ => Err(format!(
            "enka template neither rendered nor failed: {out:?}"
        )),
    }
}

/// The snapshot corpus (`make conformance-snapshots`), when
/// `ENKA_CONFORMANCE_SNAPSHOTS` names the directory mined.py and
/// generate.py `--corpus` wrote: public roles' and the playbook guide's
/// cases, never committed. One named trial per case and line, through the
/// library; a case is named by its origin (`path:line` in its repository)
/// or its id, and `mined_known.yaml` lists those enka does not match yet
/// with why (they must still fail, so a fix is noticed).
pub fn snapshot_trials() -> Vec<Trial> {
    let Some(root) = std::env::var_os("ENKA_CONFORMANCE_SNAPSHOTS").map(PathBuf::from) else {
        return Vec::new();
    };
    let known = snapshot_known();
    let corpus = root.join("cases.yaml");
    let mut trials = Vec::new();
    for (line, expected, semantics) in [
        ("2.18", "expected.json", Semantics::Ansible218),
        ("2.19", "expected-2.19.json", Semantics::Ansible219),
        ("2.21", "expected-2.21.json", Semantics::Ansible219),
    ] {
        if !root.join(expected).exists() {
            // The other lines' trials still run; this one says what is missing.
            trials.push(Trial::test(
                format!("snapshot-{line}::recorded"),
                move || {
                    Err(format!(
                        "{expected} is not recorded: run generate.py --corpus --line {line}"
                    )
                    .into())
                },
            ));
            continue;
        }
        let (cases, templar) = cases(&corpus, expected, semantics);
        let search_path: Arc<[PathBuf]> = Arc::from(vec![dir().join("files")]);
        for case in cases {
            let name = case
                .origin
                .clone()
                .unwrap_or_else(|| case.want["id"].as_str().unwrap_or_default().to_owned());
            let key = format!("{}::{name}", case.group);
            let reason = known
                .iter()
                .find(|k| k.case == key && k.lines.iter().any(|l| l == line))
                .map(|k| k.reason.clone());
            let (templar, search_path) = (templar.clone(), search_path.clone());
            trials.push(Trial::test(format!("snapshot-{line}::{key}"), move || {
                let verdict = check(&case.want, &render(&case, &templar, &search_path));
                match (verdict, reason) {
                    (Ok(()), None) | (Err(_), Some(_)) => Ok(()),
                    (Err(mismatch), None) => Err(mismatch.into()),
                    (Ok(()), Some(reason)) => Err(format!(
                        "listed in mined_known.yaml ({reason}), but it matches now: take it out"
                    )
                    .into()),
                }
            }));
        }
    }
    trials
}

/// A known disagreement of the snapshot corpus.
struct KnownCase {
    case: String,
    lines: Vec<String>,
    reason: String,
}

/// `mined_known.yaml`: `- {case: <group>::<origin>, lines: [2.19], reason: …}`
/// (every line when `lines` is absent).
fn snapshot_known() -> Vec<KnownCase> {
    let text = std::fs::read_to_string(dir().join("mined_known.yaml")).unwrap_or_default();
    let Ok(Some(node)) = enka::yaml::load_one(&text) else {
        return Vec::new();
    };
    node.as_seq()
        .unwrap_or_default()
        .iter()
        .map(|entry| {
            let text = |key: &str| entry.get(key).map(|v| v.key_string()).unwrap_or_default();
            let lines = entry
                .get("lines")
                .and_then(|l| l.as_seq())
                .map(|l| l.iter().map(|v| v.key_string()).collect())
                .unwrap_or_else(|| ["2.18", "2.19", "2.21"].map(String::from).to_vec());
            KnownCase {
                case: text("case"),
                lines,
                reason: text("reason"),
            }
        })
        .collect()
}
