//! Conditions and boolean keywords: `when`, `ignore_errors` and their kin, judged as Ansible's
//! strict booleans.

use enka_project::role::Task;
use enka_template::{Context, Error as TemplateError, Templar};
use minijinja::Value;

use super::outcome::fail_result;
use super::{Flow, Frame, Inherited, KeywordError, Runner};

impl Runner {
    /// Evaluates the inherited and own conditions; `Ok(None)` means run,
    /// `Ok(Some(cond))` means skipped because `cond` was false.
    pub(super) fn check_when(
        &self,
        ctx: &Context,
        inherited: &Inherited,
        task: &Task,
    ) -> Result<Option<Value>, TemplateError> {
        let own = std::iter::once(&task.when[..]);
        for (level, conditions) in inherited.when.iter().map(|c| &c[..]).chain(own).enumerate() {
            let is_own = level == inherited.when.len();
            for (index, condition) in conditions.iter().enumerate() {
                let judgement = self.templar.judge(condition, ctx)?;
                if let Some(warning) = judgement.delimiters_warning(condition) {
                    self.warn(warning);
                }
                if judgement.not_boolean.is_some() {
                    // Only the task's own conditions have their position;
                    // an inherited one is placed at the task, as Ansible
                    // does for a condition without one.
                    let at = task
                        .when_positions
                        .get(index)
                        .copied()
                        .flatten()
                        .filter(|_| is_own);
                    self.deprecate_broken_conditional(task, at, &judgement);
                }
                if !judgement.holds {
                    return Ok(Some(condition.clone()));
                }
            }
        }
        Ok(None)
    }

    /// 2.18's deprecation of a condition whose result is not a boolean,
    /// with where it is written (Conditional._get_conditional_source_context).
    pub(super) fn deprecate_broken_conditional(
        &self,
        task: &Task,
        at: Option<enka_yaml::Pos>,
        judgement: &enka_template::Judgement,
    ) {
        let file = task.location.file.display();
        let place = match (at, task.location.pos) {
            (Some(pos), _) => format!("location {file} {}:{}", pos.line, pos.col),
            (None, Some(pos)) => format!("approximate location {file} {}:{}", pos.line, pos.col),
            (None, None) => format!("approximate location {file}"),
        };
        if let Some(message) = judgement.not_boolean_deprecation(&place) {
            self.deprecate(message, "2.19");
        }
    }

    pub(super) fn flag(
        &self,
        ctx: &Context,
        own: Option<&Value>,
        inherited: &[Value],
    ) -> Result<bool, TemplateError> {
        let value = own.or_else(|| inherited.last());
        match value {
            None => Ok(false),
            Some(v) => {
                let v = self.templar.template_value(v, ctx)?;
                Ok(enka_template::to_bool(&v))
            }
        }
    }

    /// A boolean keyword (the task's, else its blocks' and play's) as
    /// FieldAttributeBase.post_validate converts it: templated, then
    /// `boolean(value, strict=True)`.
    pub(super) fn keyword_bool(
        &self,
        ctx: &Context,
        own: Option<&Value>,
        inherited: &[Value],
        keyword: &str,
    ) -> Result<bool, KeywordError> {
        let Some(raw) = own.or_else(|| inherited.last()) else {
            return Ok(false);
        };
        let value = self
            .templar
            .template_value(raw, ctx)
            .map_err(KeywordError::Template)?;
        if value.is_none() || value.is_undefined() {
            return Ok(false);
        }
        enka_template::strict_boolean(&value).ok_or_else(|| {
            let text = enka_template::pyrepr::to_text(&value);
            KeywordError::NotBoolean(format!(
                "the field '{keyword}' has an invalid value ({text}), and could not be converted to bool. The error was: The value '{text}' is not a valid boolean.  Valid booleans include: 'yes', 'on', 'true', '1', 't', 'y', 1, 1.0, True, 'no', 'off', 'false', '0', 'f', 'n', 0, 0.0, False"
            ))
        })
    }

    /// A keyword of the task (else of its blocks and play) that is a flag,
    /// templated in the task's scope; a template error fails the task.
    pub(super) fn task_flag(
        &self,
        frame: &Frame,
        task: &Task,
        own: Option<&Value>,
        inherited: &[Value],
        keyword: &str,
    ) -> Result<bool, Flow> {
        let scope = self.task_scope(frame, task);
        let ctx = self.context(frame, &scope, task);
        self.flag(&ctx, own, inherited)
            .map_err(|err| self.template_failure(task, keyword, &err))
    }

    pub(super) fn conditional_failure(&self, task: &Task, err: &TemplateError) -> Flow {
        let message = conditional_error(err);
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }
}

pub(super) fn all_true(
    templar: &Templar,
    conditions: &[Value],
    ctx: &Context,
) -> Result<bool, TemplateError> {
    for condition in conditions {
        if !templar.evaluate(condition, ctx)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Ansible's message for a condition that could not be evaluated, quoting
/// the condition as its Conditional does.
pub(super) fn conditional_error(err: &TemplateError) -> String {
    match err.template() {
        Some(condition) => format!(
            "The conditional check '{condition}' failed. The error was: {}",
            err.message()
        ),
        None => format!("The conditional check failed. The error was: {err}"),
    }
}
