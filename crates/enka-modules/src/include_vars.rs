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
    // A failed load keeps the (empty) facts and files, as the action's
    // result always holds them.
    match load(args, ctx).await {
        Err(message) => Ok(Output::changed(false)
            .with("failed", true)
            .with(
                "ansible_facts",
                Value::from_pairs(Vec::<(Value, Value)>::new()),
            )
            .with("ansible_included_var_files", Vec::<Value>::new())
            .with("message", message.to_string())),
        ok => ok,
    }
}

async fn load(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
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
    let name = args.str("name")?;
    // Free-form text loses its trailing newlines (a folded `>` scalar).
    let raw = args
        .str("_raw_params")?
        .map(|text| text.trim_end_matches('\n').to_owned());
    let (data, files) = match args.str("file")?.or(raw) {
        Some(file) => {
            let path = find(ctx, &file).ok_or_else(|| not_found(ctx, &file))?;
            (load_file(&path, ctx).await?, vec![path])
        }
        None => match args.str("dir")? {
            Some(dir) => load_dir(args, ctx, &dir).await?,
            None => {
                return Err(crate::ArgumentError(
                    "one of the following is required: file, dir".to_owned(),
                )
                .into());
            }
        },
    };
    let mut output = Output::changed(false).with(
        "ansible_included_var_files",
        files
            .iter()
            .map(|p| Value::from(p.to_string_lossy().as_ref()))
            .collect::<Vec<_>>(),
    );
    let data = match name {
        Some(name) => Value::from_pairs(vec![(Value::from(name), data)]),
        None => data,
    };
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
) -> Result<(Value, Vec<PathBuf>), String> {
    let root = find_dir(ctx, dir).ok_or_else(|| format!("{dir} directory does not exist"))?;
    let depth = args
        .get("depth")
        .and_then(|v| i64::try_from(v).ok())
        .unwrap_or(0);
    let (matching, ignored) = file_filters(args)?;
    let extensions: Vec<String> = match args.get("extensions") {
        None => vec!["yaml".into(), "yml".into(), "json".into()],
        Some(_) => args
            .list("extensions")?
            .iter()
            .map(enka_template::pyrepr::to_text)
            .collect(),
    };
    let ignore_unknown = args
        .get("ignore_unknown_extensions")
        .is_some_and(|v| v.is_true());
    let mut directories: Vec<PathBuf> = walkdir_sorted(&root);
    directories.sort();
    let mut merged: Vec<(Value, Value)> = Vec::new();
    let mut files = Vec::new();
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
            let known = extensions.contains(&extension);
            if !known {
                if ignore_unknown {
                    continue;
                }
                return Err(format!(
                    "{} does not have a valid extension: {}",
                    directory.join(&name).display(),
                    extensions.join(", ")
                ));
            }
            let path = directory.join(&name);
            let data = load_file(&path, ctx).await?;
            for key in data.try_iter().map_err(|e| e.to_string())? {
                let value = data.get_item(&key).unwrap_or_default();
                merged.retain(|(k, _)| *k != key);
                merged.push((key, value));
            }
            files.push(path);
        }
    }
    Ok((Value::from_pairs(merged), files))
}

/// `files_matching` and `ignore_files` as regular expressions (each ignored
/// name anchored at its end, as Ansible's).
fn file_filters(
    args: &Args<'_>,
) -> Result<(Option<fancy_regex::Regex>, Vec<fancy_regex::Regex>), String> {
    let regex = |pattern: &str| {
        fancy_regex::Regex::new(pattern)
            .map_err(|_| format!("Invalid regular expression: {pattern}"))
    };
    let matching = args.str("files_matching")?.map(|p| regex(&p)).transpose()?;
    let ignored: Vec<fancy_regex::Regex> = match args.get("ignore_files") {
        None => Vec::new(),
        Some(v) if v.kind() == ValueKind::String => v
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .map(|p| regex(&format!("{p}$")))
            .collect::<Result<_, _>>()?,
        Some(v) if v.kind() == ValueKind::Seq => v
            .try_iter()
            .into_iter()
            .flatten()
            .map(|p| regex(&format!("{}$", enka_template::pyrepr::to_text(&p))))
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(format!(
                "{} must be a list",
                enka_template::pyrepr::to_text(&v)
            ));
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
