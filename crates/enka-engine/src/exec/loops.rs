//! Loops: `loop` and `with_*` items, `loop_control`, the loop variables.

use enka_project::role::Setting;
use std::sync::Arc;

use enka_project::role::{Action, LoopKind, Task};
use enka_template::time::seconds;
use enka_template::{Context, Semantics};
use minijinja::Value;
use minijinja::value::ValueKind;

use super::blocks::as_failed_result;
use super::conditions::all_true;
use super::no_log::censor;
use super::outcome::fail_result;
use super::task_result::TaskResult;
use super::{Flow, Frame, Inherited, Runner, TaskModes};
use crate::scope::Scope;

/// One item of a loop, as its result names it.
struct Item<'a> {
    /// The loop variable (`item`, or `loop_control.loop_var`).
    name: &'a str,
    value: &'a Value,
    index: usize,
    /// `ansible_loop` as the item saw it (`loop_control.extended`).
    ansible_loop: Option<Value>,
}

impl Runner {
    /// The items of a task's loop, or `None` when it has no loop.
    pub(super) fn loop_items(
        &mut self,
        task: &Task,
        ctx: &Context,
        inherited: &Inherited,
    ) -> Result<Option<Vec<Value>>, Flow> {
        let Some(looping) = &task.looping else {
            return Ok(None);
        };
        // with_first_found templates its terms leniently: a term that meets
        // an undefined variable stays as written and the lookup skips it
        // (TaskExecutor._get_loop_items, fail_on_undefined=False).
        let lenient = matches!(&looping.kind, LoopKind::Lookup(name) if name == "first_found");
        let templated = if lenient && self.semantics() == Semantics::Ansible219 {
            // 2.19 hands first_found its terms with markers where values
            // were undefined; it skips them.
            self.templar
                .template_value_keeping_undefined(&looping.items, ctx)
                .map(|terms| without_undefined(&terms))
        } else if lenient {
            self.template_leniently(&looping.items, ctx)
        } else {
            self.templar.template_value(&looping.items, ctx)
        };
        let raw = match templated {
            Ok(v) => v,
            // Ansible's TaskExecutor keeps an undefined loop for later and
            // evaluates `when` first: a task whose condition is false is
            // skipped, whatever its loop names (awx-operator's "Remove
            // tempfiles" loops over files of a block that did not run).
            Err(err) if err.is_undefined() => {
                // `None`: run once without a loop, where `when` skips it.
                // Otherwise TaskExecutor raises the kept error, whose text
                // alone is the task's message.
                return match self.check_when(ctx, inherited, task) {
                    Ok(Some(_)) => Ok(None),
                    _ => {
                        let message = err.message().to_owned();
                        Err(Flow::Failed(self.failure(
                            task,
                            message.clone(),
                            super::outcome::fail_result(&message),
                        )))
                    }
                };
            }
            Err(err) => {
                return Err(match err.python_exception() {
                    Some((class, text)) => self.loop_raised(task, class, &text),
                    None => self.template_failure(task, "loop", &err),
                });
            }
        };
        let action = match &task.action {
            Action::Module { module, .. } => module.name(),
            _ => "",
        };
        let items = loop_list(&looping.kind, raw, ctx, lenient, action);
        // Items of a with_* loop come from a lookup, which 2.18 wraps as
        // unsafe (TaskExecutor._get_loop_items); 2.19 keeps the trust of the
        // values a lookup hands back as they were given and trusts nothing
        // it made. `loop` items are as templating left them (2.19 trusts a
        // template's result only when it looked the value up).
        let items = match &looping.kind {
            LoopKind::List => items,
            LoopKind::Items | LoopKind::Dict if self.semantics() == Semantics::Ansible219 => items,
            LoopKind::Lookup(name)
                if self.semantics() == Semantics::Ansible219
                    && PASSING_LOOKUPS.contains(&name.as_str()) =>
            {
                items
            }
            _ => items.map(|items| items.iter().map(enka_template::mark_unsafe).collect()),
        };
        match items {
            Ok(items) if items.len() > self.options.max_loop_items => {
                let message = format!(
                    "loop has {} items, over the limit of {}",
                    items.len(),
                    self.options.max_loop_items
                );
                Err(Flow::Failed(self.failure(
                    task,
                    message.clone(),
                    fail_result(&message),
                )))
            }
            Ok(items) => Ok(Some(items)),
            Err(message) => Err(Flow::Failed(self.failure(
                task,
                message.clone(),
                fail_result(&message),
            ))),
        }
    }

    /// The loop variable's name: `loop_control.loop_var`, rendered when it
    /// is a template.
    pub(super) fn loop_var(&self, task: &Task, ctx: &Context) -> Result<Arc<str>, Flow> {
        let Some(template) = &task.loop_control.loop_var_template else {
            return Ok(task.loop_control.loop_var.clone());
        };
        match self.templar.template_value(template, ctx) {
            Ok(name) => Ok(Arc::from(enka_template::pyrepr::to_text(&name).as_str())),
            Err(err) => Err(self.template_failure(task, "loop_var", &err)),
        }
    }

    /// A module task's loop: each item run in turn with its loop variables,
    /// its result named and labelled as TaskExecutor._run_loop does, until
    /// the items end, `break_when` holds, or an item cannot even be
    /// templated (then the task fails as a whole); with the `no_log` its
    /// first item settled.
    pub(super) async fn run_loop(
        &mut self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
        scope: Scope,
        items: Vec<Value>,
        modes: TaskModes,
    ) -> Result<(TaskResult, Option<bool>), Flow> {
        let Action::Module { module, args } = &task.action else {
            return Err(Flow::Continue);
        };
        let no_log = modes.no_log;
        let loop_var = self
            .loop_var_in_scope(task, ctx)
            .map_err(|flow| censor(flow, no_log))?;
        let mut results = Vec::with_capacity(items.len());
        let mut scope = scope;
        // TaskExecutor.run up to 2.18: an item whose condition or
        // arguments cannot be templated ends the loop, and the task fails
        // as a whole with that error: no `results`, and none of the facts
        // the items before it set.
        let before = self.fact_state();
        let mut aborted = None;
        let mut first_no_log = None;
        for (index, item) in items.iter().enumerate() {
            let mut item_scope = scope.clone();
            set_loop_vars(&mut item_scope, task, &loop_var, index, &items);
            let item_scope_loop =
                enka_template::VarSource::get(&item_scope, "ansible_loop").map(|v| v.value);
            let break_scope =
                (!task.loop_control.break_when.is_empty()).then(|| item_scope.clone());
            let unreachable_scope = item_scope.clone();
            let label_scope = task.loop_control.label.as_ref().map(|_| item_scope.clone());
            let item_modes = self.item_modes(frame, task, &item_scope, modes);
            let item_no_log = item_modes.no_log;
            first_no_log.get_or_insert(item_no_log);
            let outcome = self
                .run_item(frame, task, module, args, item_scope, item_modes)
                .await;
            let mut result = self.item_in_line(item_outcome(outcome, item_no_log)?);
            if let Some(over) = self.loop_past_budget(&result) {
                result = over;
            }
            if result.fails_task {
                (self.facts, self.host_facts, self.included) = before.clone();
                aborted = Some(TaskResult {
                    shown_before: results.iter().map(TaskResult::to_value).collect(),
                    ..result
                });
                break;
            }
            if result.flag("unreachable") {
                self.judge_unreachable(frame, task, &mut result, &unreachable_scope);
            }
            self.see_item_result(&mut scope, task, &result);
            self.name_item_result(
                frame,
                task,
                &mut result,
                Item {
                    name: &loop_var,
                    value: item,
                    index,
                    ansible_loop: item_scope_loop,
                },
                label_scope.map(|mut label_scope| {
                    label_scope.facts = scope.facts.clone();
                    label_scope
                }),
            );
            if item_no_log {
                result.set("_ansible_no_log", Value::from(true));
            } else if result.is_failed() {
                log_failed_item(task, item, &result);
            }
            let stop = match break_scope {
                Some(break_scope) => self.breaks_loop(frame, task, &result, break_scope)?,
                None => false,
            };
            results.push(result);
            if stop {
                break;
            }
            if let Some(pause) = task.loop_control.pause.as_ref().and_then(seconds) {
                self.sleep(pause).await;
            }
        }
        let result = self.loop_result(results, aborted);
        self.keep_facts_if_ok(&result, before);
        Ok((result, first_no_log))
    }

    /// The loop's result from its items' (or the error that stopped it),
    /// as the run's line shapes it.
    fn loop_result(&self, mut results: Vec<TaskResult>, aborted: Option<TaskResult>) -> TaskResult {
        let notices = match self.semantics() {
            Semantics::Ansible219 => {
                hoist_notices(&mut results, !self.templar.options().release_at_least(21))
            }
            Semantics::Ansible218 => Vec::new(),
        };
        let mut result = self.loop_in_line(aborted.unwrap_or_else(|| TaskResult::combine(results)));
        for (key, values) in notices {
            result.set(key, Value::from(values));
        }
        result
    }

    /// An item's result as the run's line shapes it: from 2.19 an item
    /// whose arguments or condition fail is one failed item, and the loop
    /// goes on.
    fn item_in_line(&self, result: TaskResult) -> TaskResult {
        let mut result = self.in_line(result);
        if self.semantics() == Semantics::Ansible219 {
            result.fails_task = false;
        }
        result
    }

    /// A loop's result as the run's release words it: 2.21 says `skipped`
    /// only when every item was, and `failed` always.
    fn loop_in_line(&self, mut result: TaskResult) -> TaskResult {
        if self.templar.options().release_at_least(21) {
            if !result.is_skipped() {
                result.fields.retain(|(key, _)| key != "skipped");
            }
            if result.get("failed").is_none() {
                result.set("failed", minijinja::Value::from(false));
            }
        }
        result
    }

    /// A loop that failed leaves none of its items' facts (the strategy
    /// takes facts from an ok result only, ignore_errors or not).
    fn keep_facts_if_ok(
        &mut self,
        result: &TaskResult,
        before: (crate::Facts, crate::Facts, crate::Facts),
    ) {
        if result.is_failed() {
            (self.facts, self.host_facts, self.included) = before;
        }
    }

    /// The task's modes for one item: `no_log` judged again with the item
    /// (an error in it hides the item too).
    fn item_modes(
        &self,
        frame: &Frame,
        task: &Task,
        item_scope: &Scope,
        modes: TaskModes,
    ) -> TaskModes {
        let item_ctx = self.context(frame, item_scope, task);
        TaskModes {
            no_log: modes.no_log && self.no_log(frame, task, &item_ctx).unwrap_or(true),
            ..modes
        }
    }

    /// Names an item's result as TaskExecutor's: under the loop variable,
    /// with `ansible_loop_var`, the index and `ansible_loop` when asked;
    /// `loop_control.label`, templated with the item and its result under
    /// `register` (`label_scope`), is what the callback shows for it
    /// (`_ansible_item_label`), and a label that cannot be templated fails
    /// the item (TaskExecutor._run_loop).
    fn name_item_result(
        &self,
        frame: &Frame,
        task: &Task,
        result: &mut TaskResult,
        item: Item<'_>,
        label_scope: Option<Scope>,
    ) {
        result.set(item.name, item.value.clone());
        result.set("ansible_loop_var", Value::from(item.name));
        if let Some(index_var) = &task.loop_control.index_var {
            result.set(index_var, Value::from(item.index));
            result.set("ansible_index_var", Value::from(&**index_var));
        }
        if task.loop_control.extended {
            result.set("ansible_loop", item.ansible_loop.unwrap_or_default());
        }
        let (Some(label), Some(label_scope)) = (&task.loop_control.label, label_scope) else {
            return;
        };
        let label_ctx = self.context(frame, &label_scope, task);
        match self.templar.template_value(label, &label_ctx) {
            Ok(shown) => result.set("_ansible_item_label", shown),
            Err(err) => {
                result.set("failed", Value::from(true));
                result.set(
                    "msg",
                    Value::from(format!(
                        "Failed to template loop_control.label: {}",
                        err.message()
                    )),
                );
            }
        }
    }

    /// Whether `break_when` holds after an item: it sees the item's
    /// variables and its result under `register`, as TaskExecutor._run_loop.
    fn breaks_loop(
        &self,
        frame: &Frame,
        task: &Task,
        result: &TaskResult,
        mut break_scope: Scope,
    ) -> Result<bool, Flow> {
        break_scope.facts = self.facts.clone();
        if let Some(name) = &task.register {
            Arc::make_mut(&mut break_scope.facts)
                .insert(name.clone(), self.registered(task, result));
        }
        let break_ctx = self.context(frame, &break_scope, task);
        all_true(&self.templar, &task.loop_control.break_when, &break_ctx)
            .map_err(|err| self.conditional_failure(task, &err))
    }

    /// Whether an unreachable item is forgiven: its `ignore_unreachable`,
    /// judged with the item's variables. One that cannot be templated does
    /// not forgive: the host leaves the play.
    fn judge_unreachable(
        &self,
        frame: &Frame,
        task: &Task,
        result: &mut TaskResult,
        scope: &Scope,
    ) {
        let item_ctx = self.context(frame, scope, task);
        result.ignore_unreachable = Some(
            self.flag(
                &item_ctx,
                task.settings.get(Setting::IgnoreUnreachable),
                frame.inherited.setting(Setting::IgnoreUnreachable),
            )
            .unwrap_or(false),
        );
    }

    /// Later items see what earlier ones set (facts, and the item's result
    /// under `register`), as TaskExecutor updates the task's variables
    /// after each item.
    fn see_item_result(&self, scope: &mut Scope, task: &Task, result: &TaskResult) {
        scope.facts = self.facts.clone();
        scope.host_facts = self.host_facts.clone();
        scope.included = self.included.clone();
        if let Some(name) = &task.register {
            Arc::make_mut(&mut scope.facts).insert(name.clone(), self.registered(task, result));
        }
    }
}

/// The loop variables of item `index` of `items`: `loop_var`,
/// `ansible_loop_var`, `index_var` and, with `extended`, `ansible_loop`
/// as TaskExecutor._run_loop sets them.
pub(super) fn set_loop_vars(
    scope: &mut Scope,
    task: &Task,
    loop_var: &str,
    index: usize,
    items: &[Value],
) {
    let item = items.get(index).cloned().unwrap_or_default();
    scope.set_magic(loop_var, item);
    scope.set_magic("ansible_loop_var", Value::from(loop_var));
    if let Some(index_var) = &task.loop_control.index_var {
        scope.set_magic(index_var, Value::from(index));
        scope.set_magic("ansible_index_var", Value::from(&**index_var));
    }
    if task.loop_control.extended {
        let mut ansible_loop = ansible_loop(items, index);
        if !task.loop_control.extended_allitems {
            ansible_loop = Value::from_pairs(
                ansible_loop
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .filter(|k| k.as_str() != Some("allitems"))
                    .map(|k| {
                        let v = ansible_loop.get_item(&k).unwrap_or_default();
                        (k, v)
                    })
                    .collect::<Vec<_>>(),
            );
        }
        scope.set_magic("ansible_loop", ansible_loop);
    }
}

/// `ansible_loop` of item `index` (`loop_control.extended`).
pub(super) fn ansible_loop(items: &[Value], index: usize) -> Value {
    let length = items.len();
    let mut pairs = vec![
        (Value::from("allitems"), Value::from(items.to_vec())),
        (Value::from("index"), Value::from(index + 1)),
        (Value::from("index0"), Value::from(index)),
        (Value::from("first"), Value::from(index == 0)),
        (Value::from("last"), Value::from(index + 1 == length)),
        (Value::from("length"), Value::from(length)),
        (Value::from("revindex"), Value::from(length - index)),
        (Value::from("revindex0"), Value::from(length - index - 1)),
    ];
    if index + 1 < length {
        pairs.push((Value::from("nextitem"), items[index + 1].clone()));
    }
    if index > 0 {
        pairs.push((Value::from("previtem"), items[index - 1].clone()));
    }
    Value::from_pairs(pairs)
}

/// The items a loop's templated value gives: `loop`'s list, `with_items`'
/// flattened one, `with_dict`'s key/value pairs, or a lookup's answer.
fn loop_list(
    kind: &LoopKind,
    raw: Value,
    ctx: &Context,
    lenient: bool,
    action: &str,
) -> Result<Vec<Value>, String> {
    match kind {
        LoopKind::List => match raw.kind() {
            ValueKind::Seq => Ok(raw.try_iter().map(Iterator::collect).unwrap_or_default()),
            _ => Err(format!(
                "Invalid data passed to 'loop', it requires a list, got this instead: {}. Hint: If you passed a list/dict of just one element, try adding wantlist=True to your lookup invocation or use q/query instead of lookup.",
                enka_template::pyrepr::to_text(&raw)
            )),
        },
        LoopKind::Items => Ok(match raw.kind() {
            ValueKind::Seq => raw
                .try_iter()
                .map(|iter| {
                    iter.flat_map(|v| match v.kind() {
                        ValueKind::Seq => v
                            .try_iter()
                            .map(Iterator::collect::<Vec<_>>)
                            .unwrap_or_default(),
                        _ => vec![v],
                    })
                    .collect()
                })
                .unwrap_or_default(),
            ValueKind::None => Vec::new(),
            _ => vec![raw],
        }),
        LoopKind::Dict => match raw.kind() {
            ValueKind::Map => Ok(dict_items(&raw)),
            // 2.19's dict lookup takes a list of mappings, one by one.
            ValueKind::Seq if ctx.templar().options().semantics == Semantics::Ansible219 => {
                let mut items = Vec::new();
                for term in raw.try_iter().into_iter().flatten() {
                    if term.kind() != ValueKind::Map {
                        return Err(format!(
                            "The lookup plugin 'dict' failed: the 'dict' lookup plugin expects a dictionary, got '{}' of type <class '{}'>)",
                            enka_template::pyrepr::to_text(&term),
                            enka_template::pyrepr::type_name(&term)
                        ));
                    }
                    items.extend(dict_items(&term));
                }
                Ok(items)
            }
            _ => Err(format!(
                "with_dict expects a dict, got {}",
                enka_template::pyrepr::type_name(&raw)
            )),
        },
        // The list lookup takes its terms as they are: a dict is not a
        // list of terms (LookupModule.run of `list`).
        // Ansible up to 2.18 hands these lookups a mapping as it is, and
        // they refuse it; 2.19 makes any terms that are no list a list of
        // one (TaskExecutor._get_loop_items).
        LoopKind::Lookup(name)
            if matches!(name.as_str(), "list" | "indexed_items")
                && raw.kind() == ValueKind::Map
                && ctx.templar().options().semantics == Semantics::Ansible218 =>
        {
            Err(format!("with_{name} expects a list"))
        }
        LoopKind::Lookup(name) => {
            let mut terms: Vec<Value> = match raw.kind() {
                ValueKind::Seq => raw.try_iter().map(Iterator::collect).unwrap_or_default(),
                _ => vec![raw.clone()],
            };
            if lenient {
                terms.retain(|t| !t.as_str().is_some_and(enka_template::is_possibly_template));
            }
            enka_template::query_as_with(ctx, name, &terms, action).map_err(|e| e.ansible_message())
        }
    }
}

/// A mapping's `{key, value}` items, as `with_dict` gives them.
fn dict_items(map: &Value) -> Vec<Value> {
    map.try_iter()
        .map(|keys| {
            keys.map(|k| {
                let v = map.get_item(&k).unwrap_or_default();
                Value::from_pairs([(Value::from("key"), k), (Value::from("value"), v)])
            })
            .collect()
        })
        .unwrap_or_default()
}

/// A failed item in the log: the task's own failure says only "One or more
/// items failed", as Ansible's does; each item's reason is in the log, as
/// Ansible prints it.
fn log_failed_item(task: &Task, item: &Value, result: &TaskResult) {
    tracing::warn!(
        task = %task.display_name(),
        location = %task.location,
        item = %enka_template::pyrepr::to_text(item),
        "item failed: {}",
        result.message()
    );
}

/// An item's outcome as the loop takes it: an error of the item (its
/// condition or arguments) is a failed result that ends the loop.
fn item_outcome(outcome: Result<TaskResult, Flow>, no_log: bool) -> Result<TaskResult, Flow> {
    match outcome {
        Ok(result) => Ok(result),
        Err(flow) => as_failed_result(censor(flow, no_log)).map(|result| TaskResult {
            fails_task: true,
            ..result
        }),
    }
}

/// Lookups whose items are the values they were given, rearranged: 2.19
/// keeps those values' trust.
const PASSING_LOOKUPS: &[&str] = &[
    "cartesian",
    "flattened",
    "indexed_items",
    "nested",
    "random_choice",
    "subelements",
    "together",
];

impl Runner {
    /// A loop whose terms raised a Python exception while templated: 2.18's
    /// TaskExecutor reports it as any unexpected exception, 2.19's templar
    /// as a rendering error.
    fn loop_raised(&self, task: &Task, class: &str, text: &str) -> Flow {
        let message = match self.semantics() {
            Semantics::Ansible218 => format!("Unexpected failure during module execution: {text}"),
            Semantics::Ansible219 if class == "ZeroDivisionError" => {
                format!("Error rendering template: {text}")
            }
            Semantics::Ansible219 => format!("{class}: {text}"),
        };
        Flow::Failed(self.failure(task, message.clone(), super::outcome::fail_result(&message)))
    }
}

/// From 2.19 the items' `warnings` and `deprecations` are the loop's too, in
/// order, for its own result: taken out of each item (`take`, 2.19), or
/// left there as well (2.21).
fn hoist_notices(results: &mut [TaskResult], take: bool) -> Vec<(&'static str, Vec<Value>)> {
    let mut notices = Vec::new();
    for key in ["warnings", "deprecations"] {
        let mut all = Vec::new();
        for result in results.iter_mut() {
            let Some(at) = result.fields.iter().position(|(k, _)| k == key) else {
                continue;
            };
            let values = match take {
                true => result.fields.remove(at).1,
                false => result.fields[at].1.clone(),
            };
            all.extend(values.try_iter().into_iter().flatten());
        }
        if !all.is_empty() {
            notices.push((key, all));
        }
    }
    notices
}

/// `value` without the undefined values inside it (list items, mapping
/// entries), as a lookup that skips 2.19's markers sees it.
fn without_undefined(value: &Value) -> Value {
    match value.kind() {
        ValueKind::Seq => Value::from(
            value
                .try_iter()
                .into_iter()
                .flatten()
                .filter(|item| !item.is_undefined())
                .map(|item| without_undefined(&item))
                .collect::<Vec<_>>(),
        ),
        ValueKind::Map => Value::from_pairs(
            enka_template::convert::entries(value)
                .into_iter()
                .filter(|(_, item)| !item.is_undefined())
                .map(|(key, item)| (key, without_undefined(&item))),
        ),
        _ => value.clone(),
    }
}
