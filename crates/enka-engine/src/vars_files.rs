//! A play's `vars_files` that name a variable: templated with the host's
//! variables as the play starts on it, the first file of each entry that
//! exists read (VariableManager.get_vars).

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::Value;
use minijinja::value::ValueKind;

use super::scope::{self, Scope};
use enka_project::role::{VarList, VarsFile};
use enka_template::{Context, Templar, Var};

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

/// The play's `vars` followed by its `vars_prompt` answers. Without a
/// terminal ansible-playbook answers each prompt with its default,
/// templated with the play's variables and made text (`do_var_prompt`'s
/// `to_text`, so a prompt without a default is the text `None`); enka never
/// has one. An extra var of the same name outranks the answer, as
/// ansible-playbook then does not prompt.
pub(super) fn with_prompted(
    templar: &Arc<Templar>,
    scope: &Scope,
    play: &enka_project::role::Play,
    base_dir: &std::path::Path,
) -> VarList {
    if play.vars_prompt.is_empty() {
        return play.vars.clone();
    }
    let search_path: Arc<[PathBuf]> = Arc::from(vec![base_dir.to_path_buf()]);
    let ctx = Context::new(templar.clone(), Arc::new(scope.clone()), search_path);
    let mut vars: Vec<(Arc<str>, Var)> = play.vars.to_vec();
    for prompt in play.vars_prompt.iter() {
        let answer = match &prompt.default {
            None => Value::from("None"),
            Some(default) => match templar.template_value(default, &ctx) {
                Ok(value) if value.is_none() => Value::from("None"),
                Ok(value) => Value::from(enka_template::pyrepr::to_text(&value)),
                Err(err) => {
                    tracing::warn!(
                        "vars_prompt {}: {err}; its default is used as written",
                        prompt.name
                    );
                    Value::from(enka_template::pyrepr::to_text(default))
                }
            },
        };
        let var = if prompt.unsafe_answer {
            Var::unsafe_data(&answer)
        } else {
            Var::templated(answer)
        };
        vars.push((prompt.name.clone(), var));
    }
    Arc::from(vars)
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
        let Some(path) = enka_template::find_needle(search_path, "vars", name) else {
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
    let node = enka_yaml::load_one(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    let data = node
        .map(|n| enka_template::convert::from_yaml(&n))
        .unwrap_or(Value::from(()));
    if data.is_none() {
        return Ok(Arc::from(Vec::new()));
    }
    let invalid = || {
        format!(
            "Invalid vars_file '{}'.. variable files must contain either a dictionary of variables, or a list of dictionaries",
            path.display()
        )
    };
    // A list of mappings is merged in order, later ones winning
    // (`preprocess_vars`); each keeps its own entries in the list.
    let mappings: Vec<Value> = if data.kind() == ValueKind::Seq {
        data.try_iter().map_err(|_| invalid())?.collect()
    } else {
        vec![data]
    };
    let mut vars: Vec<(Arc<str>, Var)> = Vec::new();
    for mapping in mappings {
        if mapping.kind() != ValueKind::Map {
            return Err(invalid());
        }
        for key in mapping.try_iter().map_err(|_| invalid())? {
            let Some(name) = key.as_str() else {
                return Err(invalid());
            };
            let value = mapping.get_item(&key).unwrap_or_default();
            vars.push((Arc::from(name), Var::templated(value)));
        }
    }
    Ok(Arc::from(vars))
}
