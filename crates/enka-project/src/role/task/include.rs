//! `include_tasks`, `import_tasks`, `include_role` and `import_role` as
//! tasks: their files and roles, found when the role loads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::action::arg_entries;
use super::{TaskFile, parse_task, short, templated};
use crate::role::loader::Loader;
use crate::role::{Action, RoleFrom, RoleInclude, Task};
use enka_modules::catalogue::modules::FreeForm;
use enka_template::convert::from_yaml;
use enka_yaml::Node;

/// `include_tasks`' `apply`: its keywords parsed as a block's, for a block
/// the included tasks run in (IncludedFile's apply block).
pub(super) fn apply_block(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    node: &Node,
) -> Option<Arc<Task>> {
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

/// An argument of an include that it does not take: `apply` of an import
/// is Ansible's "Invalid options", anything else is an error too.
pub(super) fn other_include_arg(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    module: &str,
    key: &str,
    v: &Node,
) {
    let message = if key == "apply" {
        format!("Invalid options for {}: apply", short(module))
    } else {
        format!("unsupported parameter for {module}: {key}")
    };
    loader.error(at.loc(v.pos), message);
}

/// A static import's file name with the role's `role_path` written in: the
/// variable such a name may use that is known when the role loads (Ansible
/// templates the name then, with what it has). `None` when it names no
/// `role_path`, or the file is in no role.
fn with_role_path(name: &str, role: Option<&Path>) -> Option<String> {
    let role = role?.display().to_string();
    let mut out = name.to_owned();
    for written in [
        "{{ role_path }}",
        "{{role_path}}",
        "{{ role_path}}",
        "{{role_path }}",
    ] {
        out = out.replace(written, &role);
    }
    (out != name).then_some(out)
}

pub(super) fn parse_include_tasks(
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
    // An include resolved when it runs.
    let dynamic = |file: minijinja::Value, dir: PathBuf, apply| Action::IncludeTasks {
        file,
        role: at.role.map(Path::to_path_buf),
        dir,
        apply,
    };
    let is_static = short(module) == "import_tasks";
    let with_role_path = file_value
        .as_str()
        .filter(|_| is_static)
        .and_then(|text| with_role_path(text, at.role));
    let Some(name) = with_role_path
        .as_deref()
        .or(file_value.as_str())
        .filter(|s| !enka_template::is_possibly_template(s))
    else {
        if is_static {
            loader.error(
                at.loc(file_node.pos),
                "import_tasks needs a file name without templates; use include_tasks for a dynamic one".to_owned(),
            );
            return None;
        }
        if let Some(text) = file_value.as_str() {
            preload_candidates(loader, at, &dir, text);
        }
        return Some(dynamic(file_value, dir, apply));
    };
    let Some(path) = resolve_task_file(at.role, &dir, name) else {
        // Ansible looks for a dynamic include's file only when it runs:
        // then the include fails, and a rescue can take it (`enka check`
        // refuses it).
        if is_static {
            loader.error(
                at.loc(file_node.pos),
                format!("{module}: could not find the task file {name}"),
            );
            return None;
        }
        loader.when_run(
            at.loc(file_node.pos),
            format!("{module}: could not find the task file {name}"),
        );
        return Some(dynamic(file_value, dir, apply));
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
            .unwrap_or_else(|| "it does not load".to_owned());
        loader.when_run(
            at.loc(file_node.pos),
            format!("{module}: {name} does not load, and the include fails if it runs: {reason}"),
        );
    }
    Some(dynamic(file_value, dir, apply))
}

/// Parses, tentatively, the task files an include named by a template
/// may name when it runs: those in the directory its name starts with
/// (relative to the including file's), so a run never reads files. A
/// role's `tasks/` is loaded whole with the role.
fn preload_candidates(loader: &mut Loader, at: &TaskFile<'_>, dir: &Path, template: &str) {
    let fixed = template
        .find("{{")
        .into_iter()
        .chain(template.find("{%"))
        .min()
        .map_or(template, |at| &template[..at]);
    let sub_dir = fixed.rfind('/').map_or("", |slash| &fixed[..=slash]);
    let candidates_dir = enka_template::normalize_path(&dir.join(sub_dir));
    if at
        .role
        .is_some_and(|role| candidates_dir.starts_with(role.join("tasks")))
    {
        return;
    }
    let Ok(entries) = std::fs::read_dir(&candidates_dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && matches!(
                    path.extension().and_then(|e| e.to_str()),
                    Some("yml" | "yaml")
                )
                && !is_playbook(path)
        })
        .collect();
    files.sort();
    for file in files {
        if !loader.is_loading(&file) {
            let _ = loader.tentative_task_file(&file, at.role);
        }
    }
}

/// Whether the YAML file at `path` reads as a playbook (its plays name
/// `hosts`, or import playbooks): no include takes it, so it is not loaded
/// as a task file beside one.
fn is_playbook(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines().any(|line| {
        let item = line.strip_prefix("- ").or_else(|| line.strip_prefix("  "));
        item.is_some_and(|rest| {
            [
                "hosts:",
                "import_playbook:",
                "ansible.builtin.import_playbook:",
            ]
            .iter()
            .any(|key| rest.starts_with(key))
        })
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

pub(super) fn parse_include_role(
    loader: &mut Loader,
    at: &TaskFile<'_>,
    module: &str,
    value: &Node,
) -> Option<Action> {
    let entries = arg_entries(loader, at, value, FreeForm::KeyValue, module)?;
    let mut name: Option<&Node> = None;
    let mut from = RoleFrom::default();
    let mut public = short(module) == "import_role";
    let mut apply = None;
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
            "apply" if short(module) == "include_role" => apply = apply_block(loader, at, v),
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
            // An include finds its `tasks_from` when it runs (a template,
            // `"{{ item }}"`, or a file that is not there, which Ansible
            // reports then); an import now.
            if short(module) == "import_role" && role.tasks(&from.tasks).is_none() {
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
            apply,
        }),
    })
}
