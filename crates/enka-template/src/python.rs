//! Filters, tests and lookups that Ansible has and enka does not: a role's
//! or the project's `filter_plugins/`, `test_plugins/`, `lookup_plugins/`,
//! a collection's plugins, and any `ansible.builtin` one enka lacks. They
//! are registered on the environment under their name and called through
//! the project's Ansible worker; values cross as JSON, and a plugin's error
//! comes back with its own message.

use std::collections::HashMap;
use std::sync::Arc;

use minijinja::value::{Kwargs, Rest};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde_json::json;

use super::Context;
use super::convert::{from_json, to_json};
use super::lookups::LookupPlugin;
use super::scan::PluginKind;
use enka_worker::AnsibleWorker;

/// Registers `name` as a filter or test that Ansible runs.
pub(super) fn register(
    env: &mut Environment<'static>,
    kind: PluginKind,
    name: &str,
    worker: &Arc<AnsibleWorker>,
) {
    let owned: Arc<str> = Arc::from(name);
    let worker = worker.clone();
    match kind {
        PluginKind::Filter => env.add_filter(
            name.to_owned(),
            move |value: Value, args: Rest<Value>, kwargs: Kwargs| {
                call(&worker, "filter", &owned, Some(value), &args, &kwargs)
            },
        ),
        PluginKind::Test => env.add_test(
            name.to_owned(),
            move |value: Value, args: Rest<Value>, kwargs: Kwargs| {
                call(&worker, "test", &owned, Some(value), &args, &kwargs).map(|v| v.is_true())
            },
        ),
        PluginKind::Lookup => {}
    }
}

fn call(
    worker: &AnsibleWorker,
    op: &str,
    name: &str,
    value: Option<Value>,
    args: &[Value],
    kwargs: &Kwargs,
) -> Result<Value, Error> {
    let mut positional = Vec::with_capacity(args.len() + 1);
    for arg in value.iter().chain(args) {
        if arg.is_undefined() {
            return Err(Error::new(
                ErrorKind::UndefinedError,
                format!("an undefined value was passed to the {op} {name}"),
            ));
        }
        positional.push(json_of(arg)?);
    }
    let mut named = serde_json::Map::new();
    for key in kwargs.args() {
        let value: Value = kwargs.get(key)?;
        named.insert(key.to_owned(), json_of(&value)?);
    }
    let request = json!({"op": op, "name": name, "args": positional, "kwargs": named});
    let answer = blocking(|| worker.call(request, None)).map_err(|err| match err {
        // The plugin's own error, worded as Ansible shows it.
        enka_worker::WorkerError::Plugin(message) => {
            Error::new(ErrorKind::InvalidOperation, message)
        }
        other => Error::new(ErrorKind::InvalidOperation, format!("{op} {name}: {other}")),
    })?;
    Ok(from_json(&answer["value"]))
}

fn json_of(value: &Value) -> Result<serde_json::Value, Error> {
    to_json(value).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))
}

/// Runs a call to the worker from template code, which is synchronous: on a
/// multi-threaded runtime the thread is handed over first, so other tasks
/// on it are not held up.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// A lookup plugin that Ansible runs.
#[derive(Debug)]
pub(super) struct PythonLookup {
    pub(super) name: String,
    pub(super) worker: Arc<AnsibleWorker>,
    /// The variables each core setting reads, once asked (`config` only):
    /// Ansible's definitions do not change while its worker runs.
    pub(super) setting_vars: std::sync::Mutex<HashMap<String, Vec<String>>>,
}

impl PythonLookup {
    /// The variables the core settings `terms` read, by Ansible's
    /// definitions of them (asked once per setting).
    fn config_vars(&self, terms: &[serde_json::Value]) -> Result<Vec<String>, Error> {
        let names: Vec<String> = terms
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        let mut known = self.setting_vars.lock().unwrap_or_else(|e| e.into_inner());
        for name in &names {
            if known.contains_key(name) {
                continue;
            }
            let request = json!({"op": "config_vars", "names": [name]});
            let answer = blocking(|| self.worker.call(request, None))
                .map_err(|err| Error::new(ErrorKind::InvalidOperation, err.to_string()))?;
            let vars = answer["vars"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            known.insert(name.clone(), vars);
        }
        Ok(names.iter().flat_map(|n| known[n].clone()).collect())
    }
}

impl LookupPlugin for PythonLookup {
    fn run(
        &self,
        ctx: &Context,
        terms: &[Value],
        options: &[(String, Value)],
    ) -> Result<Vec<Value>, Error> {
        let terms = terms.iter().map(json_of).collect::<Result<Vec<_>, _>>()?;
        // What file-finding lookups (first_found, fileglob, …) read from the
        // task's variables: where to search, and the role and playbook
        // directories; inventory_hostnames reads `groups`. The rest of the
        // variables stay in enka: shipping
        // every variable to Python for each lookup would cost more than the
        // lookup.
        let mut vars = serde_json::Map::new();
        let search_path: Vec<String> = ctx
            .search_path()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        vars.insert("ansible_search_path".into(), json!(search_path));
        for name in ["role_path", "playbook_dir", "inventory_hostname", "groups"] {
            if let Some(value) = ctx.resolve(name).filter(|v| !v.is_undefined()) {
                vars.insert(name.into(), json_of(&value)?);
            }
        }
        // `config` of a plugin's option reads the variables the option
        // names (`ansible_ssh_user`, `ansible_port`, …): Ansible's own
        // plugins name only `ansible_*` ones, so those go along.
        let config = matches!(self.name.as_str(), "config" | "ansible.builtin.config");
        let plugin_config = config && options.iter().any(|(key, _)| key == "plugin_type");
        if config && !plugin_config {
            // A core setting reads the variables its definition names
            // (asked of Ansible, which holds the definitions).
            for name in self.config_vars(&terms)? {
                if let Some(value) = ctx.resolve(&name).filter(|v| !v.is_undefined())
                    && let Ok(json) = json_of(&value)
                {
                    vars.insert(name, json);
                }
            }
        }
        if plugin_config {
            for name in ctx.vars().names() {
                if !name.starts_with("ansible_") || vars.contains_key(&*name) {
                    continue;
                }
                if let Some(value) = ctx.resolve(&name).filter(|v| !v.is_undefined())
                    && let Ok(json) = json_of(&value)
                {
                    vars.insert(name.to_string(), json);
                }
            }
        }
        let mut kwargs = serde_json::Map::new();
        for (key, value) in options {
            kwargs.insert(key.clone(), json_of(value)?);
        }
        let mut request = json!({"op": "lookup", "name": self.name, "terms": terms, "kwargs": kwargs, "vars": vars});
        if let Some(action) = &ctx.with_action {
            request["invoked_as_with"] = json!(true);
            request["task_action"] = json!(&**action);
        }
        let answer = blocking(|| self.worker.call(request, None)).map_err(|err| match err {
            // The plugin's own error, as Ansible words it.
            enka_worker::WorkerError::Plugin(message) => {
                Error::new(ErrorKind::InvalidOperation, message)
            }
            other => Error::new(
                ErrorKind::InvalidOperation,
                format!("lookup {}: {other}", self.name),
            ),
        })?;
        Ok(match &answer["value"] {
            serde_json::Value::Array(items) => items.iter().map(from_json).collect(),
            other => vec![from_json(other)],
        })
    }
}
