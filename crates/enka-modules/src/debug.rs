//! `debug`: prints a message or a variable.

use minijinja::Value;

use super::{Args, ModuleContext, Output};
use crate::catalogue;
use enka_template::pyrepr;

pub fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    let verbosity = args
        .action_int(
            "verbosity",
            ctx.templar.options().semantics,
            crate::args::IntWords::CheckType,
        )?
        .unwrap_or(0);
    if verbosity > i64::from(ctx.verbosity) {
        return Ok(Output::changed(false)
            .with("skipped", true)
            .with("skipped_reason", "Verbosity threshold not met."));
    }
    if args.has("var") {
        return show_var(args, ctx);
    }
    // A null message is shown as null (2.19: its `{{ None }}` stays null).
    let msg = args.given("msg").unwrap_or(Value::from("Hello world!"));
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

/// `debug: var=…`: `var` is a bare expression, templated as `{{ var }}`.
fn show_var(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    let semantics = ctx.templar.options().semantics;
    let strict = semantics == enka_template::Semantics::Ansible219;
    if strict {
        refuse_non_string_var(args)?;
    }
    let var = args.required_str("var")?;
    // Unsafe text (a variable's value that named the expression) is never
    // templated: 2.18 shows it wrapped, as its `"{{" + var + "}}"` stays
    // unsafe; 2.19 refuses it.
    let unsafe_var = args.get("var").is_some_and(|v| v.is_safe());
    if unsafe_var && strict {
        return Err(resolving_var(
            "Encountered untrusted template or expression.",
        ));
    }
    let mut warnings = Vec::new();
    let value = if unsafe_var {
        enka_template::mark_unsafe(&Value::from(format!("{{{{{var}}}}}")))
    } else {
        match ctx
            .templar
            .template_str(&format!("{{{{ {var} }}}}"), ctx.ctx)
        {
            Ok(v) => v,
            Err(err) if err.is_undefined() && strict => {
                // 2.19 shows what failed in place, with a warning.
                let message = err.message_in(semantics);
                warnings.push(Value::from(format!(
                    "Encountered 1 template error.\nerror 1 - {message}"
                )));
                Value::from(format!("<< error 1 - {message} >>"))
            }
            Err(err) if err.is_undefined() => Value::from("VARIABLE IS NOT DEFINED!"),
            Err(err) if strict => return Err(resolving_var(&expression_error(&err))),
            Err(err) => return Err(err.to_string().into()),
        }
    };
    let value = if strict && value.as_str() == Some(ctx.templar.omit()) {
        warnings.push(Value::from(
            "The result of the `var` expression could not be omitted; a placeholder was used instead.",
        ));
        Value::from("<<Omit>>")
    } else {
        value
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
    let mut output = Output::changed(false)
        .with(&var, value)
        .with("_ansible_verbose_always", true);
    if !warnings.is_empty() {
        output = output.with("warnings", Value::from(warnings));
    }
    Ok(output)
}

/// 2.19's error for a `var` expression that could not be evaluated.
fn resolving_var(cause: &str) -> crate::ModuleError {
    crate::ModuleError::Raised(format!("Error while resolving `var` expression: {cause}"))
}

/// 2.19's words for an expression that failed: what Jinja raised while
/// rendering is an error rendering the expression.
fn expression_error(err: &enka_template::Error) -> String {
    match err.python_exception() {
        Some(("ZeroDivisionError", text)) => format!("Error rendering expression: {text}"),
        _ => err
            .message_in(enka_template::Semantics::Ansible219)
            .into_owned(),
    }
}

/// 2.19's debug takes `var` as a string only (its argument spec's
/// `str` without conversion): a number or a mapping is refused.
fn refuse_non_string_var(args: &Args<'_>) -> Result<(), crate::ModuleError> {
    match args.get("var") {
        Some(var) if var.kind() != minijinja::value::ValueKind::String => Err(format!(
            "argument 'var' is of type {} and we were unable to convert to _check_type_str_no_conversion: '{}' is not a string and conversion is not allowed",
            pyrepr::type_name(&var),
            pyrepr::repr(&var)
        )
        .into()),
        _ => Ok(()),
    }
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
