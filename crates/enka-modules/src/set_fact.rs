//! `set_fact`: sets host facts (above role and task vars).

use std::sync::Arc;

use enka_template::Semantics;
use enka_template::migration::Kind;
use minijinja::Value;

use super::{Args, Output};
use crate::catalogue;
use enka_template::pyrepr;

pub fn run(
    args: &Args<'_>,
    module: &crate::ModuleContext<'_>,
) -> Result<Output, crate::ModuleError> {
    let semantics = module.templar.options().semantics;
    // The action reads `cacheable` with a strict `boolean()`, whose
    // TypeError is no argument error but the action's own exception.
    if args.python_bool("cacheable", false).is_none() {
        let value = args.get("cacheable").unwrap_or_default();
        return Err(crate::ModuleError::Unexpected(crate::args::not_a_boolean(
            &value, semantics,
        )));
    }
    let mut output = Output::changed(false);
    let mut facts = Vec::new();
    // set_fact templates the names it is given (`"{{ item }}": x`).
    let named = module
        .templar
        .template_keys(args.as_map(), module.ctx)
        .map_err(|err| err.ansible_message())?;
    for (key, value) in enka_template::convert::entries(&named) {
        let name = pyrepr::to_text(&key);
        if name == "cacheable" {
            continue;
        }
        if semantics == Semantics::Ansible219 {
            valid_name_219(&key)?;
        } else if !is_identifier(&name) {
            return Err(format!(
                "The variable name '{name}' is not valid. Variables must start with a letter or underscore character, and contain only letters, numbers and underscores."
            )
            .into());
        }
        // A value that is undefined is stored as None, as written null is.
        let mut value = if value.is_undefined() {
            Value::from(())
        } else {
            value
        };
        // ansible-core 2.18 converts boolean-looking strings in set_fact
        // (non-native templating), whether they came from k=v or from YAML;
        // 2.19 keeps them as written.
        if let Some(boolean) = value.as_str().and_then(boolean_looking) {
            module.templar.note_divergence(
                module.ctx,
                Kind::Module,
                format!("set_fact: {name}={}", value.as_str().unwrap_or_default()),
                [Value::from(boolean), value.clone()],
            );
            if semantics == Semantics::Ansible218 {
                value = Value::from(boolean);
            }
        }
        facts.push((Arc::from(name.as_str()), value));
    }
    let ansible_facts =
        Value::from_pairs(facts.iter().map(|(k, v)| (Value::from(&**k), v.clone())));
    output = output.with("ansible_facts", ansible_facts);
    output.facts = facts;
    Ok(output)
}

/// The boolean 2.18's set_fact makes of `text`, if any.
fn boolean_looking(text: &str) -> Option<bool> {
    match text.to_lowercase().as_str() {
        "true" | "yes" => Some(true),
        "false" | "no" => Some(false),
        _ => None,
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// 2.19's `validate_variable_name`: an ASCII identifier that is no Jinja
/// keyword (`true`, `none`, `not`, …).
fn valid_name_219(key: &Value) -> Result<(), crate::ModuleError> {
    const JINJA_KEYWORDS: &[&str] = &["False", "None", "True", "false", "none", "not", "true"];
    if let Some(name) = key.as_str()
        && name.is_ascii()
        && is_identifier(name)
        && !JINJA_KEYWORDS.contains(&name)
    {
        return Ok(());
    }
    let of_type = if key.kind() == minijinja::value::ValueKind::String {
        String::new()
    } else {
        format!(" of type '{}'", pyrepr::type_name(key))
    };
    Err(crate::ModuleError::Raised(format!(
        "Invalid variable name {}{of_type}.",
        pyrepr::repr(&Value::from(pyrepr::to_text(key)))
    )))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "set_fact",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &[],
    any_args: true,
    free_form: catalogue::FreeForm::KeyValue,
    requires: &[],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(run),
};
