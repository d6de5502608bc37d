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
#[path = "../conformance/json_eq.rs"]
mod json_eq;
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
use json_eq::json_eq;
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

/// A kind of disagreement understood and not fixed: what identifies it
/// (on the case as generated) and why it stays.
struct Known {
    name: &'static str,
    reason: &'static str,
    matches: fn(&Case, &Answer, &Answer) -> bool,
}

/// Whether an answer is a failure on an undefined value.
fn fails_undefined(answer: &Answer) -> bool {
    matches!(
        answer,
        Answer::Failed {
            class: Class::Undefined,
            ..
        }
    )
}

/// Whether a failure is about an undefined value, whatever its class (a
/// condition's failures have none).
fn names_undefined(answer: &Answer) -> bool {
    let message = error_text(answer);
    fails_undefined(answer)
        || message.contains("is undefined")
        || message.contains("has no attribute")
}

/// A failure's message; empty for an answer that is not one.
fn error_text(answer: &Answer) -> &str {
    match answer {
        Answer::Failed { message, .. } => message,
        _ => "",
    }
}

/// The disagreements a run may meet without failing, each with its reason.
const KNOWN: &[Known] = &[
    Known {
        name: "constant folding",
        reason: "Jinja evaluates an expression of literals alone while compiling; when that fails, Ansible's templar returns the template unrendered (do_template's `except Exception: return data`). enka evaluates it when rendering and fails, as the same expression over variables fails in both",
        // The unrendered template comes back (its backslashes doubled);
        // no generated text holds `{{` otherwise.
        matches: |_, ansible, _| {
            matches!(ansible, Answer::Value { value, .. }
                if value.as_str().is_some_and(|text| text.contains("{{") || text.contains("{%")))
        },
    },
    Known {
        name: "unknown filter or test",
        reason: "Jinja resolves filter names while compiling, so an unknown one fails first; enka's project loader refuses an unknown name at load (`enka check`, before any reconcile), and the templar alone meets it only when it is reached",
        matches: |_, ansible, enka| {
            error_text(ansible).contains("Could not load \"")
                || error_text(enka).contains("Could not load \"")
                || error_text(enka).contains("is unknown")
        },
    },
    Known {
        name: "unary plus",
        reason: "minijinja has no unary `+` (`{{ +x }}`); no role in the census writes one",
        matches: |_, _, enka| error_text(enka).contains("unexpected `+`"),
    },
    Known {
        name: "a Python TypeError inside a filter or test",
        reason: "a filter or test given a value of a type its Python code does not take (`0 | truncate`, `'a' is even`, `none | sort`, a list of mixed types sorted) raises a TypeError in Ansible; enka's takes what it can. The comparisons and loops roles write are Python's (pycompare.rs, strict/)",
        matches: |_, ansible, enka| {
            let message = error_text(ansible);
            !matches!(enka, Answer::Failed { .. })
                && (message.contains("Unexpected templating type error")
                    || message.starts_with("FilterArgumentError")
                    || message.starts_with("AnsibleFilterError")
                    || message.starts_with("AttributeError")
                    || message.starts_with("ValueError")
                    || message.contains("test expects a dictionary"))
        },
    },
    Known {
        name: "Jinja's select, reject and map on a non-list",
        reason: "Jinja's select/reject/map family are generators that Ansible's templar turns into [] when its input cannot be iterated; enka's refuses the input. A role filters lists",
        matches: |case, _, enka| {
            let message = error_text(enka);
            ["select", "reject", "map("]
                .iter()
                .any(|name| case.source().contains(name))
                && (message.contains("expects a list") || message.contains("is not iterable"))
        },
    },
    Known {
        name: "CPython's set order",
        reason: "`difference`, `intersect`, `union` and `unique` of strings come in CPython's set order, which hashes strings with a per-process random seed (PYTHONHASHSEED): Ansible's own order changes from run to run",
        matches: |_, ansible, enka| match (ansible, enka) {
            (Answer::Value { value: a, .. }, Answer::Value { value: b, .. }) => {
                let sorted = |v: &Json| {
                    let mut text: Vec<String> = v
                        .as_array()
                        .map(|items| items.iter().map(Json::to_string).collect())
                        .unwrap_or_else(|| {
                            v.as_str()
                                .unwrap_or_default()
                                .chars()
                                .map(String::from)
                                .collect()
                        });
                    text.sort();
                    text
                };
                a != b && sorted(a) == sorted(b)
            }
            _ => false,
        },
    },
    Known {
        name: "Python-only values",
        reason: "complex numbers (`(-2) ** 0.5`), Jinja's NativeJinjaText (`type_debug` of `to_json`'s result) and a text of several literals that literal_eval reads as a tuple have no counterpart in enka's values",
        matches: |case, ansible, _| match ansible {
            Answer::Value { value, .. } => {
                let text = value.as_str().unwrap_or_default();
                text.contains("j)")
                    || text == "NativeJinjaText"
                    || ["dict_keys(", "dict_values(", "dict_items("]
                        .iter()
                        .any(|view| text.to_lowercase().contains(view))
                    || (case.source().starts_with("{% for") && value.is_array())
            }
            _ => false,
        },
    },
    Known {
        name: "Jinja's plain undefined used",
        reason: "an inline `if` without `else` gives Jinja's plain Undefined, which Jinja lets print, compare and iterate but not slice or index; enka lets it pass everywhere",
        matches: |case, ansible, enka| {
            error_text(ansible).contains("no else section was defined")
                || error_text(enka).contains("an undefined value was passed")
                    && case.source().contains(" if ")
        },
    },
    Known {
        name: "first and last of a mapping, a test of an empty list",
        reason: "Jinja's `first`/`last` take a mapping's keys and `x is in([])` looks at nothing; minijinja refuses the mapping and enka's strict undefined fails the test's input",
        matches: |case, _, enka| {
            let source = case.source();
            matches!(enka, Answer::Failed { .. })
                && ((source.contains("| last") || source.contains("| first"))
                    && error_text(enka).contains("item from value")
                    || source.contains("in([])"))
        },
    },
    Known {
        name: "PyYAML's emitter",
        reason: "to_yaml and to_nice_yaml fold a long string at `width` (80) as PyYAML does only in part: enka writes it on one line, which reads back as the same data; line breaks are written as PyYAML writes them",
        matches: |case, ansible, enka| {
            case.source().contains("yaml")
                && matches!(
                    (ansible, enka),
                    (Answer::Value { .. }, Answer::Value { .. })
                )
        },
    },
    Known {
        name: "Jinja's lexer and values enka reads otherwise",
        reason: "Jinja refuses a float literal with a trailing dot (`0.`), reads a number sliced (`0[1:2]`) as undefined, keeps the NativeJinjaText of to_json/to_yaml through a variable, prints zip's tuples as tuples, and decodes base64 that is not UTF-8 with replacement characters; each needs a template no role writes",
        matches: |case, ansible, enka| {
            let source = case.source();
            error_text(ansible).contains("expected name or number")
                || error_text(enka).contains("cannot be sliced")
                || error_text(enka).contains("not valid UTF-8")
                || (source.contains("zip") || source.contains("_json") || source.contains("yaml"))
                    && matches!(
                        (ansible, enka),
                        (Answer::Value { .. }, Answer::Value { .. })
                    )
        },
    },
    Known {
        name: "Python's % with a list or a mapping",
        reason: "Python's `%` takes a list or a mapping (Ansible's undefined too, having `__getitem__`) as a mapping argument, used only by `%(name)s`, so `'text' % [1]` is 'text' and `'017' is divisibleby x.missing` is false; enka's counts it as one argument and fails on an undefined one",
        matches: |case, ansible, enka| {
            matches!(ansible, Answer::Value { .. })
                && (error_text(enka).contains("not all arguments converted")
                    || case.source().contains("divisibleby") && names_undefined(enka))
        },
    },
    Known {
        name: "an undefined value inside a collection turned into text",
        reason: "Jinja keeps an undefined value inside a list or dict literal, and Python's str() of the collection writes its repr (`AnsibleUndefined(hint=None, obj=missing, name='x')`) into the text; enka fails on the undefined value instead of writing that repr into a resource",
        matches: |case, ansible, _| match ansible {
            Answer::Value { value, .. } => {
                value
                    .to_string()
                    .to_lowercase()
                    .contains("ansibleundefined(")
                    || undefined_in_literal(&case.source())
            }
            _ => false,
        },
    },
    Known {
        name: "a slice of an undefined value",
        reason: "Ansible's undefined slices to itself (AnsibleUndefined.__getitem__), so `x[1:] | default(y)` is y, and Jinja's getitem turns `none[1:]` into an undefined value; minijinja slices both to an empty list, which would pass silently, so enka fails on them, naming them",
        matches: |case, ansible, enka| {
            let source = case.source();
            matches!(ansible, Answer::Value { .. })
                && (fails_undefined(enka)
                    || names_undefined(enka)
                    || error_text(enka).contains("'NoneType' object is not subscriptable"))
                && ["[1:]", "[:-1]", "[::-1]", "[1:2]"]
                    .iter()
                    .any(|slice| source.contains(slice))
        },
    },
    Known {
        name: "membership of an undefined value in an empty collection",
        reason: "Python's `x in []` compares nothing, so an undefined x passes; enka fails on the undefined operand of `in` before looking at the collection",
        matches: |case, ansible, enka| {
            let message = error_text(enka);
            matches!(ansible, Answer::Value { .. })
                && (message.contains("is undefined") || message.contains("has no attribute"))
                && case.source().contains(" in ")
        },
    },
    Known {
        name: "negative and boolean arithmetic",
        reason: "Python repeats a string a negative number of times as '' and negates booleans as integers (`- True` is -1); minijinja refuses both",
        matches: |_, _, enka| {
            let message = error_text(enka);
            message.starts_with("strings can only be multiplied with integers")
                || message.starts_with("sequences and iterables can only be multiplied")
                || message.starts_with("cannot round value (bool)")
                || message.starts_with("invalid operation")
        },
    },
];

/// Whether one of the generator's undefined values (`nope`, `x.missing`,
/// `l[7]`, a slice of `none`, a string's missing key) stands inside a list or dict literal: walking back from it, an
/// opening bracket that starts a literal (not a subscript) comes before
/// any call's parenthesis.
fn undefined_in_literal(source: &str) -> bool {
    [
        "nope", ".missing", ".a", ".b", ".k", ".x", "l[7]", "none[", "['a']", "[5]",
    ]
    .iter()
    .any(|name| {
        source.match_indices(name).any(|(at, _)| {
            let before = &source[..at];
            let mut depth = 0i32;
            for (i, c) in before.char_indices().rev() {
                match c {
                    ')' | ']' | '}' => depth += 1,
                    '(' | '[' | '{' if depth > 0 => depth -= 1,
                    '(' => return false,
                    '{' => return true,
                    '[' => {
                        let prev = before[..i].trim_end().chars().last();
                        return !prev.is_some_and(|p| {
                            p.is_alphanumeric() || matches!(p, '_' | ')' | ']' | '\'')
                        });
                    }
                    _ => {}
                }
            }
            false
        })
    })
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
    let mut known = vec![0usize; KNOWN.len()];
    // ENKA_TEMPLATE_FUZZ_SHOW_KNOWN=n prints n examples of each known kind.
    let show_known: usize = setting("ENKA_TEMPLATE_FUZZ_SHOW_KNOWN", 0);
    let mut examples: Vec<Vec<String>> = vec![Vec::new(); KNOWN.len()];
    let mut done = 0;
    let most: usize = setting("ENKA_TEMPLATE_FUZZ_MOST", 25);
    while done < cases && started.elapsed() < budget && found.len() < most {
        let case = Gen { rng: &mut rng }.case(4);
        done += 1;
        let (ansible, enka) = judge.answers(&case);
        let Some(kind) = disagreement(&ansible, &enka) else {
            continue;
        };
        if let Some(index) = KNOWN
            .iter()
            .position(|k| (k.matches)(&case, &ansible, &enka))
        {
            known[index] += 1;
            if examples[index].len() < show_known {
                examples[index].push(format!(
                    "{} {:?}\n      ansible-core: {}\n      enka:         {}",
                    case.kind(),
                    case.source(),
                    shown(&ansible),
                    shown(&enka)
                ));
            }
            continue;
        }
        let small = shrink::shrink(&case, &kind, |c| judge.disagreement(c));
        let (small_ansible, small_enka) = judge.answers(&small);
        if let Some(index) = KNOWN
            .iter()
            .position(|k| (k.matches)(&small, &small_ansible, &small_enka))
        {
            known[index] += 1;
            continue;
        }
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
    for (class, count) in KNOWN.iter().zip(&known).filter(|(_, count)| **count > 0) {
        println!("  known, {count}: {}: {}", class.name, class.reason);
    }
    for (class, shown) in KNOWN.iter().zip(&examples).filter(|(_, s)| !s.is_empty()) {
        println!("\n  examples of {}:", class.name);
        for example in shown {
            println!("    {example}");
        }
    }
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
