//! `fail`: fails the task with a message.

use minijinja::Value;

use super::{Args, Output};

pub fn run(args: &Args<'_>) -> Result<Output, String> {
    let msg = args
        .get("msg")
        .unwrap_or(Value::from("Failed as requested from task"));
    Ok(Output::changed(false).with("failed", true).with("msg", msg))
}
