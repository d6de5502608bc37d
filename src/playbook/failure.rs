//! 2.19's default callback says why a task failed before its `fatal:` line:
//! `[ERROR]: Task failed: …`, then where the task is (`Origin:` and the
//! lines around it). 2.18 shows the result alone.

use minijinja::Value;

use crate::role::{Action, Task};

/// The `[ERROR]` section for a failed task's (or item's) `result`: none
/// when the result says nothing (censored).
pub(super) fn error_section(task: &Task, result: &Value) -> Option<String> {
    let msg = result.get_attr("msg").ok().filter(|m| !m.is_undefined())?;
    let msg = crate::template::pyrepr::to_text(&msg);
    let message = if msg.starts_with("Task failed: ") {
        msg
    } else if is_action_plugin(task) {
        format!("Task failed: Action failed: {msg}")
    } else {
        format!("Task failed: Module failed: {msg}")
    };
    let mut text = format!("[ERROR]: {message}\n");
    if let Some(origin) = crate::role::origin_excerpt(&task.location) {
        text.push_str(&origin);
    }
    Some(text)
}

fn is_action_plugin(task: &Task) -> bool {
    match &task.action {
        Action::Module { module, .. } => module.is_controller_action(),
        _ => true,
    }
}
