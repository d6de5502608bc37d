//! `include_vars`: loads variables from a YAML file of the role.

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::Value;
use minijinja::value::ValueKind;

use super::{Args, ModuleContext, Output};
use crate::catalogue;
use enka_template::convert::from_yaml;

pub async fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    // The action reports a file it cannot load under `message`, not `msg`.
    // A failed load keeps the files it read and the variables of the
    // directories it finished, as the action's result always holds them.
    let mut read = Read::default();
    let output = match load(args, ctx, &mut read).await {
        Err(err @ (crate::ModuleError::Unexpected(_) | crate::ModuleError::Raised(_))) => {
            return Err(err);
        }
        Err(message) => Output::changed(false)
            .with("failed", true)
            .with("ansible_facts", named(args, read.vars)?)
            .with("ansible_included_var_files", paths(&read.files))
            .with("message", message.to_string()),
        Ok(output) => output,
    };
    // 2.21 deprecates `ignore_files` given as one string, before it reads.
    let text_ignore_files = args
        .get("ignore_files")
        .is_some_and(|v| v.kind() == ValueKind::String);
    if ctx.templar.options().release_at_least(21) && text_ignore_files {
        let deprecation = serde_json::json!({
            "collection_name": "ansible.builtin",
            "deprecator": {"resolved_name": "ansible.builtin.include_vars", "type": "action"},
            "msg": "Specifying 'ignore_files' as a string is deprecated.",
            "version": "2.24",
        });
        return Ok(output.with(
            "deprecations",
            vec![enka_template::convert::from_json(&deprecation)],
        ));
    }
    Ok(output)
}

/// What the action has read so far.
#[derive(Default)]
struct Read {
    /// Each file loaded, in order.
    files: Vec<PathBuf>,
    /// The variables of every file of the directories finished (a
    /// directory's own count only once all its files loaded).
    vars: Vec<(Value, Value)>,
}

/// The variables under `name` when the task gives one.
fn named(args: &Args<'_>, vars: Vec<(Value, Value)>) -> Result<Value, crate::ModuleError> {
    let vars = Value::from_pairs(vars);
    Ok(match args.str("name")? {
        Some(name) => Value::from_pairs(vec![(Value::from(name), vars)]),
        None => vars,
    })
}

fn paths(files: &[PathBuf]) -> Vec<Value> {
    files
        .iter()
        .map(|p| Value::from(p.to_string_lossy().as_ref()))
        .collect()
}

async fn load(
    args: &Args<'_>,
    ctx: &ModuleContext<'_>,
    read: &mut Read,
) -> Result<Output, crate::ModuleError> {
    if args.given("file").is_some_and(|file| file.is_none()) {
        // Ansible's search for a null file name finds nothing, and says so.
        return Ok(Output::changed(false)
            .with("failed", true)
            .with("ansible_facts", Value::from_pairs(Vec::<(Value, Value)>::new()))
            .with("ansible_included_var_files", Vec::<Value>::new())
            .with(
                "message",
                "Could not find file on the Ansible Controller.\nIf you are using a module and expect the file to exist on the remote, see the remote_src option",
            )
            .with(
                "warnings",
                vec![Value::from(
                    "Invalid request to find a file that matches a \"null\" value",
                )],
            ));
    }
    // Free-form text loses its trailing newlines (a folded `>` scalar).
    let raw = args
        .str("_raw_params")?
        .map(|text| text.trim_end_matches('\n').to_owned());
    // The action compiles `files_matching` before it reads anything.
    let filters = file_filters(args)?;
    match args.str("file")?.or(raw) {
        Some(file) => {
            let path = find(ctx, &file).ok_or_else(|| not_found(ctx, &file))?;
            let data = load_file(&path, ctx).await?;
            read.files.push(path);
            read.vars = enka_template::convert::entries(&data);
        }
        None => match args.str("dir")? {
            Some(dir) => load_dir(args, ctx, &dir, &filters, read).await?,
            None => {
                return Err(crate::ArgumentError(
                    "one of the following is required: file, dir".to_owned(),
                )
                .into());
            }
        },
    };
    let mut output = Output::changed(false).with("ansible_included_var_files", paths(&read.files));
    let data = named(args, std::mem::take(&mut read.vars))?;
    // hash_behaviour=merge merges each mapping into the variable's value
    // now, recursively (combine_vars with merge).
    let merge = args.str("hash_behaviour")?.as_deref() == Some("merge");
    for key in data.try_iter().map_err(|e| e.to_string())? {
        let name = enka_template::pyrepr::to_text(&key);
        let mut value = data.get_item(&key).unwrap_or_default();
        if merge && let Some(old) = ctx.ctx.resolve(&name) {
            value = enka_template::merge_hash(&old, &value);
        }
        output.included_vars.push((Arc::from(name.as_str()), value));
    }
    // The result shows what was included as the action returns it.
    let facts = Value::from_pairs(
        output
            .included_vars
            .iter()
            .map(|(k, v)| (Value::from(&**k), v.clone()))
            .collect::<Vec<_>>(),
    );
    Ok(output.with("ansible_facts", facts))
}

/// One vars file: a mapping (Vault-encrypted whole or in part).
async fn load_file(path: &std::path::Path, ctx: &ModuleContext<'_>) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("could not read {}: {e}", path.display()))?;
    let text = if text.starts_with("$ANSIBLE_VAULT") {
        decrypt(&text, path, ctx).await?
    } else {
        text
    };
    let node = enka_yaml::load_one(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    let node = match node {
        Some(node) => Some(decrypt_inline(node, path, ctx).await?),
        None => None,
    };
    let data = node.map(|n| from_yaml(&n)).unwrap_or(Value::from(()));
    match data.kind() {
        ValueKind::Map => Ok(data),
        ValueKind::None | ValueKind::Undefined => {
            Ok(Value::from_pairs(Vec::<(Value, Value)>::new()))
        }
        _ => Err(format!(
            "{} must be stored as a dictionary/hash",
            path.display()
        )),
    }
}

/// `dir=`: every vars file under the directory, each directory's files in
/// name order, directories in path order, down to `depth` (0: all), those
/// `files_matching` names and not `ignore_files`, later files' variables
/// winning (ActionModule._traverse_dir_depth of include_vars).
async fn load_dir(
    args: &Args<'_>,
    ctx: &ModuleContext<'_>,
    dir: &str,
    (matching, ignored): &Filters,
    read: &mut Read,
) -> Result<(), crate::ModuleError> {
    let root = find_dir(ctx, dir).ok_or_else(|| {
        format!(
            "{} directory does not exist",
            missing_dir(ctx, dir).display()
        )
    })?;
    let depth = depth(args, ctx)?;
    let newer = ctx.templar.options().release_at_least(21);
    let extensions = valid_extensions(args, newer)?;
    let ignore_unknown = args
        .get("ignore_unknown_extensions")
        .is_some_and(|v| v.is_true());
    let mut directories: Vec<PathBuf> = walkdir_sorted(&root);
    directories.sort();
    for directory in directories {
        let level = directory
            .strip_prefix(&root)
            .map_or(0, |rel| rel.components().count())
            + 1;
        if depth != 0 && level as i64 > depth {
            continue;
        }
        let mut names: Vec<String> = std::fs::read_dir(&directory)
            .map_err(|e| format!("could not read {}: {e}", directory.display()))?
            .filter_map(Result::ok)
            .filter(|entry| entry.path().is_file())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        // A directory's variables count once all its files loaded.
        let mut merged: Vec<(Value, Value)> = Vec::new();
        for name in names {
            if matching
                .as_ref()
                .is_some_and(|m| !m.is_match(&name).unwrap_or(false))
                || ignored.iter().any(|r| r.is_match(&name).unwrap_or(false))
            {
                continue;
            }
            // os.path.splitext: no extension is the empty one.
            let extension = std::path::Path::new(&name)
                .extension()
                .map(|e| e.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !extensions.contains(&extension) {
                if ignore_unknown {
                    continue;
                }
                // 2.21 writes the path as Python's repr.
                let path = directory.join(&name).display().to_string();
                let path = match newer {
                    true => enka_template::pyrepr::repr(&Value::from(path)),
                    false => path,
                };
                return Err(format!(
                    "{path} does not have a valid extension: {}",
                    extensions.join(", ")
                )
                .into());
            }
            let path = directory.join(&name);
            let data = load_file(&path, ctx).await?;
            read.files.push(path);
            for (key, value) in enka_template::convert::entries(&data) {
                merged.retain(|(k, _)| *k != key);
                merged.push((key, value));
            }
        }
        for (key, value) in merged {
            read.vars.retain(|(k, _)| *k != key);
            read.vars.push((key, value));
        }
    }
    Ok(())
}

/// `extensions`: the file extensions a directory's files may have (a
/// string is Python's list() of it, its characters, until 2.21 refuses
/// it).
fn valid_extensions(args: &Args<'_>, newer: bool) -> Result<Vec<String>, crate::ModuleError> {
    Ok(match args.get("extensions") {
        None => vec!["yaml".into(), "yml".into(), "json".into()],
        Some(text) if text.kind() == ValueKind::String && newer => {
            return Err(crate::ModuleError::Raised(
                "The 'extensions' option must be a list.".to_owned(),
            ));
        }
        // Python's list() of a string: its characters.
        Some(text) if text.kind() == ValueKind::String => text
            .as_str()
            .unwrap_or_default()
            .chars()
            .map(String::from)
            .collect(),
        Some(_) => args
            .list("extensions")?
            .iter()
            .map(enka_template::pyrepr::to_text)
            .collect(),
    })
}

/// `depth`: the action compares each directory's depth with it as given,
/// so anything but a number raises Python's TypeError at the first one.
fn depth(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<i64, crate::ModuleError> {
    let Some(value) = args.get("depth").filter(|v| !v.is_none()) else {
        return Ok(0);
    };
    match value.kind() {
        ValueKind::Number | ValueKind::Bool => Ok(i64::try_from(value).unwrap_or(0)),
        _ => {
            // The class of a string as the task's YAML gave it.
            let class = match (value.kind(), ctx.templar.options().semantics) {
                (ValueKind::String, enka_template::Semantics::Ansible218) => "AnsibleUnicode",
                (ValueKind::String, enka_template::Semantics::Ansible219) => "_AnsibleTaggedStr",
                _ => enka_template::pyrepr::type_name(&value),
            };
            Err(crate::ModuleError::Unexpected(format!(
                "'>' not supported between instances of 'int' and '{class}'"
            )))
        }
    }
}

/// Where the action looks for a `dir` it then says does not exist: the
/// role's `vars/` for a role's task, else beside the task's file.
fn missing_dir(ctx: &ModuleContext<'_>, dir: &str) -> PathBuf {
    let task_dir = ctx.task.file.parent().unwrap_or(std::path::Path::new(""));
    match task_dir.parent() {
        Some(role) if task_dir.ends_with("tasks") || task_dir.ends_with("handlers") => {
            role.join("vars").join(dir)
        }
        _ => task_dir.join(dir),
    }
}

/// `files_matching`, compiled, and the `ignore_files` patterns.
type Filters = (Option<fancy_regex::Regex>, Vec<fancy_regex::Regex>);

/// `files_matching` and `ignore_files` as regular expressions (each ignored
/// name anchored at its end, as Ansible's). A `files_matching` Python
/// cannot compile raises its `re.error`; an `ignore_files` one the
/// action's own AnsibleError.
fn file_filters(args: &Args<'_>) -> Result<Filters, crate::ModuleError> {
    let matching = match args.str("files_matching")? {
        Some(pattern) => Some(fancy_regex::Regex::new(&pattern).map_err(|e| {
            crate::ModuleError::Unexpected(enka_template::python_regex_message(&pattern, &e))
        })?),
        None => None,
    };
    let ignored_regex = |pattern: String| {
        fancy_regex::Regex::new(&format!("{pattern}$")).map_err(|_| {
            crate::ModuleError::Raised(format!("Invalid regular expression: {pattern}"))
        })
    };
    let ignored: Vec<fancy_regex::Regex> = match args.get("ignore_files") {
        None => Vec::new(),
        Some(v) if v.kind() == ValueKind::String => v
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .map(|p| ignored_regex(p.to_owned()))
            .collect::<Result<_, _>>()?,
        Some(v) if v.kind() == ValueKind::Seq => v
            .try_iter()
            .into_iter()
            .flatten()
            .map(|p| ignored_regex(enka_template::pyrepr::to_text(&p)))
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(format!("{} must be a list", enka_template::pyrepr::to_text(&v)).into());
        }
    };
    Ok((matching, ignored))
}

/// `root` and every directory under it (links followed).
fn walkdir_sorted(root: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut index = 0;
    while index < out.len() {
        let dir = out[index].clone();
        index += 1;
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.is_dir() && out.len() < 10_000 {
                    out.push(path);
                }
            }
        }
    }
    out
}

/// AnsibleFileNotFound's message, with where enka looked.
fn not_found(ctx: &ModuleContext<'_>, file: &str) -> String {
    let what = if file.is_empty() {
        "Could not find file".to_owned()
    } else {
        format!("Could not find or access '{file}'")
    };
    let searched: Vec<String> = ctx
        .search_path()
        .iter()
        .flat_map(|base| [base.join("vars").join(file), base.join(file)])
        .map(|p| p.display().to_string())
        .collect();
    // 2.21 no longer points at remote_src.
    let remote = match ctx.templar.options().release_at_least(21) {
        true => "",
        false => {
            "\nIf you are using a module and expect the file to exist on the remote, see the remote_src option"
        }
    };
    format!(
        "{what}\nSearched in:\n\t{} on the Ansible Controller.{remote}",
        searched.join("\n\t")
    )
}

/// A directory as Ansible's `_find_needle('vars', dir)` finds one.
fn find_dir(ctx: &ModuleContext<'_>, dir: &str) -> Option<PathBuf> {
    let path = std::path::Path::new(dir);
    if path.is_absolute() {
        return path.is_dir().then(|| path.to_path_buf());
    }
    ctx.search_path()
        .iter()
        .flat_map(|base| [base.join("vars").join(dir), base.join(dir)])
        .find(|candidate| candidate.is_dir())
}

/// Looks as Ansible does: an absolute path as it is, else the role's
/// `vars/`, the role, then the project.
fn find(ctx: &ModuleContext<'_>, file: &str) -> Option<PathBuf> {
    enka_template::find_needle(&ctx.search_path(), "vars", file)
}

/// Vault text decrypted by Ansible, with the Vault secrets enka was given.
async fn decrypt(
    text: &str,
    path: &std::path::Path,
    ctx: &ModuleContext<'_>,
) -> Result<String, String> {
    let worker = ctx.ansible.ok_or_else(|| {
        format!(
            "{} is encrypted with Ansible Vault and this project has no Ansible worker to decrypt it",
            path.display()
        )
    })?;
    let request =
        serde_json::json!({"op": "vault_decrypt", "text": text, "file": path.to_string_lossy()});
    let answer = worker
        .call_async(request, None)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(answer["value"].as_str().unwrap_or_default().to_owned())
}

/// The file's `!vault` values decrypted, as Ansible's loader decrypts them
/// when it reads the file (upstream's advanced-molecule-operator reads such
/// a value with `include_vars` and `--vault-password-file`).
async fn decrypt_inline(
    node: enka_yaml::Node,
    path: &std::path::Path,
    ctx: &ModuleContext<'_>,
) -> Result<enka_yaml::Node, String> {
    let encrypted: Vec<String> = node
        .tagged_strings("vault")
        .into_iter()
        .map(str::to_owned)
        .collect();
    if encrypted.is_empty() {
        return Ok(node);
    }
    let mut plain = Vec::with_capacity(encrypted.len());
    for text in &encrypted {
        plain.push(decrypt(text, path, ctx).await?);
    }
    let mut next = encrypted.iter().zip(plain);
    Ok(node.replace_tagged("vault", &mut |_, _| next.next().map(|(_, p)| p)))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "include_vars",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &[
        "_raw_params",
        "file",
        "dir",
        "name",
        "depth",
        "files_matching",
        "ignore_files",
        "extensions",
        "ignore_unknown_extensions",
        "hash_behaviour",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::Raw,
    requires: &[catalogue::Requirement::OneOf(&[
        "_raw_params",
        "file",
        "dir",
    ])],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
