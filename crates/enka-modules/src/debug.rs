//! `debug`: prints a message or a variable.

use minijinja::Value;

use super::{Args, ModuleContext, Output};
use crate::catalogue;
use enka_template::pyrepr;

pub fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    let verbosity = args.int("verbosity")?.unwrap_or(0);
    if verbosity > i64::from(ctx.verbosity) {
        return Ok(Output::changed(false)
            .with("skipped", true)
            .with("skipped_reason", "Verbosity threshold not met."));
    }
    if args.has("var") {
        let var = args.required_str("var")?;
        // `var` is a bare expression: template it as `{{ var }}`. Unsafe
        // text (a variable's value that named the expression) is never
        // templated: Ansible shows it wrapped, as its `"{{" + var + "}}"`
        // stays unsafe.
        let unsafe_var = args.get("var").is_some_and(|v| v.is_safe());
        let value = if unsafe_var {
            enka_template::mark_unsafe(&Value::from(format!("{{{{{var}}}}}")))
        } else {
            match ctx
                .templar
                .template_str(&format!("{{{{ {var} }}}}"), ctx.ctx)
            {
                Ok(v) => v,
                Err(err) if err.is_undefined() => Value::from("VARIABLE IS NOT DEFINED!"),
                Err(err) => return Err(err.to_string().into()),
            }
        };
        let shown = if ctx.no_log {
            Value::from("******")
        } else {
            value.clone()
        };
        tracing::info!(
            task = ctx.task.name.unwrap_or("debug"),
            "{var}: {}",
            pyrepr::to_text(&shown)
        );
        // Debug output is always shown in full (`_ansible_verbose_always`).
        return Ok(Output::changed(false)
            .with(&var, value)
            .with("_ansible_verbose_always", true));
    }
    let msg = args.get("msg").unwrap_or(Value::from("Hello world!"));
    if !ctx.no_log {
        tracing::info!(
            task = ctx.task.name.unwrap_or("debug"),
            "{}",
            pyrepr::to_text(&msg)
        );
    }
    Ok(Output::changed(false)
        .with("msg", msg)
        .with("_ansible_verbose_always", true))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "debug",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &["msg", "var", "verbosity"],
    any_args: false,
    free_form: catalogue::FreeForm::KeyValue,
    requires: &[catalogue::Requirement::Exclusive(&["msg", "var"])],
    expressions: &["var"],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(run),
};
