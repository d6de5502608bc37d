//! Handlers: `notify` (by name or `listen`), and running the notified ones when a section ends or
//! `flush_handlers` asks.

use std::sync::Arc;

use enka_project::role::{Action, Task};

use super::{BoxFlow, Flow, Runner, TaskReport};

impl Runner {
    /// Marks the handlers `names` calls for (by name, `<role> : <name>`, or
    /// `listen` topic) to run at the next flush; a name no handler answers
    /// to fails the task, as in Ansible.
    pub(super) fn notify(&mut self, names: &[String]) -> Result<(), String> {
        for name in names {
            let mut found = false;
            // By name: the last handler loaded with it, as Ansible.
            let by_name = self.handlers.iter().enumerate().rev().find_map(|(set, h)| {
                h.tasks
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(index, (list, at))| {
                        let own = list[*at].name.as_deref()?;
                        let qualified = h.role.as_ref().map(|(role, _)| format!("{role} : {own}"));
                        (own == name || qualified.as_deref() == Some(name)).then_some((set, index))
                    })
            });
            let mut hits: Vec<(usize, usize)> = by_name.into_iter().collect();
            for (set, h) in self.handlers.iter().enumerate() {
                for (index, (list, at)) in h.tasks.iter().enumerate() {
                    if list[*at].listen.iter().any(|topic| topic == name) {
                        hits.push((set, index));
                    }
                }
            }
            for hit in hits {
                found = true;
                if !self.notified.contains(&hit) {
                    self.notified.push(hit);
                }
            }
            if !found {
                return Err(format!(
                    "The requested handler '{name}' was not found in either the main handlers list nor in the listening handlers list"
                ));
            }
        }
        Ok(())
    }

    /// Runs the notified handlers, in the order they were defined, each
    /// once, when `flow` went on (a failed play runs none, as without
    /// force_handlers); handlers they notify run in the same flush.
    pub(super) fn flush_handlers_after(&mut self, flow: Flow, after: Arc<[u32]>) -> BoxFlow<'_> {
        Box::pin(async move {
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
            let mut round = 0;
            while !self.notified.is_empty() {
                let mut due = std::mem::take(&mut self.notified);
                due.sort_unstable();
                let round_at = self.at(&after, round);
                round += 1;
                for (set, index) in due {
                    let Some((list, at)) = self.handlers[set].tasks.get(index).cloned() else {
                        continue;
                    };
                    let frame = self.handlers[set].frame.clone();
                    let position = self.at(&self.at(&round_at, set), index);
                    let outer = std::mem::replace(&mut self.in_handlers, true);
                    // A handler's own `meta: flush_handlers` has nothing
                    // to flush: the handlers are running.
                    let mut report = TaskReport::default();
                    let flow = self
                        .run_task(&frame, &list[at], &position, &mut report)
                        .await;
                    self.in_handlers = outer;
                    if !matches!(flow, Flow::Continue) {
                        return flow;
                    }
                }
            }
            Flow::Continue
        })
    }
}

/// The handlers of a handlers list, those of the files it imports (blocks)
/// included, in order.
pub(super) fn handler_list(tasks: &Arc<[Task]>) -> Vec<(Arc<[Task]>, usize)> {
    let mut out = Vec::new();
    for (index, task) in tasks.iter().enumerate() {
        match &task.action {
            Action::Block { block, .. } => out.extend(handler_list(block)),
            _ => out.push((tasks.clone(), index)),
        }
    }
    out
}
