//! `assert`: checks conditions.

use minijinja::Value;

use super::{Args, ModuleContext, Output};
use crate::catalogue;

pub fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    // The action reads `that` as the task wrote it (untemplated_args): a
    // list's conditions keep their `{{ }}` (evaluated, and warned about,
    // as conditions) and show as written in `assertion`; a single string
    // is templated first, as it may name a list.
    let written = ctx
        .task
        .written_args
        .get_attr("that")
        .ok()
        .filter(|v| v.kind() == minijinja::value::ValueKind::Seq);
    // A single condition is one condition, commas and all (the assert
    // action wraps a non-list in a list; it does not split it).
    let that = match (written, args.get("that")) {
        (Some(list), _) => list.try_iter().into_iter().flatten().collect(),
        (None, Some(one)) if one.kind() == minijinja::value::ValueKind::String => vec![one],
        (None, _) => args.list("that")?,
    };
    let quiet = args.bool("quiet", false)?;
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
        warnings.extend(judgement.delimiters_warning(condition).map(Value::from));
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
    let mut output = with_notices(Output::changed(false), warnings, deprecations);
    if !quiet {
        output = output.with("msg", success_msg);
    }
    Ok(shown_in_full(output, quiet))
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
