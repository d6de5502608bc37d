//! A play's `vars_files` that name a variable: templated with the host's
//! variables as the play starts on it, the first file of each entry that
//! exists read (VariableManager.get_vars).

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::Value;

use super::scope::{self, Scope};
use crate::role::{VarList, VarsFile};
use crate::template::{Context, Templar, Var};

/// The play's vars for one host: its `vars`, then each `vars_files` entry
/// in order, later ones winning. An entry whose name is undefined for the
/// host, or whose files are nowhere, is skipped, as Ansible skips it.
pub(super) fn play_vars(
    templar: &Arc<Templar>,
    scope: &Scope,
    vars: &VarList,
    files: &[VarsFile],
    search_path: &Arc<[PathBuf]>,
) -> Option<Arc<scope::Frame>> {
    let mut play_vars = scope::push(&None, vars);
    for entry in files {
        let loaded = match entry {
            VarsFile::Loaded(list) => list.clone(),
            VarsFile::Templated {
                candidates,
                location,
            } => {
                let mut scope = scope.clone();
                scope.play_vars = play_vars.clone();
                let ctx = Context::new(templar.clone(), Arc::new(scope), search_path.clone());
                match first_found(templar, &ctx, candidates, search_path) {
                    Ok(Some(list)) => list,
                    Ok(None) => continue,
                    Err(message) => {
                        tracing::warn!(
                            "{location}: vars_files: {message}; the play runs without it"
                        );
                        continue;
                    }
                }
            }
        };
        play_vars = scope::push(&play_vars, &loaded);
    }
    play_vars
}

/// The variables of the first candidate that templates and exists.
fn first_found(
    templar: &Templar,
    ctx: &Context,
    candidates: &[Value],
    search_path: &[PathBuf],
) -> Result<Option<VarList>, String> {
    for candidate in candidates {
        let name = match templar.template_value(candidate, ctx) {
            Ok(name) => name,
            // Not known for this host: the whole entry is skipped.
            Err(err) if err.is_undefined() => return Ok(None),
            Err(err) => return Err(err.ansible_message()),
        };
        let Some(name) = name.as_str() else {
            return Err(format!(
                "Invalid vars_files entry found: {name:?}; vars_files entries should be either a string type or a list of string types after template expansion"
            ));
        };
        let Some(path) = crate::template::find_needle(search_path, "vars", name) else {
            continue;
        };
        return read(&path).map(Some);
    }
    Ok(None)
}

/// A vars file's mapping, each value templated lazily where it is used.
fn read(path: &std::path::Path) -> Result<VarList, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("could not read {}: {e}", path.display()))?;
    if text.starts_with("$ANSIBLE_VAULT") {
        return Err(format!(
            "{} is encrypted with Ansible Vault, which a templated vars_files name cannot read",
            path.display()
        ));
    }
    let node = crate::yaml::load_one(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    let data = node
        .map(|n| crate::template::convert::from_yaml(&n))
        .unwrap_or(Value::from(()));
    if data.is_none() {
        return Ok(Arc::from(Vec::new()));
    }
    let mut vars: Vec<(Arc<str>, Var)> = Vec::new();
    let keys = data
        .try_iter()
        .map_err(|_| format!("{} must be stored as a dictionary/hash", path.display()))?;
    for key in keys {
        let Some(name) = key.as_str() else {
            return Err(format!(
                "{} must be stored as a dictionary/hash",
                path.display()
            ));
        };
        let value = data.get_item(&key).unwrap_or_default();
        vars.push((Arc::from(name), Var::templated(value)));
    }
    Ok(Arc::from(vars))
}
