//! The differential template fuzzer: templates and conditions made from a
//! seed (`generate.rs`), each rendered by enka and by real ansible-core in
//! one long-lived Python process (`oracle.rs`), compared on value and type,
//! or on failure and its class (undefined, syntax, other). A panic in enka
//! is a disagreement. Each disagreement is made as small as it stays one
//! (`shrink.rs`) and printed as a case for the `fuzz` group of
//! `tests/conformance/cases.yaml`, whose variables the fuzzer renders with.
//!
//! - `cargo test --test template_fuzz`: a fixed seed and case count (the
//!   `make test` run); it fails on any disagreement not already recorded in
//!   the `fuzz` group.
//! - `ENKA_TEMPLATE_FUZZ_SEED`, `ENKA_TEMPLATE_FUZZ_CASES`,
//!   `ENKA_TEMPLATE_FUZZ_SECONDS`: another stream, more cases, a time limit
//!   (`make template-fuzz`).
//! - `ENKA_TEMPLATE_FUZZ_RECORD=1`: the minimised cases are added to the
//!   `fuzz` group and recorded from ansible-core (`generate.py --groups
//!   fuzz`), so that each becomes a named conformance case before it is
//!   fixed.
//!
//! Needs `ENKA_ANSIBLE_PYTHON` (the worker's virtualenv, as `make test` sets
//! it); without it the run fails, never skips.

mod generate;
mod oracle;
mod shrink;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use enka::template::{Context, Options, TemplarBuilder, Var, VarList, convert, pyrepr};
use minijinja::Value;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value as Json;

use generate::{Case, Gen};
use oracle::Oracle;

/// How a failure is classed on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Undefined,
    Syntax,
    Other,
}

/// One side's answer.
#[derive(Debug, Clone)]
enum Answer {
    Value {
        type_name: String,
        value: Json,
    },
    Failed {
        class: Class,
        message: String,
    },
    Panic(String),
    /// The oracle could not say (it ran out of time).
    Unknown,
}

/// What kind of disagreement two answers are, to keep the same one while
/// shrinking; `None` when they agree.
fn disagreement(ansible: &Answer, enka: &Answer) -> Option<String> {
    match (ansible, enka) {
        (Answer::Unknown, _) | (_, Answer::Unknown) => None,
        (_, Answer::Panic(_)) => Some("enka panics".to_owned()),
        (
            Answer::Value { type_name, value },
            Answer::Value {
                type_name: their_type,
                value: theirs,
            },
        ) => (type_name != their_type || !json_eq(value, theirs))
            .then(|| "a different value".to_owned()),
        // Which of two runtime errors comes first (an undefined operand or
        // the TypeError of the operation) follows evaluation order, which
        // this does not compare; a syntax error must be one on both sides.
        (Answer::Failed { class, .. }, Answer::Failed { class: theirs, .. }) => {
            ((*class == Class::Syntax) != (*theirs == Class::Syntax))
                .then(|| format!("fails as {theirs:?} where Ansible fails as {class:?}"))
        }
        (Answer::Value { .. }, Answer::Failed { class, .. }) => {
            Some(format!("fails ({class:?}) where Ansible renders"))
        }
        (Answer::Failed { class, .. }, _) => {
            Some(format!("renders where Ansible fails ({class:?})"))
        }
        (Answer::Panic(_), _) => None,
    }
}

/// JSON equality with floats compared to Python's printing precision.
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

/// ansible-core's answer as an [`Answer`].
fn ansible_answer(json: &Json) -> Answer {
    match json["ok"].as_bool() {
        Some(true) => Answer::Value {
            type_name: json["type"].as_str().unwrap_or_default().to_owned(),
            value: json["value"].clone(),
        },
        Some(false) => {
            let message = json["error"].as_str().unwrap_or_default().to_owned();
            // A condition's failures all come as "The conditional check …
            // failed", its syntax errors included: no class to compare.
            let class = if message.starts_with("AnsibleError: The conditional check") {
                Class::Other
            } else if message.starts_with("AnsibleUndefinedVariable") {
                Class::Undefined
            } else if message.contains("template error while templating string")
                || message.starts_with("TemplateSyntaxError")
            {
                Class::Syntax
            } else {
                Class::Other
            };
            Answer::Failed { class, message }
        }
        None => Answer::Unknown,
    }
}

/// The `fuzz` group: its variables for enka and for the oracle, and the
/// cases already recorded in it.
struct Group {
    vars: Arc<VarList>,
    vars_json: Json,
    recorded: Vec<String>,
}

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn fuzz_group() -> Group {
    let path = conformance_dir().join("cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let groups = enka::yaml::load_one(&text)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{} is not YAML", path.display()));
    let group = groups
        .as_seq()
        .unwrap_or_default()
        .iter()
        .find(|g| g.get("group").is_some_and(|n| n.key_string() == "fuzz"))
        .cloned()
        .unwrap_or_else(|| panic!("{} has no `fuzz` group", path.display()));
    let vars_node = group.get("vars").cloned();
    let vars = vars_node
        .as_ref()
        .and_then(|v| v.as_map())
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| (k.key_string(), Var::templated(convert::from_yaml(v))))
        .collect();
    let recorded = ["templates", "conditions"]
        .iter()
        .flat_map(|key| group.get(key).and_then(|n| n.as_seq()).unwrap_or_default())
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    Group {
        vars: Arc::new(VarList(vars)),
        vars_json: vars_node.map(|v| v.to_json()).unwrap_or(Json::Null),
        recorded,
    }
}

/// enka's answer, through the library as a role's compiled template.
fn enka_answer(case: &Case, group: &Group, search_path: &Arc<[PathBuf]>) -> Answer {
    let source = case.source();
    let run = || {
        let mut builder = TemplarBuilder::new(Options::default());
        let compiled = match case.kind() {
            "template" => builder.add_template(&source),
            _ => builder.add_condition(&source),
        };
        compiled?;
        let templar = builder.build();
        let ctx = Context::new(templar.clone(), group.vars.clone(), search_path.clone());
        match case.kind() {
            "template" => templar.template_str(&source, &ctx),
            _ => templar
                .evaluate(&Value::from(source.as_str()), &ctx)
                .map(Value::from),
        }
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Err(panic) => Answer::Panic(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default(),
        ),
        Ok(Ok(value)) => match convert::to_json(&value) {
            Ok(json) => Answer::Value {
                type_name: pyrepr::type_name(&value).to_owned(),
                value: json,
            },
            Err(e) => Answer::Failed {
                class: Class::Other,
                message: e.to_string(),
            },
        },
        Ok(Err(err)) => Answer::Failed {
            class: match err.kind() {
                _ if case.kind() == "condition" => Class::Other,
                enka::template::ErrorKind::Undefined => Class::Undefined,
                enka::template::ErrorKind::Syntax => Class::Syntax,
                _ => Class::Other,
            },
            message: err.to_string(),
        },
    }
}

/// Both answers for one case.
struct Judge<'a> {
    oracle: Oracle,
    group: &'a Group,
    search_path: Arc<[PathBuf]>,
}

impl Judge<'_> {
    fn answers(&mut self, case: &Case) -> (Answer, Answer) {
        let ansible = self
            .oracle
            .answer(case.kind(), &case.source(), &self.group.vars_json)
            .unwrap_or_else(|e| panic!("{e}"));
        (
            ansible_answer(&ansible),
            enka_answer(case, self.group, &self.search_path),
        )
    }

    fn disagreement(&mut self, case: &Case) -> Option<String> {
        let (ansible, enka) = self.answers(case);
        disagreement(&ansible, &enka)
    }
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // A panic in enka is an answer here, not noise on stderr.
    std::panic::set_hook(Box::new(|_| {}));
    let seed: u64 = setting("ENKA_TEMPLATE_FUZZ_SEED", 40);
    let cases: usize = setting("ENKA_TEMPLATE_FUZZ_CASES", 3000);
    let budget = Duration::from_secs(setting("ENKA_TEMPLATE_FUZZ_SECONDS", 600));
    let record = std::env::var("ENKA_TEMPLATE_FUZZ_RECORD").is_ok_and(|v| v == "1");
    let python = std::env::var("ENKA_ANSIBLE_PYTHON").unwrap_or_else(|_| {
        eprintln!("template_fuzz: ENKA_ANSIBLE_PYTHON is not set; `make test` sets it (scripts/ansible-venv.sh)");
        std::process::exit(1);
    });
    let group = fuzz_group();
    let oracle = Oracle::start(&python, &conformance_dir()).unwrap_or_else(|e| {
        eprintln!("template_fuzz: {e}");
        std::process::exit(1);
    });
    let mut judge = Judge {
        oracle,
        group: &group,
        search_path: Arc::from(vec![conformance_dir().join("files")]),
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut found: BTreeMap<String, (Case, String)> = BTreeMap::new();
    let mut done = 0;
    let most: usize = setting("ENKA_TEMPLATE_FUZZ_MOST", 25);
    while done < cases && started.elapsed() < budget && found.len() < most {
        let case = Gen { rng: &mut rng }.case(4);
        done += 1;
        let Some(kind) = judge.disagreement(&case) else {
            continue;
        };
        let small = shrink::shrink(&case, &kind, |c| judge.disagreement(c));
        if group.recorded.contains(&small.source()) {
            continue;
        }
        found.entry(small.source()).or_insert((small, kind));
    }
    println!(
        "template_fuzz: seed {seed}, {done} cases in {:.1} s, {} disagreements",
        started.elapsed().as_secs_f64(),
        found.len()
    );
    report(&mut judge, &found);
    if record && !found.is_empty() {
        shrink::record(&conformance_dir(), found.values().map(|(case, _)| case));
    }
    if !found.is_empty() {
        std::process::exit(1);
    }
}

fn report(judge: &mut Judge<'_>, found: &BTreeMap<String, (Case, String)>) {
    for (source, (case, kind)) in found {
        let (ansible, enka) = judge.answers(case);
        println!("\n{} {source:?}: enka {kind}", case.kind());
        println!("  ansible-core: {}", shown(&ansible));
        println!("  enka:         {}", shown(&enka));
    }
    if !found.is_empty() {
        println!(
            "\nEach is a case for the `fuzz` group of tests/conformance/cases.yaml; ENKA_TEMPLATE_FUZZ_RECORD=1 adds them and records ansible-core's answers."
        );
    }
}

fn shown(answer: &Answer) -> String {
    match answer {
        Answer::Value { type_name, value } => format!("{type_name} {value}"),
        Answer::Failed { class, message } => {
            let message: String = message.chars().take(240).collect();
            format!("fails ({class:?}): {message}")
        }
        Answer::Panic(message) => format!("panics: {message}"),
        Answer::Unknown => "no answer".to_owned(),
    }
}
