//! `no_log`: what a hidden result shows, and what it keeps.

use minijinja::Value;
use minijinja::value::ValueKind;

use super::Flow;
use super::outcome::fail_result;
use super::task_result::TaskResult;

/// A `no_log` task's failure says nothing of its values, whichever step
/// failed: a condition, a loop item, `retries`, the arguments (whose
/// template errors may quote the data they were given).
pub(super) fn censor(flow: Flow, no_log: bool) -> Flow {
    match flow {
        Flow::Failed(mut failure) if no_log => {
            failure.message = NO_LOG_MESSAGE.to_owned();
            failure.result = fail_result(NO_LOG_MESSAGE);
            Flow::Failed(failure)
        }
        other => other,
    }
}

/// `no_log` of a task that neither it nor its blocks or play set:
/// Ansible's `DEFAULT_NO_LOG` (`ANSIBLE_NO_LOG`, default false), read once.
pub(super) fn default_no_log() -> bool {
    static DEFAULT: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::env::var("ANSIBLE_NO_LOG")
            .ok()
            .and_then(|v| enka_template::strict_boolean(&Value::from(v)))
            .unwrap_or(false)
    });
    *DEFAULT
}

/// What Ansible says in place of a `no_log` task's output.
pub(super) const NO_LOG_MESSAGE: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

/// A result's message for logs, conditions and Events: a no_log task's
/// may hold what it hides, so it is censored too.
pub(super) fn shown_message(result: &TaskResult, no_log: bool) -> String {
    if no_log {
        NO_LOG_MESSAGE.to_owned()
    } else {
        result.message()
    }
}

/// A result as a `no_log` task shows it: the message Ansible puts in its
/// place, with the flags that decide what follows; a loop's items that
/// were hidden (`_ansible_no_log`, each item's own `no_log`) censored
/// alike, so each is still shown as Ansible's callback shows it.
pub(super) fn censored(result: &TaskResult) -> Value {
    let mut shown = censored_fields(&result.to_value());
    if let Some(items) = result.get("results").filter(|v| v.kind() == ValueKind::Seq) {
        let hidden = |item: &Value| item.get_attr("_ansible_no_log").is_ok_and(|v| v.is_true());
        let items: Vec<Value> = items
            .try_iter()
            .into_iter()
            .flatten()
            .map(|item| {
                if hidden(&item) {
                    censored_item(&item)
                } else {
                    item
                }
            })
            .collect();
        shown.push((Value::from("results"), Value::from(items)));
    }
    Value::from_pairs(shown)
}

/// One loop item's result as shown when it is not to be: censored, and
/// marked `_ansible_no_log` for the callback.
pub fn censored_item(item: &Value) -> Value {
    let mut shown = censored_fields(item);
    shown.push((Value::from("_ansible_no_log"), Value::from(true)));
    Value::from_pairs(shown)
}

pub(super) fn censored_fields(result: &Value) -> Vec<(Value, Value)> {
    let flag = |key: &str| {
        result
            .get_attr(key)
            .is_ok_and(|v| enka_template::to_bool(&v))
    };
    let mut pairs = vec![
        (Value::from("censored"), Value::from(NO_LOG_MESSAGE)),
        (Value::from("changed"), Value::from(flag("changed"))),
        (Value::from("failed"), Value::from(flag("failed"))),
    ];
    // Whether the host was reached, or the item skipped, is no secret, and
    // decides what follows.
    for key in ["unreachable", "skipped"] {
        if flag(key) {
            pairs.push((Value::from(key), Value::from(true)));
        }
    }
    pairs
}
