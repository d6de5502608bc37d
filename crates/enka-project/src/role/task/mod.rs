//! Turning a YAML task list into [`Task`]s, reporting every problem with its
//! position.

mod action;
mod include;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::Value;
use minijinja::value::ValueKind;

use super::keywords::{self, Places, Setting, Settings};
use super::loader::Loader;
use super::{Action, Location, Loop, LoopControl, LoopKind, Task, VarList};
use enka_modules::catalogue::modules::{self as registry};
use enka_template::Var;
use enka_template::convert::from_yaml;
use enka_template::scan::PluginKind;
use enka_yaml::{Node, Pos};

use action::parse_action;
pub use action::{TEMPLATED_ARGS, VARIABLE_PARAMS};

/// How a task file that is not a list of tasks is refused (an include of
/// one fails as Ansible's does, rather than ending the run).
pub const NOT_A_TASK_LIST: &str = "a task list must be a YAML list";
pub use include::resolve_task_file;

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
                format!("{NOT_A_TASK_LIST}, not a {}", node.type_name()),
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
        // A condition is an expression, templates in its string literals
        // and all, unless it is one whole template.
        enka_yaml::Value::Str(expr) => loader.note_plugins(
            &at.loc(node.pos),
            expr,
            !enka_template::is_all_template(expr.trim()),
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
    if node.tag.as_deref() == Some("unsafe") {
        return; // never templated
    }
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
    let action = task_action(loader, at, node, entries)?;

    let (when, when_positions) = parse_when(loader, at, node);
    let arg_positions = arg_positions(entries);
    let condition_positions = ["until", "changed_when", "failed_when"]
        .iter()
        .filter_map(|key| {
            node.get(key)
                .map(|n| (Arc::from(*key), string_positions(n)))
        })
        .collect();
    let register = parse_register(loader, at, node);
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
    let settings = Settings::read(Places::TASK_FILE, |name| {
        node.get(name).map(|n| templated(loader, at, n, name))
    });
    check_retry_numbers(loader, at, node);
    if let (Some(value), Some(n)) = (
        settings.get(Setting::ModuleDefaults),
        node.get("module_defaults"),
    ) {
        loader.note_module_defaults(at.loc(n.pos), value);
    }
    let tags = node.get("tags").map(tag_list).unwrap_or_default();
    let notify = name_list(node, "notify");
    let listen = name_list(node, "listen");

    Some(Task {
        name,
        location: at.loc(node.pos),
        role: at.role_name(),
        action,
        when,
        when_positions,
        arg_positions,
        condition_positions,
        register,
        vars,
        looping,
        loop_control,
        until,
        settings,
        changed_when,
        failed_when,
        tags,
        notify,
        listen,
    })
}

/// A task's action: a block's sections, or the one module, action or
/// include its keys name (any other key is not a keyword, so two of them
/// conflict).
fn task_action(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
    entries: &[(Node, Node)],
) -> Option<Action> {
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
        // A task's own keywords (`loop`, `register`, …) are no block's.
        let foreign = entries
            .iter()
            .map(|(k, _)| k)
            .find(|k| {
                let key = key_of(k);
                !keywords::of_block(&key)
                    && (keywords::of_task_or_block(&key) || key.starts_with("with_"))
            })
            .or(action_keys.first().map(|(k, _)| *k));
        if let Some(k) = foreign {
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
        let block = list(loader, "block");
        let rescue = list(loader, "rescue");
        let always = list(loader, "always");
        // Block._validate_rescue/_validate_always: an empty block cannot
        // have them.
        if block.is_empty() {
            for (key, tasks) in [("rescue", &rescue), ("always", &always)] {
                if !tasks.is_empty() {
                    loader.error(
                        at.loc(node.pos),
                        format!("'{key}' keyword cannot be used without 'block'"),
                    );
                }
            }
        }
        Action::Block {
            block,
            rescue,
            always,
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
    Some(action)
}

/// `when`, its conditions and where each written one is.
fn parse_when(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
) -> (Arc<[Value]>, Arc<[Option<Pos>]>) {
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
    (when, when_positions)
}

/// Where the strings of the module's written arguments are: the first
/// key that is no keyword names the module, its mapping the arguments.
fn arg_positions(entries: &[(Node, Node)]) -> super::ArgPositions {
    let Some(args) = entries
        .iter()
        .find(|(k, _)| !keywords::of_task_or_block(&key_of(k)))
        .and_then(|(_, v)| v.as_map())
    else {
        return Arc::from(Vec::new());
    };
    args.iter()
        .filter(|(_, v)| matches!(v.value, enka_yaml::Value::Seq(_) | enka_yaml::Value::Str(_)))
        .map(|(k, v)| (Arc::from(key_of(k).as_str()), string_positions(v)))
        .collect()
}

/// Where each string of `node` is: itself, or each item of a list (`None`
/// for one that is no string).
fn string_positions(node: &Node) -> Arc<[Option<enka_yaml::Pos>]> {
    let position = |node: &Node| matches!(node.value, enka_yaml::Value::Str(_)).then_some(node.pos);
    match &node.value {
        enka_yaml::Value::Seq(items) => items.iter().map(position).collect(),
        _ => Arc::from(vec![position(node)]),
    }
}

/// `notify` or `listen`: one name or a list of them.
fn name_list(node: &Node, key: &str) -> Vec<String> {
    node.get(key)
        .map(|n| match &n.value {
            enka_yaml::Value::Seq(items) => items.iter().map(Node::key_string).collect(),
            enka_yaml::Value::Null => Vec::new(),
            _ => vec![n.key_string()],
        })
        .unwrap_or_default()
}

/// `register`: a variable name, or an error.
fn parse_register(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) -> Option<Arc<str>> {
    node.get("register").and_then(|n| match n.as_str() {
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
    })
}

/// `retries` and `delay` written as text that is no number would be
/// ignored at run time: an error when the role loads.
fn check_retry_numbers(loader: &mut Loader, at: &TaskFile<'_>, node: &Node) {
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
