//! The Ansible flavour of Jinja, on minijinja.
//!
//! [`Templar`] reproduces ansible-core 2.18's non-native templating:
//!
//! - a string that is exactly `{{ name }}`, where `name` holds a bool or a
//!   number, returns that value with its type (Ansible's single-variable
//!   fast path);
//! - any other template renders to text, printing each value as Python's
//!   `str()` would, and text that looks like a list, a dict or a bool
//!   (`[…]`, `{…}`, `True`, `False`) is parsed back with `literal_eval`
//!   ([`pyliteral`]); so `'{{ x | length }}'` is the *string* `"3"`;
//! - conditions (`when`, `until`, `failed_when`, …) are bare expressions
//!   judged by truthiness;
//! - variables are templated lazily ([`Context`]); undefined values chain
//!   through attribute access (`x.y.z is defined` is false) but fail when
//!   printed or judged.
//!
//! Every template of a project is compiled once, by [`TemplarBuilder`], and
//! looked up by its source text at run time.
//!
//! The crate is the floor every other layer stands on: it uses only
//! `enka-yaml` (for `from_yaml` and literal values) and `enka-worker` (for
//! filters, tests and lookups it has no native code for). It also holds
//! [`freeform`], Ansible's `key=value` splitting, and [`time`], Ansible's
//! seconds and Kubernetes' timestamps, which every layer above reads.

#![forbid(unsafe_code)]

pub mod budget;
mod conditional;
mod containers;
mod context;
pub mod convert;
mod error;
pub(crate) mod filters;
pub mod freeform;
mod globals;
mod growing;
mod lookups;
pub(crate) mod methods;
pub mod migration;
mod mutable;
mod native;
mod operators;
mod output;
mod predicates;
mod protomatter;
mod pycompare;
mod pyjson;
pub mod pyliteral;
mod pyrandom;
pub mod pyrepr;
/// Python's `shlex.split` (POSIX mode).
pub mod pyshlex;
mod python;
mod pytime;
pub mod scan;
mod source;
mod strict;
pub mod time;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use minijinja::{Environment, UndefinedBehavior, Value};

use rand::SeedableRng;
use rand::rngs::StdRng;
use source::{KeepsText, check_source, escape_backslashes, keeps_text, single_var, unicode_spaces};

pub(crate) use conditional::ConditionalInspections;
pub use conditional::{Judgement, UNSAFE_CONDITION, is_all_template};
pub use context::{
    Context, MAX_VAR_DEPTH, Var, VarList, VarSource, contains_template, contains_unsafe,
    is_possibly_template, mark_unsafe,
};
pub use error::{Error, ErrorKind};
pub use filters::ansible_boolean;
pub use filters::core_to_bool as to_bool;
pub use filters::{json_string, merge_hash, python_json, python_json_ascii, python_regex_message};
pub use lookups::is_native as is_native_lookup;
pub use lookups::{
    LookupPlugin, find_needle, normalize as normalize_path, query_as_with, render_template_file,
};
pub use predicates::strict_boolean;

/// Filters whose output Ansible keeps as text even when it looks like data
/// (`C.STRING_TYPE_FILTERS`).
const STRING_TYPE_FILTERS: &[&str] = &[
    "string",
    "to_json",
    "to_nice_json",
    "to_yaml",
    "to_nice_yaml",
    "ppretty",
    "json",
];

/// Instruction budget of one render, so a runaway loop in a template fails
/// instead of hanging a reconcile. A render runs on the async runtime's
/// thread, so this also bounds how long one object can hold a worker: about
/// 0.13 s in a release build (measured: 39 M instructions/s), while a loop
/// over 5000 items costs well under 1 M.
pub const DEFAULT_FUEL: u64 = 5_000_000;

/// Largest text one render may produce.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

/// Environment variable that seeds `random` and `shuffle`, so a run can be
/// reproduced.
pub const SEED_ENV: &str = "ENKA_RANDOM_SEED";

/// Which ansible-core's templating and conditionals a project follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Semantics {
    /// ansible-core 2.18, upstream's: text results parsed back into data
    /// when they look like it, conditions judged by truthiness.
    #[default]
    Ansible218,
    /// ansible-core 2.19 and later (data tagging): native results, and
    /// conditions that must be booleans.
    Ansible219,
}

impl Semantics {
    /// The (major, minor) release of an ansible-core version (`2.21.5`).
    pub fn release_of(version: &str) -> Option<(u32, u32)> {
        let mut parts = version.trim().split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }

    /// The line an ansible-core version (`2.19.14`) follows.
    pub fn of_version(version: &str) -> Option<Semantics> {
        match Semantics::release_of(version)? {
            (2, 0..=18) => Some(Semantics::Ansible218),
            (2, _) => Some(Semantics::Ansible219),
            _ => None,
        }
    }

    /// Whether results keep their native types (2.19 on).
    pub fn native(self) -> bool {
        self == Semantics::Ansible219
    }

    /// Whether an undefined value passes through the filters and methods
    /// that do not take one, to whatever takes it (2.19 on: Ansible's
    /// markers).
    pub fn passes_markers(self) -> bool {
        self == Semantics::Ansible219
    }
}

/// Knobs that change what templates may do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Seed for `random` and `shuffle`; `None` seeds from the OS.
    pub seed: Option<u64>,
    /// Whether `lookup('pipe', …)` may run commands.
    pub allow_pipe: bool,
    /// Instruction budget of one render; `None` means [`DEFAULT_FUEL`].
    pub fuel: Option<u64>,
    /// Bytes one reconcile may keep and each of its renders hold at once
    /// ([`budget`]); `None` means [`budget::DEFAULT_MEMORY_BUDGET`], 0 none.
    pub memory_budget: Option<usize>,
    /// Which ansible-core's semantics templates and conditions follow.
    pub semantics: Semantics,
    /// Where to record what the other line would make of each render (the
    /// migration report); `None` renders once.
    pub migration: Option<Arc<migration::Recorder>>,
    /// The ansible-core release (major, minor) the worker runs, when known:
    /// where releases of one line word a thing differently (2.21 against
    /// 2.19), the run follows the installed one.
    pub release: Option<(u32, u32)>,
    /// The worker's ansible-core version (`2.18.19`), when known: what
    /// `ansible_version` says.
    pub ansible_core: Option<Arc<str>>,
    /// The Python (major, minor) the worker runs, when known: filters that
    /// are Python's own functions (`win_dirname` is `ntpath.dirname`)
    /// answer as that Python's do.
    pub python: Option<(u32, u32)>,
}

impl Options {
    /// The memory budget of one reconcile, which each render shares: 0 in
    /// the setting means none.
    pub fn memory_budget(&self) -> usize {
        match self.memory_budget {
            Some(0) => usize::MAX,
            Some(bytes) => bytes,
            None => budget::DEFAULT_MEMORY_BUDGET,
        }
    }

    /// Whether the worker's ansible-core is 2.`minor` or later.
    pub fn release_at_least(&self, minor: u32) -> bool {
        self.release
            .is_some_and(|(major, at)| major > 2 || (major == 2 && at >= minor))
    }

    /// Whether the worker's Python is `version` or later; an unknown one
    /// counts as older (this machine's and the default image's 3.11).
    pub fn python_at_least(&self, version: (u32, u32)) -> bool {
        self.python.is_some_and(|python| python >= version)
    }

    /// Options with the seed taken from `ENKA_RANDOM_SEED`, when set.
    pub fn from_env() -> Self {
        Options {
            seed: std::env::var(SEED_ENV)
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            ..Options::default()
        }
    }
}

/// What the builder learned about one template when compiling it.
#[derive(Debug, Clone)]
struct Compiled {
    /// Name of the template in the environment.
    name: Arc<str>,
    /// `Some(var)` when the source is exactly `{{ var }}`.
    single_var: Option<Arc<str>>,
    /// Whether the whole output comes from a string-type filter.
    keeps_text: KeepsText,
    /// Trailing newlines of the source, which Jinja drops and Ansible restores.
    trailing_newlines: usize,
    /// Whether it hands back a value it looked up, whose trust 2.19 keeps
    /// ([`source::passes_through`]).
    passes_through: bool,
    /// Whether its output is read by template code before the result
    /// ([`native::nests_output`]): rendered as text in 2.19 mode.
    nests_output: bool,
}

/// Compiles a project's templates into a [`Templar`].
pub struct TemplarBuilder {
    env: Environment<'static>,
    lookups: HashMap<String, Arc<dyn LookupPlugin>>,
    compiled: HashMap<Arc<str>, Compiled>,
    conditions: HashMap<Arc<str>, Arc<str>>,
    options: Options,
}

/// A compiled set of templates and the Ansible-flavoured environment.
pub struct Templar {
    env: Environment<'static>,
    lookups: HashMap<String, Arc<dyn LookupPlugin>>,
    compiled: HashMap<Arc<str>, Compiled>,
    conditions: HashMap<Arc<str>, Arc<str>>,
    options: Options,
    rng: Mutex<StdRng>,
    omit: Arc<str>,
    /// The other line's templar, for the migration report.
    shadow: Option<migration::Shadow>,
}

impl std::fmt::Debug for Templar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templar")
            .field("templates", &self.compiled.len())
            .field("conditions", &self.conditions.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn omit_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        use rand::Rng;
        let mut rng = rand::rng();
        let hex: String = (0..40)
            .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
            .collect();
        format!("__omit_place_holder__{hex}")
    })
}

impl TemplarBuilder {
    /// The options the templates are compiled with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// An environment with Ansible's filters, tests, lookups and typing.
    pub fn new(options: Options) -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Chainable);
        if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_fuel(Some(options.fuel.unwrap_or(DEFAULT_FUEL)));
        env.set_recursion_limit(200);
        env.set_formatter(output::format_output);
        env.set_unknown_method_callback(methods::call_method);
        env.add_global("omit", omit_token());
        env.add_function("now", filters::now);
        globals::add(&mut env, Value::from_function(filters::dict_global));
        // Ansible's `undef(hint)`: a value that is undefined wherever it is
        // used, for a variable a role requires its caller to override.
        env.add_function(
            "undef",
            |_hint: Option<Value>, kwargs: minijinja::value::Kwargs| {
                kwargs.get::<Option<Value>>("hint")?;
                kwargs.assert_all_used()?;
                Ok::<_, minijinja::Error>(Value::UNDEFINED)
            },
        );
        // A condition's truth, and the type of a result that is not a
        // boolean (`True int`), which 2.18 deprecates.
        env.add_function("__enka_truth", |state: &minijinja::State, value: &Value| {
            if value.is_undefined() && is_silent_undefined(value) {
                // An inline `if` that was false: false to 2.18; 2.19 keeps
                // the expression's value, which Jinja's own undefined
                // cannot be.
                if filters::semantics(state) == Semantics::Ansible219 {
                    return Err(minijinja::Error::new(
                        minijinja::ErrorKind::InvalidOperation,
                        "Error rendering expression: Type 'Undefined' is unsupported for variable storage.",
                    ));
                }
                return Ok(Value::from("False"));
            }
            if value.is_undefined() {
                // The condition itself is what is undefined; the caller,
                // which has its text, names it.
                return Err(error::Cause::ConditionUndefined.error(
                    minijinja::ErrorKind::UndefinedError,
                    "the condition is undefined",
                ));
            }
            let truth = if value.is_true() { "True" } else { "False" };
            if value.kind() == minijinja::value::ValueKind::Bool {
                return Ok(Value::from(truth));
            }
            Ok(Value::from(format!("{truth} {}", pyrepr::type_name(value))))
        });
        filters::register(&mut env, options.semantics);
        predicates::register(&mut env);
        strict::register(&mut env, options.semantics);
        lookups::register(&mut env);
        operators::register(&mut env);
        growing::register(&mut env);
        mutable::register(&mut env);
        TemplarBuilder {
            env,
            lookups: HashMap::new(),
            compiled: HashMap::new(),
            conditions: HashMap::new(),
            options,
        }
    }

    /// Compiles a string that may be a template. Non-templates and sources
    /// seen before cost nothing.
    pub fn add_template(&mut self, source: &str) -> Result<(), Error> {
        if !is_possibly_template(source) || self.compiled.contains_key(source) {
            return Ok(());
        }
        let compiled = compile(&mut self.env, source, source)?;
        self.compiled.insert(Arc::from(source), compiled);
        Ok(())
    }

    /// Compiles every template string inside `value`.
    pub fn add_templates_in(&mut self, value: &Value) -> Result<(), Error> {
        use minijinja::value::ValueKind;
        match value.kind() {
            ValueKind::String => self.add_template(value.as_str().unwrap_or_default()),
            ValueKind::Seq => {
                for item in value.try_iter().into_iter().flatten() {
                    self.add_templates_in(&item)?;
                }
                Ok(())
            }
            ValueKind::Map => {
                for key in value.try_iter().into_iter().flatten() {
                    self.add_templates_in(&value.get_item(&key).unwrap_or_default())?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Compiles a bare conditional expression such as a `when`.
    pub fn add_condition(&mut self, expr: &str) -> Result<(), Error> {
        if is_possibly_template(expr) {
            // Ansible templates these first and warns; the result is then
            // evaluated dynamically.
            return self.add_template(expr);
        }
        if self.conditions.contains_key(expr) {
            return Ok(());
        }
        // Parse the bare expression first, so a syntax error points into
        // what the author wrote rather than into enka's wrapper.
        self.env
            .compile_expression(expr)
            .map_err(|e| Error::from_minijinja(&e, expr))?;
        let name: Arc<str> = Arc::from(format!("\u{1}condition\u{1}{expr}"));
        self.env
            .add_template_owned(name.to_string(), condition_source(expr))
            .map_err(|e| Error::from_minijinja(&e, expr))?;
        self.conditions.insert(Arc::from(expr), name);
        Ok(())
    }

    /// Registers a template file under `name` (its path), for `lookup('template')`
    /// and `{% include %}`.
    pub fn add_file(&mut self, name: &str, source: String) -> Result<(), Error> {
        let info = Compiled {
            name: Arc::from(name),
            single_var: None,
            keeps_text: KeepsText::Never,
            trailing_newlines: 0,
            nests_output: true,
            passes_through: false,
        };
        let source = file_source(&source).map_err(|e| e.in_template(&source))?;
        self.env
            .add_template_owned(name.to_owned(), source)
            .map_err(|e| Error::from_minijinja(&e, name))?;
        self.compiled
            .insert(Arc::from(format!("\u{1}file\u{1}{name}")), info);
        Ok(())
    }

    /// Adds a lookup plugin implemented by another layer (such as `k8s`).
    pub fn add_lookup(&mut self, name: &str, plugin: Arc<dyn LookupPlugin>) {
        self.lookups.insert(name.to_owned(), plugin);
    }

    /// Whether enka itself has the filter, test or lookup `name`.
    pub fn has_plugin(&self, kind: scan::PluginKind, name: &str) -> bool {
        let probe = match kind {
            scan::PluginKind::Filter => format!("{{{{ none | {name} }}}}"),
            scan::PluginKind::Test => format!("{{{{ none is {name} }}}}"),
            scan::PluginKind::Lookup => {
                return self.lookups.contains_key(name)
                    || lookups::is_native(name)
                    || self.lookups.contains_key(lookups::short_name(name));
            }
        };
        match self.env.render_str(&probe, ()) {
            Ok(_) => true,
            Err(err) => !matches!(
                err.kind(),
                minijinja::ErrorKind::UnknownFilter | minijinja::ErrorKind::UnknownTest
            ),
        }
    }

    /// Registers a filter, test or lookup that Ansible has and enka does
    /// not, called through the project's worker.
    pub fn add_python_plugin(
        &mut self,
        kind: scan::PluginKind,
        name: &str,
        worker: &Arc<enka_worker::AnsibleWorker>,
    ) {
        match kind {
            scan::PluginKind::Lookup => {
                let plugin = python::PythonLookup {
                    name: name.to_owned(),
                    worker: worker.clone(),
                    setting_vars: std::sync::Mutex::default(),
                };
                self.lookups.insert(name.to_owned(), Arc::new(plugin));
            }
            _ => python::register(&mut self.env, kind, name, worker),
        }
    }

    /// Finishes the set.
    pub fn build(self) -> Arc<Templar> {
        let rng = match self.options.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let shadow = self.options.migration.clone().map(|recorder| {
            let other = match self.options.semantics {
                Semantics::Ansible218 => Semantics::Ansible219,
                Semantics::Ansible219 => Semantics::Ansible218,
            };
            let shadow = TemplarBuilder {
                env: self.env.clone(),
                lookups: self.lookups.clone(),
                compiled: self.compiled.clone(),
                conditions: self.conditions.clone(),
                options: Options {
                    semantics: other,
                    migration: None,
                    ..self.options.clone()
                },
            };
            migration::Shadow {
                templar: shadow.build(),
                recorder,
            }
        });
        Arc::new(Templar {
            env: self.env,
            lookups: self.lookups,
            compiled: self.compiled,
            conditions: self.conditions,
            options: self.options,
            rng: Mutex::new(rng),
            omit: Arc::from(omit_token()),
            shadow,
        })
    }
}

/// A template file's source as enka compiles it: Python's mutable
/// literals, operators and strictness rewritten for minijinja.
pub(crate) fn file_source(source: &str) -> Result<String, Error> {
    check_source(source)?;
    let spaced = unicode_spaces(source);
    let literals = mutable::rewrite(&spaced);
    Ok(strict::rewrite(&operators::rewrite(&literals)).into_owned())
}

/// What a template not compiled beforehand is rendered from: its source
/// with Ansible's escapes and operators rewritten for minijinja.
pub(crate) fn render_text(source: &str) -> String {
    let escaped = escape_backslashes(&mutable::rewrite(&unicode_spaces(source)));
    let escaped = operators::rewrite(&escaped);
    strict::rewrite(&escaped).into_owned()
}

fn compile(env: &mut Environment<'static>, name: &str, source: &str) -> Result<Compiled, Error> {
    check_source(source)?;
    let escaped = escape_backslashes(&mutable::rewrite(&unicode_spaces(source)));
    let escaped = operators::rewrite(&escaped);
    let escaped = strict::rewrite(&escaped).into_owned();
    env.add_template_owned(name.to_owned(), escaped)
        .map_err(|e| Error::from_minijinja(&e, source))?;
    Ok(analyse(Arc::from(name), source))
}

fn analyse(name: Arc<str>, source: &str) -> Compiled {
    Compiled {
        name,
        single_var: single_var(source).map(Arc::from),
        keeps_text: keeps_text(source),
        trailing_newlines: source.len() - source.trim_end_matches('\n').len(),
        nests_output: native::nests_output(source),
        passes_through: source::passes_through(source),
    }
}

/// The source of the template a condition compiles to.
pub(crate) fn condition_source(expr: &str) -> String {
    let source = format!("{{{{ __enka_truth(({expr}\n)) }}}}");
    strict::rewrite(&operators::rewrite(&source)).into_owned()
}

thread_local! {
    /// Whether this thread is inside [`guarded_render`], whose panics
    /// become the template's error.
    static RENDERING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that stays silent for a panic inside a render
/// (which becomes that template's error, not a crash) and hands every
/// other panic to the hook before it. Commands call it once at start.
pub fn quiet_render_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !RENDERING.get() {
            previous(info);
        }
    }));
}

/// Renders `template` to text, turning a panic inside minijinja into an
/// error of the template, so that no template takes a command or a worker
/// down (the one known, a negative-step slice of an empty value in
/// minijinja 3.0.5, is rewritten away by `strict`).
pub(crate) fn guarded_render(
    template: &minijinja::Template<'_, '_>,
    ctx: &Context,
) -> Result<String, minijinja::Error> {
    native::with_capture(false, || render_catching_panics(template, ctx)).0
}

/// [`guarded_render`] keeping the values the template outputs
/// ([`native`]): the text with markers in their places, and the values.
pub(crate) fn guarded_render_native(
    template: &minijinja::Template<'_, '_>,
    ctx: &Context,
) -> (Result<String, minijinja::Error>, Vec<Value>) {
    native::with_capture(true, || render_catching_panics(template, ctx))
}

fn render_catching_panics(
    template: &minijinja::Template<'_, '_>,
    ctx: &Context,
) -> Result<String, minijinja::Error> {
    let was_rendering = RENDERING.replace(true);
    let _budget = budget::enter(ctx.memory_budget());
    let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        template.render(ctx.to_value())
    }));
    RENDERING.set(was_rendering);
    rendered.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("the template engine failed on this template ({message})"),
        ))
    })
}

/// Whether `value` is Ansible's strict undefined, which fails where Python
/// uses it (Jinja's plain undefined of an inline `if` passes).
pub(crate) fn is_strict_undefined(value: &Value) -> bool {
    value.is_undefined() && !is_silent_undefined(value)
}

/// Whether `value` is what an inline `if` without `else` gives when false:
/// Jinja's plain `Undefined`, which prints as nothing and is false, where
/// any other undefined value fails (Ansible's strict undefined).
/// minijinja keeps the two kinds apart, but not in its public API; its
/// strict mode fails on the other kind only, so a strict environment is
/// asked. Only called on undefined values, which otherwise fail.
pub(crate) fn is_silent_undefined(value: &Value) -> bool {
    static STRICT: std::sync::LazyLock<Environment<'static>> = std::sync::LazyLock::new(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env
    });
    value.is_undefined()
        && STRICT
            .render_str("{% if v %}{% endif %}", minijinja::context! { v => value })
            .is_ok()
}

impl Templar {
    /// The `omit` placeholder; arguments equal to it are dropped.
    pub fn omit(&self) -> &str {
        &self.omit
    }

    /// Whether `name` is one of the environment's globals (`lookup`,
    /// `omit`, `range`): a template reads it after the variables miss it.
    pub(crate) fn is_global(&self, name: &str) -> bool {
        self.env.globals().any(|(global, _)| global == name)
    }

    /// The options this templar was built with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut rng)
    }

    pub(crate) fn lookup_plugin(&self, name: &str) -> Option<&Arc<dyn LookupPlugin>> {
        self.lookups.get(name)
    }

    pub(crate) fn env(&self) -> &Environment<'static> {
        &self.env
    }

    /// Whether `name` is a registered template file.
    pub fn has_file(&self, name: &str) -> bool {
        self.env.get_template(name).is_ok()
    }

    /// Templates one string with Ansible's rules (`Templar.template`).
    pub fn template_str(&self, source: &str, ctx: &Context) -> Result<Value, Error> {
        let result = self.render_str(source, ctx);
        if let Some(shadow) = &self.shadow
            && ctx.depth == 0
            && is_possibly_template(source)
        {
            shadow.template(self, source, ctx, &result);
        }
        result
    }

    /// [`Templar::template_str`] without the migration report's second
    /// render: for templates inside a condition, which is compared whole.
    pub(crate) fn render_str(&self, source: &str, ctx: &Context) -> Result<Value, Error> {
        if !is_possibly_template(source) {
            return Ok(Value::from(source));
        }
        // A top-level render sees the variables as they are now; only
        // renders nested inside it share its cache of templated variables.
        if ctx.depth == 0 {
            ctx.reset();
        }
        let dynamic;
        let info = match self.compiled.get(source) {
            Some(info) => info,
            None => {
                dynamic = analyse(Arc::from(source), source);
                &dynamic
            }
        };
        if let Some(var) = info.single_var.as_ref().and_then(|name| ctx.vars.get(name)) {
            if var.value.is_number()
                || matches!(var.value.kind(), minijinja::value::ValueKind::Bool)
            {
                return Ok(var.value);
            }
            if var.value.is_none() {
                return Ok(Value::from(()));
            }
        }
        if self.options.semantics.native() {
            let (text, values) = self.render_source(source, info, ctx, !info.nests_output)?;
            let mut value = native::finish(&text, values, info.trailing_newlines)?;
            if ctx.depth == 0 && globals::is_python_class(&value) {
                // `{{ namespace }}` as a task's value: 2.19 stores no class
                // (a variable's own template, read lazily, may hold one).
                return Err(Error::new(
                    ErrorKind::Invalid,
                    "Error rendering template: Type 'type' is unsupported for variable storage.",
                )
                .in_template(source));
            }
            if let Some(text) = value.as_str() {
                check_output_size(text)?;
            }
            // What a template computes is data, not a template (2.19); a
            // value it looked up keeps its own trust, whatever else the
            // template read.
            if !info.passes_through {
                value = context::mark_unsafe(&value);
            }
            return Ok(value);
        }
        let (mut text, _) = self.render_source(source, info, ctx, false)?;
        check_output_size(&text)?;
        let have = text.len() - text.trim_end_matches('\n').len();
        for _ in have..info.trailing_newlines {
            text.push('\n');
        }
        // An inline `if`'s test, asked again only when its branches differ.
        let mut test = |test: &str| {
            self.evaluate(&Value::from(test), ctx)
                .is_ok_and(|truth| truth)
        };
        let value = if info.keeps_text.decide(&mut test) {
            Value::from(text)
        } else {
            pyliteral::convert_rendered(text)
        };
        Ok(self.keep_taint(value, ctx))
    }

    /// What came from unsafe data stays unsafe, whatever the template did
    /// to it (Ansible's AnsibleContext.unsafe).
    fn keep_taint(&self, value: Value, ctx: &Context) -> Value {
        if ctx.is_tainted() {
            context::mark_unsafe(&value)
        } else {
            value
        }
    }

    /// Renders `source` (compiled before, or now), as text or keeping the
    /// values it outputs (`native`).
    fn render_source(
        &self,
        source: &str,
        info: &Compiled,
        ctx: &Context,
        native: bool,
    ) -> Result<(String, Vec<Value>), Error> {
        let render = |template: minijinja::Template<'_, '_>| {
            let (rendered, values) = if native {
                guarded_render_native(&template, ctx)
            } else {
                (guarded_render(&template, ctx), Vec::new())
            };
            rendered.map(|text| (text, values)).map_err(|e| {
                let err = Error::from_render(&e, source, template.source());
                if err.is_undefined() && ctx.recursion.load(std::sync::atomic::Ordering::Relaxed) {
                    Error::recursion(source)
                } else {
                    err.explained(ctx)
                }
            })
        };
        if self.compiled.contains_key(source) {
            return render(
                self.env
                    .get_template(&info.name)
                    .map_err(|e| Error::from_minijinja(&e, source))?,
            );
        }
        check_source(source)?;
        let escaped = render_text(source);
        render(
            self.env
                .template_from_str(&escaped)
                .map_err(|e| Error::from_minijinja(&e, source))?,
        )
    }

    /// Templates every string inside `value`, recursively (mapping keys are
    /// left alone, as in Ansible); unsafe strings are kept as they are.
    pub fn template_value(&self, value: &Value, ctx: &Context) -> Result<Value, Error> {
        use minijinja::value::ValueKind;
        if value.is_safe() || context::is_unsafe_view(value) {
            return Ok(value.clone());
        }
        match value.kind() {
            ValueKind::String => self.template_str(value.as_str().unwrap_or_default(), ctx),
            ValueKind::Seq => {
                let mut items = Vec::with_capacity(value.len().unwrap_or(0));
                for item in value.try_iter().into_iter().flatten() {
                    items.push(self.template_item(&item, ctx)?);
                }
                Ok(Value::from(items))
            }
            ValueKind::Map => {
                let mut pairs = Vec::with_capacity(value.len().unwrap_or(0));
                // Keys stay as written, as Ansible's templar leaves them
                // (set_fact templates its own: `set_fact: "{{ item }}=x"`).
                for key in value.try_iter().into_iter().flatten() {
                    let item = value.get_item(&key).unwrap_or_default();
                    pairs.push((key, self.template_item(&item, ctx)?));
                }
                Ok(Value::from_pairs(pairs))
            }
            _ => Ok(value.clone()),
        }
    }

    /// Evaluates a conditional as Ansible does: `None`, `""` and `true` pass,
    /// a string is a bare Jinja expression judged by truthiness, and using
    /// an undefined value is an error.
    pub fn evaluate(&self, condition: &Value, ctx: &Context) -> Result<bool, Error> {
        self.judge(condition, ctx).map(|judgement| judgement.holds)
    }

    /// [`Templar::evaluate`], saying also when the result was not a
    /// boolean: 2.18's backported inspection deprecates that, and with
    /// `ALLOW_BROKEN_CONDITIONALS` off it is an error.
    pub fn judge(&self, condition: &Value, ctx: &Context) -> Result<Judgement, Error> {
        let result = self.judge_once(condition, ctx);
        if let Some(shadow) = &self.shadow
            && ctx.depth == 0
        {
            shadow.condition(self, condition, ctx, &result);
        }
        result
    }

    fn judge_once(&self, condition: &Value, ctx: &Context) -> Result<Judgement, Error> {
        match self.options.semantics {
            Semantics::Ansible218 => self.judge_leniently(condition, ctx),
            Semantics::Ansible219 => self.judge_strictly(condition, ctx),
        }
    }

    fn evaluate_str(&self, expr: &str, ctx: &Context) -> Result<Judgement, Error> {
        if ctx.depth == 0 {
            ctx.reset();
        }
        let mut expr = std::borrow::Cow::Borrowed(expr);
        let delimiters = is_possibly_template(&expr);
        if delimiters {
            let templated = self.render_str(&expr, ctx)?;
            if matches!(templated.kind(), minijinja::value::ValueKind::Bool) {
                return Ok(Judgement {
                    delimiters,
                    ..Judgement::boolean(templated.is_true())
                });
            }
            // An inline template that read unsafe data (a module's output, a
            // custom resource's field) must not become an expression that is
            // evaluated: it could run lookups. Ansible refuses it too.
            if ctx.is_tainted() || context::contains_unsafe(&templated) {
                return Err(Error::new(ErrorKind::Invalid, UNSAFE_CONDITION).in_template(&expr));
            }
            let text = pyrepr::to_text(&templated);
            if text.is_empty() {
                return Ok(Judgement {
                    delimiters,
                    ..Judgement::boolean(false)
                });
            }
            expr = std::borrow::Cow::Owned(text);
        }
        let (holds, not_boolean) = self.truth_of(&expr, ctx)?;
        Ok(Judgement {
            holds,
            not_boolean,
            delimiters,
        })
    }

    /// A bare expression's truth, and the Python type of its result when
    /// that is not a boolean.
    fn truth_of(&self, expr: &str, ctx: &Context) -> Result<(bool, Option<String>), Error> {
        let rendered = match self.conditions.get(expr) {
            Some(name) => self
                .env
                .get_template(name)
                .and_then(|t| guarded_render(&t, ctx)),
            None => {
                let source = condition_source(expr);
                check_source(&source)?;
                self.env
                    .template_from_str(&source)
                    .and_then(|t| guarded_render(&t, ctx))
            }
        }
        .map_err(|e| {
            let mut err = Error::from_minijinja(&e, expr).explained(ctx);
            let prefix = match self.options.semantics {
                Semantics::Ansible218 => format!("error while evaluating conditional ({expr}): "),
                Semantics::Ansible219 => "Error while evaluating conditional: ".to_owned(),
            };
            if err.is_undefined()
                && !err
                    .message()
                    .to_ascii_lowercase()
                    .starts_with("error while evaluating conditional")
            {
                err = Error::new(ErrorKind::Undefined, format!("{prefix}{}", err.message()));
            }
            err.in_template(expr)
        })?;
        let (truth, type_name) = rendered.split_once(' ').unwrap_or((&rendered, ""));
        Ok((
            truth == "True",
            (!type_name.is_empty()).then(|| type_name.to_owned()),
        ))
    }
}

fn check_output_size(text: &str) -> Result<(), Error> {
    if text.len() > MAX_OUTPUT_BYTES {
        return Err(Error::new(
            ErrorKind::Limit,
            format!(
                "template output is {} bytes, over the {MAX_OUTPUT_BYTES}-byte limit",
                text.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
