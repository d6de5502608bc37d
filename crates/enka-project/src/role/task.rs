//! Turning a YAML task list into [`Task`]s, reporting every problem with its
//! position.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::Value;
use minijinja::value::ValueKind;

use super::keywords;
use super::loader::Loader;
use super::{Action, Location, Loop, LoopControl, LoopKind, RoleFrom, RoleInclude, Task, VarList};
use enka_modules::catalogue::modules::{self as registry, FreeForm};
use enka_modules::catalogue::{AnsibleAction, ModuleRef};
use enka_template::Var;
use enka_template::convert::from_yaml;
use enka_template::scan::PluginKind;
use enka_yaml::{Node, Pos};

/// Where the task list being parsed comes from.
pub(crate) struct TaskFile<'a> {
    pub file: &'a Arc<Path>,
    /// The role the file belongs to, if any.
    pub role: Option<&'a Path>,
}

impl TaskFile<'_> {
    pub(crate) fn loc(&self, pos: Pos) -> Location {
        Location::new(self.file, pos)
    }

    /// The role's name: the last component of its directory.
    fn role_name(&self) -> Option<Arc<str>> {
        let name = self.role?.file_name()?;
        Some(Arc::from(name.to_string_lossy().as_ref()))
    }

    fn dir(&self) -> PathBuf {
        self.file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }
}

/// Parses a task list (a YAML sequence of mappings).
pub(crate) fn parse_tasks(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) -> Vec<Task> {
    match &node.value {
        enka_yaml::Value::Null => Vec::new(),
        enka_yaml::Value::Seq(items) => items
            .iter()
            .filter_map(|item| {
                let before = loader.diagnostics.0.len();
                let name = item.get("name").map(Node::key_string);
                let outer = std::mem::replace(&mut loader.current_task, name.clone());
                let task = parse_task(loader, at, item);
                loader.current_task = outer;
                // Name the task in every finding made while parsing it.
                for diagnostic in &mut loader.diagnostics.0[before..] {
                    if diagnostic.task.is_none() {
                        diagnostic.task.clone_from(&name);
                    }
                }
                task
            })
            .collect(),
        _ => {
            loader.error(
                at.loc(node.pos),
                format!(
                    "a task list must be a YAML list, not a {}",
                    node.type_name()
                ),
            );
            Vec::new()
        }
    }
}

fn key_of(node: &Node) -> String {
    node.key_string()
}

fn as_values(loader: &mut Loader, at: &TaskFile<'_>, node: &Node, what: &str) -> Arc<[Value]> {
    let items: Vec<&Node> = match &node.value {
        enka_yaml::Value::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let value = from_yaml(item);
        if let Some(expr) = value.as_str() {
            if let Err(err) = loader.builder.add_condition(expr) {
                loader.when_run(at.loc(item.pos), format!("{what}: {err}"));
            }
            loader.note_plugins(
                &at.loc(item.pos),
                expr,
                !enka_template::is_possibly_template(expr),
            );
        } else if !matches!(
            value.kind(),
            ValueKind::Bool | ValueKind::None | ValueKind::Number
        ) {
            loader.error(
                at.loc(item.pos),
                format!(
                    "{what} must be a condition or a list of conditions, not a {}",
                    item.type_name()
                ),
            );
        }
        out.push(value);
    }
    Arc::from(out)
}

/// Arguments that are bare Jinja expressions, not templates: `assert`'s
/// `that` and `debug`'s `var`.
fn is_bare_expression(spec: &registry::ModuleSpec, name: &str) -> bool {
    spec.expressions.contains(&name)
}

/// Notes the filters, tests and lookups a bare expression (or a list of
/// them) names, so those enka lacks run through Ansible.
fn note_expression_plugins(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) {
    match &node.value {
        enka_yaml::Value::Str(expr) => loader.note_plugins(
            &at.loc(node.pos),
            expr,
            !enka_template::is_possibly_template(expr),
        ),
        enka_yaml::Value::Seq(items) => {
            for item in items {
                note_expression_plugins(loader, at, item);
            }
        }
        _ => {}
    }
}

/// A raw value whose strings are compiled as templates (`!vault` strings
/// decrypted first).
fn templated(loader: &mut Loader, at: &TaskFile<'_>, node: &Node, what: &str) -> Value {
    if super::ansible::has_vault(node) {
        let plain = loader.unvault(at.file, node);
        return templated(loader, at, &plain, what);
    }
    let value = from_yaml(node);
    compile_in(loader, at, node, what);
    value
}

pub(crate) fn compile_in(loader: &mut Loader, at: &TaskFile<'_>, node: &Node, what: &str) {
    match &node.value {
        enka_yaml::Value::Str(s) => {
            if let Err(err) = loader.builder.add_template(s) {
                let mut pos = node.pos;
                if let Some(line) = err.line().filter(|&l| l > 1) {
                    pos.line += u32::try_from(line - 1).unwrap_or(0);
                }
                loader.when_run(at.loc(pos), format!("{what}: {err}"));
            }
            loader.note_plugins(&at.loc(node.pos), s, false);
        }
        enka_yaml::Value::Seq(items) => {
            for item in items {
                compile_in(loader, at, item, what);
            }
        }
        enka_yaml::Value::Map(entries) => {
            for (_, v) in entries {
                compile_in(loader, at, v, what);
            }
        }
        _ => {}
    }
}

/// The `vars` keyword of a play, block, task or role entry, as
/// `Base._load_vars` takes it: a mapping (or nothing) whose every key is a
/// valid variable name. `owner` is the class Ansible names in its errors
/// (`Play`, `Block`, `Task`, `RoleInclude`, `IncludeRole`). A list of
/// mappings, which Ansible once merged, is refused by 2.18 like any other
/// non-mapping.
pub(crate) fn keyword_vars(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
    owner: &str,
) -> VarList {
    let Some(entries) = node.as_map() else {
        if !matches!(node.value, enka_yaml::Value::Null) {
            loader.error(
                at.loc(node.pos),
                format!("Vars in a {owner} must be specified as a dictionary"),
            );
        }
        return Arc::from(Vec::new());
    };
    if let Some((bad, _)) = entries
        .iter()
        .find(|(k, _)| !is_ansible_identifier(&key_of(k)))
    {
        let name = key_of(bad);
        loader.error(
            at.loc(bad.pos),
            format!(
                "Invalid variable name in vars specified for {owner}: '{name}' is not a valid variable name"
            ),
        );
        return Arc::from(Vec::new());
    }
    parse_vars(loader, at, node, "vars")
}

/// `ansible.utils.vars.isidentifier`: an ASCII Python identifier that is no
/// Python keyword (nor `True`, `False`, `None`).
pub(crate) fn is_ansible_identifier(name: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
        "try", "while", "with", "yield",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

/// A mapping of variables, compiled.
pub(crate) fn parse_vars(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
    what: &str,
) -> VarList {
    let Some(entries) = node.as_map() else {
        if !matches!(node.value, enka_yaml::Value::Null) {
            loader.error(
                at.loc(node.pos),
                format!("{what} must be a mapping, not a {}", node.type_name()),
            );
        }
        return Arc::from(Vec::new());
    };
    let mut vars: Vec<(Arc<str>, Var)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let name = key_of(k);
        let value = templated(loader, at, v, &format!("{what} {name}"));
        let var = if v.tag.as_deref() == Some("unsafe") {
            Var::unsafe_data(&value)
        } else {
            Var::templated(value)
        };
        vars.retain(|(existing, _)| **existing != *name);
        vars.push((Arc::from(name.as_str()), var));
    }
    Arc::from(vars)
}

fn parse_task(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) -> Option<Task> {
    let Some(entries) = node.as_map() else {
        loader.error(
            at.loc(node.pos),
            format!("a task must be a mapping, not a {}", node.type_name()),
        );
        return None;
    };
    let name_node = node.get("name");
    let name: Option<Arc<str>> =
        name_node.map(|n| Arc::from(enka_yaml::Node::key_string(n).as_str()));
    if let (Some(n), Some(text)) = (name_node, &name)
        && let Err(err) = loader.builder.add_template(text)
    {
        // Ansible shows such a name as it is written; the task still runs.
        loader.warning(at.loc(n.pos), format!("name: {err}"));
    }

    // A task's or block's own `collections` replaces the list it would
    // inherit, for itself and the tasks inside it (Task.preprocess_data).
    let own_collections = node.get("collections").and_then(Node::as_seq).map(|items| {
        items
            .iter()
            .map(Node::key_string)
            .collect::<Vec<_>>()
            .into()
    });
    let inherited_collections =
        own_collections.map(|own| std::mem::replace(&mut loader.collections, own));
    let task = parse_task_body(loader, at, node, entries, name);
    if let Some(inherited) = inherited_collections {
        loader.collections = inherited;
    }
    task
}

fn parse_task_body(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
    entries: &[(Node, Node)],
    name: Option<Arc<str>>,
) -> Option<Task> {
    let mut action_keys: Vec<(&Node, &Node)> = Vec::new();
    let mut is_block = false;
    for (k, v) in entries {
        let key = key_of(k);
        if keywords::of_task_or_block(&key) {
            if matches!(key.as_str(), "block" | "rescue" | "always") {
                is_block = true;
            }
            if key == "action" || key == "local_action" {
                action_keys.push((k, v));
            }
            continue;
        }
        if key.starts_with("with_") {
            continue;
        }
        action_keys.push((k, v));
    }

    let action = if is_block {
        if let Some((k, _)) = action_keys.first() {
            loader.error(
                at.loc(k.pos),
                format!("'{}' is not a valid attribute for a Block", key_of(k)),
            );
        }
        let list = |loader: &mut Loader, key: &str| -> Arc<[Task]> {
            node.get(key)
                .map(|n| parse_tasks(loader, at, n))
                .unwrap_or_default()
                .into()
        };
        Action::Block {
            block: list(loader, "block"),
            rescue: list(loader, "rescue"),
            always: list(loader, "always"),
        }
    } else {
        match action_keys.as_slice() {
            [] => {
                loader.error(
                    at.loc(node.pos),
                    "no module/action detected in task".to_owned(),
                );
                return None;
            }
            [(k, v)] => parse_action(loader, at, node, k, v)?,
            [(_, _), (second, _), ..] => {
                let names: Vec<String> = action_keys.iter().map(|(k, _)| key_of(k)).collect();
                let unknown: Vec<&String> = names
                    .iter()
                    .filter(|n| registry::lookup(n).is_none() && !is_include(n))
                    .collect();
                let message = if unknown.len() == 1 && names.len() == 2 {
                    format!("'{}' is not a valid task keyword or module", unknown[0])
                } else {
                    format!("conflicting action statements: {}", names.join(", "))
                };
                loader.error(at.loc(second.pos), message);
                return None;
            }
        }
    };

    let when = node
        .get("when")
        .map(|n| as_values(loader, at, n, "when"))
        .unwrap_or_else(|| Arc::from(Vec::new()));
    let when_positions = node
        .get("when")
        .map(|n| {
            let items: Vec<&Node> = match &n.value {
                enka_yaml::Value::Seq(items) => items.iter().collect(),
                _ => vec![n],
            };
            items
                .iter()
                .map(|item| matches!(item.value, enka_yaml::Value::Str(_)).then_some(item.pos))
                .collect()
        })
        .unwrap_or_else(|| Arc::from(Vec::new()));
    let register = node.get("register").and_then(|n| match n.as_str() {
        Some(s) if is_identifier(s) => Some(Arc::from(s)),
        _ => {
            loader.error(
                at.loc(n.pos),
                format!(
                    "Invalid variable name in 'register' specified: '{}'",
                    n.key_string()
                ),
            );
            None
        }
    });
    let owner = match &action {
        Action::Block { .. } => "Block",
        Action::IncludeRole(_) | Action::ImportRole { .. } => "IncludeRole",
        _ => "Task",
    };
    let vars = node
        .get("vars")
        .map(|n| keyword_vars(loader, at, n, owner))
        .unwrap_or_else(|| Arc::from(Vec::new()));
    let looping = parse_loop(loader, at, node);
    let loop_control = node
        .get("loop_control")
        .map(|n| parse_loop_control(loader, at, n))
        .unwrap_or_default();
    let conditions =
        |loader: &mut Loader, key: &str| node.get(key).map(|n| as_values(loader, at, n, key));
    let until = conditions(loader, "until");
    let changed_when = conditions(loader, "changed_when");
    let failed_when = conditions(loader, "failed_when");
    let scalar =
        |loader: &mut Loader, key: &str| node.get(key).map(|n| templated(loader, at, n, key));
    let retries = scalar(loader, "retries");
    let delay = scalar(loader, "delay");
    // A number written as text that is not one would be ignored at run time.
    for (key, whole) in [("retries", true), ("delay", false)] {
        if let Some(n) = node.get(key) {
            let is_number = match n.as_str() {
                Some(text) if !text.contains("{{") => {
                    let text = text.trim();
                    text.parse::<i64>().is_ok() || (!whole && text.parse::<f64>().is_ok())
                }
                _ => true,
            };
            if !is_number {
                let what = if whole {
                    "an integer"
                } else {
                    "a number of seconds"
                };
                loader.error(
                    at.loc(n.pos),
                    format!(
                        "{key} must be {what}, got {:?}",
                        n.as_str().unwrap_or_default()
                    ),
                );
            }
        }
    }
    let ignore_errors = scalar(loader, "ignore_errors");
    let ignore_unreachable = scalar(loader, "ignore_unreachable");
    let delegate_to = scalar(loader, "delegate_to");
    let connection = scalar(loader, "connection");
    let run_once = scalar(loader, "run_once");
    let throttle = scalar(loader, "throttle");
    let any_errors_fatal = scalar(loader, "any_errors_fatal");
    let no_log = scalar(loader, "no_log");
    let check_mode = scalar(loader, "check_mode");
    let diff = scalar(loader, "diff");
    let environment = scalar(loader, "environment");
    let module_defaults = scalar(loader, "module_defaults");
    if let (Some(value), Some(n)) = (&module_defaults, node.get("module_defaults")) {
        loader.note_module_defaults(at.loc(n.pos), value);
    }
    let timeout = scalar(loader, "timeout");
    let asynchronous = scalar(loader, "async");
    let poll = scalar(loader, "poll");
    let tags = node.get("tags").map(tag_list).unwrap_or_default();
    let names = |key: &str| -> Vec<String> {
        node.get(key)
            .map(|n| match &n.value {
                enka_yaml::Value::Seq(items) => items.iter().map(Node::key_string).collect(),
                enka_yaml::Value::Null => Vec::new(),
                _ => vec![n.key_string()],
            })
            .unwrap_or_default()
    };
    let notify = names("notify");
    let listen = names("listen");

    Some(Task {
        name,
        location: at.loc(node.pos),
        role: at.role_name(),
        action,
        when,
        when_positions,
        register,
        vars,
        looping,
        loop_control,
        until,
        retries,
        delay,
        changed_when,
        failed_when,
        ignore_errors,
        ignore_unreachable,
        delegate_to,
        connection,
        run_once,
        throttle,
        any_errors_fatal,
        no_log,
        check_mode,
        diff,
        tags,
        notify,
        listen,
        environment,
        module_defaults,
        timeout,
        asynchronous,
        poll,
    })
}

/// `tags` as Taggable loads them: a list, or one string split at commas.
pub(crate) fn tag_list(node: &Node) -> Vec<String> {
    match &node.value {
        enka_yaml::Value::Seq(items) => items.iter().map(Node::key_string).collect(),
        _ => node
            .key_string()
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect(),
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

fn short(name: &str) -> &str {
    name.strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.legacy."))
        .unwrap_or(name)
}

fn is_include(name: &str) -> bool {
    matches!(
        short(name),
        "include_tasks" | "import_tasks" | "include" | "include_role" | "import_role"
    )
}

/// Arguments as a mapping: a YAML mapping, or free-form `k=v` text.
fn arg_entries(
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

fn parse_action(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    task: &Node,
    key: &Node,
    value: &Node,
) -> Option<Action> {
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
                module_name = name.to_owned();
                value = Node {
                    value: enka_yaml::Value::Map(
                        entries
                            .iter()
                            .filter(|(k, _)| k.as_str() != Some("module"))
                            .cloned()
                            .collect(),
                    ),
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

    // `include` is no longer among them: ansible-core 2.16 removed it, and
    // Ansible's own words for it come back from the worker's resolution.
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
    if loader.shadows_builtin(&module_name) {
        // A project's own action plugin or module of that name is what
        // ansible.legacy resolves it to: Ansible runs that one.
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
    merge_task_args(loader, at, task, &mut entries);
    let mut pairs: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
    let mut variable_params = false;
    for (name, node) in &entries {
        if name == "_raw_params" && spec.free_form != FreeForm::Raw && is_template_node(node) {
            // Templated free-form text must render to the arguments
            // (`_variable_params`, checked when the task runs).
            variable_params = true;
            pairs.push((
                Value::from(VARIABLE_PARAMS),
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

/// Adds the task's `args:` to the module's arguments (those written with the
/// module win).
fn merge_task_args(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    task: &Node,
    entries: &mut Vec<(String, Node)>,
) {
    let Some(extra) = task.get("args") else {
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
        None => loader.error(at.loc(extra.pos), "args must be a mapping".to_owned()),
    }
}

/// The argument holding templated free-form text, which must render to a
/// mapping of the arguments (Ansible's `_variable_params`).
pub const VARIABLE_PARAMS: &str = "_variable_params";

/// Actions that take free-form text besides the command family
/// (ModuleArgsParser's `_BUILTIN_RAW_PARAM_MODULES_SIMPLE`).
const RAW_PARAM_ACTIONS: &[&str] = &[
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

fn is_template_node(node: &Node) -> bool {
    node.as_str()
        .is_some_and(|text| text.contains("{{") || text.contains("{%"))
}

/// Modules whose free-form text is a command line (`_raw_params`), with the
/// few `k=v` words Ansible still takes from it (`parse_kv(check_raw=True)`).
pub(crate) const COMMAND_MODULES: &[&str] = &[
    "command",
    "shell",
    "raw",
    "script",
    "win_command",
    "win_shell",
];

/// A task whose action enka has no native code for: Ansible runs it in the
/// worker. Its arguments are parsed as Ansible's `ModuleArgsParser` does and
/// compiled like any other; whether Ansible has the action is checked when
/// the project finishes loading.
fn parse_bridged(
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
    merge_task_args(loader, at, task, &mut entries);
    // `cmd` of command, shell and script is their free-form text
    // (Task.preprocess_data moves it, C._ACTION_HAS_CMD).
    if is_builtin_name(name)
        && matches!(short, "command" | "shell" | "script")
        && let Some(at_cmd) = entries.iter().position(|(k, _)| k == "cmd")
    {
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
    // Free-form text is only for the command family; Ansible says so once
    // the name resolves (an unknown name is the first error).
    // Free-form text is allowed for the few actions that take it; for
    // others a template must render to the arguments (`_variable_params`),
    // and plain words are an error (ModuleArgsParser.parse).
    let short = name.rsplit('.').next().unwrap_or(name);
    let raw_allowed = is_command || RAW_PARAM_ACTIONS.contains(&short);
    let extra_params = (!raw_allowed)
        .then(|| entries.iter().find(|(k, _)| k == "_raw_params"))
        .flatten()
        .filter(|(_, node)| !is_template_node(node))
        .map(|(_, node)| at.loc(node.pos));
    let pairs: Vec<(Value, Value)> = entries
        .iter()
        .map(|(k, node)| {
            let key = if k == "_raw_params" && !raw_allowed {
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

/// Whether an action name is ansible-core's own: short, or
/// `ansible.builtin.`/`ansible.legacy.` qualified.
fn is_builtin_name(name: &str) -> bool {
    !name.contains('.')
        || name.starts_with("ansible.builtin.")
        || name.starts_with("ansible.legacy.")
}

/// A `template` or `copy` whose `src` is written out must name a file that
/// exists where Ansible looks (`templates/` or `files/` of the role, then
/// the task's directory): that task would fail on every run.
fn check_source_file(
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

/// `include_tasks`' `apply`: its keywords parsed as a block's, for a block
/// the included tasks run in (IncludedFile's apply block).
fn apply_block(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) -> Option<Arc<Task>> {
    let enka_yaml::Value::Map(entries) = &node.value else {
        loader.error(
            at.loc(node.pos),
            "apply must be a mapping of task keywords".to_owned(),
        );
        return None;
    };
    let mut entries = entries.clone();
    entries.push((
        Node {
            value: enka_yaml::Value::Str("block".to_owned()),
            pos: node.pos,
            tag: None,
        },
        Node {
            value: enka_yaml::Value::Seq(Vec::new()),
            pos: node.pos,
            tag: None,
        },
    ));
    let block = Node {
        value: enka_yaml::Value::Map(entries),
        pos: node.pos,
        tag: None,
    };
    parse_task(loader, at, &block).map(Arc::new)
}

/// An argument of an include that enka does not take: `apply` is ignored
/// with a warning, anything else is an error.
fn other_include_arg(loader: &mut Loader, at: &TaskFile<'_>, module: &str, key: &str, v: &Node) {
    if key == "apply" {
        loader.warning(
            at.loc(v.pos),
            format!("{module}: 'apply' has no effect in enka"),
        );
    } else {
        loader.error(
            at.loc(v.pos),
            format!("unsupported parameter for {module}: {key}"),
        );
    }
}

fn parse_include_tasks(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    task: &Node,
    module: &str,
    value: &Node,
) -> Option<Action> {
    let entries = arg_entries(loader, at, value, FreeForm::Raw, module)?;
    let mut file: Option<&Node> = None;
    let mut apply = None;
    for (k, v) in &entries {
        match k.as_str() {
            "_raw_params" | "file" => file = Some(v),
            "apply" if short(module) == "include_tasks" => apply = apply_block(loader, at, v),
            other => other_include_arg(loader, at, module, other, v),
        }
    }
    let Some(file_node) = file else {
        loader.error(at.loc(value.pos), format!("{module} needs a file name"));
        return None;
    };
    let file_value = templated(loader, at, file_node, module);
    let dir = at.dir();
    let is_static = short(module) == "import_tasks";
    let Some(name) = file_value
        .as_str()
        .filter(|s| !enka_template::is_possibly_template(s))
    else {
        if is_static {
            loader.error(
                at.loc(file_node.pos),
                "import_tasks needs a file name without templates; use include_tasks for a dynamic one".to_owned(),
            );
            return None;
        }
        return Some(Action::IncludeTasks {
            file: file_value,
            role: at.role.map(Path::to_path_buf),
            dir,
            apply,
        });
    };
    let Some(path) = resolve_task_file(at.role, &dir, name) else {
        loader.error(
            at.loc(file_node.pos),
            format!("{module}: could not find the task file {name}"),
        );
        return None;
    };
    if is_static {
        let tasks = loader.task_file(&path, at.role, Some(at.loc(file_node.pos)))?;
        let _ = task;
        return Some(Action::Block {
            block: tasks,
            rescue: Arc::from(Vec::new()),
            always: Arc::from(Vec::new()),
        });
    }
    // Parsed now, so a run never reads files; but as Ansible reads a
    // dynamically included file only when the include runs, one that does
    // not load fails that include, not the project (`enka check` warns). A
    // file including itself (a recursion guarded by `when`) is found when
    // the include runs.
    if !loader.is_loading(&path) && loader.tentative_task_file(&path, at.role).is_none() {
        let reason = loader
            .unloadable_reason(&path)
            .unwrap_or("it does not load")
            .to_owned();
        loader.warning(
            at.loc(file_node.pos),
            format!("{module}: {name} does not load, and the include fails if it runs: {reason}"),
        );
    }
    Some(Action::IncludeTasks {
        file: file_value,
        role: at.role.map(Path::to_path_buf),
        dir,
        apply,
    })
}

/// The task file `name`, relative to the including file's directory, then
/// to the role's `tasks/`.
pub fn resolve_task_file(role: Option<&Path>, dir: &Path, name: &str) -> Option<PathBuf> {
    let mut candidates = vec![dir.join(name)];
    if let Some(role) = role {
        candidates.push(role.join("tasks").join(name));
    }
    candidates
        .into_iter()
        .map(|p| enka_template::normalize_path(&p))
        .find(|p| p.is_file())
}

fn parse_include_role(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    module: &str,
    value: &Node,
) -> Option<Action> {
    let entries = arg_entries(loader, at, value, FreeForm::KeyValue, module)?;
    let mut name: Option<&Node> = None;
    let mut from = RoleFrom::default();
    let mut public = short(module) == "import_role";
    for (k, v) in &entries {
        let text = || {
            v.key_string()
                .trim_end_matches(".yml")
                .trim_end_matches(".yaml")
                .to_owned()
        };
        match k.as_str() {
            "name" | "role" => name = Some(v),
            "tasks_from" => from.tasks = text(),
            "defaults_from" => from.defaults = text(),
            "vars_from" => from.vars = text(),
            "public" => public = enka_template::to_bool(&from_yaml(v)),
            "allow_duplicates" | "handlers_from" | "rolespec_validate" => {}
            other => other_include_arg(loader, at, module, other, v),
        }
    }
    let Some(name_node) = name else {
        loader.error(at.loc(value.pos), format!("{module} needs a role name"));
        return None;
    };
    let name_value = templated(loader, at, name_node, module);
    let static_name = name_value
        .as_str()
        .filter(|s| !enka_template::is_possibly_template(s))
        .map(str::to_owned);
    let role = match &static_name {
        // A role including itself (guarded by a condition) is resolved
        // when the include runs, as Ansible's dynamic include_role is; its
        // depth is bounded then. An import of another task file of the role
        // being loaded is resolved the same way (its role is not loaded
        // yet); an import of a file being loaded is a recursion, an error.
        Some(role_name)
            if loader.role_is_loading(role_name)
                && (short(module) == "include_role"
                    || !loader.role_task_file_is_loading(role_name, &from.tasks)) =>
        {
            None
        }
        Some(role_name) => {
            let role = loader.role_by_name(role_name, at.loc(name_node.pos))?;
            if role.tasks(&from.tasks).is_none() {
                loader.error(
                    at.loc(name_node.pos),
                    format!("{module}: role {role_name} has no tasks/{}.yml", from.tasks),
                );
                return None;
            }
            Some(role)
        }
        None if short(module) == "import_role" => {
            loader.error(
                at.loc(name_node.pos),
                "import_role needs a role name without templates".to_owned(),
            );
            return None;
        }
        None => {
            // Named when it runs: the roles it may name load now.
            if static_name.is_none() {
                loader.candidate_roles(at.role);
            }
            None
        }
    };
    Some(match (short(module), role) {
        ("import_role", Some(role)) => Action::ImportRole { role, from },
        (_, role) => Action::IncludeRole(RoleInclude {
            name: name_value,
            role,
            from,
            public,
        }),
    })
}

fn parse_loop(loader: &mut Loader, at: &TaskFile<'_>, task: &Node) -> Option<Loop> {
    let mut found: Vec<(LoopKind, &Node)> = Vec::new();
    for (k, v) in task.as_map().unwrap_or_default() {
        let key = key_of(k);
        let kind = match key.as_str() {
            "loop" => LoopKind::List,
            "with_list" => LoopKind::Lookup("list".to_owned()),
            "with_items" => LoopKind::Items,
            "with_dict" => LoopKind::Dict,
            other => match other.strip_prefix("with_") {
                Some(lookup) => {
                    if !enka_template::is_native_lookup(lookup) {
                        loader.note_plugin(&at.loc(k.pos), PluginKind::Lookup, lookup);
                    }
                    LoopKind::Lookup(lookup.to_owned())
                }
                None => continue,
            },
        };
        found.push((kind, v));
    }
    if found.len() > 1 {
        loader.error(
            at.loc(found[1].1.pos),
            "a task can only have one loop keyword".to_owned(),
        );
    }
    let (kind, node) = found.into_iter().next()?;
    let items = templated(loader, at, node, "loop");
    Some(Loop { kind, items })
}

fn parse_loop_control(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) -> LoopControl {
    let mut control = LoopControl::default();
    let Some(entries) = node.as_map() else {
        loader.error(
            at.loc(node.pos),
            "loop_control must be a mapping".to_owned(),
        );
        return control;
    };
    for (k, v) in entries {
        match key_of(k).as_str() {
            "loop_var" => match v.as_str() {
                Some(s) if is_identifier(s) => control.loop_var = Arc::from(s),
                Some(s) if enka_template::is_possibly_template(s) => {
                    control.loop_var_template = Some(templated(loader, at, v, "loop_var"));
                }
                _ => loader.error(at.loc(v.pos), "loop_var must be a variable name".to_owned()),
            },
            "index_var" => match v.as_str() {
                Some(s) if is_identifier(s) => control.index_var = Some(Arc::from(s)),
                _ => loader.error(
                    at.loc(v.pos),
                    "index_var must be a variable name".to_owned(),
                ),
            },
            "label" => control.label = Some(templated(loader, at, v, "loop_control.label")),
            "pause" => control.pause = Some(templated(loader, at, v, "loop_control.pause")),
            "extended" => control.extended = enka_template::to_bool(&from_yaml(v)),
            "extended_allitems" => {
                control.extended_allitems = enka_template::to_bool(&from_yaml(v));
            }
            "break_when" => control.break_when = as_values(loader, at, v, "break_when").to_vec(),
            other => loader.error(
                at.loc(k.pos),
                format!("'{other}' is not a valid loop_control option"),
            ),
        }
    }
    control
}
