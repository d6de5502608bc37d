//! A task that runs a module: once per host, or once for the batch (`run_once`), its loop, `async`.

use std::sync::Arc;

use enka_modules as modules;
use enka_project::role::Action;
use enka_project::role::Task;
use enka_template::Context;
use enka_template::Var;
use enka_template::time::seconds;
use minijinja::Value;

use super::Flow;
use super::Frame;
use super::KeywordError;
use super::Runner;
use super::blocks::as_failed_result;
use super::conditions::all_true;
use super::loops::set_loop_vars;
use super::no_log::censor;
use super::no_log::default_no_log;
use super::task_result::TaskResult;
use crate::LogEvents;

impl Runner {
    /// A module task, run on this host unless it runs once for the batch
    /// (`run_once`, or an action that bypasses the host loop): then the
    /// first host runs it and the others take what it set and its failure.
    pub(super) async fn run_module_task_in_batch(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
    ) -> Flow {
        let Some(lockstep) = self.lockstep.clone() else {
            return self.run_module_task(frame, task).await;
        };
        // add_host bypasses the host loop; the linear strategy runs
        // `meta: refresh_inventory` once for the batch.
        let bypasses = match &task.action {
            Action::Module { module, args } => {
                module.name().rsplit('.').next() == Some("add_host")
                    || (module.is_meta()
                        && args
                            .get_attr("_raw_params")
                            .is_ok_and(|a| a.as_str() == Some("refresh_inventory")))
            }
            _ => false,
        };
        let once = bypasses || {
            let scope = self.task_scope(frame, task);
            let ctx = self.context(frame, &scope, task);
            self.flag(&ctx, task.run_once.as_ref(), &frame.inherited.run_once)
                .unwrap_or(false)
        };
        if !once {
            return self.run_module_task(frame, task).await;
        }
        if lockstep.leads(self.host_index) {
            let before = self.facts.clone();
            let flow = self.run_module_task(frame, task).await;
            let vars: Vec<(Arc<str>, Var)> = self
                .facts
                .iter()
                .filter(|(name, var)| {
                    before
                        .get(*name)
                        .is_none_or(|old| old.value != var.value || old.is_unsafe != var.is_unsafe)
                })
                .map(|(name, var)| (name.clone(), var.clone()))
                .collect();
            let failure = match &flow {
                Flow::Failed(failure) => Some(failure.clone()),
                _ => None,
            };
            lockstep.share(position, crate::lockstep::Shared { vars, failure });
            return flow;
        }
        let Some(shared) = lockstep.shared(position).await else {
            return Flow::Continue;
        };
        let facts = Arc::make_mut(&mut self.facts);
        for (name, var) in shared.vars {
            facts.insert(name, var);
        }
        self.silent_task = true;
        match shared.failure {
            Some(failure) => Flow::Failed(failure),
            None => Flow::Continue,
        }
    }

    pub(super) async fn run_module_task(&mut self, frame: &Frame, task: &Task) -> Flow {
        let Action::Module { module, args } = &task.action else {
            return Flow::Continue;
        };
        let quiet = matches!(module.name(), "set_fact" | "debug");
        if self.options.log_events != LogEvents::Nothing && !quiet {
            tracing::info!(
                event_type = "playbook_on_task_start",
                task = %task.display_name(),
                "[playbook task start]"
            );
        }
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        // TaskExecutor post-validates these keywords as booleans: a value
        // that is none is a failed result of the task (ignore_errors and
        // register apply), as a template error in them is not.
        let no_log_set = task.no_log.is_some() || !frame.inherited.no_log.is_empty();
        let no_log = match self.keyword_bool(
            &ctx,
            task.no_log.as_ref(),
            &frame.inherited.no_log,
            "no_log",
        ) {
            Ok(b) if no_log_set => b,
            Ok(_) => default_no_log(),
            Err(KeywordError::Template(err)) => {
                return self.template_failure(task, "no_log", &err);
            }
            Err(KeywordError::NotBoolean(message)) => {
                return self.finish_task(frame, task, TaskResult::failed(message), false);
            }
        };
        // `check_mode` of the task, else of its blocks and play, else the
        // run's --check. `ansible_check_mode` stays --check's, as in
        // Ansible (only the module is told).
        self.check_mode = self.options.check_mode;
        self.diff = self.options.diff;
        for (keyword, own, inherited) in [
            ("check_mode", &task.check_mode, &frame.inherited.check_mode),
            ("diff", &task.diff, &frame.inherited.diff),
        ] {
            if own.is_none() && inherited.is_empty() {
                continue;
            }
            let value = match self.keyword_bool(&ctx, own.as_ref(), inherited, keyword) {
                Ok(b) => b,
                Err(KeywordError::Template(err)) => {
                    return self.template_failure(task, keyword, &err);
                }
                Err(KeywordError::NotBoolean(message)) => {
                    return self.finish_task(frame, task, TaskResult::failed(message), no_log);
                }
            };
            match keyword {
                "check_mode" => self.check_mode = value,
                _ => self.diff = value,
            }
        }
        // An error templating the loop, a condition or the arguments is a
        // failed result, as TaskExecutor.run returns it: `ignore_errors`
        // forgives it and `register` keeps it.
        let items = match task.looping {
            Some(_) => match self.loop_items(task, &ctx, &frame.inherited) {
                Ok(items) => items,
                Err(flow) => match as_failed_result(censor(flow, no_log)) {
                    Ok(result) => return self.finish_task(frame, task, result, no_log),
                    Err(flow) => return flow,
                },
            },
            None => None,
        };
        let result = match items {
            None => match self
                .run_item(frame, task, module, args, scope, no_log)
                .await
            {
                Ok(result) => result,
                Err(flow) => match as_failed_result(censor(flow, no_log)) {
                    Ok(result) => result,
                    Err(flow) => return flow,
                },
            },
            Some(items) => {
                let loop_var = match self.loop_var(task, &ctx) {
                    Ok(name) => name,
                    Err(flow) => return censor(flow, no_log),
                };
                let mut results = Vec::with_capacity(items.len());
                let mut scope = scope;
                // TaskExecutor.run: an item whose condition or arguments
                // cannot be templated ends the loop, and the task fails as
                // a whole with that error: no `results`, and none of the
                // facts the items before it set.
                let before = (
                    self.facts.clone(),
                    self.host_facts.clone(),
                    self.included.clone(),
                );
                let mut aborted = None;
                for (index, item) in items.iter().enumerate() {
                    let mut item_scope = scope.clone();
                    set_loop_vars(&mut item_scope, task, &loop_var, index, &items);
                    let item_scope_loop =
                        enka_template::VarSource::get(&item_scope, "ansible_loop").map(|v| v.value);
                    let break_scope =
                        (!task.loop_control.break_when.is_empty()).then(|| item_scope.clone());
                    let unreachable_scope = item_scope.clone();
                    let label_scope = task.loop_control.label.as_ref().map(|_| item_scope.clone());
                    let mut result = match self
                        .run_item(frame, task, module, args, item_scope, no_log)
                        .await
                    {
                        Ok(result) => result,
                        Err(flow) => match as_failed_result(censor(flow, no_log)) {
                            Ok(result) => TaskResult {
                                fails_task: true,
                                ..result
                            },
                            Err(flow) => return flow,
                        },
                    };
                    if result.fails_task {
                        (self.facts, self.host_facts, self.included) = before;
                        aborted = Some(result);
                        break;
                    }
                    if result.flag("unreachable") {
                        // An ignore_unreachable that cannot be templated
                        // does not forgive: the host leaves the play.
                        let item_ctx = self.context(frame, &unreachable_scope, task);
                        result.ignore_unreachable = Some(
                            self.flag(
                                &item_ctx,
                                task.ignore_unreachable.as_ref(),
                                &frame.inherited.ignore_unreachable,
                            )
                            .unwrap_or(false),
                        );
                    }
                    // Later items see what earlier ones set (facts, and the
                    // item's result under `register`), as TaskExecutor
                    // updates the task's variables after each item.
                    scope.facts = self.facts.clone();
                    scope.host_facts = self.host_facts.clone();
                    scope.included = self.included.clone();
                    if let Some(name) = &task.register {
                        Arc::make_mut(&mut scope.facts)
                            .insert(name.clone(), Var::unsafe_data(&result.registered()));
                    }
                    // The item's result names its item as TaskExecutor's:
                    // under the loop variable, with `ansible_loop_var`.
                    result.set(&loop_var, item.clone());
                    result.set("ansible_loop_var", Value::from(&*loop_var));
                    if let Some(index_var) = &task.loop_control.index_var {
                        result.set(index_var, Value::from(index));
                        result.set("ansible_index_var", Value::from(&**index_var));
                    }
                    if task.loop_control.extended {
                        let shown = item_scope_loop.clone().unwrap_or_default();
                        result.set("ansible_loop", shown);
                    }
                    // `loop_control.label`, templated with the item and its
                    // result under `register`, is what the callback shows for
                    // it (`_ansible_item_label`); a label that cannot be
                    // templated fails the item (TaskExecutor._run_loop).
                    if let (Some(label), Some(mut label_scope)) =
                        (&task.loop_control.label, label_scope)
                    {
                        label_scope.facts = scope.facts.clone();
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
                    if result.is_failed() && !no_log {
                        // The task's own failure says only "One or more items
                        // failed", as Ansible's does; each item's reason is
                        // in the log, as Ansible prints it.
                        tracing::warn!(
                            task = %task.display_name(),
                            location = %task.location,
                            item = %enka_template::pyrepr::to_text(item),
                            "item failed: {}",
                            result.message()
                        );
                    }
                    // break_when sees the item's variables and its result
                    // under `register`, as TaskExecutor._run_loop.
                    let stop = match break_scope {
                        Some(mut break_scope) => {
                            break_scope.facts = self.facts.clone();
                            if let Some(name) = &task.register {
                                Arc::make_mut(&mut break_scope.facts)
                                    .insert(name.clone(), Var::unsafe_data(&result.registered()));
                            }
                            let break_ctx = self.context(frame, &break_scope, task);
                            match all_true(&self.templar, &task.loop_control.break_when, &break_ctx)
                            {
                                Ok(stop) => stop,
                                Err(err) => return self.conditional_failure(task, &err),
                            }
                        }
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
                aborted.unwrap_or_else(|| TaskResult::combine(results))
            }
        };
        self.finish_task(frame, task, result, no_log)
    }

    /// Facts a module returned (`setup`, `gather_facts`, `*_facts`), as
    /// Ansible keeps them: the host's facts (below play vars), each a
    /// variable of its own (facts injected as vars), and under
    /// `ansible_facts` without the `ansible_` prefix.
    pub(super) fn add_module_facts(&mut self, returned: &[(Arc<str>, Value)]) {
        let namespace = self
            .host_facts
            .get("ansible_facts")
            .map(|var| var.value.clone())
            .unwrap_or_default();
        let mut merged: Vec<(Value, Value)> = namespace
            .try_iter()
            .into_iter()
            .flatten()
            .map(|k| {
                let v = namespace.get_item(&k).unwrap_or_default();
                (k, v)
            })
            .collect();
        let facts = Arc::make_mut(&mut self.host_facts);
        for (name, value) in returned {
            facts.insert(name.clone(), Var::unsafe_data(value));
            let short = match name.strip_prefix("ansible_") {
                Some(short) if &**name != "ansible_local" => short,
                _ => name,
            };
            merged.retain(|(k, _)| k.as_str() != Some(short));
            merged.push((Value::from(short), value.clone()));
        }
        facts.insert(
            Arc::from("ansible_facts"),
            Var::unsafe_data(&Value::from_pairs(merged)),
        );
    }

    /// A meta task whose condition was false: skipped, with the reason
    /// Ansible's strategy gives.
    pub(super) fn meta_skipped(&self, task: &Task, action: &str) -> TaskResult {
        let (msg, skip_reason) =
            enka_modules::meta::report(action, &self.host, task.role.as_deref(), false);
        let mut fields = vec![("msg".into(), Value::from(msg))];
        if let Some(reason) = skip_reason {
            fields.push(("skipped".into(), Value::from(true)));
            fields.push(("skip_reason".into(), Value::from(reason)));
        }
        TaskResult::of(fields)
    }

    /// The task's `async` and `poll`, templated; `None` without `async`
    /// (or with `async: 0`).
    pub(super) fn asynchronous(
        &self,
        task: &Task,
        ctx: &Context,
    ) -> Result<Option<modules::Asynchronous>, String> {
        let whole = |raw: &Option<Value>, what: &str| -> Result<Option<u64>, String> {
            let Some(raw) = raw else {
                return Ok(None);
            };
            let value = self
                .templar
                .template_value(raw, ctx)
                .map_err(|err| format!("{what}: {}", err.ansible_message()))?;
            enka_template::time::seconds(&value)
                .map(|d| Some(d.as_secs()))
                .ok_or_else(|| format!("{what} must be a whole number of seconds, got {value}"))
        };
        let Some(seconds) = whole(&task.asynchronous, "async")?.filter(|&s| s > 0) else {
            return Ok(None);
        };
        let poll = whole(&task.poll, "poll")?.unwrap_or(DEFAULT_POLL_SECONDS);
        Ok(Some(modules::Asynchronous { seconds, poll }))
    }
}

/// Ansible's DEFAULT_POLL_INTERVAL.
pub(super) const DEFAULT_POLL_SECONDS: u64 = 15;
