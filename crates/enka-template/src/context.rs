//! The variables a template sees, templated lazily as Ansible does.
//!
//! Ansible templates a variable only when a template reads it, and again at
//! every read, with the variables in force at that moment: `foo: "{{ bar }}"`
//! follows `bar`. A variable whose own templating hits an undefined value is
//! itself undefined, so `foo is defined` is false rather than an error.

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::Value;
use minijinja::value::{Enumerator, Object, ObjectRepr};

use super::Templar;

/// Bound on variables that template other variables, to stop `a: "{{ b }}"`,
/// `b: "{{ a }}"` from recursing forever.
pub const MAX_VAR_DEPTH: u32 = 32;

/// Name under which a template can reach its own [`Context`] (for lookups).
pub(crate) const CONTEXT_VAR: &str = "__enka_context";

/// One variable as stored: its raw value, whether any string inside it
/// may be a template, and whether it holds unsafe data (both computed once
/// when the variable is stored).
///
/// Unsafe data is what Ansible wraps as `AnsibleUnsafeText`: values from the
/// custom resource, module results, `!unsafe` strings. Each unsafe string is
/// a minijinja "safe" string (the flag autoescaping would use; Ansible
/// templates never autoescape), so the mark travels with the value through
/// every copy, list and dict, and is never templated. A render that reads an
/// unsafe variable marks its whole result unsafe, as Ansible's context does,
/// so a filter's new string (`{{ cr_field | upper }}`) stays unsafe too.
#[derive(Debug, Clone)]
pub struct Var {
    /// The raw value.
    pub value: Value,
    /// True when some string in `value` contains `{{`, `{%` or `{#` and is
    /// not unsafe.
    pub lazy: bool,
    /// True when some string in `value` is unsafe.
    pub is_unsafe: bool,
}

impl Var {
    /// A variable whose value is used as is.
    pub fn plain(value: Value) -> Self {
        let is_unsafe = contains_unsafe(&value);
        Var {
            value,
            lazy: false,
            is_unsafe,
        }
    }

    /// A variable that is templated on read if it contains templates.
    pub fn templated(value: Value) -> Self {
        let lazy = contains_template(&value);
        let is_unsafe = contains_unsafe(&value);
        Var {
            value,
            lazy,
            is_unsafe,
        }
    }

    /// A variable of unsafe data: every string in `value` is marked, and it
    /// is never templated.
    pub fn unsafe_data(value: &Value) -> Self {
        Var {
            value: mark_unsafe(value),
            lazy: false,
            is_unsafe: true,
        }
    }
}

/// Whether `s` may contain Jinja (Ansible's `is_possibly_template`).
pub fn is_possibly_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Whether any string in `value` may contain Jinja; unsafe strings never
/// count.
pub fn contains_template(value: &Value) -> bool {
    use minijinja::value::ValueKind;
    if is_unsafe_view(value) {
        return false;
    }
    match value.kind() {
        ValueKind::String => !value.is_safe() && value.as_str().is_some_and(is_possibly_template),
        ValueKind::Seq => value
            .try_iter()
            .map(|mut iter| iter.any(|v| contains_template(&v)))
            .unwrap_or(false),
        ValueKind::Map => value
            .try_iter()
            .map(|mut keys| {
                keys.any(|k| contains_template(&value.get_item(&k).unwrap_or_default()))
            })
            .unwrap_or(false),
        _ => false,
    }
}

pub(crate) fn is_unsafe_view(value: &Value) -> bool {
    value
        .downcast_object_ref::<super::convert::JsonView>()
        .is_some_and(|view| view.is_unsafe())
}

/// Whether any string in `value` is unsafe.
pub fn contains_unsafe(value: &Value) -> bool {
    use minijinja::value::ValueKind;
    if value
        .downcast_object_ref::<super::convert::JsonView>()
        .is_some()
    {
        return is_unsafe_view(value);
    }
    match value.kind() {
        ValueKind::String => value.is_safe(),
        ValueKind::Seq => value
            .try_iter()
            .map(|mut iter| iter.any(|v| contains_unsafe(&v)))
            .unwrap_or(false),
        ValueKind::Map => value
            .try_iter()
            .map(|mut keys| keys.any(|k| contains_unsafe(&value.get_item(&k).unwrap_or_default())))
            .unwrap_or(false),
        _ => false,
    }
}

/// What a string operation on `input` gives, as Ansible's
/// `AnsibleUnsafeText` gives it: its str methods (`upper`, `split`,
/// `format`, `%`...) return unsafe text when the input was unsafe.
pub fn keep_unsafe(input: &Value, output: Value) -> Value {
    if input.kind() == minijinja::value::ValueKind::String && input.is_safe() {
        mark_unsafe(&output)
    } else {
        output
    }
}

/// `value` with every string in it marked unsafe (mapping keys are left
/// alone: Ansible never templates them). JSON views are marked as a whole.
pub fn mark_unsafe(value: &Value) -> Value {
    use minijinja::value::ValueKind;
    if let Some(view) = value.downcast_object_ref::<super::convert::JsonView>() {
        return view.to_unsafe();
    }
    match value.kind() {
        ValueKind::String if !value.is_safe() => {
            Value::from_safe_string(value.as_str().unwrap_or_default().to_owned())
        }
        ValueKind::Seq => Value::from(
            value
                .try_iter()
                .map(|iter| iter.map(|v| mark_unsafe(&v)).collect::<Vec<_>>())
                .unwrap_or_default(),
        ),
        ValueKind::Map => Value::from_pairs(
            value
                .try_iter()
                .map(|keys| {
                    keys.map(|k| {
                        let item = value.get_item(&k).unwrap_or_default();
                        (k, mark_unsafe(&item))
                    })
                    .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        ),
        _ => value.clone(),
    }
}

/// Where the engine keeps variables; implemented by its layered scope.
pub trait VarSource: Send + Sync + std::fmt::Debug {
    /// The variable `name` at the highest precedence that defines it.
    fn get(&self, name: &str) -> Option<Var>;
    /// Every visible variable name, for `vars` and debugging.
    fn names(&self) -> Vec<Arc<str>>;
    /// The variables of an inventory host, for `hostvars[name]`; `None`
    /// when there is no such host (for the current host, `hostvars` then
    /// gives these variables themselves).
    fn host(&self, _name: &str) -> Option<Arc<dyn VarSource>> {
        None
    }
    /// Every inventory host's name, for iterating `hostvars`.
    fn host_names(&self) -> Vec<Arc<str>> {
        Vec::new()
    }
}

/// Variables from a plain list, a later definition of a name winning: for
/// renders outside a run (tests, fuzzing, the conformance replay).
#[derive(Debug, Default)]
pub struct VarList(pub Vec<(String, Var)>);

impl VarSource for VarList {
    fn get(&self, name: &str) -> Option<Var> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
    fn names(&self) -> Vec<Arc<str>> {
        self.0.iter().map(|(k, _)| Arc::from(k.as_str())).collect()
    }
}

/// Variables templated during one render, in resolution order.
pub(crate) type Resolved = Vec<(Arc<str>, Value)>;

/// Names read as undefined during one render, with the cause for a
/// variable that is defined but templates to nothing.
pub(crate) type UndefinedReads = Vec<(Arc<str>, Option<String>)>;

/// Everything a render needs besides the template: the variables, the
/// directories `template` and `file` lookups may read, and the templar.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) vars: Arc<dyn VarSource>,
    pub(crate) search_path: Arc<[PathBuf]>,
    pub(crate) templar: Arc<Templar>,
    pub(crate) depth: u32,
    /// Set when a variable chain hit [`MAX_VAR_DEPTH`].
    pub(crate) recursion: Arc<std::sync::atomic::AtomicBool>,
    /// Set when the current top-level render read an unsafe variable: its
    /// result is unsafe then.
    pub(crate) tainted: Arc<std::sync::atomic::AtomicBool>,
    /// Variables already templated during this render: the engine may look
    /// a name up several times per use, and nothing changes mid-render.
    pub(crate) resolved: Arc<std::sync::Mutex<Resolved>>,
    /// The names this render read that were undefined, in reading order,
    /// with Ansible's account of why for a variable whose own template met
    /// an undefined value (2.18: `{{ b }}: 'b' is undefined`, each level's
    /// template before the cause; 2.19: the innermost cause alone).
    pub(crate) undefined_reads: Arc<std::sync::Mutex<UndefinedReads>>,
    /// A variable whose templating meets an undefined value keeps its raw
    /// text instead of being undefined: how `hostvars` templates (Ansible's
    /// `HostVarsVars`, `fail_on_undefined=False`).
    pub(crate) undefined_keeps_raw: bool,
    /// The task this context renders for (the migration report's place).
    pub(crate) origin: Option<Arc<crate::migration::Origin>>,
    /// What a render may hold, when the caller narrowed the options' budget.
    pub(crate) memory_budget: Option<usize>,
    /// The action of the task whose `with_<lookup>` loop runs the lookup
    /// now (first_found picks its directory by it from 2.19).
    pub(crate) with_action: Option<Arc<str>>,
}

impl Context {
    /// A context over `vars`, with lookups searching `search_path` in order.
    pub fn new(
        templar: Arc<Templar>,
        vars: Arc<dyn VarSource>,
        search_path: Arc<[PathBuf]>,
    ) -> Self {
        Context {
            vars,
            search_path,
            templar,
            depth: 0,
            recursion: Arc::default(),
            tainted: Arc::default(),
            resolved: Arc::default(),
            undefined_reads: Arc::default(),
            undefined_keeps_raw: false,
            origin: None,
            with_action: None,
            memory_budget: None,
        }
    }

    /// This context, with `bytes` as what each of its renders may hold
    /// (what the reconcile has left of its budget).
    pub fn with_memory_budget(self, bytes: usize) -> Self {
        Context {
            memory_budget: Some(bytes),
            ..self
        }
    }

    /// What one render in this context may hold ([`crate::budget`]).
    pub(crate) fn memory_budget(&self) -> usize {
        self.memory_budget
            .unwrap_or_else(|| self.templar.options().memory_budget())
    }

    /// This context, saying which task it renders for.
    pub fn at(self, origin: Arc<crate::migration::Origin>) -> Self {
        Context {
            origin: Some(origin),
            ..self
        }
    }

    /// The templar this context renders with.
    pub fn templar(&self) -> &Arc<Templar> {
        &self.templar
    }

    /// The variables.
    pub fn vars(&self) -> &Arc<dyn VarSource> {
        &self.vars
    }

    /// Directories searched by `template` and `file` lookups.
    pub fn search_path(&self) -> &[PathBuf] {
        &self.search_path
    }

    /// `hostvars`: every inventory host's variables by host name.
    pub fn hostvars(&self) -> Value {
        Value::from_object(HostVars(self.clone()))
    }

    /// A variable by name as a template reads it: the variables, and the
    /// ones the task's surroundings make (`ansible_search_path`,
    /// `hostvars`) unless a variable of that name hides them.
    pub fn variable(&self, name: &str) -> Option<Value> {
        match name {
            // The directories this task's lookups and file searches use.
            "ansible_search_path" if self.vars.get("ansible_search_path").is_none() => {
                Some(Value::from(
                    self.search_path
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>(),
                ))
            }
            "hostvars" if self.vars.get("hostvars").is_none() => Some(self.hostvars()),
            _ => self.resolve(name),
        }
    }

    /// The value of `name`, templated if needed; `None` when not defined.
    pub fn resolve(&self, name: &str) -> Option<Value> {
        let Some(var) = self.vars.get(name) else {
            if !self.templar.is_global(name) {
                self.read_undefined(name, None);
            }
            return None;
        };
        if var.is_unsafe {
            self.tainted
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if !var.lazy {
            return Some(var.value);
        }
        if let Some(value) = self.cached(name) {
            return Some(value);
        }
        if self.depth >= MAX_VAR_DEPTH {
            // An error value here would be looked at again by every level
            // above; failing fast as undefined keeps the unwinding linear,
            // and the flag lets the outermost render name the real cause.
            self.recursion
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return Some(Value::UNDEFINED);
        }
        let nested = Context {
            depth: self.depth + 1,
            ..self.clone()
        };
        let value = match self.templar.template_value(&var.value, &nested) {
            Ok(value) => value,
            Err(err) if err.is_undefined() && self.undefined_keeps_raw => var.value.clone(),
            Err(err) if err.is_undefined() => {
                let cause = match self.templar.options().semantics {
                    super::Semantics::Ansible218 => {
                        format!("{}: {}", super::pyrepr::to_text(&var.value), err.message())
                    }
                    super::Semantics::Ansible219 => err.message().to_owned(),
                };
                self.read_undefined(name, Some(cause));
                Value::UNDEFINED
            }
            Err(err) => Value::from(err.to_minijinja()),
        };
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Arc::from(name), value.clone()));
        Some(value)
    }

    fn read_undefined(&self, name: &str, cause: Option<String>) {
        /// The most reads kept: only the latest are ever asked about, and a
        /// long loop inside one render must not grow the list without end.
        const KEPT: usize = 256;
        let mut reads = self
            .undefined_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if reads.len() >= KEPT {
            reads.drain(..KEPT / 2);
        }
        reads.push((Arc::from(name), cause));
    }

    /// Why `name`, a variable this render read, is undefined, when its own
    /// template met an undefined value (`None` for a name never defined).
    pub(crate) fn undefined_cause(&self, name: &str) -> Option<String> {
        let reads = self
            .undefined_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        reads
            .iter()
            .rev()
            .find(|(read, _)| &**read == name)
            .and_then(|(_, cause)| cause.clone())
    }

    /// Ansible's account of the last undefined name this render read: a
    /// lookup's option that came out undefined names it, as the marker
    /// 2.19 hands the plugin carries its own error.
    pub(crate) fn last_undefined_read(&self) -> Option<String> {
        let reads = self
            .undefined_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (name, cause) = reads.last()?;
        Some(
            cause
                .clone()
                .unwrap_or_else(|| format!("'{name}' is undefined")),
        )
    }

    /// Ansible's wording for an undefined path such as `r.stdout` or
    /// `x['a'].b`: the first name that is undefined (`'x' is undefined`), or
    /// the attribute a defined value lacks (`'dict object' has no
    /// attribute 'stdout'`). `None` when the path does not parse or
    /// resolves.
    pub(crate) fn explain_undefined(&self, path: &str) -> Option<String> {
        let mut segments = path_segments(path)?.into_iter();
        let first = segments.next()?;
        let first = first.as_str()?;
        let mut current = match self.resolve(first) {
            Some(value) if !value.is_undefined() => value,
            _ => {
                return Some(
                    self.undefined_cause(first)
                        .unwrap_or_else(|| format!("'{first}' is undefined")),
                );
            }
        };
        for segment in segments {
            let next = match segment.as_str() {
                Some(name) => current.get_attr(name).ok(),
                None => current.get_item(&segment).ok(),
            }
            .filter(|v| !v.is_undefined());
            match next {
                Some(value) => current = value,
                None => return Some(self.missing_attribute(&current, &segment)),
            }
        }
        None
    }

    /// Ansible's words for `attribute` missing from `object`.
    pub(crate) fn missing_attribute(&self, object: &Value, attribute: &Value) -> String {
        let type_name = super::pyrepr::type_name(object);
        match self.templar.options().semantics {
            super::Semantics::Ansible218 => format!(
                "'{type_name} object' has no attribute '{}'",
                super::pyrepr::to_text(attribute)
            ),
            // 2.19's Marker: the attribute as Python's repr.
            super::Semantics::Ansible219 => format!(
                "object of type '{type_name}' has no attribute {}",
                super::pyrepr::repr(attribute)
            ),
        }
    }

    /// Records that a filter made an undefined value of `object`'s missing
    /// `attribute` (`map(attribute=…)`), for the error that value causes.
    pub(crate) fn read_missing_attribute(&self, object: &Value, attribute: &Value) {
        let cause = self.missing_attribute(object, attribute);
        self.read_undefined("", Some(cause));
    }

    /// Records the error a method call raised, which 2.19 keeps in the
    /// value the call gives (failing where that value is used).
    pub(crate) fn read_failed_call(&self, message: String) {
        self.read_undefined("", Some(message));
    }

    fn cached(&self, name: &str) -> Option<Value> {
        let resolved = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        resolved
            .iter()
            .rev()
            .find(|(k, _)| &**k == name)
            .map(|(_, v)| v.clone())
    }

    /// Starts a new top-level render over the same variables: forgets
    /// what earlier renders templated (variables may have changed since).
    pub fn reset(&self) {
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.undefined_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.recursion
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.tainted
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the current top-level render has read unsafe data.
    pub fn is_tainted(&self) -> bool {
        self.tainted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A context sharing nothing cached with this one (for renders over
    /// other variables, such as `template_vars`).
    pub fn fresh(&self) -> Self {
        Context {
            depth: 0,
            recursion: Arc::default(),
            resolved: Arc::default(),
            undefined_reads: Arc::default(),
            ..self.clone()
        }
    }

    /// A context over the same variables and place rendering with
    /// `templar`, sharing no state with this one: the migration report's
    /// second renders leave the run's own render as it was.
    pub(crate) fn isolated(&self, templar: Arc<Templar>) -> Self {
        Context {
            templar,
            tainted: Arc::default(),
            ..self.fresh()
        }
    }

    /// This context as a template value.
    pub(crate) fn to_value(&self) -> Value {
        Value::from_object(self.clone())
    }
}

impl Object for Context {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        match name {
            CONTEXT_VAR => Some(Value::from_dyn_object(self.clone())),
            "vars" if self.vars.get("vars").is_none() => Some(Value::from_dyn_object(self.clone())),
            _ => self.variable(name),
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let names: Vec<Value> = self.vars.names().into_iter().map(Value::from).collect();
        Enumerator::Values(names)
    }
}

/// `hostvars`: every inventory host's variables by host name, templated
/// lazily like the current host's own (Ansible's `HostVars`).
#[derive(Debug)]
struct HostVars(Context);

impl HostVars {
    fn current_host(&self) -> Option<String> {
        self.0
            .resolve("inventory_hostname")
            .and_then(|v| v.as_str().map(str::to_owned))
    }
}

impl Object for HostVars {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let host = key.as_str()?;
        let Some(vars) = self.0.vars.host(host) else {
            return (self.current_host().as_deref() == Some(host))
                .then(|| Value::from_object(self.0.clone()));
        };
        let context = Context {
            vars,
            undefined_keeps_raw: true,
            ..self.0.fresh()
        };
        Some(Value::from_object(context))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut names = self.0.vars.host_names();
        if let Some(current) = self.current_host()
            && !names.iter().any(|n| **n == *current)
        {
            names.insert(0, Arc::from(current));
        }
        Enumerator::Values(names.into_iter().map(Value::from).collect())
    }
}

/// The parts of a variable path: `a.b['c'][0]` is `a`, `b`, `c`, `0`;
/// `None` for anything else (calls, filters, operators).
fn path_segments(path: &str) -> Option<Vec<Value>> {
    let ident = |s: &str| -> Option<usize> {
        let end = s
            .char_indices()
            .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
            .map_or(s.len(), |(i, _)| i);
        (end > 0 && !s.starts_with(|c: char| c.is_ascii_digit())).then_some(end)
    };
    let mut rest = path.trim();
    let end = ident(rest)?;
    let mut out = vec![Value::from(&rest[..end])];
    rest = &rest[end..];
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            // After a dot digits name an attribute too (`l.0`).
            let end = after
                .char_indices()
                .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
                .map_or(after.len(), |(i, _)| i);
            if end == 0 {
                return None;
            }
            out.push(Value::from(&after[..end]));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let inner = after[..close].trim();
            let key = if let Some(quoted) = inner
                .strip_prefix('\'')
                .and_then(|q| q.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|q| q.strip_suffix('"')))
            {
                Value::from(quoted)
            } else {
                Value::from(inner.parse::<i64>().ok()?)
            };
            out.push(key);
            rest = &after[close + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}
