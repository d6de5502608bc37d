//! `pause`: waits (never for input: an operator has no terminal).

use std::time::{Duration, Instant};

use super::{Args, ModuleContext, Output};
use crate::catalogue;

/// Longest pause allowed, so a role cannot stall a worker for long.
const MAX_PAUSE: Duration = Duration::from_secs(3600);

pub async fn run(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Output, crate::ModuleError> {
    let seconds = args.seconds("seconds")?.unwrap_or_default();
    let minutes = args.seconds("minutes")?.unwrap_or_default() * 60;
    if !args.has("seconds") && !args.has("minutes") {
        return Err(
            "pause without seconds or minutes waits for a keypress, which an operator cannot give"
                .into(),
        );
    }
    let mut wait = (seconds + minutes).min(MAX_PAUSE);
    if let Some(deadline) = ctx.deadline {
        wait = wait.min(deadline.saturating_duration_since(Instant::now()));
    }
    let started = Instant::now();
    tokio::time::sleep(wait).await;
    let elapsed = started.elapsed();
    Ok(Output::changed(false)
        .with("delta", elapsed.as_secs())
        .with("echo", true)
        .with(
            "stdout",
            format!("Paused for {:.2} seconds", elapsed.as_secs_f64()),
        ))
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
