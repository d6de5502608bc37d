//! `assert`: checks conditions.

use enka_template::{Semantics, pyrepr};
use minijinja::Value;
use minijinja::value::ValueKind;

use super::{Args, ModuleContext, Output};
use crate::catalogue;

pub fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    let strict = ctx.templar.options().semantics == enka_template::Semantics::Ansible219;
    let that = if strict {
        conditions_219(args, ctx)
    } else {
        conditions_218(args, ctx)?
    };
    let quiet = quiet(args, ctx)?;
    let fail_msg = args.get("fail_msg").or_else(|| args.get("msg"));
    let success_msg = args
        .get("success_msg")
        .unwrap_or(Value::from("All assertions passed"));
    let mut deprecations = Vec::new();
    let mut warnings = Vec::new();
    for (index, condition) in that.iter().enumerate() {
        let judgement = ctx.templar.judge(condition, ctx.ctx).map_err(|error| {
            crate::ModuleError::Conditional {
                argument: "that",
                index,
                error,
            }
        })?;
        if strict {
            // 2.19 deprecates the delimiters, in the result.
            if judgement.delimiters {
                deprecations.push(delimiters_deprecation_219());
            }
        } else {
            warnings.extend(judgement.delimiters_warning(condition).map(Value::from));
        }
        // The assert action's conditions have no position in 2.18.
        let place = || {
            format!(
                "unknown location (conditional: {})",
                enka_template::pyrepr::repr(condition)
            )
        };
        if judgement.not_boolean.is_some()
            && let Some(message) = judgement.not_boolean_deprecation(&place())
        {
            deprecations.push(Value::from_pairs([
                ("msg", Value::from(message)),
                ("version", Value::from("2.19")),
            ]));
        }
        if !judgement.holds {
            let msg = fail_msg.clone().unwrap_or(Value::from("Assertion failed"));
            let output = Output::changed(false)
                .with("failed", true)
                .with("assertion", condition.clone())
                .with("evaluated_to", false)
                .with("msg", msg);
            let output = with_notices(output, warnings, deprecations);
            return Ok(shown_in_full(output, quiet));
        }
    }
    // `quiet` only keeps the result from being shown in full.
    let output = with_notices(Output::changed(false), warnings, deprecations);
    Ok(shown_in_full(output.with("msg", success_msg), quiet))
}

/// `quiet`: 2.18's action reads it as `boolean(quiet, strict=False)`, so
/// anything it does not list is false; 2.19 validates it as its argument
/// spec's `bool`.
fn quiet(args: &Args<'_>, ctx: &crate::ModuleContext<'_>) -> Result<bool, crate::ModuleError> {
    let semantics = ctx.templar.options().semantics;
    match (args.python_bool("quiet", false), semantics) {
        (Some(quiet), _) => Ok(quiet),
        (None, Semantics::Ansible218) => Ok(false),
        (None, Semantics::Ansible219) => {
            let value = args.get("quiet").unwrap_or_default();
            Err(crate::ArgumentError(format!(
                "argument 'quiet' is of type {} and we were unable to convert to bool: {}",
                pyrepr::type_name(&value),
                crate::args::not_a_boolean(&value, semantics)
            ))
            .into())
        }
    }
}

/// What the action said while judging, as a module's result carries it
/// (enka playbook prints them as Ansible's Display does).
fn with_notices(mut output: Output, warnings: Vec<Value>, deprecations: Vec<Value>) -> Output {
    if !warnings.is_empty() {
        output = output.with("warnings", warnings);
    }
    if !deprecations.is_empty() {
        output = output.with("deprecations", deprecations);
    }
    output
}

/// The assert action marks its result for display in full unless `quiet`
/// (`_ansible_verbose_always`, which register and callbacks strip).
fn shown_in_full(output: Output, quiet: bool) -> Output {
    if quiet {
        output
    } else {
        output.with("_ansible_verbose_always", true)
    }
}

/// The conditions of `that` as 2.18's action reads them: as the task wrote
/// them (untemplated_args), so a list's conditions keep their `{{ }}`
/// (evaluated, and warned about, as conditions) and show as written in
/// `assertion`; a single string is templated first, as it may name a list,
/// and is one condition, commas and all.
fn conditions_218(
    args: &Args<'_>,
    ctx: &ModuleContext<'_>,
) -> Result<Vec<Value>, crate::ModuleError> {
    let written = ctx
        .task
        .written_args
        .get_attr("that")
        .ok()
        .filter(|v| v.kind() == ValueKind::Seq);
    Ok(match (written, args.get("that")) {
        (Some(list), _) => list.try_iter().into_iter().flatten().collect(),
        (None, Some(one)) if one.kind() == ValueKind::String => vec![one],
        (None, _) => args.list("that")?,
    })
}

/// The conditions of `that` as 2.19's action reads them
/// (`finalize_task_arg`): a string that is one whole template is resolved,
/// and used when it names a list; any other string, as written, is one
/// condition; a list's conditions are as written. A missing condition is
/// the empty one 2.19 refuses.
fn conditions_219(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Vec<Value> {
    let items = |list: &Value| list.try_iter().into_iter().flatten().collect::<Vec<_>>();
    let written = ctx
        .task
        .written_args
        .get_attr("that")
        .ok()
        .filter(|v| !v.is_undefined());
    let resolved = args.get("that");
    let that = match (written, resolved) {
        (Some(text), resolved) if text.kind() == ValueKind::String => {
            let all_template = text
                .as_str()
                .is_some_and(|t| enka_template::is_all_template(t.trim()));
            let as_written = || {
                let source = text.as_str().unwrap_or_default();
                ctx.templar.container_as_written(source, ctx.ctx)
            };
            match resolved {
                Some(list) if all_template && list.kind() == ValueKind::Seq => {
                    items(&as_written().unwrap_or(list))
                }
                _ => vec![text],
            }
        }
        (Some(list), _) if list.kind() == ValueKind::Seq => items(&list),
        (Some(one), _) => vec![one],
        (None, Some(list)) if list.kind() == ValueKind::Seq => items(&list),
        (None, Some(one)) => vec![one],
        (None, None) => Vec::new(),
    };
    if that.is_empty() {
        return vec![Value::from("")];
    }
    that.into_iter()
        .map(|c| if c.is_none() { Value::from("") } else { c })
        .collect()
}

/// 2.19's deprecation of a condition written inside `{{ }}` or `{% %}`,
/// as a result carries it.
fn delimiters_deprecation_219() -> Value {
    Value::from_pairs([
        ("collection_name", Value::from("ansible.builtin")),
        (
            "deprecator",
            Value::from_pairs([
                ("resolved_name", Value::from("ansible.builtin")),
                ("type", Value::from(())),
            ]),
        ),
        (
            "msg",
            Value::from(
                "Conditionals should not be surrounded by templating delimiters such as {{ }} or {% %}.",
            ),
        ),
        ("version", Value::from("2.23")),
    ])
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "assert",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &["that", "fail_msg", "msg", "success_msg", "quiet"],
    any_args: false,
    free_form: catalogue::FreeForm::KeyValue,
    requires: &[catalogue::Requirement::OneOf(&["that"])],
    expressions: &["that"],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Now(run),
};
