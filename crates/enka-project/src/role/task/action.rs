//! A task's action: the module or action it names, its arguments as
//! written (free-form, `args`, `action`/`local_action`), checked against
//! the catalogue, or handed to Ansible.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::Value;

use super::include::{parse_include_role, parse_include_tasks};
use super::{
    COMMAND_MODULES, TaskFile, compile_in, is_bare_expression, key_of, note_expression_plugins,
    short, templated,
};
use crate::role::Action;
use crate::role::loader::Loader;
use enka_modules::catalogue::modules::{self as registry, FreeForm};
use enka_modules::catalogue::{AnsibleAction, ModuleRef};
use enka_template::convert::from_yaml;
use enka_yaml::Node;

/// Arguments as a mapping: a YAML mapping, or free-form `k=v` text.
pub(super) fn arg_entries(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
    free_form: FreeForm,
    module: &str,
) -> Option<Vec<(String, Node)>> {
    match &node.value {
        enka_yaml::Value::Null => Some(Vec::new()),
        enka_yaml::Value::Map(entries) => Some(
            entries
                .iter()
                .map(|(k, v)| (key_of(k), v.clone()))
                .collect(),
        ),
        enka_yaml::Value::Str(text) if free_form != FreeForm::No || !text.contains("{{") => {
            let pairs = enka_template::freeform::parse_kv(text);
            Some(
                pairs
                    .into_iter()
                    .map(|(k, v)| {
                        (
                            k,
                            Node {
                                value: enka_yaml::Value::Str(v),
                                pos: node.pos,
                                tag: None,
                            },
                        )
                    })
                    .collect(),
            )
        }
        enka_yaml::Value::Str(_) => None,
        _ => {
            loader.error(
                at.loc(node.pos),
                format!(
                    "arguments of {module} must be a mapping or k=v text, not a {}",
                    node.type_name()
                ),
            );
            Some(Vec::new())
        }
    }
}

pub(super) fn parse_action(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    task: &Node,
    key: &Node,
    value: &Node,
) -> Option<Action> {
    let (module_name, value) = action_keyword(loader, at, key, value)?;

    // `include` is no longer among them: ansible-core 2.16 removed it, and
    // Ansible's own words for it come back from the worker's resolution.
    // An import is static: there is no loop to run it in (helpers.py).
    if let Some(dynamic) = match short(&module_name) {
        "import_tasks" => Some("include_tasks"),
        "import_role" => Some("include_role"),
        _ => None,
    } && let Some((_, looped)) = task.as_map().unwrap_or_default().iter().find(|(k, _)| {
        k.as_str()
            .is_some_and(|k| k == "loop" || k.starts_with("with_"))
    }) {
        loader.error(
            at.loc(looped.pos),
            format!(
                "You cannot use loops on '{}' statements. You should use '{dynamic}' instead.",
                short(&module_name)
            ),
        );
        return None;
    }
    match short(&module_name) {
        "include_tasks" | "import_tasks" => {
            return parse_include_tasks(loader, at, task, &module_name, &value);
        }
        "include_role" | "import_role" => {
            return parse_include_role(loader, at, &module_name, &value);
        }
        _ => {}
    }

    if enka_template::is_possibly_template(&module_name) {
        // Named when it runs; Ansible runs whatever it names.
        compile_in(
            loader,
            at,
            &Node {
                value: enka_yaml::Value::Str(module_name.clone()),
                pos: value.pos,
                tag: None,
            },
            "action",
        );
        return parse_bridged(loader, at, task, key, &module_name, &value);
    }
    let Some(spec) = registry::lookup(&module_name) else {
        return parse_bridged(loader, at, task, key, &module_name, &value);
    };
    if loader.shadows_builtin(&module_name) || loader.module_rejected(&module_name) {
        // A project's own action plugin or module of that name is what
        // ansible.legacy resolves it to: Ansible runs that one. One its
        // plugin filter rejects is Ansible's to refuse.
        return parse_bridged(loader, at, task, key, &module_name, &value);
    }
    let mut entries = match arg_entries(loader, at, &value, spec.free_form, spec.name) {
        Some(entries) => entries,
        None => {
            // The whole argument mapping is a template; checked when it runs.
            let args = templated(loader, at, &value, spec.name);
            return Some(Action::Module {
                module: ModuleRef::Native(spec),
                args,
            });
        }
    };
    refuse_internal_args(loader, at, &module_name, &value, &entries);
    merge_task_args(loader, at, task, &mut entries);
    let (pairs, variable_params) = native_args(loader, at, spec, &entries);
    if !variable_params {
        enka_modules::catalogue::validate_args(spec, &pairs)
            .unwrap_or_else(|message| loader.error(at.loc(value.pos), message));
    }
    // load_list_of_tasks refuses it where there is no role to end.
    if spec.name == "meta"
        && at.role.is_none()
        && pairs
            .iter()
            .any(|(k, v)| k.as_str() == Some("_raw_params") && v.as_str() == Some("end_role"))
    {
        loader.error(
            at.loc(value.pos),
            "Cannot execute 'end_role' from outside of a role".to_owned(),
        );
    }
    Some(Action::Module {
        module: ModuleRef::Native(spec),
        args: Value::from_pairs(pairs),
    })
}

/// The module an `action:` or `local_action:` names and the arguments
/// after it (a string's first word, or a mapping's `module`); any other
/// key is the module's own name.
fn action_keyword(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    key: &Node,
    value: &Node,
) -> Option<(String, Node)> {
    let mut module_name = key_of(key);
    let mut value = value.clone();
    if module_name == "action" || module_name == "local_action" {
        match &value.value {
            enka_yaml::Value::Str(text) => {
                let (name, rest) = enka_template::freeform::first_word(text.trim());
                module_name = name.to_owned();
                value = Node {
                    value: enka_yaml::Value::Str(rest.trim().to_owned()),
                    pos: value.pos,
                    tag: None,
                };
            }
            enka_yaml::Value::Map(entries) => {
                let Some(name) = value.get("module").and_then(Node::as_str) else {
                    loader.error(
                        at.loc(value.pos),
                        "action: a mapping needs a 'module' key".to_owned(),
                    );
                    return None;
                };
                // `module: "echo a=1 {{ vp }}"`: the first word names the
                // module, the rest are its key=value words and free-form text.
                let (name, words) = enka_template::freeform::first_word(name.trim());
                module_name = name.to_owned();
                let key_node = |text: &str| Node {
                    value: enka_yaml::Value::Str(text.to_owned()),
                    pos: value.pos,
                    tag: None,
                };
                let from_words: Vec<(Node, Node)> = enka_template::freeform::parse_kv(words)
                    .into_iter()
                    .map(|(k, v)| (key_node(&k), key_node(&v)))
                    .collect();
                // Precedence, lowest first (ModuleArgsParser): the other
                // keys, the module's words, then an `args` mapping inside.
                let nested = value.get("args").and_then(Node::as_map).unwrap_or_default();
                let mut merged: Vec<(Node, Node)> = Vec::new();
                // `args: "{{ mapping }}"` inside: rendered when the task runs.
                if let Some(templated_args) = value.get("args").filter(|a| is_template_node(a)) {
                    merged.push((key_node(TEMPLATED_ARGS), templated_args.clone()));
                }
                let discrete = entries
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), Some("module" | "args")));
                for (k, v) in discrete.chain(&from_words).chain(nested.iter()) {
                    merged.retain(|(existing, _)| existing.as_str() != k.as_str());
                    merged.push((k.clone(), v.clone()));
                }
                value = Node {
                    value: enka_yaml::Value::Map(merged),
                    pos: value.pos,
                    tag: None,
                };
            }
            _ => {
                loader.error(
                    at.loc(value.pos),
                    "action must be a string or a mapping".to_owned(),
                );
                return None;
            }
        }
    }
    Some((module_name, value))
}

/// A native module's arguments, checked against its catalogue entry and
/// compiled; and whether its free-form text is a template that must render
/// to them (`_variable_params`, checked when the task runs).
fn native_args(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    spec: &registry::ModuleSpec,
    entries: &[(String, Node)],
) -> (Vec<(Value, Value)>, bool) {
    let mut pairs: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
    let mut variable_params = false;
    let native = loader.builder.options().semantics.native();
    for (name, node) in entries {
        let free_words = name == "_raw_params" && spec.free_form != FreeForm::Raw;
        // 2.19 defers only text that is all one template; other words are
        // refused when the task runs ("does not support raw params").
        let templated_raw = free_words && deferred_to_run(node, native);
        if free_words && native && !templated_raw {
            variable_params = true;
            pairs.push((
                Value::from("_raw_params"),
                templated(loader, at, node, &format!("{}.{name}", spec.name)),
            ));
            continue;
        }
        if templated_raw || name == TEMPLATED_ARGS {
            // Templated free-form text must render to the arguments
            // (`_variable_params`, checked when the task runs).
            variable_params = true;
            pairs.push((
                Value::from(if templated_raw {
                    VARIABLE_PARAMS
                } else {
                    TEMPLATED_ARGS
                }),
                templated(loader, at, node, &format!("{}.{name}", spec.name)),
            ));
            continue;
        }
        if name == "_raw_params" && spec.free_form != FreeForm::Raw {
            loader.error(
                at.loc(node.pos),
                format!(
                    "{} takes key=value arguments; '{}' is not one",
                    spec.name,
                    node.as_str().unwrap_or_default()
                ),
            );
            continue;
        }
        if name != "_raw_params" && !spec.accepts(name) {
            let mut known: Vec<&str> = spec
                .params
                .iter()
                .copied()
                .filter(|p| !p.starts_with('_'))
                .collect();
            known.sort_unstable();
            loader.error(
                at.loc(node.pos),
                format!(
                    "unsupported parameter for {}: {name} (supported: {})",
                    spec.name,
                    known.join(", ")
                ),
            );
            continue;
        }
        if is_bare_expression(spec, name) {
            note_expression_plugins(loader, at, node);
        }
        pairs.push((
            Value::from(name.as_str()),
            templated(loader, at, node, &format!("{}.{name}", spec.name)),
        ));
    }
    (pairs, variable_params)
}

/// Arguments named `_ansible_…` are Ansible's own (its result keys); a task
/// may not pass them, except to the command family (ModuleArgsParser).
/// The task's `args:` are not checked, as Ansible does not check them.
fn refuse_internal_args(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    action: &str,
    value: &Node,
    entries: &[(String, Node)],
) {
    let short = action.rsplit('.').next().unwrap_or(action);
    if super::COMMAND_MODULES.contains(&short) {
        return;
    }
    if let Some((name, _)) = entries.iter().find(|(k, _)| k.starts_with("_ansible_")) {
        loader.error(
            at.loc(value.pos),
            format!(
                "Invalid parameter specified beginning with keyword '_ansible_' for action '{action}': '{name}'. The prefix '_ansible_' is reserved for internal use only."
            ),
        );
    }
}

/// Adds the task's `args:` to the module's arguments (those written with the
/// module win).
pub(super) fn merge_task_args(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    task: &Node,
    entries: &mut Vec<(String, Node)>,
) {
    // `args:` with no value is no arguments (both lines).
    let Some(extra) = task
        .get("args")
        .filter(|a| !matches!(a.value, enka_yaml::Value::Null))
    else {
        return;
    };
    match extra.as_map() {
        Some(args) => {
            for (k, v) in args {
                let k = key_of(k);
                if !entries.iter().any(|(existing, _)| *existing == k) {
                    entries.push((k, v.clone()));
                }
            }
        }
        // A template that must render to the arguments (ModuleArgsParser's
        // `_variable_params`, checked when the task runs).
        None if is_template_node(extra) => {
            entries.push((TEMPLATED_ARGS.to_owned(), extra.clone()));
        }
        None => loader.error(
            at.loc(extra.pos),
            "Complex args must be a dictionary or variable string (\"{{var}}\").".to_owned(),
        ),
    }
}

/// The argument holding templated free-form text, which must render to a
/// mapping of the arguments (Ansible's `_variable_params`).
pub const VARIABLE_PARAMS: &str = "_variable_params";

/// The argument holding a task's `args:` written as a template, which must
/// render to a mapping of the arguments (Ansible keeps it as
/// `_variable_params` too; 2.19 words its refusal differently).
pub const TEMPLATED_ARGS: &str = "_templated_args";

/// Actions that take free-form text besides the command family
/// (ModuleArgsParser's `_BUILTIN_RAW_PARAM_MODULES_SIMPLE`).
pub(super) const RAW_PARAM_ACTIONS: &[&str] = &[
    "include_vars",
    "include_tasks",
    "include_role",
    "import_tasks",
    "import_role",
    "add_host",
    "group_by",
    "set_fact",
    "meta",
];

pub(super) fn is_template_node(node: &Node) -> bool {
    node.as_str()
        .is_some_and(|text| text.contains("{{") || text.contains("{%"))
}

/// Whether free-form text is a template to render into the arguments when
/// the task runs (`_variable_params`): any template for 2.18, text that is
/// all one template for 2.19 (`is_possibly_all_template`).
fn deferred_to_run(node: &Node, native: bool) -> bool {
    if native {
        is_all_template_node(node)
    } else {
        is_template_node(node)
    }
}

/// Whether the text starts and ends with Jinja's delimiters (2.19's
/// `is_possibly_all_template`): all of it stands for one value.
fn is_all_template_node(node: &Node) -> bool {
    node.as_str().is_some_and(|text| {
        ["{{", "{%", "{#"]
            .iter()
            .any(|start| text.starts_with(start))
            && ["}}", "%}", "#}"].iter().any(|end| text.ends_with(end))
    })
}

/// A task whose action enka has no native code for: Ansible runs it in the
/// worker. Its arguments are parsed as Ansible's `ModuleArgsParser` does and
/// compiled like any other; whether Ansible has the action is checked when
/// the project finishes loading.
pub(super) fn parse_bridged(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    task: &Node,
    key: &Node,
    name: &str,
    value: &Node,
) -> Option<Action> {
    let short = name.rsplit('.').next().unwrap_or(name);
    let is_command = COMMAND_MODULES.contains(&short)
        && (is_builtin_name(name) || name.starts_with("ansible.windows."));
    let mut entries: Vec<(String, Node)> = match &value.value {
        enka_yaml::Value::Str(text) => {
            let pairs = if is_command {
                enka_template::freeform::command_kv(text)
            } else {
                enka_template::freeform::parse_kv(text)
            };
            pairs
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        Node {
                            value: enka_yaml::Value::Str(v),
                            pos: value.pos,
                            tag: None,
                        },
                    )
                })
                .collect()
        }
        _ => arg_entries(loader, at, value, FreeForm::No, name).unwrap_or_default(),
    };
    refuse_internal_args(loader, at, name, value, &entries);
    merge_task_args(loader, at, task, &mut entries);
    cmd_as_free_form(loader, at, name, &mut entries);
    // Free-form text is only for the command family; Ansible says so once
    // the name resolves (an unknown name is the first error).
    // Free-form text is allowed for the few actions that take it; for
    // others a template must render to the arguments (`_variable_params`),
    // and plain words are an error (ModuleArgsParser.parse).
    let raw_allowed = is_command || RAW_PARAM_ACTIONS.contains(&short);
    let extra_params = (!raw_allowed)
        .then(|| entries.iter().find(|(k, _)| k == "_raw_params"))
        .flatten()
        .filter(|(_, node)| !is_template_node(node))
        .map(|(_, node)| at.loc(node.pos));
    let native = loader.builder.options().semantics.native();
    let pairs: Vec<(Value, Value)> = entries
        .iter()
        .map(|(k, node)| {
            // A template must render to the arguments; plain words stay
            // free-form text, which 2.19 refuses when the task runs unless
            // the action plugin takes it (`supports_raw_params`).
            let key = if k == "_raw_params" && !raw_allowed && deferred_to_run(node, native) {
                VARIABLE_PARAMS
            } else {
                k.as_str()
            };
            (
                Value::from(key),
                templated(loader, at, node, &format!("{name}.{k}")),
            )
        })
        .collect();
    check_source_file(loader, at, name, &entries);
    let action = Arc::new(AnsibleAction::new(name, loader.collections.clone()));
    loader.remember_task(&at.loc(key.pos));
    if let Some(extra) = extra_params {
        loader.remember_task(&extra);
        loader.extra_params.push((at.loc(key.pos), extra));
    }
    loader.bridged.push((at.loc(key.pos), action.clone()));
    Some(Action::Module {
        module: ModuleRef::Ansible(action),
        args: Value::from_pairs(pairs),
    })
}

/// `cmd` of command, shell and script is their free-form text
/// (Task.preprocess_data moves it, C._ACTION_HAS_CMD); both at once is an
/// error.
fn cmd_as_free_form(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    name: &str,
    entries: &mut Vec<(String, Node)>,
) {
    let short = name.rsplit('.').next().unwrap_or(name);
    if !(is_builtin_name(name) && matches!(short, "command" | "shell" | "script")) {
        return;
    }
    let Some(at_cmd) = entries.iter().position(|(k, _)| k == "cmd") else {
        return;
    };
    let raw_given = entries
        .iter()
        .any(|(k, v)| k == "_raw_params" && v.as_str() != Some(""));
    if raw_given {
        loader.error(
            at.loc(entries[at_cmd].1.pos),
            "The 'cmd' argument cannot be used when other raw parameters are specified. Please put everything in one or the other place.".to_owned(),
        );
    } else {
        entries.retain(|(k, _)| k != "_raw_params");
        if let Some((key, _)) = entries.iter_mut().find(|(k, _)| k == "cmd") {
            *key = "_raw_params".to_owned();
        }
    }
}

/// Whether an action name is ansible-core's own: short, or
/// `ansible.builtin.`/`ansible.legacy.` qualified.
pub(super) fn is_builtin_name(name: &str) -> bool {
    !name.contains('.')
        || name.starts_with("ansible.builtin.")
        || name.starts_with("ansible.legacy.")
}

/// A `template` or `copy` whose `src` is written out must name a file that
/// exists where Ansible looks (`templates/` or `files/` of the role, then
/// the task's directory): that task would fail on every run.
pub(super) fn check_source_file(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    name: &str,
    entries: &[(String, Node)],
) {
    let builtin = is_builtin_name(name);
    let subdir = match name.rsplit('.').next() {
        Some("template") if builtin => "templates",
        Some("copy") if builtin => "files",
        _ => return,
    };
    let remote = entries
        .iter()
        .any(|(k, v)| k == "remote_src" && enka_template::to_bool(&from_yaml(v)));
    let Some((_, src)) = entries.iter().find(|(k, _)| k == "src") else {
        return;
    };
    let Some(text) = src
        .as_str()
        .filter(|t| !enka_template::is_possibly_template(t))
    else {
        return;
    };
    if remote || text.ends_with('/') {
        return;
    }
    let mut search: Vec<PathBuf> = at.role.map(Path::to_path_buf).into_iter().collect();
    search.push(at.dir());
    if enka_template::find_needle(&search, subdir, text).is_none()
        && !search
            .iter()
            .any(|dir| dir.join(subdir).join(text).is_dir() || dir.join(text).is_dir())
    {
        loader.error(
            at.loc(src.pos),
            format!("Could not find or access '{text}' (looked in {subdir}/ of the role and next to the task file)"),
        );
    }
}
