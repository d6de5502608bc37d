//! The module call itself: check mode, arguments templated, the deadline, an unreachable host.

use enka_project::role::Setting;
use std::sync::Arc;
use std::time::{Duration, Instant};

use enka_modules as modules;
use enka_modules::{ModuleContext, ModuleRef};
use enka_project::role::{Action, Task};
use enka_template::time::seconds;
use enka_template::{Context, Var};
use minijinja::Value;
use minijinja::value::ValueKind;

use super::outcome::{exception_result, undefined_in_arguments};
use super::play::is_localhost;
use super::retries::Attempt;
use super::task_result::TaskResult;
use super::variables::{remove_omit, variable_params};
use super::{Flow, Frame, Runner};
use enka_template::Semantics;

/// How long a module may run.
struct TimeLimits {
    /// The task's own `timeout`, which a timed-out result names.
    task_timeout: Option<Duration>,
    /// When it must stop: the run's deadline, `timeout`'s or `async`'s,
    /// the earliest.
    deadline: Option<Instant>,
    /// The task's `async` and `poll`.
    asynchronous: Option<modules::Asynchronous>,
}

impl Runner {
    /// Templates the arguments and calls the module.
    pub(super) async fn execute(&mut self, at: &Attempt<'_>) -> TaskResult {
        let Attempt {
            frame,
            task,
            module,
            args,
            ctx,
            modes,
            facts_to,
            ..
        } = *at;
        let no_log = modes.no_log;
        let templated = match self.templated_args(frame, task, module, args, ctx) {
            Ok(templated) => templated,
            Err(refused) => return refused,
        };
        let environment = match self.environment(frame, task, ctx) {
            Ok(environment) => environment,
            Err(message) => return TaskResult::task_error(message),
        };
        let TimeLimits {
            task_timeout,
            deadline,
            asynchronous,
        } = match self.time_limits(frame, task, module, ctx) {
            Ok(limits) => limits,
            Err(message) => return TaskResult::task_error(message),
        };
        let not_a_module = Value::UNDEFINED;
        let mut module_ctx = ModuleContext {
            task: modules::TaskView {
                name: task.name.as_deref(),
                file: &task.location.file,
                written_args: match &task.action {
                    Action::Module { args, .. } => args,
                    _ => &not_a_module,
                },
            },
            ctx,
            templar: &self.templar,
            cluster: self.cluster.as_ref(),
            verbosity: self.options.verbosity,
            deadline,
            task_timeout,
            no_log,
            api_time: Duration::ZERO,
            role_path: frame.role.as_ref().map(|r| r.path.as_path()),
            base_dir: &self.project.base_dir,
            owner: self.options.owner.as_deref(),
            dependents: Vec::new(),
            ansible: self.project.ansible.as_ref(),
            environment,
            // A dry run's cluster writes nothing; Ansible's own modules
            // are kept from writing by its check mode.
            check_mode: modes.check_mode || (self.options.dry_run && module.is_bridged()),
            diff: modes.diff,
            asynchronous,
        };
        let started = Instant::now();
        let outcome = modules::run(module, &templated, &mut module_ctx).await;
        self.module_timings
            .push((module.timing_name(), started.elapsed()));
        for dependent in module_ctx.dependents.drain(..) {
            enka_kube::Dependent::merge_into(&mut self.dependents, dependent);
        }
        self.api_time += module_ctx.api_time;
        match outcome {
            Ok(mut output) => {
                self.show_async_events(task, &mut output);
                self.take_output(module, output, facts_to)
            }
            // A collection's failed result is the task's result as it is.
            Err(modules::ModuleError::Result(output)) => {
                self.take_output(module, output.with("failed", true), facts_to)
            }
            Err(err) => self.error_result(task, err),
        }
    }

    /// The result of a module that failed other than by returning a failed
    /// result: an error its action raised, worded as the run's line does.
    fn error_result(&self, task: &Task, err: modules::ModuleError) -> TaskResult {
        match err {
            // The action raised Ansible's conditional error out of
            // `_execute`: its text is the whole result, judged by nothing.
            modules::ModuleError::Conditional {
                argument,
                index,
                error,
            } => {
                let at = task
                    .arg_positions
                    .iter()
                    .find(|(name, _)| &**name == argument)
                    .and_then(|(_, positions)| positions.get(index).copied().flatten());
                TaskResult::task_error(self.condition_failure_text(task, at, &error, None))
            }
            modules::ModuleError::Unexpected(text) => match self.semantics() {
                enka_template::Semantics::Ansible218 => {
                    let mut result = TaskResult::task_error(format!(
                        "Unexpected failure during module execution: {text}"
                    ));
                    result.fields.push(("stdout".into(), Value::from("")));
                    result
                }
                enka_template::Semantics::Ansible219 => {
                    TaskResult::task_error(format!("Task failed: {text}"))
                }
            },
            modules::ModuleError::Raised(message) => {
                TaskResult::task_error(match self.semantics() {
                    enka_template::Semantics::Ansible218 => message,
                    enka_template::Semantics::Ansible219 => format!("Task failed: {message}"),
                })
            }
            err => TaskResult::failed(err.to_string()),
        }
    }

    /// Why the host `task` acts on cannot be reached, if it cannot: enka
    /// runs every action on its own machine, so only a `local` connection
    /// reaches a host. The host is `delegate_to`'s, else the task's own;
    /// its connection is its `ansible_connection`, else the task's, block's
    /// or play's `connection`, else `local` for localhost and Ansible's
    /// default, `ssh`, for any other host.
    pub(super) fn unreachable_reason(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
        delegate: Option<&str>,
    ) -> Result<Option<String>, Flow> {
        let delegate = delegate.map(str::to_owned);
        let target = delegate.clone().unwrap_or_else(|| self.host.to_string());
        let host_connection = match &delegate {
            Some(name) => ctx
                .hostvars()
                .get_item(&Value::from(name.as_str()))
                .ok()
                .filter(|vars| !vars.is_undefined())
                .and_then(|vars| vars.get_attr("ansible_connection").ok()),
            None => ctx.resolve("ansible_connection"),
        }
        .filter(|v| !v.is_undefined() && !v.is_none());
        let keyword = task
            .settings
            .get(Setting::Connection)
            .or_else(|| frame.inherited.setting(Setting::Connection).last());
        let connection = match (host_connection, keyword) {
            (Some(v), _) => Some(v),
            (None, Some(keyword)) => match self.templar.template_value(keyword, ctx) {
                Ok(v) => Some(v),
                Err(err) => return Err(self.template_failure(task, "connection", &err)),
            },
            (None, None) => self
                .options
                .connection
                .as_ref()
                .map(|c| Value::from(c.as_str())),
        };
        let connection = match connection {
            Some(v) => enka_template::pyrepr::to_text(&v),
            None if is_localhost(&target) => return Ok(None),
            None => "ssh".to_owned(),
        };
        let local = matches!(
            connection.as_str(),
            "local" | "ansible.builtin.local" | "ansible.legacy.local"
        );
        Ok((!local).then(|| {
            format!(
                "Failed to connect to the host via {connection}: enka runs every task on its own machine, and host {target} asks for a {connection} connection"
            )
        }))
    }

    /// The host the task's `delegate_to` names (templated for this host
    /// and item), if it names one.
    pub(super) fn delegate(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
    ) -> Result<Option<String>, Flow> {
        match frame.inherited.for_task(task, Setting::DelegateTo) {
            Some(value) => match self.templar.template_value(value, ctx) {
                Ok(v) if v.is_none() || v.is_undefined() => Ok(None),
                Ok(v) => Ok(Some(enka_template::pyrepr::to_text(&v))),
                // Templated with the host's variables before the task is
                // validated: Ansible says the bare error.
                Err(err) => {
                    let message = err.message().to_owned();
                    Err(Flow::Failed(self.failure(
                        task,
                        message.clone(),
                        super::outcome::fail_result(&message),
                    )))
                }
            },
            None => Ok(None),
        }
    }

    /// What a result delegated to another host carries for the callbacks
    /// (`_ansible_delegated_vars`): the host, and its `ansible_host`.
    pub(super) fn delegated_vars(&self, delegate: &str, ctx: &Context) -> Value {
        let address = ctx
            .hostvars()
            .get_item(&Value::from(delegate))
            .ok()
            .and_then(|vars| vars.get_attr("ansible_host").ok())
            .filter(|v| !v.is_undefined() && !v.is_none())
            .unwrap_or_else(|| Value::from(delegate));
        Value::from_pairs(vec![
            (Value::from("ansible_delegated_host"), Value::from(delegate)),
            (Value::from("ansible_host"), address),
        ])
    }

    /// 2.19's words for arguments that fail to template: the action, and
    /// the argument whose value failed (found by templating each alone,
    /// only on this path of failure).
    fn finalization_failure(
        &self,
        module: &ModuleRef,
        args: &Value,
        cause: &str,
        ctx: &Context,
    ) -> String {
        let failing = args.try_iter().into_iter().flatten().find(|key| {
            let value = args.get_item(key).unwrap_or_default();
            self.templar.template_value(&value, ctx).is_err()
        });
        let action = module.resolved_name();
        match failing {
            Some(key) => format!(
                "Task failed: Finalization of task args for '{action}' failed: Error while resolving value for '{}': {}",
                enka_template::pyrepr::to_text(&key),
                cause
            ),
            None => format!(
                "Task failed: Finalization of task args for '{action}' failed: {}",
                cause
            ),
        }
    }

    /// The arguments to template, and those 2.19 leaves as written: an
    /// action's expressions (assert's `that`) are finalized by the action,
    /// which resolves a string that is one whole template and evaluates
    /// any other string, or a list's strings, as written.
    fn expressions_as_written(
        &self,
        module: &ModuleRef,
        args: &Value,
    ) -> (Value, Vec<(Value, Value)>) {
        let ModuleRef::Native(spec) = module else {
            return (args.clone(), Vec::new());
        };
        if self.semantics() == Semantics::Ansible218 || spec.expressions.is_empty() {
            return (args.clone(), Vec::new());
        }
        let written = |key: &Value, value: &Value| {
            key.as_str().is_some_and(|k| spec.expressions.contains(&k))
                && !value
                    .as_str()
                    .is_some_and(|text| enka_template::is_all_template(text.trim()))
        };
        let (kept, rest): (Vec<_>, Vec<_>) = enka_template::convert::entries(args)
            .into_iter()
            .partition(|(key, value)| written(key, value));
        if kept.is_empty() {
            return (args.clone(), kept);
        }
        (Value::from_pairs(rest), kept)
    }

    /// Templated arguments with the templated free-form text merged, then
    /// `omit` dropped (an omitted argument masks what the layers below
    /// give it); 2.18 refuses an omitted whole like any text, 2.19 takes it
    /// for no arguments and finalizes them in key order.
    fn finalized_args(&self, args: Value, module: &ModuleRef) -> Result<Value, String> {
        let omit = self.templar.omit();
        let merged =
            variable_params(args, self.semantics(), module, omit).map(|v| remove_omit(&v, omit))?;
        Ok(match self.semantics() {
            Semantics::Ansible218 => merged,
            Semantics::Ansible219 => sorted_by_key(&merged),
        })
    }

    /// The task's arguments with `module_defaults`, templated, `omit`
    /// dropped and free-form `args` merged; a failed result when they
    /// cannot be, or are not a mapping.
    fn templated_args(
        &self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        ctx: &Context,
    ) -> Result<Value, TaskResult> {
        let with_defaults;
        let args = match self.with_module_defaults(frame, task, module, args, ctx) {
            Ok(Some(merged)) => {
                with_defaults = merged;
                &with_defaults
            }
            Ok(None) => args,
            Err(message) => return Err(TaskResult::task_error(message)),
        };
        let (args, as_written) = self.expressions_as_written(module, args);
        let templated = match self
            .templar
            .template_value(&args, ctx)
            .map(|v| with_entries(&v, &as_written))
        {
            Ok(v) => match self.finalized_args(v, module) {
                Ok(v) => v,
                Err(message) => return Err(TaskResult::task_error(message)),
            },
            Err(err) => {
                let python = err.python_exception();
                let message = match (self.semantics(), python) {
                    (Semantics::Ansible218, Some((class, text))) => {
                        return Err(exception_result(class, &text, err.line()));
                    }
                    // 2.19 catches what Jinja raises while rendering.
                    (Semantics::Ansible219, Some(("ZeroDivisionError", text))) => {
                        let cause = format!("Error rendering template: {text}");
                        self.finalization_failure(module, &args, &cause, ctx)
                    }
                    (Semantics::Ansible219, _) => {
                        let cause = err.message_in(Semantics::Ansible219);
                        self.finalization_failure(module, &args, &cause, ctx)
                    }
                    (Semantics::Ansible218, None) if err.is_undefined() => {
                        undefined_in_arguments(task, &err)
                    }
                    (Semantics::Ansible218, None) => err.ansible_message(),
                };
                return Err(TaskResult::task_error(message));
            }
        };
        if templated.kind() != ValueKind::Map {
            return Err(TaskResult::task_error(format!(
                "the arguments of {} must be a mapping, got {}",
                module.name(),
                enka_template::pyrepr::type_name(&templated)
            )));
        }
        Ok(templated)
    }

    /// The task's own `timeout`, the deadline the module runs to (the
    /// run's, `timeout`'s or `async`'s, the earliest) and its `async`.
    fn time_limits(
        &self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        ctx: &Context,
    ) -> Result<TimeLimits, String> {
        let task_timeout = match frame.inherited.for_task(task, Setting::Timeout) {
            Some(raw) => match self.templar.template_value(raw, ctx) {
                Ok(v) => {
                    check_timeout_range(&v, self.semantics())?;
                    seconds(&v).filter(|t| !t.is_zero())
                }
                Err(err) => return Err(format!("timeout: {err}")),
            },
            None => None,
        };
        let deadline = match task_timeout {
            Some(t) => {
                let own = Instant::now() + t;
                Some(self.options.deadline.map_or(own, |d| d.min(own)))
            }
            None => self.options.deadline,
        };
        let asynchronous = self.asynchronous(task, ctx)?;
        // A native action has no background: it runs to completion, within
        // the time `async` gives it when the task waits for it.
        let deadline = match asynchronous {
            Some(a) if a.poll > 0 && !module.is_bridged() => {
                let own = Instant::now() + Duration::from_secs(a.seconds);
                Some(deadline.map_or(own, |d| d.min(own)))
            }
            _ => deadline,
        };
        Ok(TimeLimits {
            task_timeout,
            deadline,
            asynchronous,
        })
    }

    /// What waiting on the task's background job saw, to the observer.
    fn show_async_events(&self, task: &Task, output: &mut modules::Output) {
        if let Some(observer) = &self.options.observer {
            for event in output.async_events.drain(..) {
                observer.async_event(task, self.in_handlers, &self.host, &event);
            }
        }
    }

    /// A module's output taken into the run: facts (this host's, or with
    /// `delegate_facts` the host in `facts_to`), module facts, included
    /// variables and metrics kept, the rest its result.
    fn take_output(
        &mut self,
        module: &ModuleRef,
        mut output: modules::Output,
        facts_to: Option<&str>,
    ) -> TaskResult {
        self.warn_if_reserved(
            output
                .facts
                .iter()
                .chain(&output.included_vars)
                .map(|(name, _)| &**name),
        );
        if let Some(delegate) = facts_to {
            let delivered = crate::scope::Delivered {
                facts: std::mem::take(&mut output.facts)
                    .into_iter()
                    .map(|(k, v)| (k, Var::templated(v)))
                    .collect(),
                module_facts: std::mem::take(&mut output.plain_facts),
            };
            self.delivering.push((delegate.to_owned(), delivered));
        }
        if !output.facts.is_empty() {
            if let Err(message) = self.keep(output.facts.iter().map(|(k, v)| (k, v))) {
                return TaskResult::failed(message);
            }
            let facts = Arc::make_mut(&mut self.facts);
            for (k, v) in &output.facts {
                facts.insert(k.clone(), Var::templated(v.clone()));
            }
        }
        if !output.plain_facts.is_empty() {
            crate::scope::add_module_facts(&mut self.host_facts, &output.plain_facts);
            // What gather_facts tells the executor (smart
            // gathering then skips the next plays' gathering).
            if module.name().rsplit('.').next() == Some("gather_facts") {
                Arc::make_mut(&mut self.host_facts).insert(
                    Arc::from("_ansible_facts_gathered"),
                    Var::plain(Value::from(true)),
                );
            }
        }
        if !output.included_vars.is_empty() {
            let included = Arc::make_mut(&mut self.included);
            for (k, v) in &output.included_vars {
                included.insert(k.clone(), Var::templated(v.clone()));
            }
        }
        self.metrics.extend(output.metrics);
        TaskResult {
            fields: output.fields,
            control: output.control,
            ignore_unreachable: None,
            fails_task: false,
            shown_before: Vec::new(),
            raised: false,
        }
    }
}

/// A mapping with its keys in order: 2.19 finalizes a task's arguments
/// through a chain of layers whose keys it sorts (so `set_fact` sets its
/// variables in that order). Anything else as it is.
fn sorted_by_key(args: &Value) -> Value {
    if args.kind() != ValueKind::Map {
        return args.clone();
    }
    let mut pairs = enka_template::convert::entries(args);
    pairs.sort_by(|(a, _), (b, _)| a.cmp(b));
    Value::from_pairs(pairs)
}

/// `map` with `entries` added.
fn with_entries(map: &Value, entries: &[(Value, Value)]) -> Value {
    if entries.is_empty() {
        return map.clone();
    }
    let mut pairs = enka_template::convert::entries(map);
    pairs.extend(entries.iter().cloned());
    Value::from_pairs(pairs)
}

/// The most seconds 2.19's alarm takes (BSD's setitimer limit).
const MAX_TIMEOUT: i64 = 100_000_000;

/// 2.19 refuses a task `timeout` outside what an alarm can hold
/// (AnsibleTimeoutError.alarm_timeout); 2.18 took any.
fn check_timeout_range(value: &Value, semantics: Semantics) -> Result<(), String> {
    let Some(n) = value.as_i64() else {
        return Ok(());
    };
    if semantics == Semantics::Ansible219 && !(0..=MAX_TIMEOUT).contains(&n) {
        return Err(format!(
            "Task failed: Timeout {n} is invalid, it must be between 0 and {MAX_TIMEOUT}."
        ));
    }
    Ok(())
}
