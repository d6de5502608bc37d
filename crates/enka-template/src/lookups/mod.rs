//! `lookup(…)`, `query(…)` and `q(…)`, with ansible.builtin's lookup
//! plugins that need neither the network nor Ansible's configuration:
//! `template`, `file`, `fileglob`, `env`, `vars`, `varnames`, `items`,
//! `list`, `dict`, `password`, the list shapers of `lists.rs` and
//! `sequence.rs`, and, only when enabled, `pipe` and `lines`. Plugins that
//! need the operator (such as `k8s`) are added through [`LookupPlugin`].
//! A template file's own Jinja settings (the lookup's options, the file's
//! `#jinja2:` header) are read in `overrides.rs`; template files and what
//! they include are rendered in `template_file.rs`.

mod lists;
mod overrides;
mod sequence;
mod template_file;

pub use template_file::render_template_file;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::context::{CONTEXT_VAR, Context, Var, VarSource, mark_unsafe};
use super::filters::invalid;
use super::pyrepr;

/// A lookup plugin implemented outside the template layer.
pub trait LookupPlugin: Send + Sync + std::fmt::Debug {
    /// Runs the lookup; returns the list `query` would.
    fn run(
        &self,
        ctx: &Context,
        terms: &[Value],
        kwargs: &[(String, Value)],
    ) -> Result<Vec<Value>, Error>;
}

pub fn register(env: &mut Environment<'static>) {
    env.add_function(
        "lookup",
        |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
            dispatch(state, &name, &terms, kwargs, false)
        },
    );
    for name in ["query", "q"] {
        env.add_function(
            name,
            |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
                dispatch(state, &name, &terms, kwargs, true)
            },
        );
    }
    env.set_path_join_callback(|name, parent| {
        if name.starts_with('/') {
            return name.to_owned().into();
        }
        match Path::new(parent).parent() {
            Some(dir) if parent.starts_with('/') => normalize(&dir.join(name))
                .to_string_lossy()
                .into_owned()
                .into(),
            _ => name.to_owned().into(),
        }
    });
}

/// A lookup's own failure as the project's line words it. 2.18's
/// `_lookup` raises an undefined variable, an `AnsibleLookupError` and an
/// `AnsibleOptionsError` as they are, and words any other exception with
/// its class (`… Error was a <class 'ansible.errors.AnsibleError'>,
/// original message: …`), which a custom resource's Failure condition
/// quotes; plugins of other collections (`k8s`) word their own. 2.19 wraps
/// every failure of a plugin (`AnsibleTemplatePluginRuntimeError`).
fn plugin_failure(ctx: &Context, name: &str, err: Error) -> Error {
    let class = crate::error::Cause::python_class(&err);
    let detail = err.detail().unwrap_or_default().to_owned();
    if ctx.templar().options().semantics != crate::Semantics::Ansible219 {
        // A `with_<lookup>` loop runs the plugin itself, not through
        // `_lookup`: its errors are the plugin's own.
        let wrapped = matches!(
            err.kind(),
            ErrorKind::InvalidOperation | ErrorKind::TemplateNotFound
        ) && ctx.with_action.is_none()
            && ctx.templar().lookup_plugin(name).is_none()
            && !matches!(class, Some(LOOKUP_ERROR | OPTIONS_ERROR));
        if !wrapped {
            return err;
        }
        let class = class.unwrap_or(ANSIBLE_ERROR);
        return Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "An unhandled exception occurred while running the lookup plugin '{name}'. \
                 Error was a <class '{class}'>, original message: {detail}. {detail}"
            ),
        );
    }
    if err.kind() != ErrorKind::InvalidOperation || detail.starts_with("The lookup plugin '") {
        return err;
    }
    if class.is_some_and(|c| c != TEMPLATE_NOT_FOUND) {
        // Raised while a template file rendered, in its own words (a
        // filter's `The filter plugin '…' failed: …`).
        return err;
    }
    if class == Some(TEMPLATE_NOT_FOUND) {
        // Raised by Jinja while the file renders, not by the plugin.
        return Error::new(
            ErrorKind::InvalidOperation,
            format!("Error rendering template: {detail}"),
        );
    }
    Error::new(
        ErrorKind::InvalidOperation,
        format!("The lookup plugin '{}' failed: {detail}", short_name(name)),
    )
}

/// Python's classes of a lookup's errors, where Ansible tells them apart.
const ANSIBLE_ERROR: &str = "ansible.errors.AnsibleError";
const LOOKUP_ERROR: &str = "ansible.errors.AnsibleLookupError";
const OPTIONS_ERROR: &str = "ansible.errors.AnsibleOptionsError";
const TEMPLATE_NOT_FOUND: &str = "jinja2.exceptions.TemplateNotFound";

/// A lookup's error as Python raises it as `class` (one of the above).
fn raised(class: &'static str, message: impl Into<String>) -> Error {
    crate::error::Cause::Python(class).error(ErrorKind::InvalidOperation, message)
}

fn context(state: &State) -> Result<Context, Error> {
    state
        .lookup(CONTEXT_VAR)
        .and_then(|v| v.downcast_object_ref::<Context>().cloned())
        .ok_or_else(|| invalid("lookups need an Ansible context"))
}

/// Lookups that take 2.19's markers (undefined values) as arguments and
/// deal with them themselves (ansible-core's `accept_args_markers`).
const ACCEPT_MARKERS: &[&str] = &["env", "first_found"];

/// Whether the lookup, given an undefined argument, does not run and is
/// that undefined value (2.19's Templar hands back the first marker; the
/// error comes where the value is used, and `default` or `is undefined`
/// can still catch it). 2.18 raises at once.
fn hands_back_markers(ctx: &Context, name: &str) -> bool {
    ctx.templar().options().semantics.native() && !ACCEPT_MARKERS.contains(&short_name(name))
}

/// What a lookup given an undefined term or option is: that undefined value
/// (2.19, a lookup taking no markers), else the undefined value's own error,
/// naming the variable behind it (`unnamed` when no read explains it).
fn undefined_argument(
    ctx: &Context,
    name: &str,
    unnamed: impl FnOnce() -> String,
) -> Result<Value, Error> {
    if hands_back_markers(ctx, name) {
        return Ok(Value::UNDEFINED);
    }
    let message = ctx.last_undefined_read().unwrap_or_else(unnamed);
    Err(Error::new(ErrorKind::UndefinedError, message))
}

fn dispatch(
    state: &State,
    name: &str,
    terms: &[Value],
    kwargs: Kwargs,
    wantlist: bool,
) -> Result<Value, Error> {
    let ctx = context(state)?;
    let wantlist = kwargs.get::<Option<bool>>("wantlist")?.unwrap_or(wantlist);
    let errors = kwargs
        .get::<Option<String>>("errors")?
        .unwrap_or_else(|| "strict".into());
    let allow_unsafe = kwargs.get::<Option<bool>>("allow_unsafe")?.unwrap_or(false);
    let mut options: Vec<(String, Value)> = Vec::new();
    for key in kwargs.args() {
        if !matches!(key, "wantlist" | "errors" | "allow_unsafe") {
            let value = kwargs.get::<Value>(key)?;
            // The plugin never runs with an undefined option: the undefined
            // value's own error is the lookup's. `env` alone takes one, as
            // the default it returns (`default=undef()`).
            if value.is_undefined() && short_name(name) != "env" {
                return undefined_argument(&ctx, name, || format!("'{key}' is undefined"));
            }
            options.push((key.to_owned(), value));
        }
    }
    // A term that is itself undefined fails the same way, before the
    // plugin runs.
    if short_name(name) != "env" && terms.iter().any(Value::is_undefined) {
        return undefined_argument(&ctx, name, || "undefined variable".to_owned());
    }
    let terms = template_terms(&ctx, terms)?;
    let result = match ctx.templar().lookup_plugin(name) {
        Some(plugin) => plugin.run(&ctx, &terms, &options),
        None => run(&ctx, short_name(name), &terms, &options),
    };
    let values = match result {
        Ok(values) => values,
        // Only `warn` and `ignore` swallow the error; any other word is
        // `strict`'s (Templar._lookup raises unless it is one of the two).
        Err(err)
            if err.kind() != ErrorKind::UndefinedError
                && matches!(errors.as_str(), "warn" | "ignore") =>
        {
            tracing::warn!(
                lookup = name,
                "lookup failed but the error is being ignored: {err}"
            );
            return Ok(if wantlist {
                Value::from(Vec::<Value>::new())
            } else {
                Value::from(())
            });
        }
        Err(err) => return Err(plugin_failure(&ctx, name, err)),
    };
    // Templar._lookup: a non-empty result, unless unsafe results are
    // allowed, is joined (when not wanted as a list) and wrapped unsafe, and
    // so is the render that used it: a file holding `{{ x }}` is never
    // templated again, and its text is an `AnsibleUnsafeText`.
    // 2.18 hands an allowed-unsafe result over as the plugin's list; 2.19
    // shapes every result alike and only leaves it trusted.
    let shaped_alike = ctx.templar().options().semantics.native();
    if values.is_empty() || (allow_unsafe && !shaped_alike) {
        return Ok(Value::from(values));
    }
    let result = if wantlist {
        Value::from(values)
    } else if values.iter().all(|v| v.kind() == ValueKind::String) {
        let joined: Vec<&str> = values
            .iter()
            .map(|v| v.as_str().unwrap_or_default())
            .collect();
        Value::from(joined.join(","))
    } else if values.len() == 1 {
        values.into_iter().next().unwrap_or_default()
    } else {
        Value::from(values)
    };
    if allow_unsafe {
        return Ok(result);
    }
    ctx.tainted
        .store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(mark_unsafe(&result))
}

/// The terms as the plugin sees them: templated first, as Ansible's
/// `listify_lookup_plugin_terms` does (`lookup('file', '{{ tmp.path }}')`
/// reads the file the variable names); unsafe terms are left as they are,
/// and an undefined variable in a term fails the lookup (in 2.18), whatever
/// `errors` says.
fn template_terms(ctx: &Context, terms: &[Value]) -> Result<Vec<Value>, Error> {
    let nested = Context {
        depth: ctx.depth + 1,
        ..ctx.clone()
    };
    let lazy_undefined = ctx.templar().options().semantics.native();
    terms
        .iter()
        .map(|term| match ctx.templar().template_value(term, &nested) {
            // 2.19 makes an undefined value inside a term a marker that
            // fails only where the plugin reads it: the term is left as
            // it was written.
            Err(e) if lazy_undefined && e.is_undefined() => Ok(term.clone()),
            other => other.map_err(|e| e.to_minijinja()),
        })
        .collect()
}

/// The most items one lookup makes: far beyond any real loop, and a
/// `count` or a product from a custom resource cannot exhaust memory.
const MAX_LOOKUP_ITEMS: usize = 1_000_000;

/// `name` without the collection prefixes enka's own lookups answer to.
pub(crate) fn short_name(name: &str) -> &str {
    name.strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.legacy."))
        .or_else(|| name.strip_prefix("kubernetes.core."))
        .or_else(|| name.strip_prefix("community.kubernetes."))
        .unwrap_or(name)
}

/// Whether enka runs lookup `name` itself.
pub fn is_native(name: &str) -> bool {
    let name = short_name(name);
    LOOKUPS.iter().any(|(n, _)| *n == name) || PLUGINS.contains(&name)
}

/// Runs lookup `name` as `with_<lookup>` on a task of `action` does:
/// what `query(name, *terms)` returns, the lookup told how it was invoked.
pub fn query_as_with(
    ctx: &Context,
    name: &str,
    terms: &[Value],
    action: &str,
) -> Result<Vec<Value>, super::Error> {
    let ctx = Context {
        with_action: Some(std::sync::Arc::from(action)),
        ..ctx.clone()
    };
    run(&ctx, name, terms, &[])
        .map_err(|e| plugin_failure(&ctx, name, e))
        .map_err(|e| super::Error::from_minijinja(&e, name))
}

pub(super) fn option<'a>(options: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    options.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn run(
    ctx: &Context,
    name: &str,
    terms: &[Value],
    options: &[(String, Value)],
) -> Result<Vec<Value>, Error> {
    if let Some(plugin) = ctx.templar().lookup_plugin(name) {
        return plugin.run(ctx, terms, options);
    }
    match LOOKUPS.iter().find(|(n, _)| *n == name) {
        Some((_, lookup)) => lookup(ctx, terms, options),
        None => Err(invalid(format!("lookup plugin ({name}) not found"))),
    }
}

/// A lookup enka runs itself: what `query(name, *terms, **options)` returns.
type Lookup = fn(&Context, &[Value], &[(String, Value)]) -> Result<Vec<Value>, Error>;

/// Every lookup enka runs itself, in one table.
const LOOKUPS: &[(&str, Lookup)] = &[
    ("template", |ctx, terms, options| {
        per_term(ctx, terms, options, template_file::template)
    }),
    ("file", |ctx, terms, options| {
        per_term(ctx, terms, options, file)
    }),
    ("env", env),
    ("vars", vars),
    ("varnames", varnames),
    ("items", items),
    ("list", |_, terms, _| Ok(terms.to_vec())),
    ("dict", dict),
    ("password", |ctx, terms, options| {
        per_term(ctx, terms, options, password)
    }),
    ("pipe", pipe),
    ("lines", lines),
    ("fileglob", fileglob_lookup),
    ("sequence", |ctx, terms, options| {
        sequence::run(terms, options, ctx.templar().options().semantics)
    }),
    ("nested", |_, terms, _| {
        lists::nested(terms, MAX_LOOKUP_ITEMS)
    }),
    ("together", |_, terms, _| lists::together(terms)),
    ("indexed_items", |_, terms, _| {
        Ok(lists::indexed_items(terms))
    }),
    ("subelements", |ctx, terms, _| {
        lists::subelements(terms, ctx.templar().options().semantics)
    }),
    ("random_choice", |_, terms, _| {
        Ok(lists::random_choice(terms))
    }),
];

/// What answers one term of a lookup, read as text.
type TermLookup = fn(&Context, &str, &[(String, Value)]) -> Result<Value, Error>;

/// A lookup that answers each term on its own, read as text.
fn per_term(
    ctx: &Context,
    terms: &[Value],
    options: &[(String, Value)],
    each: TermLookup,
) -> Result<Vec<Value>, Error> {
    terms
        .iter()
        .map(|t| each(ctx, &pyrepr::to_text(t), options))
        .collect()
}

/// Lookups run natively by a plugin another crate registers per project
/// (`enka-kube`'s `k8s`).
const PLUGINS: &[&str] = &["k8s"];

fn env(_ctx: &Context, terms: &[Value], options: &[(String, Value)]) -> Result<Vec<Value>, Error> {
    Ok(terms
        .iter()
        .map(|t| match std::env::var(pyrepr::to_text(t)) {
            Ok(v) => Value::from(v),
            Err(_) => option(options, "default")
                .cloned()
                .unwrap_or(Value::from("")),
        })
        .collect())
}

fn vars(ctx: &Context, terms: &[Value], options: &[(String, Value)]) -> Result<Vec<Value>, Error> {
    let strict = ctx.templar().options().semantics.native();
    terms
        .iter()
        .map(|t| {
            let Some(name) = t.as_str().map(str::to_owned) else {
                return Err(invalid(if strict {
                    format!(
                        "Variable name must be 'str' not '{}'.",
                        pyrepr::type_name(t)
                    )
                } else {
                    format!(
                        "Invalid setting identifier, \"{}\" is not a string, its a <class '{}'>",
                        pyrepr::to_text(t),
                        pyrepr::type_name(t)
                    )
                }));
            };
            match ctx.variable(&name) {
                Some(v) if !v.is_undefined() => Ok(v),
                _ => option(options, "default").cloned().ok_or_else(|| {
                    Error::new(
                        ErrorKind::UndefinedError,
                        if strict {
                            format!("No variable named '{name}' was found.")
                        } else {
                            format!("No variable found with this name: {name}")
                        },
                    )
                }),
            }
        })
        .collect()
}

fn varnames(
    ctx: &Context,
    terms: &[Value],
    _options: &[(String, Value)],
) -> Result<Vec<Value>, Error> {
    {
        let mut names = ctx.vars().names();
        // Every task's variables hold TaskExecutor's search path, and up to
        // 2.18 VariableManager's `omit`, after the play's.
        let always: &[&str] = match ctx.templar().options().semantics {
            crate::Semantics::Ansible218 => &["ansible_search_path", "omit"],
            crate::Semantics::Ansible219 => &["ansible_search_path"],
        };
        for &always in always {
            if !names.iter().any(|n| &**n == always) {
                names.push(std::sync::Arc::from(always));
            }
        }
        let mut out = Vec::new();
        for term in terms {
            let Some(pattern) = term.as_str() else {
                return Err(invalid(format!(
                    "Invalid setting identifier, \"{}\" is not a string, it is a {}",
                    pyrepr::to_text(term),
                    pyrepr::type_name(term)
                )));
            };
            let re = fancy_regex::Regex::new(pattern).map_err(|e| {
                invalid(format!(
                    "Unable to use \"{pattern}\" as a search parameter: {}",
                    super::filters::python_regex_error(&e)
                ))
            })?;
            for name in &names {
                if re.is_match(&**name).unwrap_or(false) {
                    out.push(Value::from(&**name));
                }
            }
        }
        Ok(out)
    }
}

fn items(
    _ctx: &Context,
    terms: &[Value],
    _options: &[(String, Value)],
) -> Result<Vec<Value>, Error> {
    Ok(terms
        .iter()
        .flat_map(|t| match t.kind() {
            ValueKind::Seq => t
                .try_iter()
                .map(Iterator::collect::<Vec<_>>)
                .unwrap_or_default(),
            _ => vec![t.clone()],
        })
        .collect())
}

fn dict(
    _ctx: &Context,
    terms: &[Value],
    _options: &[(String, Value)],
) -> Result<Vec<Value>, Error> {
    {
        let mut out = Vec::new();
        for term in terms {
            if term.kind() != ValueKind::Map {
                return Err(invalid("with_dict expects a dict"));
            }
            for key in term.try_iter()? {
                let value = term.get_item(&key)?;
                out.push(Value::from_pairs([
                    (Value::from("key"), key),
                    (Value::from("value"), value),
                ]));
            }
        }
        Ok(out)
    }
}

fn pipe(ctx: &Context, terms: &[Value], _options: &[(String, Value)]) -> Result<Vec<Value>, Error> {
    terms
        .iter()
        .map(|t| shell_output(ctx, "pipe", &pyrepr::to_text(t)))
        .map(|out| out.map(|text| Value::from(text.trim_end())))
        .collect()
}

fn lines(
    ctx: &Context,
    terms: &[Value],
    _options: &[(String, Value)],
) -> Result<Vec<Value>, Error> {
    {
        let mut out = Vec::new();
        for term in terms {
            let text = shell_output(ctx, "lines", &pyrepr::to_text(term))?;
            out.extend(text.lines().map(Value::from));
        }
        Ok(out)
    }
}

fn fileglob_lookup(
    ctx: &Context,
    terms: &[Value],
    _options: &[(String, Value)],
) -> Result<Vec<Value>, Error> {
    Ok(terms
        .iter()
        .flat_map(|t| fileglob(ctx, &pyrepr::to_text(t)))
        .collect())
}

/// What `/bin/sh -c command` prints, for `pipe` and `lines`, which run
/// only where the run allows commands.
fn shell_output(ctx: &Context, lookup: &str, command: &str) -> Result<String, Error> {
    if !ctx.templar().options().allow_pipe {
        return Err(invalid(format!(
            "lookup('{lookup}') runs commands, which this run does not allow"
        )));
    }
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .output()
        .map_err(|e| {
            invalid(format!(
                "lookup('{lookup}'): could not run {command:?}: {e}"
            ))
        })?;
    if !out.status.success() {
        return Err(invalid(format!(
            "lookup_plugin.{lookup}({command}) returned {}",
            out.status.code().unwrap_or(-1)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The files matching the glob `term` in the first directory that has
/// any: a term with a directory is looked for in `files/` along the
/// search path, a bare pattern in each search-path directory's `files/`
/// and then the directory itself.
fn fileglob(ctx: &Context, term: &str) -> Vec<Value> {
    let path = Path::new(term);
    let Some(pattern) = path.file_name() else {
        return Vec::new();
    };
    let dirs: Vec<PathBuf> = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if dir.is_absolute() => vec![dir.to_owned()],
        Some(dir) => ctx
            .search_path()
            .iter()
            .flat_map(|base| [base.join("files").join(dir), base.join(dir)])
            .find(|candidate| candidate.exists())
            .into_iter()
            .collect(),
        None => ctx
            .search_path()
            .iter()
            .flat_map(|base| [base.join("files"), base.clone()])
            .collect(),
    };
    for dir in dirs {
        let full = normalize(&dir).join(pattern);
        let found = super::filters::glob_files(&full.to_string_lossy());
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// Lexically normalises a path (`a/./b/../c` is `a/c`) without touching
/// the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Finds `name` as Ansible's `path_dwim_relative_stack` does: an absolute
/// path as it is; otherwise the first existing `dir/<subdir>/name` or
/// `dir/name` along the search path (the role, then the project). Like
/// Ansible's, the search is not fenced: roles see the container's file
/// system (`../common/templates/x.j2` reaches a sibling role).
pub fn find_needle(search_path: &[PathBuf], subdir: &str, name: &str) -> Option<PathBuf> {
    let path = Path::new(name);
    if path.is_absolute() {
        return path.is_file().then(|| normalize(path));
    }
    search_path
        .iter()
        .flat_map(|dir| [dir.join(subdir).join(name), dir.join(name)])
        .map(|candidate| normalize(&candidate))
        .find(|candidate| candidate.is_file())
}

pub(super) fn find_in_search_path(ctx: &Context, subdir: &str, name: &str) -> Option<PathBuf> {
    find_needle(ctx.search_path(), subdir, name)
}

fn file(ctx: &Context, name: &str, options: &[(String, Value)]) -> Result<Value, Error> {
    let path = find_in_search_path(ctx, "files", name)
        .ok_or_else(|| match ctx.templar().options().semantics {
            crate::Semantics::Ansible218 => raised(
                LOOKUP_ERROR,
                format!(
                    "The 'file' lookup had an issue accessing the file '{name}'. \
                     file not found, use -vvvvv to see paths searched"
                ),
            ),
            crate::Semantics::Ansible219 => invalid(format!(
                "Unable to access the file '{name}': File not found. Use -vvvvv to see paths searched."
            )),
        })?;
    let mut text = std::fs::read_to_string(&path)
        .map_err(|e| invalid(format!("could not read {}: {e}", path.display())))?;
    if option_flag(options, "rstrip", true) {
        text.truncate(text.trim_end().len());
    }
    if option_flag(options, "lstrip", false) {
        text = text.trim_start().to_owned();
    }
    Ok(Value::from(text))
}

/// `password` with the `/dev/null` path roles use: a fresh random password
/// that is never stored (enka writes no files).
fn password(ctx: &Context, term: &str, options: &[(String, Value)]) -> Result<Value, Error> {
    use rand::Rng;
    let mut parts = term.split_whitespace();
    let _path = parts.next().unwrap_or("/dev/null");
    let mut length = 20usize;
    let mut chars = String::new();
    let mut set = |key: &str, value: String| -> Result<(), Error> {
        match key {
            "length" => {
                length = value
                    .parse()
                    .map_err(|_| invalid(format!("password: bad length {value:?}")))?
            }
            "chars" => chars = value,
            _ => {}
        }
        Ok(())
    };
    for part in parts {
        if let Some((k, v)) = part.split_once('=') {
            set(k, v.to_owned())?;
        }
    }
    for (k, v) in options {
        set(k, pyrepr::to_text(v))?;
    }
    let mut alphabet = String::new();
    let classes = if chars.is_empty() {
        "ascii_letters,digits,.,:-_".to_owned()
    } else {
        chars
    };
    for class in classes.split(',') {
        match class {
            "ascii_letters" => {
                alphabet.push_str("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
            }
            "ascii_lowercase" => alphabet.push_str("abcdefghijklmnopqrstuvwxyz"),
            "ascii_uppercase" => alphabet.push_str("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
            "digits" => alphabet.push_str("0123456789"),
            "hexdigits" => alphabet.push_str("0123456789abcdefABCDEF"),
            "punctuation" => alphabet.push_str("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
            other => alphabet.push_str(other),
        }
    }
    let alphabet: Vec<char> = alphabet.chars().collect();
    if alphabet.is_empty() {
        return Err(invalid("password: empty character set"));
    }
    let pw: String = ctx.templar().with_rng(|rng| {
        (0..length)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect()
    });
    Ok(Value::from(pw))
}

/// A `bool` option as Ansible's configuration reads it
/// (`boolean(value, strict=False)`): true only for what it lists as true,
/// so `'maybe'` is false.
pub(super) fn option_flag(options: &[(String, Value)], name: &str, default: bool) -> bool {
    option(options, name).map_or(default, |v| crate::ansible_boolean(v).unwrap_or(false))
}

/// Variables with extra ones on top (`template_vars`).
#[derive(Debug)]
pub(super) struct Overlay {
    pub(super) base: Arc<dyn VarSource>,
    pub(super) extra: Vec<(String, Var)>,
}

impl VarSource for Overlay {
    fn get(&self, name: &str) -> Option<Var> {
        self.extra
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| self.base.get(name))
    }

    fn names(&self) -> Vec<Arc<str>> {
        let mut names = self.base.names();
        names.extend(self.extra.iter().map(|(k, _)| Arc::from(k.as_str())));
        names
    }

    fn host(&self, name: &str) -> Option<Arc<dyn VarSource>> {
        self.base.host(name)
    }

    fn host_names(&self) -> Vec<Arc<str>> {
        self.base.host_names()
    }
}
