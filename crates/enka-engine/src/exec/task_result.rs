//! A task's result as Ansible registers it.

use enka_modules::Control;
use minijinja::Value;
use minijinja::value::ValueKind;

use super::retries::UNTIL_REASON;

/// A task's result as Ansible registers it.
#[derive(Debug, Clone)]
pub(crate) struct TaskResult {
    pub(super) fields: Vec<(String, Value)>,
    pub(super) control: Option<Control>,
    /// `ignore_unreachable` as judged for each item of a loop (with the
    /// item's variables), when one could not reach its host.
    pub(super) ignore_unreachable: Option<bool>,
    /// An error Ansible raises out of `TaskExecutor._execute` (an argument,
    /// the environment or a keyword that cannot be templated): in a loop,
    /// it ends the loop and fails the task as a whole.
    pub(super) fails_task: bool,
    /// The results of the loop items before the one that ended the loop
    /// (`fails_task`): the callback showed each as it came.
    pub(super) shown_before: Vec<Value>,
    /// An error Ansible raised rather than a result a module returned:
    /// from 2.19 its result has `exception` and `changed` too.
    pub(super) raised: bool,
}

impl TaskResult {
    /// A result of these fields alone.
    pub(super) fn of(fields: Vec<(String, Value)>) -> Self {
        TaskResult {
            fields,
            control: None,
            ignore_unreachable: None,
            fails_task: false,
            shown_before: Vec::new(),
            raised: false,
        }
    }

    /// An error Ansible raises rather than returns (a template, a
    /// condition, a keyword): TaskExecutor.run's result for it says only
    /// that it failed, and why.
    pub(super) fn error(message: String) -> Self {
        TaskResult {
            raised: true,
            ..TaskResult::of(vec![
                ("failed".into(), Value::from(true)),
                ("msg".into(), Value::from(message)),
            ])
        }
    }

    /// A raised error's result as 2.19 makes it
    /// (`result_dict_from_exception`): `failed`, the `exception` summary
    /// (its traceback only when tracebacks are shown), `msg`, and
    /// `changed` false. Any other result is as it was.
    pub(super) fn raised_as_219(mut self) -> Self {
        if !self.raised {
            return self;
        }
        let mut fields = vec![("failed".to_owned(), Value::from(true))];
        let exception = self
            .get("exception")
            .cloned()
            .unwrap_or_else(|| Value::from("(traceback unavailable)"));
        fields.push(("exception".to_owned(), exception));
        fields.extend(
            self.fields
                .drain(..)
                .filter(|(key, _)| key != "failed" && key != "exception"),
        );
        if !fields.iter().any(|(key, _)| key == "changed") {
            fields.push(("changed".to_owned(), Value::from(false)));
        }
        self.fields = fields;
        self.raised = false;
        self
    }

    /// Such an error before the action ran (see `fails_task`).
    pub(super) fn task_error(message: String) -> Self {
        TaskResult {
            fails_task: true,
            ..TaskResult::error(message)
        }
    }

    pub(super) fn failed(message: String) -> Self {
        TaskResult::of(vec![
            ("changed".into(), Value::from(false)),
            ("failed".into(), Value::from(true)),
            ("msg".into(), Value::from(message)),
        ])
    }

    pub(super) fn unreachable(message: String) -> Self {
        TaskResult::of(vec![
            ("changed".into(), Value::from(false)),
            ("msg".into(), Value::from(message)),
            ("unreachable".into(), Value::from(true)),
        ])
    }

    pub(super) fn skipped(condition: Value) -> Self {
        TaskResult::of(vec![
            ("changed".into(), Value::from(false)),
            ("skipped".into(), Value::from(true)),
            (
                "skip_reason".into(),
                Value::from("Conditional result was False"),
            ),
            ("false_condition".into(), condition),
        ])
    }

    pub(super) fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Removes `key`, returning its value.
    pub(super) fn take(&mut self, key: &str) -> Option<Value> {
        let at = self.fields.iter().position(|(k, _)| k == key)?;
        Some(self.fields.remove(at).1)
    }

    pub(super) fn set(&mut self, key: &str, value: Value) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((key.to_owned(), value)),
        }
    }

    pub(super) fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(enka_template::to_bool)
    }

    /// TaskResult.is_failed: `failed_when_result` decides when the task
    /// has one (a failed_when overrides even an until loop that ran out),
    /// else `failed`.
    pub(super) fn is_failed(&self) -> bool {
        // `_check_key`: Python's truth of the value, so the error text of
        // a condition that could not be evaluated fails the task.
        match self.get("failed_when_result") {
            Some(judged) => judged.is_true(),
            None => self.flag("failed"),
        }
    }

    pub(super) fn is_skipped(&self) -> bool {
        self.flag("skipped")
    }

    pub(super) fn is_changed(&self) -> bool {
        self.flag("changed")
    }

    pub(super) fn message(&self) -> String {
        let own = self
            .get("msg")
            .or_else(|| {
                self.get("message")
                    .filter(|v| v.kind() == ValueKind::String)
            })
            .or_else(|| {
                ["failed_when_result", "changed_when_result"]
                    .iter()
                    .filter_map(|k| self.get(k))
                    .find(|v| v.kind() == ValueKind::String)
            })
            .map(enka_template::pyrepr::to_text)
            .or_else(|| {
                // An exception's result: its traceback's last line.
                let exception = self.get("exception")?;
                let text = exception.as_str()?.trim_end().lines().last()?.to_owned();
                Some(text)
            });
        match (own, self.get(UNTIL_REASON).and_then(Value::as_str)) {
            (Some(own), Some(why)) => format!("{own} ({why})"),
            (None, Some(why)) => format!("Retried: {why}"),
            (Some(own), None) => own,
            (None, None) => "the task failed".to_owned(),
        }
    }

    pub(super) fn to_value(&self) -> Value {
        Value::from_pairs(
            self.fields
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), v.clone())),
        )
    }

    /// The result as `register` keeps it: without the internal
    /// `_ansible_*` keys, in each item's result too (strip_internal_keys),
    /// and without the module's `invocation` (the strategy's clean copy;
    /// a loop's items keep theirs).
    pub(super) fn registered(&self) -> Value {
        fn strip(value: &Value) -> Value {
            let Ok(keys) = value.try_iter() else {
                return value.clone();
            };
            Value::from_pairs(keys.filter_map(|k| {
                let internal = k.as_str().is_some_and(|k| k.starts_with("_ansible"));
                (!internal).then(|| {
                    let v = value.get_item(&k).unwrap_or_default();
                    (k, v)
                })
            }))
        }
        Value::from_pairs(
            self.fields
                .iter()
                .filter(|(k, _)| !k.starts_with("_ansible") && k != "invocation")
                .map(|(k, v)| {
                    let v = if k == "results" && v.kind() == ValueKind::Seq {
                        Value::from(
                            v.try_iter()
                                .into_iter()
                                .flatten()
                                .map(|item| {
                                    if item.kind() == ValueKind::Map {
                                        strip(&item)
                                    } else {
                                        item
                                    }
                                })
                                .collect::<Vec<_>>(),
                        )
                    } else {
                        v.clone()
                    };
                    (Value::from(k.as_str()), v)
                }),
        )
    }

    /// The result of a looped task: `results` plus combined flags.
    pub(super) fn combine(results: Vec<TaskResult>) -> TaskResult {
        if results.is_empty() {
            // TaskExecutor.run on an empty loop.
            return TaskResult::of(vec![
                ("changed".to_owned(), Value::from(false)),
                ("skipped".to_owned(), Value::from(true)),
                (
                    "skipped_reason".to_owned(),
                    Value::from("No items in the list"),
                ),
                ("results".to_owned(), Value::from(Vec::<Value>::new())),
            ]);
        }
        let changed = results.iter().any(TaskResult::is_changed);
        let failed = results.iter().any(TaskResult::is_failed);
        let all_skipped = results.iter().all(TaskResult::is_skipped);
        let control = results.iter().find_map(|r| r.control.clone());
        let mut fields = vec![
            ("changed".to_owned(), Value::from(changed)),
            (
                "msg".to_owned(),
                Value::from(if failed {
                    "One or more items failed"
                } else if all_skipped {
                    "All items skipped"
                } else {
                    "All items completed"
                }),
            ),
            (
                "results".to_owned(),
                Value::from(results.iter().map(TaskResult::to_value).collect::<Vec<_>>()),
            ),
            ("skipped".to_owned(), Value::from(all_skipped)),
        ];
        if failed {
            fields.push(("failed".to_owned(), Value::from(true)));
        }
        // TaskExecutor: the first unreachable item's ignore_unreachable,
        // and false once any unreachable item's is.
        let unreachable: Vec<&TaskResult> =
            results.iter().filter(|r| r.flag("unreachable")).collect();
        if !unreachable.is_empty() {
            fields.push(("unreachable".to_owned(), Value::from(true)));
        }
        let ignore_unreachable = unreachable
            .iter()
            .map(|r| r.ignore_unreachable)
            .collect::<Option<Vec<bool>>>()
            .filter(|flags| !flags.is_empty())
            .map(|flags| flags.iter().all(|&f| f));
        TaskResult {
            fields,
            control,
            ignore_unreachable,
            fails_task: false,
            shown_before: Vec::new(),
            raised: false,
        }
    }
}
