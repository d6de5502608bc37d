//! `include_tasks`, `include_role` and `import_role` resolved at run time.

use std::sync::Arc;

use enka_project::role::{Action, Task};
use minijinja::Value;

use super::blocks::as_failed_result;
use super::loops::set_loop_vars;
use super::outcome::fail_result;
use super::task_result::TaskResult;
use super::{Flow, Frame, Runner, TaskReport};
use crate::scope;

impl Runner {
    pub(super) async fn run_include(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
        report: &mut TaskReport,
    ) -> Flow {
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        // An include's own `when` decides whether it runs (for each item
        // of a looped one, below); it is not passed down (unlike a
        // block's or an import's).
        if task.looping.is_none() {
            match self.check_when(&ctx, &frame.inherited, task) {
                Ok(Some(condition)) => {
                    self.stats.skipped += 1;
                    let skipped = TaskResult::skipped(condition).to_value();
                    report.outcome = Some((crate::TaskStatus::Skipped, skipped, None));
                    return Flow::Continue;
                }
                Ok(None) => {}
                Err(when) => {
                    let flow = self.when_failure(task, &when);
                    return self.include_failed(frame, task, flow, report);
                }
            }
        }
        if frame.depth >= self.options.max_include_depth {
            let message = format!(
                "includes nested deeper than {} levels (recursive include?)",
                self.options.max_include_depth
            );
            return Flow::Failed(self.failure(task, message.clone(), fail_result(&message)));
        }
        // The loop is read before any item's condition (TaskExecutor); its
        // error is the include's failed result (ignore_errors applies).
        let items = match self.loop_items(task, &ctx, &frame.inherited) {
            Ok(items) => items,
            Err(flow) => return self.include_failed(frame, task, flow, report),
        };
        let loop_var = match self.loop_var_in_scope(task, &ctx) {
            Ok(name) => name,
            Err(flow) => return self.include_failed(frame, task, flow, report),
        };
        let iterations: Vec<Option<usize>> = match &items {
            None => vec![None],
            Some(items) => (0..items.len()).map(Some).collect(),
        };
        let items: Arc<[Value]> = items.unwrap_or_default().into();
        let frames: ItemFrames<'_> = iterations
            .into_iter()
            .map(|iteration| {
                let mut inner = frame.clone();
                inner.depth += 1;
                inner.position = self.at(position, iteration.unwrap_or(0));
                inner.scope.params = scope::push(&inner.scope.params, &task.vars);
                if let Some(index) = iteration {
                    set_loop_vars(&mut inner.scope, task, &loop_var, index, &items);
                }
                (iteration.and_then(|index| items.get(index)), inner)
            })
            .collect();
        if let Action::ImportRole { .. } = &task.action {
            return Box::pin(self.run_import_role(task, frames)).await;
        }
        let frames = match self.items_that_run(task, frames, &loop_var, report) {
            Ok(Some(frames)) => frames,
            Ok(None) => return Flow::Continue,
            Err(flow) => return self.include_failed(frame, task, flow, report),
        };
        // Every item's file (or role) is found and said (`included: …`)
        // before any of them runs, as the strategy gathers the round's
        // includes first.
        let mut found = Vec::with_capacity(frames.len());
        for (item, inner) in frames {
            match self.find_included(&inner, task, item) {
                Ok(included) => found.push((inner, included)),
                Err(flow) => return flow,
            }
        }
        for (inner, included) in found {
            let flow = Box::pin(self.run_included(inner, task, included)).await;
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
        }
        Flow::Continue
    }

    /// An imported role, resolved when the play runs: its tasks take the
    /// import's `when`, tags and keywords.
    async fn run_import_role(&mut self, task: &Task, frames: ItemFrames<'_>) -> Flow {
        let Action::ImportRole { role, from } = &task.action else {
            return Flow::Continue;
        };
        for (_, mut inner) in frames {
            if !task.when.is_empty() {
                inner.inherited.when.push(super::InheritedWhen::of(task));
            }
            inner.inherited.tags.extend(task.tags.iter().cloned());
            // Its keywords (`environment`, …) hold for the role's tasks, as
            // a block's do.
            inner.inherited.enter(&task.settings);
            let flow = self
                .run_role(
                    inner,
                    role.clone(),
                    from.clone(),
                    Arc::from(Vec::new()),
                    Some(task),
                )
                .await;
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
        }
        Flow::Continue
    }

    /// A looped include's items whose `when` holds (each judged with its
    /// item); the others are shown skipped as they are met. `None` when
    /// every item was skipped: the include is then skipped as a whole. A
    /// condition that cannot be judged fails the include as a whole.
    fn items_that_run<'i>(
        &mut self,
        task: &Task,
        frames: ItemFrames<'i>,
        loop_var: &str,
        report: &mut TaskReport,
    ) -> Result<Option<ItemFrames<'i>>, Flow> {
        if task.looping.is_none() {
            return Ok(Some(frames));
        }
        // A loop that named nothing defined is read only if `when` holds
        // (TaskExecutor keeps its error): it did not, so the include is
        // skipped as a whole.
        if let [(None, inner)] = frames.as_slice() {
            let scope = self.task_scope(inner, task);
            let ctx = self.context(inner, &scope, task);
            if let Ok(Some(condition)) = self.check_when(&ctx, &inner.inherited, task) {
                self.stats.skipped += 1;
                let skipped = TaskResult::skipped(condition).to_value();
                report.outcome = Some((crate::TaskStatus::Skipped, skipped, None));
                return Ok(None);
            }
            return Ok(Some(frames));
        }
        let mut kept = Vec::with_capacity(frames.len());
        for (item, inner) in frames {
            let scope = self.task_scope(&inner, task);
            let ctx = self.context(&inner, &scope, task);
            match self.check_when(&ctx, &inner.inherited, task) {
                Ok(Some(condition)) => {
                    let mut result = TaskResult::skipped(condition);
                    result.set(loop_var, item.cloned().unwrap_or_default());
                    result.set("ansible_loop_var", Value::from(loop_var));
                    if let Some(observer) = &self.options.observer {
                        let shown = result.to_value();
                        observer.include_item_skipped(task, self.in_handlers, &self.host, &shown);
                    }
                }
                Ok(None) => kept.push((item, inner)),
                Err(when) => return Err(self.when_failure(task, &when)),
            }
        }
        if kept.is_empty() {
            // Its items were shown as they were skipped.
            self.stats.skipped += 1;
            let result = TaskResult::of(vec![
                ("changed".into(), Value::from(false)),
                ("skipped".into(), Value::from(true)),
                ("msg".into(), Value::from("All items skipped")),
            ]);
            report.outcome = Some((crate::TaskStatus::Skipped, result.to_value(), None));
            return Ok(None);
        }
        Ok(Some(kept))
    }

    /// An include that failed before bringing anything in (its loop, a
    /// looped include's condition): a
    /// failed result of the task, which `ignore_errors` forgives.
    fn include_failed(
        &mut self,
        frame: &Frame,
        task: &Task,
        flow: Flow,
        report: &mut TaskReport,
    ) -> Flow {
        match as_failed_result(flow) {
            Ok(result) => self.finish_task(frame, task, result, false, report),
            Err(flow) => flow,
        }
    }

    /// What one run of an include brings in: found, said and counted.
    fn find_included(
        &mut self,
        inner: &Frame,
        task: &Task,
        item: Option<&Value>,
    ) -> Result<Included, Flow> {
        match &task.action {
            Action::IncludeTasks { .. } => self.find_included_tasks(inner, task, item),
            Action::IncludeRole(include) => {
                // Ansible counts each dynamic include (each item of a
                // looped one) as a task that ran ok, before the tasks it
                // brings in (include_tasks once its file loaded), once
                // the role's file was found.
                let found = self.find_included_role(inner, task, include, item);
                if found.is_ok() {
                    self.stats.ok += 1;
                }
                found
            }
            _ => Ok(Included::Nothing),
        }
    }

    /// Runs what an include brought in.
    async fn run_included(&mut self, inner: Frame, task: &Task, included: Included) -> Flow {
        match (included, &task.action) {
            (Included::Tasks(tasks), Action::IncludeTasks { apply, .. }) => match apply {
                Some(apply) => {
                    let none: Arc<[Task]> = Arc::from(Vec::new());
                    let at = inner.position.clone();
                    self.run_block(&inner, apply, &at, [&tasks, &none, &none])
                        .await
                }
                None => self.run_tasks(inner, tasks).await,
            },
            (Included::Role(role, from), Action::IncludeRole(include)) => {
                // `apply`: the role's tasks as inside a block of its keywords.
                let mut inner = inner;
                if let Some(apply) = &include.apply {
                    inner.scope.locals = scope::push(&inner.scope.locals, &apply.vars);
                    inner.inherited.enter_block(apply);
                }
                self.run_role(inner, role, from, Arc::from(Vec::new()), Some(task))
                    .await
            }
            _ => Flow::Continue,
        }
    }

    /// One run of `include_tasks`: its file templated and found among the
    /// files loaded with the project, and said.
    fn find_included_tasks(
        &mut self,
        inner: &Frame,
        task: &Task,
        item: Option<&Value>,
    ) -> Result<Included, Flow> {
        let Action::IncludeTasks {
            file, role, dir, ..
        } = &task.action
        else {
            return Ok(Included::Nothing);
        };
        let scope = self.task_scope(inner, task);
        let ctx = self.context(inner, &scope, task);
        let name = match self.templar.template_value(file, &ctx) {
            Ok(v) => enka_template::pyrepr::to_text(&v),
            Err(err) => return Err(self.template_failure(task, "include_tasks", &err)),
        };
        let path = enka_project::role::resolve_task_file(role.as_deref(), dir, &name);
        let tasks = path
            .as_ref()
            .and_then(|p| self.project.task_files.get(p).cloned());
        if let (Some(path), Some(tasks)) = (&path, tasks) {
            if let Some(observer) = &self.options.observer {
                observer.included(task, self.in_handlers, &self.host, path, item);
            }
            self.stats.ok += 1;
            return Ok(Included::Tasks(tasks));
        }
        let broken = path
            .as_ref()
            .and_then(|p| self.project.unloadable_task_files.get(p));
        let message = match (broken, &path) {
            // A file that does not parse is the strategy's parser error:
            // it ends the run (exit 4), said as Ansible says load errors.
            // One that is not a list of tasks fails the include (the
            // strategy's AnsibleError, not a parser error).
            (Some(problem), _)
                if problem
                    .message
                    .starts_with(enka_project::role::NOT_A_TASK_LIST) =>
            {
                let reason = "included task files must contain a list of tasks";
                return Err(self.include_refused(task, &name, reason.to_owned()));
            }
            (Some(problem), _) => {
                let mut message = problem.message.clone();
                if let Some(excerpt) = enka_project::role::ansible_excerpt(&problem.location) {
                    message = format!("{message}\n\n{excerpt}");
                }
                let mut failure = self.failure(task, message.clone(), fail_result(&message));
                failure.parser_error = true;
                return Err(Flow::Failed(failure.aborting()));
            }
            (None, Some(_)) => format!(
                "include_tasks: could not find or load {name} (only files loaded with the project can be included)"
            ),
            (None, None) => {
                return Err(self.include_not_found(task, role.as_deref(), dir, &name));
            }
        };
        Err(Flow::Failed(self.failure(
            task,
            message.clone(),
            fail_result(&message),
        )))
    }

    /// One run of `include_role`: the role found, announced (`included: r
    /// for host`), its vars kept for the play when `public`.
    fn find_included_role(
        &mut self,
        inner: &Frame,
        task: &Task,
        include: &enka_project::role::RoleInclude,
        item: Option<&Value>,
    ) -> Result<Included, Flow> {
        let role = self.included_role(inner, task, include)?;
        let from = self.role_from(inner, task, &include.from)?;
        if role.tasks(&from.tasks).is_none() {
            // The strategy's error: it ends the run, ignore_errors or not.
            let message = format!(
                "Could not find specified file in role: tasks/{}",
                from.tasks
            );
            let failure = self.failure(task, message.clone(), fail_result(&message));
            return Err(Flow::Failed(failure.aborting()));
        }
        if let Some(observer) = &self.options.observer {
            let name = std::path::Path::new(role.name.as_str());
            observer.included(task, self.in_handlers, &self.host, name, item);
        }
        if include.public {
            self.public_role_vars
                .push((role.defaults(&from.defaults), role.vars(&from.vars)));
        }
        Ok(Included::Role(role, from))
    }

    /// `tasks_from`, `vars_from` and `defaults_from` as this run of the
    /// include names them (each may be a template: `"{{ item }}"`).
    fn role_from(
        &self,
        inner: &Frame,
        task: &Task,
        from: &enka_project::role::RoleFrom,
    ) -> Result<enka_project::role::RoleFrom, Flow> {
        let written = [&from.tasks, &from.vars, &from.defaults];
        if !written
            .iter()
            .any(|f| enka_template::is_possibly_template(f))
        {
            return Ok(from.clone());
        }
        let scope = self.task_scope(inner, task);
        let ctx = self.context(inner, &scope, task);
        let mut named = Vec::with_capacity(3);
        for file in written {
            let value = self
                .templar
                .template_value(&Value::from(file.as_str()), &ctx)
                .map_err(|err| self.template_failure(task, "include_role", &err))?;
            let text = enka_template::pyrepr::to_text(&value);
            named.push(
                text.trim_end_matches(".yml")
                    .trim_end_matches(".yaml")
                    .to_owned(),
            );
        }
        let [tasks, vars, defaults] = <[String; 3]>::try_from(named).unwrap_or_default();
        Ok(enka_project::role::RoleFrom {
            tasks,
            vars,
            defaults,
        })
    }

    /// An included file that is nowhere: the strategy says so (an error
    /// line) and marks the host failed with its own result.
    fn include_not_found(
        &self,
        task: &Task,
        role: Option<&std::path::Path>,
        dir: &std::path::Path,
        name: &str,
    ) -> Flow {
        let looked = match role {
            Some(role) => role.join("tasks").join(name),
            None => dir.join(name),
        };
        let looked = std::path::absolute(&looked).unwrap_or(looked);
        let reason = format!(
            "Could not find or access '{}' on the Ansible Controller.",
            looked.display()
        );
        self.include_refused(task, name, reason)
    }

    /// An included file the strategy could not take in (`reason`): it says
    /// so (an error line) and marks the host failed with its own result.
    fn include_refused(&self, task: &Task, name: &str, reason: String) -> Flow {
        if let Some(observer) = &self.options.observer {
            observer.error(&reason);
        }
        let result = Value::from_pairs([
            (Value::from("changed"), Value::from(false)),
            (Value::from("failed"), Value::from(true)),
            (Value::from("include"), Value::from(name)),
            (Value::from("reason"), Value::from(reason.as_str())),
        ]);
        let mut failure = self.failure(task, reason, result);
        failure.marked_failed = true;
        Flow::Failed(failure)
    }

    /// The role `include_role` names (templated when it is a template),
    /// added to the play's role names; a failure when it is not part of the
    /// loaded project.
    fn included_role(
        &mut self,
        inner: &Frame,
        task: &Task,
        include: &enka_project::role::RoleInclude,
    ) -> Result<Arc<enka_project::role::Role>, Flow> {
        let role = match &include.role {
            Some(role) => Ok(role.clone()),
            None => {
                let scope = self.task_scope(inner, task);
                let ctx = self.context(inner, &scope, task);
                match self.templar.template_value(&include.name, &ctx) {
                    Ok(v) => {
                        let name = enka_template::pyrepr::to_text(&v);
                        enka_project::role::resolve_role(&self.project.role_paths, &name)
                            .ok()
                            .and_then(|p| self.project.role(&p).cloned())
                            .ok_or(name)
                    }
                    Err(err) => {
                        return Err(self.template_failure(task, "include_role", &err));
                    }
                }
            }
        };
        match role {
            Ok(role) => {
                let name = Value::from(role.name.as_str());
                if !self.included_role_names.contains(&name) {
                    self.included_role_names.push(name);
                }
                Ok(role)
            }
            Err(name) => {
                let message = format!(
                    "include_role: role {name} is not part of the loaded project (a role named by a template must exist when enka starts)"
                );
                Err(Flow::Failed(self.failure(
                    task,
                    message.clone(),
                    fail_result(&message),
                )))
            }
        }
    }
}

/// Each run of an include: its loop item (if it loops) and its frame.
type ItemFrames<'i> = Vec<(Option<&'i Value>, Frame)>;

/// What one run of an include brings in.
enum Included {
    Tasks(Arc<[Task]>),
    Role(Arc<enka_project::role::Role>, enka_project::role::RoleFrom),
    Nothing,
}
