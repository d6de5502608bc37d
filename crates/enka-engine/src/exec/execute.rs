//! The module call itself: check mode, arguments templated, the deadline, an unreachable host.

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use enka_modules as modules;
use enka_modules::ModuleContext;
use enka_modules::ModuleRef;
use enka_project::role::Action;
use enka_project::role::Task;
use enka_template::Context;
use enka_template::Var;
use enka_template::time::seconds;
use minijinja::Value;
use minijinja::value::ValueKind;

use super::Flow;
use super::Frame;
use super::Runner;
use super::outcome::exception_result;
use super::outcome::undefined_in_arguments;
use super::play::is_localhost;
use super::task_result::TaskResult;
use super::variables::remove_omit;
use super::variables::variable_params;

impl Runner {
    /// Templates the arguments and calls the module.
    pub(super) async fn execute(
        &mut self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        ctx: &Context,
        no_log: bool,
    ) -> TaskResult {
        let with_defaults;
        let args = match self.with_module_defaults(frame, task, module, args, ctx) {
            Ok(Some(merged)) => {
                with_defaults = merged;
                &with_defaults
            }
            Ok(None) => args,
            Err(message) => return TaskResult::task_error(message),
        };
        let templated = match self.templar.template_value(args, ctx) {
            Ok(v) => match variable_params(remove_omit(&v, self.templar.omit())) {
                Ok(v) => v,
                Err(message) => return TaskResult::task_error(message),
            },
            Err(err) => {
                if let Some((class, text)) = err.python_exception() {
                    return exception_result(class, &text, err.line());
                }
                let message = if err.is_undefined() {
                    undefined_in_arguments(task, &err)
                } else {
                    err.ansible_message()
                };
                return TaskResult::task_error(message);
            }
        };
        if templated.kind() != ValueKind::Map {
            return TaskResult::task_error(format!(
                "the arguments of {} must be a mapping, got {}",
                module.name(),
                enka_template::pyrepr::type_name(&templated)
            ));
        }
        let environment = match self.environment(frame, task, ctx) {
            Ok(environment) => environment,
            Err(message) => return TaskResult::task_error(message),
        };
        let task_timeout = match &task.timeout {
            Some(raw) => match self.templar.template_value(raw, ctx) {
                Ok(v) => seconds(&v).filter(|t| !t.is_zero()),
                Err(err) => return TaskResult::task_error(format!("timeout: {err}")),
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
        let asynchronous = match self.asynchronous(task, ctx) {
            Ok(asynchronous) => asynchronous,
            Err(message) => return TaskResult::task_error(message),
        };
        // A native action has no background: it runs to completion, within
        // the time `async` gives it when the task waits for it.
        let deadline = match asynchronous {
            Some(a) if a.poll > 0 && !module.is_bridged() => {
                let own = Instant::now() + Duration::from_secs(a.seconds);
                Some(deadline.map_or(own, |d| d.min(own)))
            }
            _ => deadline,
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
            check_mode: self.check_mode || (self.options.dry_run && module.is_bridged()),
            diff: self.diff,
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
            Ok(output) => {
                self.warn_if_reserved(
                    output
                        .facts
                        .iter()
                        .chain(&output.included_vars)
                        .map(|(name, _)| &**name),
                );
                if !output.facts.is_empty() {
                    let facts = Arc::make_mut(&mut self.facts);
                    for (k, v) in &output.facts {
                        facts.insert(k.clone(), Var::templated(v.clone()));
                    }
                }
                if !output.plain_facts.is_empty() {
                    self.add_module_facts(&output.plain_facts);
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
                }
            }
            Err(message) => TaskResult::failed(message),
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
    ) -> Result<Option<String>, Flow> {
        let delegate = match &task.delegate_to {
            Some(value) => match self.templar.template_value(value, ctx) {
                Ok(v) if v.is_none() || v.is_undefined() => None,
                Ok(v) => Some(enka_template::pyrepr::to_text(&v)),
                Err(err) => return Err(self.template_failure(task, "delegate_to", &err)),
            },
            None => None,
        };
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
            .connection
            .as_ref()
            .or_else(|| frame.inherited.connection.last());
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
}
