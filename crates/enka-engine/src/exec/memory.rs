//! The reconcile's memory budget (enka-template's `budget`) over what a run
//! keeps from task to task: registered results and facts. Each render may
//! hold what the run has left; a task whose result or facts would take the
//! run past the budget fails, keeping nothing.

use std::collections::HashMap;
use std::sync::Arc;

use enka_project::role::Task;
use enka_template::{Var, budget};
use minijinja::Value;

use super::Runner;
use super::task_result::TaskResult;

/// Bytes kept by name: a name set again replaces what it held.
#[derive(Debug, Default)]
pub(super) struct Kept {
    by_name: HashMap<Arc<str>, usize>,
    total: usize,
    /// What the loops running now hold in their items' results, which the
    /// renders of their next items must leave room for.
    looping: usize,
}

impl Runner {
    /// What each render of this run may hold now.
    pub(super) fn render_budget(&self) -> usize {
        self.templar
            .options()
            .memory_budget()
            .saturating_sub(self.kept.total)
            .saturating_sub(self.kept.looping)
    }

    /// Keeps `values` in the budget's account, or says why they cannot be
    /// kept (then nothing of them is counted).
    pub(super) fn keep<'a>(
        &mut self,
        values: impl IntoIterator<Item = (&'a Arc<str>, &'a Value)>,
    ) -> Result<(), String> {
        let budget = self.templar.options().memory_budget();
        let mut total = self.kept.total;
        let mut sizes = Vec::new();
        for (name, value) in values {
            let size = budget::size_of(value, budget);
            total = total
                .saturating_sub(self.kept.by_name.get(name).copied().unwrap_or(0))
                .saturating_add(size);
            sizes.push((name.clone(), size));
        }
        if total > budget {
            let names: Vec<&str> = sizes.iter().map(|(name, _)| &**name).collect();
            return Err(format!(
                "keeping '{}' would take what this reconcile keeps (registered results and \
                 facts) past its memory budget of {} (the operator's \
                 --reconcile-memory-budget)",
                names.join("', '"),
                budget::human(budget)
            ));
        }
        for (name, size) in sizes {
            self.kept.by_name.insert(name, size);
        }
        self.kept.total = total;
        Ok(())
    }
}

impl Runner {
    /// `result`, and what `register` keeps of it: a result past the budget
    /// becomes the task's failure, which is what is registered then.
    pub(super) fn register_within_budget(
        &mut self,
        task: &Task,
        result: TaskResult,
    ) -> (TaskResult, Option<Var>) {
        let Some(name) = &task.register else {
            return (result, None);
        };
        let registered = self.registered(task, &result);
        match self.keep([(name, &registered.value)]) {
            Ok(()) => (result, Some(registered)),
            Err(message) => {
                let failed = TaskResult::failed(message);
                let registered = self.registered(task, &failed);
                // A failure's few bytes fit whatever is left.
                let _ = self.keep([(name, &registered.value)]);
                (failed, Some(registered))
            }
        }
    }
}

impl Runner {
    /// Counts one more loop item's `result` into what the loops running now
    /// hold (the run's renders leave room for it while the loop runs): past
    /// what the run has left, the loop ends and the task fails as a whole
    /// (the error it returns).
    pub(super) fn loop_past_budget(&mut self, result: &TaskResult) -> Option<TaskResult> {
        let left = self.render_budget();
        // Its fields as they are: no map built per item to measure it.
        let size = result.fields.iter().fold(0usize, |size, (key, value)| {
            size.saturating_add(key.len())
                .saturating_add(budget::size_of(value, left.saturating_sub(size)))
        });
        self.kept.looping = self.kept.looping.saturating_add(size);
        (size > left).then(|| {
            TaskResult::task_error(format!(
                "the loop's results would take this reconcile past its memory budget of {} \
                 (the operator's --reconcile-memory-budget)",
                budget::human(self.templar.options().memory_budget())
            ))
        })
    }

    /// What the loops running now hold in their items' results.
    pub(super) fn looping(&self) -> usize {
        self.kept.looping
    }

    /// Sets it back when a loop ends (registering its results counts them
    /// again).
    pub(super) fn set_looping(&mut self, bytes: usize) {
        self.kept.looping = bytes;
    }
}
