//! `block`, `rescue` and `always`.

use std::sync::Arc;

use enka_project::role::Task;
use enka_template::Var;
use minijinja::Value;

use super::task_result::TaskResult;
use super::{Flow, Frame, Runner};
use crate::scope;

impl Runner {
    pub(super) async fn run_block(
        &mut self,
        frame: &Frame,
        task: &Task,
        position: &Arc<[u32]>,
        [block, rescue, always]: [&Arc<[Task]>; 3],
    ) -> Flow {
        let section = |runner: &Runner, frame: &Frame, index: usize| -> Frame {
            let mut frame = frame.clone();
            frame.position = runner.at(position, index);
            frame
        };
        let mut inner = frame.clone();
        inner.scope.locals = scope::push(&inner.scope.locals, &task.vars);
        inner.inherited.enter_block(task);
        let failed_before = self.stats.failed;
        let mut flow = self
            .run_tasks(section(self, &inner, 0), block.clone())
            .await;
        // A host that cannot be reached leaves the play at once: its block
        // runs no rescue and no always.
        if matches!(&flow, Flow::Failed(f) if f.is_unreachable() || f.aborts_run) {
            return flow;
        }
        if let Flow::Failed(failure) = &flow
            && !rescue.is_empty()
        {
            let rescue_frame = inner.clone();
            // The strategy sets them as the host's non-persistent facts when
            // a failure moves it into a rescue: they stay for `always` and
            // after the block, and a failure inside the rescue (which moves
            // to `always`) does not replace them.
            let failed_task = Value::from_pairs([
                (Value::from("name"), Value::from(&*failure.task)),
                (Value::from("action"), Value::from(&*failure.action)),
                (
                    Value::from("location"),
                    Value::from(failure.location.to_string()),
                ),
            ]);
            if !failure.marked_failed {
                let facts = Arc::make_mut(&mut self.facts);
                facts.insert(
                    Arc::from("ansible_failed_task"),
                    Var::unsafe_data(&failed_task),
                );
                facts.insert(
                    Arc::from("ansible_failed_result"),
                    Var::unsafe_data(&failure.result),
                );
            }
            // The failures a rescue takes (the block's, and those of an
            // inner block's `always` after it) are counted rescued, not
            // failed, whatever the rescue then does: the strategy counts a
            // failure with a rescue ahead as rescued. One the strategy
            // marked itself stays failed.
            let mut taken = self.stats.failed.saturating_sub(failed_before);
            if failure.marked_failed {
                taken = taken.saturating_sub(1);
            }
            self.stats.rescued += taken;
            self.stats.failed -= taken;
            flow = self
                .run_tasks(section(self, &rescue_frame, 1), rescue.clone())
                .await;
        }
        // `meta: end_play` and `end_role` end the host's tasks at once: no
        // always section runs.
        if !always.is_empty() && !matches!(flow, Flow::EndRole | Flow::EndPlay) {
            self.host_errors_cleared = false;
            let always_flow = self
                .run_tasks(section(self, &inner, 2), always.clone())
                .await;
            // `end_play` (or `end_role`) in `always` ends the host's tasks,
            // but a failure the block did not rescue stays: the host is
            // still failed.
            match (always_flow, &flow) {
                (Flow::Continue, _) => {}
                (Flow::EndPlay | Flow::EndRole, Flow::Failed(_)) => return flow,
                (always_flow, _) => return always_flow,
            }
            // `meta: clear_host_errors` in `always` lets the host go on
            // after the failure it ran for (the strategy re-adds it).
            if std::mem::take(&mut self.host_errors_cleared) && matches!(flow, Flow::Failed(_)) {
                flow = Flow::Continue;
            }
        }
        flow
    }
}

/// A task's failure as the failed result TaskExecutor.run returns for it;
/// any other flow (an error that ends the run included) as it is.
pub(super) fn as_failed_result(flow: Flow) -> Result<TaskResult, Flow> {
    match flow {
        // Raised out of the strategy: no task result holds it.
        Flow::Failed(failure) if !failure.aborts_run => {
            let mut result = TaskResult::error(failure.message);
            for key in ["exception", "_ansible_delegated_vars"] {
                if let Ok(value) = failure.result.get_attr(key)
                    && !value.is_undefined()
                {
                    result.set(key, value);
                }
            }
            Ok(result)
        }
        other => Err(other),
    }
}
