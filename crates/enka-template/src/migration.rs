//! The recorder behind the 2.18 → 2.19 migration report.
//!
//! With a [`Recorder`] in [`Options::migration`](crate::Options), a
//! templar is built twice: once with the project's semantics and once with
//! the other line's (the *shadow*). Every top-level template and condition
//! the run renders is rendered by both over the same variables; where the
//! value, its Python type, or whether it fails differ, the recorder keeps a
//! [`Divergence`]: the task it belongs to, what was rendered, each line's
//! outcome, and the variables it read, so that the finding can be put to
//! real ansible-core of each line.
//!
//! The run itself goes on with the project's semantics only: the shadow's
//! answers are never used. Its lookups do run a second time, so a report
//! is made where that is harmless (a dry run, a test namespace).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use minijinja::Value;
use serde_json::Value as Json;

use crate::error::Error;
use crate::{Context, Judgement, Semantics, Templar, context, convert, pyrepr};

/// How many variables a finding keeps, and how large their JSON may be:
/// enough for a task's own inputs, not for a whole cluster's objects.
const MAX_VARS: usize = 64;
const MAX_VARS_BYTES: usize = 256 * 1024;

/// The task a render belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// The task's file.
    pub file: PathBuf,
    /// 1-based line of the task.
    pub line: u32,
    /// 1-based column of the task.
    pub column: u32,
    /// The task's name as Ansible shows it.
    pub task: String,
    /// Whether line and column are where the rendered text itself is
    /// written (a `when` entry), not only its task.
    pub exact: bool,
}

/// What was rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A template (a task argument, a variable's value, a loop).
    Template,
    /// A condition (`when`, `changed_when`, `failed_when`, `until`, `that`).
    Condition,
    /// What a module makes of its arguments (2.18's set_fact turns
    /// `yes`/`no` text into booleans).
    Module,
}

impl Kind {
    /// `template` or `condition`, as the oracle names them.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Template => "template",
            Kind::Condition => "condition",
            Kind::Module => "module",
        }
    }
}

/// What one line made of a render.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A value (a condition's is a boolean) and its Python type name.
    Value {
        /// The value as JSON.
        value: Json,
        /// `str`, `int`, `bool`, `list`, `dict`, `NoneType`, …
        type_name: String,
    },
    /// The render failed with this message.
    Failed(String),
}

impl Outcome {
    fn of_value(result: &Result<Value, Error>) -> Outcome {
        match result {
            Ok(value) => Outcome::Value {
                value: convert::to_json(value)
                    .unwrap_or_else(|_| Json::String(pyrepr::to_text(value))),
                type_name: pyrepr::type_name(value).to_owned(),
            },
            Err(err) => Outcome::Failed(err.to_string()),
        }
    }

    fn of_judgement(result: &Result<Judgement, Error>) -> Outcome {
        match result {
            Ok(judgement) => Outcome::Value {
                value: Json::Bool(judgement.holds),
                type_name: "bool".to_owned(),
            },
            Err(err) => Outcome::Failed(err.to_string()),
        }
    }

    /// The Python type name of a value; `None` for a failure.
    pub fn type_name(&self) -> Option<&str> {
        match self {
            Outcome::Value { type_name, .. } => Some(type_name),
            Outcome::Failed(_) => None,
        }
    }

    /// Whether the two lines agree: the same value of the same type, or
    /// both failing (their messages differ between lines by design).
    fn agrees_with(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Failed(_), Outcome::Failed(_)) => true,
            (
                Outcome::Value {
                    value: a,
                    type_name: ta,
                },
                Outcome::Value {
                    value: b,
                    type_name: tb,
                },
            ) => ta == tb && a == b,
            _ => false,
        }
    }

    /// The outcome as the conformance oracle answers:
    /// `{"ok": true, "value": …, "type": …}` or `{"ok": false, "error": …}`.
    pub fn to_json(&self) -> Json {
        match self {
            Outcome::Value { value, type_name } => {
                serde_json::json!({"ok": true, "value": value, "type": type_name})
            }
            Outcome::Failed(error) => serde_json::json!({"ok": false, "error": error}),
        }
    }

    /// `str '3'`, `int 3`, `an error: …`.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Value { value, type_name } => {
                let mut shown = match value {
                    Json::String(text) => format!("'{text}'"),
                    other => other.to_string(),
                };
                if shown.chars().count() > 80 {
                    shown = shown.chars().take(77).collect::<String>() + "...";
                }
                format!("{type_name} {shown}")
            }
            Outcome::Failed(error) => format!("an error: {}", first_line(error)),
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A template or condition whose result 2.18 and 2.19 do not agree on.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The task, when the render was made for one.
    pub origin: Option<Arc<Origin>>,
    /// Template or condition.
    pub kind: Kind,
    /// Its text.
    pub source: String,
    /// What ansible-core 2.18 makes of it.
    pub under_218: Outcome,
    /// What ansible-core 2.19 and later make of it.
    pub under_219: Outcome,
    /// The variables it read, raw (templates in them untemplated), as JSON.
    pub vars: BTreeMap<String, Json>,
    /// Which of those hold untrusted data (a custom resource's, a module's).
    pub unsafe_vars: BTreeSet<String>,
    /// Whether every variable it read is in `vars`.
    pub vars_complete: bool,
    /// Whether the text gives the same value each time it is rendered; the
    /// values of one that does not (`lookup('password')`) are a sample, and
    /// only their types tell the lines apart.
    pub stable: bool,
    /// How many times the run met it.
    pub count: usize,
}

impl Divergence {
    /// A divergence met once at `ctx`'s place, its variables not read yet.
    fn new(
        ctx: &Context,
        kind: Kind,
        source: String,
        [under_218, under_219]: [Outcome; 2],
    ) -> Self {
        Divergence {
            origin: ctx.origin.clone(),
            kind,
            source,
            under_218,
            under_219,
            vars: BTreeMap::new(),
            unsafe_vars: BTreeSet::new(),
            vars_complete: true,
            stable: true,
            count: 1,
        }
    }

    /// Whether `other` is the same text at the same place: a condition
    /// placed exactly (a block's or an include's `when`, inherited by each
    /// task under it) is one place whichever task met it.
    fn same_place(&self, other: &Divergence) -> bool {
        let place = |d: &Divergence| {
            d.origin.as_ref().map(|o| {
                let task = if o.exact { "" } else { o.task.as_str() };
                (o.file.clone(), o.line, o.column, task.to_owned())
            })
        };
        self.kind == other.kind && self.source == other.source && place(self) == place(other)
    }
}

/// Keeps the divergences a run meets, each place and text once.
#[derive(Debug, Default)]
pub struct Recorder {
    found: Mutex<Vec<Divergence>>,
}

impl Recorder {
    /// An empty recorder to put in [`Options::migration`](crate::Options).
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// What was found so far, in the order it was first met.
    pub fn divergences(&self) -> Vec<Divergence> {
        self.found.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many distinct divergences were found so far.
    pub fn len(&self) -> usize {
        self.found.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts one more meeting of a divergence kept before at the same
    /// place with the same text; false when there is none.
    fn met_again(&self, divergence: &Divergence) -> bool {
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        match found.iter_mut().find(|d| d.same_place(divergence)) {
            Some(known) => {
                known.count += 1;
                true
            }
            None => false,
        }
    }

    /// Keeps `divergence`, or counts it when it was met before.
    fn record(&self, divergence: Divergence) {
        if !self.met_again(&divergence) {
            self.found
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(divergence);
        }
    }
}

/// The other line's templar and where its disagreements go.
pub(crate) struct Shadow {
    pub(crate) templar: Arc<Templar>,
    pub(crate) recorder: Arc<Recorder>,
}

impl Shadow {
    /// `ctx` for the shadow: the same variables and place, nothing shared.
    fn context(&self, ctx: &Context) -> Context {
        ctx.isolated(self.templar.clone())
    }

    /// Renders `source` as the other line does and records a disagreement
    /// with `primary`, the project's line's result.
    pub(crate) fn template(
        &self,
        own: &Templar,
        source: &str,
        ctx: &Context,
        primary: &Result<Value, Error>,
    ) {
        let other = self.templar.template_str(source, &self.context(ctx));
        let (primary, other) = (Outcome::of_value(primary), Outcome::of_value(&other));
        if primary.agrees_with(&other) {
            return;
        }
        // A template that does not give the same twice (a random password,
        // `now()`, a lookup of what the run just changed) tells the lines
        // apart by its type only: rendered again by its own line, a value
        // that does not repeat is no finding.
        let again = own.render_str(source, &ctx.isolated(ctx.templar.clone()));
        let stable = primary.agrees_with(&Outcome::of_value(&again));
        if !stable && primary.type_name() == other.type_name() {
            return;
        }
        self.compare(own, Kind::Template, source, ctx, [primary, other], stable);
    }

    /// [`Shadow::template`] for a condition.
    pub(crate) fn condition(
        &self,
        own: &Templar,
        condition: &Value,
        ctx: &Context,
        primary: &Result<Judgement, Error>,
    ) {
        let Some(source) = condition.as_str().filter(|s| !s.trim().is_empty()) else {
            return;
        };
        let other = self.templar.judge(condition, &self.context(ctx));
        let (primary, other) = (
            Outcome::of_judgement(primary),
            Outcome::of_judgement(&other),
        );
        self.compare(own, Kind::Condition, source, ctx, [primary, other], true);
    }

    /// Records `primary` (the project's line) and `other` when they differ;
    /// `stable` says whether the text gives the same value every time.
    fn compare(
        &self,
        own: &Templar,
        kind: Kind,
        source: &str,
        ctx: &Context,
        [primary, other]: [Outcome; 2],
        stable: bool,
    ) {
        if primary.agrees_with(&other) {
            return;
        }
        let (under_218, under_219) = match own.options().semantics {
            Semantics::Ansible218 => (primary, other),
            Semantics::Ansible219 => (other, primary),
        };
        let mut divergence = Divergence::new(ctx, kind, source.to_owned(), [under_218, under_219]);
        divergence.stable = stable;
        // The variables are read once per place: a loop meets it often.
        if self.recorder.met_again(&divergence) {
            return;
        }
        read_vars(own, kind, source, ctx, &mut divergence);
        self.recorder.record(divergence);
    }
}

/// Fills `divergence.vars` with the raw values of the variables `source`
/// reads, and of those their templates read, as far as the limits allow.
fn read_vars(own: &Templar, kind: Kind, source: &str, ctx: &Context, divergence: &mut Divergence) {
    let mut pending: Vec<String> = own.names_read(kind, source).into_iter().collect();
    let mut bytes = 0;
    while let Some(name) = pending.pop() {
        if divergence.vars.contains_key(&name) {
            continue;
        }
        let Some(var) = ctx.vars.get(&name) else {
            continue;
        };
        let json = convert::to_json(&var.value)
            .unwrap_or_else(|_| Json::String(pyrepr::to_text(&var.value)));
        bytes += json.to_string().len();
        if divergence.vars.len() >= MAX_VARS || bytes > MAX_VARS_BYTES {
            divergence.vars_complete = false;
            break;
        }
        if var.is_unsafe || context::contains_unsafe(&var.value) {
            divergence.unsafe_vars.insert(name.clone());
        } else if var.lazy {
            for text in template_strings(&var.value) {
                pending.extend(own.names_read(Kind::Template, &text));
            }
        }
        divergence.vars.insert(name, json);
    }
}

/// The strings inside `value` that hold templates.
fn template_strings(value: &Value) -> Vec<String> {
    use minijinja::value::ValueKind;
    match value.kind() {
        ValueKind::String => value
            .as_str()
            .filter(|s| context::is_possibly_template(s))
            .map(|s| vec![s.to_owned()])
            .unwrap_or_default(),
        ValueKind::Seq | ValueKind::Map => {
            let mut out = Vec::new();
            for key in value.try_iter().into_iter().flatten() {
                let item = if value.kind() == ValueKind::Map {
                    value.get_item(&key).unwrap_or_default()
                } else {
                    key
                };
                out.extend(template_strings(&item));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// What the 2.18 → 2.19 migration means for one divergence: why the two
/// lines differ and what to write so that both agree.
pub fn advice(divergence: &Divergence) -> String {
    match (&divergence.under_218, &divergence.under_219, divergence.kind) {
        (Outcome::Value { .. }, Outcome::Failed(error), Kind::Condition) => {
            condition_failure_advice(error, &divergence.source)
        }
        (Outcome::Value { .. }, Outcome::Failed(error), _) => template_failure_advice(error),
        (Outcome::Failed(_), Outcome::Value { .. }, _) => {
            "2.18 fails here where 2.19 does not; a task that relied on this failure (in a rescue or with ignore_errors) must test for the case itself".to_owned()
        }
        (Outcome::Value { type_name: t18, .. }, Outcome::Value { type_name: t19, .. }, Kind::Template)
            if t18 != t19 =>
        {
            type_advice(t18, t19)
        }
        (_, _, Kind::Module) => {
            "2.18's set_fact turned this text into a boolean, 2.19's keeps the text: write the boolean itself (`true`/`false`, unquoted) where a boolean is meant".to_owned()
        }
        (_, _, Kind::Condition) => {
            "the condition holds under one line and not the other: write it as a comparison of values of one type (`x | int == 3`, `x | bool`)".to_owned()
        }
        _ => "2.19 renders a different value: 2.18 printed each part as text and parsed the result back; write the value's type out (`| string`, `| int`, `| to_json`) where it matters".to_owned(),
    }
}

fn type_advice(t18: &str, t19: &str) -> String {
    match (t18, t19) {
        ("str", _) => format!(
            "2.19 keeps the {t19} the expression gives where 2.18 made it text: where text is wanted (a string field of an object, a label, an annotation, a message compared with text) write `| string` at the end of the expression; where the {t19} is wanted, nothing to change"
        ),
        (_, "str") => format!(
            "2.18 parsed the rendered text back into {}; 2.19 keeps the text: write the {t18} in the expression itself (`{{{{ [a, b] }}}}`, `{{{{ {{'k': v}} }}}}`) or convert it (`| from_yaml`, `| int`, `| bool`)",
            with_article(t18)
        ),
        _ => format!(
            "2.19 keeps the {t19} the expression gives where 2.18 gave {}: convert it where the type matters (`| {t18}` where the filter exists)",
            with_article(t18)
        ),
    }
}

/// `a str`, `an int`.
fn with_article(type_name: &str) -> String {
    let article = if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {type_name}")
}

fn condition_failure_advice(error: &str, source: &str) -> String {
    if error.contains("Conditionals must have a boolean result") {
        let type_name = error
            .split("of type '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or("value");
        return format!(
            "2.19 refuses a condition whose result is {}, not a boolean: compare or test it instead (`x | length > 0` for text and lists, `x is not none`, `x | bool` for 'yes'/'no' text, `x | int > 0` for numbers)",
            with_article(type_name)
        );
    }
    if error.contains("untrusted") || error.contains("unsafe") {
        return "2.19 does not evaluate an expression that came from data: write the condition itself in the task, comparing the data's value (`when: field == 'x'`), not a template that builds one".to_owned();
    }
    if source.contains("{{") || source.contains("{%") {
        return "2.19 fails here: write the condition as a bare expression, without `{{ }}`"
            .to_owned();
    }
    format!(
        "2.19 fails here ({}): see ansible-core's 2.19 porting guide",
        first_line(error)
    )
}

fn template_failure_advice(error: &str) -> String {
    if error.contains("untrusted") || error.contains("not trusted") {
        return "2.19 does not render a template that came from data: keep templates in the role's own files".to_owned();
    }
    if error.contains("is undefined") || error.contains("has no attribute") {
        return "2.19 no longer passes over this undefined value: give it a default (`| default(…)`) or test it (`is defined`) first".to_owned();
    }
    format!(
        "2.19 fails here ({}): see ansible-core's 2.19 porting guide",
        first_line(error)
    )
}

impl Templar {
    /// Records that a module's own handling of `what` differs between the
    /// lines: `values` is what 2.18 and 2.19 make of it. Nothing happens
    /// without a migration report.
    pub fn note_divergence(&self, ctx: &Context, kind: Kind, what: String, values: [Value; 2]) {
        let Some(shadow) = &self.shadow else {
            return;
        };
        let [under_218, under_219] = values.map(|v| Outcome::of_value(&Ok(v)));
        shadow
            .recorder
            .record(Divergence::new(ctx, kind, what, [under_218, under_219]));
    }

    /// The top-level variable names `source` reads.
    fn names_read(&self, kind: Kind, source: &str) -> BTreeSet<String> {
        let mut texts = Vec::new();
        if kind == Kind::Condition {
            texts.push(crate::condition_source(source));
        }
        texts.push(crate::render_text(source));
        texts
            .iter()
            .find_map(|text| self.env().template_from_str(text).ok())
            .map(|template| template.undeclared_variables(false).into_iter().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
