//! Warnings and deprecations as Ansible's display gives them: each said once per run.

use enka_project::role::Task;
use enka_template::Context;

use super::{Flow, Runner};

impl Runner {
    /// Whether gathering is `smart` and this host's facts were gathered
    /// already.
    pub(super) fn facts_gathered_smartly(&self) -> bool {
        std::env::var("ANSIBLE_GATHERING").is_ok_and(|g| g.trim() == "smart")
            && self
                .host_facts
                .get("_ansible_facts_gathered")
                .is_some_and(|var| var.value.is_true())
    }

    /// Says `message` once per run: to the observer (`enka playbook`
    /// prints `[WARNING]: …`). A reconcile has no observer and logs it at
    /// debug level: a custom resource field named like a keyword would
    /// otherwise repeat it on every reconcile.
    /// Whether `message` was not said yet in this run.
    pub(super) fn first_time(&self, message: &str) -> bool {
        self.warned
            .lock()
            .map(|mut warned| warned.insert(message.to_owned()))
            .unwrap_or(false)
    }

    /// Says a deprecation once per run, as [`Runner::warn`] says a warning.
    pub(super) fn deprecate(&self, message: String, version: &str) {
        if !self.first_time(&message) {
            return;
        }
        match &self.options.observer {
            Some(observer) => observer.deprecation(&message, version),
            None => tracing::debug!(host = %self.host, "{message}"),
        }
    }

    /// The task's loop variable; one already defined where the loop runs
    /// (an outer loop's, say) is warned of, as _run_loop warns of the
    /// collision.
    pub(super) fn loop_var_in_scope(
        &self,
        task: &Task,
        ctx: &Context,
    ) -> Result<std::sync::Arc<str>, Flow> {
        let loop_var = self.loop_var(task, ctx)?;
        if task.looping.is_some() {
            self.warn_if_loop_var_in_use(task, ctx, &loop_var);
        }
        Ok(loop_var)
    }

    fn warn_if_loop_var_in_use(&self, task: &Task, ctx: &Context, loop_var: &str) {
        if ctx.resolve(loop_var).is_some_and(|v| !v.is_undefined()) {
            self.warn(format!(
                "TASK: {}: The loop variable '{loop_var}' is already in use. You should set the `loop_var` value in the `loop_control` option for the task to something else to avoid variable collisions and unexpected behavior.",
                task.title()
            ));
        }
    }

    pub(super) fn warn(&self, message: String) {
        if !self.first_time(&message) {
            return;
        }
        match &self.options.observer {
            Some(observer) => observer.warning(&message),
            None => tracing::debug!(host = %self.host, "{message}"),
        }
    }

    /// Ansible's warning for each variable `names` defines with a
    /// reserved name (warn_if_reserved).
    pub(super) fn warn_if_reserved<'n>(&self, names: impl IntoIterator<Item = &'n str>) {
        for name in names {
            if crate::reserved::is_reserved(name) {
                self.warn(crate::reserved::warning(name));
            }
        }
    }
}
