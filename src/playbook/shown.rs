//! A task's result as the default callback shows it: cleaned of what the
//! line already says and of internal keys, and dumped as Python's JSON.

use minijinja::Value;

/// A result as the default callback receives and dumps it: without
/// `failed` and `skipped` (the line says so, TaskResult.clean_copy),
/// internal `_ansible_*` keys, `exception`, and below `-vvv` `invocation`
/// and `diff`; a debug result holds only its `msg` (or its variable).
pub(super) fn cleaned(result: &Value, debug: bool, verbosity: u8) -> Value {
    const DEBUG_KEEPS: &[&str] = &["msg", "exception", "warnings", "deprecations"];
    const DEBUG_HIDES: &[&str] = &["changed", "failed", "skipped", "invocation", "skip_reason"];
    let Ok(keys) = result.try_iter() else {
        return result.clone();
    };
    let has_msg = result.get_attr("msg").is_ok_and(|v| !v.is_undefined());
    let pairs: Vec<(Value, Value)> = keys
        .filter_map(|key| {
            let name = key.as_str()?.to_owned();
            let drop = name.starts_with("_ansible")
                || matches!(name.as_str(), "failed" | "skipped" | "exception")
                || (verbosity < 3 && matches!(name.as_str(), "invocation" | "diff"))
                || (debug && has_msg && !DEBUG_KEEPS.contains(&name.as_str()))
                || (debug && !has_msg && DEBUG_HIDES.contains(&name.as_str()));
            let value = result.get_item(&key).ok()?;
            // _handle_warnings printed them and took them out.
            let printed = matches!(name.as_str(), "warnings" | "deprecations") && value.is_true();
            (!drop && !printed).then_some((key, value))
        })
        .collect();
    Value::from_pairs(pairs)
}

/// A loop's result without its items.
pub(super) fn without_items(result: &Value) -> Value {
    let Ok(keys) = result.try_iter() else {
        return result.clone();
    };
    Value::from_pairs(
        keys.filter(|key| key.as_str() != Some("results"))
            .map(|key| {
                let value = result.get_item(&key).unwrap_or_default();
                (key, value)
            })
            .collect::<Vec<_>>(),
    )
}

/// Whether a loop's result is a `no_log` task's, censored as a whole.
pub(super) fn censored_loop(result: &Value) -> bool {
    result.get_attr("censored").is_ok_and(|v| !v.is_undefined())
}

/// Whether an action marked its result for display in full (debug, and
/// assert unless quiet: `_ansible_verbose_always`).
pub(super) fn verbose_always(result: &Value) -> bool {
    result
        .get_attr("_ansible_verbose_always")
        .is_ok_and(|v| v.is_true())
}

/// The default callback's `_dump_results`: JSON with sorted keys, indented
/// by four for a result marked `_ansible_verbose_always` or from `-vvv`,
/// else on one line.
pub(super) fn dumped(result: &Value, debug: bool, verbosity: u8) -> String {
    let value = cleaned(result, debug, verbosity);
    let indent = (verbose_always(result) || verbosity > 2).then_some(4);
    crate::template::python_json(&value, indent).unwrap_or_else(|_| value.to_string())
}
