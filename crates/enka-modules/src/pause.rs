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
    let (asked, minutes) = match args.seconds("minutes")? {
        Some(minutes) => (minutes * 60, true),
        None => (args.seconds("seconds")?.unwrap_or_default(), false),
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
    Ok(Output::changed(false)
        .with("rc", 0)
        .with("stderr", "")
        .with("stdout", format!("Paused for {rounded} {unit}"))
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
