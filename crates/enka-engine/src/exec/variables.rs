//! A task's variables and context: precedence, `environment`, `module_defaults`, free-form `args`,
//! `omit`.

use enka_project::role::Setting;
use std::sync::Arc;

use enka_modules::ModuleRef;
use enka_project::role::Task;
use enka_template::Context;
use minijinja::Value;
use minijinja::value::ValueKind;

use super::{Frame, Runner};
use crate::scope::{self, Scope};

impl Runner {
    /// The templating context of `task`: its scope, and where lookups
    /// search, as Ansible's `ansible_search_path`: the role, the task file's
    /// own directory, then the playbook's directory (the loader's basedir:
    /// ansible-runner's `project/` for a reconcile's role).
    pub(super) fn context(&self, frame: &Frame, scope: &Scope, task: &Task) -> Context {
        let mut search_path = Vec::new();
        if let Some(role) = &frame.role {
            search_path.push(role.path.clone());
        }
        if let Some(dir) = task.location.file.parent()
            && !search_path.iter().any(|p| p == dir)
        {
            search_path.push(dir.to_path_buf());
        }
        let playbook_dir = scope
            .builtins
            .iter()
            .rev()
            .find(|(k, _)| &**k == "playbook_dir")
            .and_then(|(_, v)| v.value.as_str())
            .map_or_else(|| self.project.base_dir.clone(), std::path::PathBuf::from);
        if !search_path.contains(&playbook_dir) {
            search_path.push(playbook_dir);
        }
        let ctx = Context::new(
            self.templar.clone(),
            Arc::new(scope.clone()),
            Arc::from(search_path),
        )
        .with_memory_budget(self.render_budget());
        if self.templar.options().migration.is_none() {
            return ctx;
        }
        let pos = task.location.pos.unwrap_or_default();
        ctx.at(Arc::new(enka_template::migration::Origin {
            file: task.location.file.to_path_buf(),
            line: pos.line,
            column: pos.col,
            task: task.display_name(),
            exact: false,
        }))
    }

    /// The scope a task sees: the frame's, with the task's vars and the
    /// current facts.
    pub(super) fn task_scope(&self, frame: &Frame, task: &Task) -> Scope {
        let mut scope = frame.scope.clone();
        // Roles included with `public: true`, for the play's own tasks
        // (inside a role its own vars must stay above them, which these
        // frames cannot order: there they are not seen).
        if frame.role.is_none() {
            for (defaults, vars) in &self.public_role_vars {
                scope.defaults = scope::push(&scope.defaults, defaults);
                scope.role_vars = scope::push(&scope.role_vars, vars);
            }
        }
        scope.locals = scope::push(&scope.locals, &task.vars);
        scope.facts = self.facts.clone();
        scope.host_facts = self.host_facts.clone();
        scope.included = self.included.clone();
        if self.inventory.is_some() {
            // add_host and group_by change groups and so variables.
            let inventory = self.live_inventory();
            if let Some(vars) = inventory.as_ref().and_then(|i| i.host_vars(&self.host)) {
                scope.inventory_vars = scope::push(&None, vars);
            }
            scope.inventory = inventory;
        }
        // Hosts that failed out of the play leave ansible_play_hosts and
        // ansible_play_batch.
        if let Some(lockstep) = &self.lockstep {
            let failed: Vec<&str> = lockstep
                .failed()
                .into_iter()
                .filter_map(|i| self.batch.get(i).map(String::as_str))
                .collect();
            if !failed.is_empty() {
                for name in ["ansible_play_hosts", "ansible_play_batch", "play_hosts"] {
                    let left: Vec<Value> = enka_template::VarSource::get(&scope, name)
                        .and_then(|v| v.value.try_iter().ok().map(Iterator::collect::<Vec<Value>>))
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|h: &Value| !h.as_str().is_some_and(|h| failed.contains(&h)))
                        .collect();
                    scope.set_magic(name, Value::from(left));
                }
            }
        }
        if !self.included_role_names.is_empty() {
            for name in [
                "role_names",
                "ansible_play_role_names",
                "ansible_role_names",
            ] {
                let mut names: Vec<Value> = enka_template::VarSource::get(&scope, name)
                    .and_then(|v| v.value.try_iter().ok().map(Iterator::collect))
                    .unwrap_or_default();
                for included in &self.included_role_names {
                    if !names.contains(included) {
                        names.push(included.clone());
                    }
                }
                scope.set_magic(name, Value::from(names));
            }
        }
        scope
    }

    /// The task's `environment`: the play's, its blocks' and its own
    /// merged in that order, each a mapping or a list of them
    /// (Task._post_validate_environment); `None` when there is none.
    pub(super) fn environment(
        &self,
        frame: &Frame,
        task: &Task,
        ctx: &Context,
    ) -> Result<Value, String> {
        let layers: Vec<&Value> = frame
            .inherited
            .setting(Setting::Environment)
            .iter()
            .chain(task.settings.get(Setting::Environment))
            .collect();
        if layers.is_empty() {
            return Ok(Value::from(()));
        }
        let mut merged: Vec<(Value, Value)> = Vec::new();
        for layer in layers {
            let items = match layer.kind() {
                ValueKind::Seq => layer.try_iter().map(Iterator::collect).unwrap_or_default(),
                _ => vec![layer.clone()],
            };
            for item in items {
                // A mapping is templated value by value (Task's
                // _post_validate_environment): a value that needs the
                // `ansible_env` fact before facts are gathered is left out.
                // Ansible decides this on the undefined error's text
                // (`'ansible_env' in error`): an undefined value reached
                // through `ansible_env`.
                let templated = if item.kind() == ValueKind::Map {
                    let mut pairs = Vec::new();
                    for key in item.try_iter().into_iter().flatten() {
                        let raw = item.get_item(&key).unwrap_or_default();
                        match self.templar.template_value(&raw, ctx) {
                            Ok(value) => pairs.push((key, value)),
                            Err(err)
                                if err.is_undefined()
                                    && err.is_undefined_through("ansible_env") => {}
                            Err(err) => {
                                return Err(format!("environment: {}", err.ansible_message()));
                            }
                        }
                    }
                    Value::from_pairs(pairs)
                } else {
                    self.templar
                        .template_value(&item, ctx)
                        .map_err(|err| format!("environment: {}", err.ansible_message()))?
                };
                // 2.19 drops what is omitted: an entry, or a value.
                let omitted = self.semantics() == enka_template::Semantics::Ansible219;
                let templated = if omitted {
                    remove_omit(&templated, self.templar.omit())
                } else {
                    templated
                };
                match templated.kind() {
                    ValueKind::None => {}
                    _ if omitted && templated.as_str() == Some(self.templar.omit()) => {}
                    ValueKind::Map => {
                        for key in templated.try_iter().into_iter().flatten() {
                            let value = templated.get_item(&key).unwrap_or_default();
                            match merged.iter_mut().find(|(k, _)| *k == key) {
                                Some(slot) => slot.1 = value,
                                None => merged.push((key, value)),
                            }
                        }
                    }
                    // Task._post_validate_environment skips what is no
                    // mapping once templated, with a warning; the task runs.
                    _ => self.warn(format!(
                        "could not parse environment value, skipping: {}",
                        enka_template::pyrepr::to_text(&item)
                    )),
                }
            }
        }
        Ok(Value::from_pairs(merged))
    }

    /// Templates every string inside `value`, keeping a string as written
    /// when it meets an undefined variable (Ansible's
    /// `fail_on_undefined=False`); any other error is the template's.
    pub(super) fn template_leniently(
        &self,
        value: &Value,
        ctx: &Context,
    ) -> Result<Value, enka_template::Error> {
        Ok(match value.kind() {
            ValueKind::String => match self.templar.template_value(value, ctx) {
                Err(err) if err.is_undefined() => value.clone(),
                other => other?,
            },
            ValueKind::Seq => Value::from(
                value
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .map(|item| self.template_leniently(&item, ctx))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            ValueKind::Map => Value::from_pairs(
                value
                    .try_iter()
                    .into_iter()
                    .flatten()
                    .map(|key| {
                        let item = value.get_item(&key).unwrap_or_default();
                        self.template_leniently(&item, ctx).map(|v| (key, v))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => value.clone(),
        })
    }

    /// The task's arguments over the `module_defaults` in force for its
    /// action (get_action_args_with_defaults); `None` when there are none.
    pub(super) fn with_module_defaults(
        &self,
        frame: &Frame,
        task: &Task,
        module: &ModuleRef,
        args: &Value,
        ctx: &Context,
    ) -> Result<Option<Value>, String> {
        if frame.inherited.setting(Setting::ModuleDefaults).is_empty()
            && task.settings.get(Setting::ModuleDefaults).is_none()
        {
            return Ok(None);
        }
        let action = match module {
            ModuleRef::Native(spec) => spec.fqcn(),
            ModuleRef::Ansible(action) => action.qualified_name().to_owned(),
        };
        let entries: Vec<Value> = frame
            .inherited
            .setting(Setting::ModuleDefaults)
            .iter()
            .chain(task.settings.get(Setting::ModuleDefaults))
            .cloned()
            .collect();
        // gather_facts runs setup with the defaults setup has (its action's
        // _get_module_args), beneath its own.
        let mut applied = Vec::new();
        if action.rsplit('.').next() == Some("gather_facts") {
            applied.extend(
                self.project
                    .module_defaults
                    .for_action("ansible.builtin.setup", &entries),
            );
        }
        applied.extend(self.project.module_defaults.for_action(&action, &entries));
        if applied.is_empty() {
            return Ok(None);
        }
        let mut pairs: Vec<(Value, Value)> = Vec::new();
        let mut set = |key: Value, value: Value| match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, kept)) => *kept = value,
            None => pairs.push((key, value)),
        };
        for defaults in applied {
            let defaults = self
                .templar
                .template_value(&defaults, ctx)
                .map_err(|err| format!("module_defaults: {}", err.ansible_message()))?;
            if defaults.kind() != ValueKind::Map {
                return Err(format!(
                    "module_defaults: the defaults of {action} must be a mapping, got {}",
                    enka_template::pyrepr::type_name(&defaults)
                ));
            }
            for key in defaults.try_iter().into_iter().flatten() {
                let value = defaults.get_item(&key).unwrap_or_default();
                set(key, value);
            }
        }
        // Arguments written as one template become their mapping first.
        let own = if args.kind() == ValueKind::Map {
            args.clone()
        } else {
            self.templar
                .template_value(args, ctx)
                .map_err(|err| err.ansible_message())?
        };
        for key in own.try_iter().into_iter().flatten() {
            let value = own.get_item(&key).unwrap_or_default();
            set(key, value);
        }
        Ok(Some(Value::from_pairs(pairs)))
    }
}

/// Arguments whose templated `args:` or free-form text rendered to a
/// mapping: that mapping, the arguments written beside it winning
/// (Task._post_validate_args). In 2.19 a template that rendered to `omit`
/// stands for no arguments.
pub(super) fn variable_params(
    args: Value,
    semantics: enka_template::Semantics,
    module: &enka_modules::ModuleRef,
    omit: &str,
) -> Result<Value, String> {
    use enka_project::role::{TEMPLATED_ARGS, VARIABLE_PARAMS};
    let templated = |k: &Value| matches!(k.as_str(), Some(TEMPLATED_ARGS | VARIABLE_PARAMS));
    let written = enka_template::convert::entries(&args);
    // Plain words beside an action that takes none (2.18 refused them
    // when the task loaded).
    if semantics.native()
        && module.refuses_raw_params()
        && written
            .iter()
            .any(|(k, _)| k.as_str() == Some("_raw_params"))
    {
        return Err(format!(
            "Task failed: Action '{}' does not support raw params.",
            module.resolved_name()
        ));
    }
    if !written.iter().any(|(k, _)| templated(k)) {
        return Ok(args);
    }
    // Later layers win: `args:`, then free-form text, then what is written.
    let mut merged: Vec<(Value, Value)> = Vec::new();
    let mut put = |k: Value, v: Value| {
        merged.retain(|(existing, _)| *existing != k);
        merged.push((k, v));
    };
    for key in [TEMPLATED_ARGS, VARIABLE_PARAMS] {
        let params = args.get_attr(key).unwrap_or_default();
        let omitted = semantics.native() && params.as_str() == Some(omit);
        if params.is_undefined() || omitted {
            continue;
        }
        if params.kind() != ValueKind::Map {
            // An action that takes free-form words gets the text itself.
            if key == VARIABLE_PARAMS && semantics.native() && module.takes_raw_params() {
                put(Value::from("_raw_params"), params);
                continue;
            }
            return Err(not_arguments(&params, semantics, &module.resolved_name()));
        }
        for (k, v) in enka_template::convert::entries(&params) {
            put(k, v);
        }
    }
    for (k, v) in written {
        if !templated(&k) {
            put(k, v);
        }
    }
    Ok(Value::from_pairs(merged))
}

/// Why templated arguments that are no mapping are refused.
fn not_arguments(params: &Value, semantics: enka_template::Semantics, action: &str) -> String {
    match semantics {
        enka_template::Semantics::Ansible218 => format!(
            "invalid or malformed argument: '{}'",
            enka_template::pyrepr::to_text(params)
        ),
        enka_template::Semantics::Ansible219 => format!(
            "Task failed: Finalization of task args for '{action}' failed: Task args must resolve to a 'dict' not '{}'.",
            enka_template::pyrepr::type_name(params)
        ),
    }
}

/// Drops arguments equal to the `omit` placeholder, recursively.
pub(super) fn remove_omit(value: &Value, omit: &str) -> Value {
    match value.kind() {
        ValueKind::Map => {
            Value::from_pairs(value.try_iter().into_iter().flatten().filter_map(|k| {
                let v = value.get_item(&k).unwrap_or_default();
                (v.as_str() != Some(omit)).then(|| (k, remove_omit(&v, omit)))
            }))
        }
        ValueKind::Seq => Value::from(
            value
                .try_iter()
                .into_iter()
                .flatten()
                .filter(|v| v.as_str() != Some(omit))
                .map(|v| remove_omit(&v, omit))
                .collect::<Vec<_>>(),
        ),
        _ => value.clone(),
    }
}
