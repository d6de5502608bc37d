//! Loops: `loop` and `with_*` items, `loop_control`, the loop variables.

use std::sync::Arc;

use enka_project::role::LoopKind;
use enka_project::role::Task;
use enka_template::Context;
use minijinja::Value;
use minijinja::value::ValueKind;

use super::Flow;
use super::Inherited;
use super::Runner;
use super::outcome::fail_result;
use crate::scope::Scope;

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
        let templated = if lenient {
            Ok(self.template_leniently(&looping.items, ctx))
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
                return match self.check_when(ctx, inherited, task) {
                    Ok(Some(_)) => Ok(None),
                    _ => Err(self.template_failure(task, "loop", &err)),
                };
            }
            Err(err) => {
                return Err(self.template_failure(task, "loop", &err));
            }
        };
        let items: Result<Vec<Value>, String> = match &looping.kind {
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
                ValueKind::Map => Ok(raw
                    .try_iter()
                    .map(|keys| {
                        keys.map(|k| {
                            let v = raw.get_item(&k).unwrap_or_default();
                            Value::from_pairs([(Value::from("key"), k), (Value::from("value"), v)])
                        })
                        .collect()
                    })
                    .unwrap_or_default()),
                _ => Err(format!(
                    "with_dict expects a dict, got {}",
                    enka_template::pyrepr::type_name(&raw)
                )),
            },
            // The list lookup takes its terms as they are: a dict is not a
            // list of terms (LookupModule.run of `list`).
            // Ansible hands these lookups a mapping as it is, and they
            // refuse it.
            LoopKind::Lookup(name)
                if matches!(name.as_str(), "list" | "indexed_items")
                    && raw.kind() == ValueKind::Map =>
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
                enka_template::query(ctx, name, &terms).map_err(|e| e.ansible_message())
            }
        };
        // Items of a with_* loop come from a lookup, which Ansible wraps as
        // unsafe (TaskExecutor._get_loop_items); `loop` items are templated
        // values.
        let items = match &looping.kind {
            LoopKind::List => items,
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
