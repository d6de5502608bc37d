//! `pause`: waits (never for input: an operator has no terminal).

use std::time::{Duration, Instant};

use minijinja::Value;

use super::{Args, ModuleContext, Output};
use crate::catalogue;

/// Longest pause allowed, so a role cannot stall a worker for long.
const MAX_PAUSE: Duration = Duration::from_secs(3600);

pub async fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    if !args.has("seconds") && !args.has("minutes") {
        return Err(
            "pause without seconds or minutes waits for a keypress, which an operator cannot give"
                .into(),
        );
    }
    if args.has("seconds") && args.has("minutes") {
        return Err("parameters are mutually exclusive: minutes|seconds".into());
    }
    // As the action: minutes if given, else seconds; at least one second.
    let semantics = ctx.templar.options().semantics;
    let (asked, minutes) =
        match args.action_int("minutes", semantics, crate::args::IntWords::IntLiteral)? {
            Some(minutes) => (Duration::from_secs(minutes.max(0) as u64 * 60), true),
            None => (
                Duration::from_secs(
                    args.action_int("seconds", semantics, crate::args::IntWords::IntLiteral)?
                        .unwrap_or(0)
                        .max(0) as u64,
                ),
                false,
            ),
        };
    let mut wait = asked.max(Duration::from_secs(1)).min(MAX_PAUSE);
    if let Some(deadline) = ctx.deadline {
        wait = wait.min(deadline.saturating_duration_since(Instant::now()));
    }
    let start = enka_template::time::python_now();
    let started = Instant::now();
    tokio::time::sleep(wait).await;
    let elapsed = started.elapsed().as_secs_f64();
    let (amount, unit) = match minutes {
        true => (elapsed / 60.0, "minutes"),
        false => (elapsed, "seconds"),
    };
    // Python's round(x, 2), printed as Python prints a float.
    let rounded = enka_template::pyrepr::repr(&Value::from((amount * 100.0).round() / 100.0));
    let stdout = format!("Paused for {rounded} {unit}");
    let mut output = Output::changed(false);
    if ctx.templar.options().release_at_least(21) {
        // 2.21's action returns the lines too.
        output = output
            .with("stderr_lines", Vec::<Value>::new())
            .with("stdout_lines", vec![Value::from(stdout.as_str())]);
    }
    Ok(output
        .with("rc", 0)
        .with("stderr", "")
        .with("stdout", stdout)
        .with("start", start)
        .with("stop", enka_template::time::python_now())
        .with("delta", elapsed as u64)
        .with("echo", args.bool("echo", true)?)
        .with("user_input", ""))
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "pause",
    aliases: &[],
    collections: catalogue::BUILTIN,
    params: &["seconds", "minutes", "prompt", "echo"],
    any_args: false,
    free_form: catalogue::FreeForm::KeyValue,
    requires: &[],
    expressions: &[],
    uses_cluster: false,
    check_mode_through: None,
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
