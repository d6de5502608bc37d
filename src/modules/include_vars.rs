//! `include_vars`: loads variables from a YAML file of the role.

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::Value;

use super::{Args, ModuleContext, Output};
use crate::template::convert::from_yaml;

pub async fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, String> {
    let name = args.str("name")?;
    let file = match args.str("file")?.or(args.str("_raw_params")?) {
        Some(file) => file,
        None => return Err("include_vars: only file= is supported in-process (dir= needs a directory walk of the operator's disk)".to_owned()),
    };
    let path = find(ctx, &file).ok_or_else(|| {
        format!("Could not find or access '{file}' (looked in the role's vars/ and the project)")
    })?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("could not read {}: {e}", path.display()))?;
    let text = if text.starts_with("$ANSIBLE_VAULT") {
        decrypt(&text, &path, ctx).await?
    } else {
        text
    };
    let node = crate::yaml::load_one(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    let node = match node {
        Some(node) => Some(decrypt_inline(node, &path, ctx).await?),
        None => None,
    };
    let data = node.map(|n| from_yaml(&n)).unwrap_or(Value::from(()));
    if data.kind() != minijinja::value::ValueKind::Map {
        return Err(format!(
            "{} must contain a mapping of variables",
            path.display()
        ));
    }
    let mut output = Output::changed(false).with(
        "ansible_included_var_files",
        vec![Value::from(path.to_string_lossy().as_ref())],
    );
    match name {
        Some(name) => output.included_vars.push((Arc::from(name.as_str()), data)),
        None => {
            for key in data.try_iter().map_err(|e| e.to_string())? {
                let value = data.get_item(&key).unwrap_or_default();
                output.included_vars.push((
                    Arc::from(crate::template::pyrepr::to_text(&key).as_str()),
                    value,
                ));
            }
        }
    }
    Ok(output)
}

/// Looks as Ansible does: an absolute path as it is, else the role's
/// `vars/`, the role, then the project.
fn find(ctx: &ModuleContext<'_>, file: &str) -> Option<PathBuf> {
    crate::template::find_needle(&ctx.search_path(), "vars", file)
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
    node: crate::yaml::Node,
    path: &std::path::Path,
    ctx: &ModuleContext<'_>,
) -> Result<crate::yaml::Node, String> {
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
