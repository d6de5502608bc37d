//! Conditions and boolean keywords: `when`, `ignore_errors` and their kin, judged as Ansible's
//! strict booleans.

use enka_project::role::{Location, Task, ansible_excerpt};
use enka_template::{Context, Error as TemplateError, Semantics, Templar};
use minijinja::Value;

use super::outcome::fail_result;
use super::{Flow, Frame, Inherited, InheritedWhen, KeywordError, Runner};

/// A `when` condition that could not be evaluated, with where it is
/// written when known.
pub(super) struct WhenError {
    pub err: TemplateError,
    pub at: Option<Location>,
}

/// `ctx` saying that what it renders is written at `at` (the migration
/// report's place for a condition).
fn placed_at(ctx: &Context, at: &Location, task: &Task) -> Context {
    let pos = at.pos.unwrap_or_default();
    ctx.clone()
        .at(std::sync::Arc::new(enka_template::migration::Origin {
            file: at.file.to_path_buf(),
            line: pos.line,
            column: pos.col,
            task: task.display_name(),
            exact: at.pos.is_some(),
        }))
}

impl Runner {
    /// Evaluates the inherited and own conditions; `Ok(None)` means run,
    /// `Ok(Some(cond))` means skipped because `cond` was false.
    pub(super) fn check_when(
        &self,
        ctx: &Context,
        inherited: &Inherited,
        task: &Task,
    ) -> Result<Option<Value>, WhenError> {
        let own = InheritedWhen::of(task);
        for level in inherited.when.iter().chain(std::iter::once(&own)) {
            for (index, condition) in level.conditions.iter().enumerate() {
                let at = level.written.as_ref().and_then(|(file, positions)| {
                    let pos = positions.get(index).copied().flatten()?;
                    Some(Location::new(file, pos))
                });
                let placed;
                let ctx = match &at {
                    Some(at) if self.templar.options().migration.is_some() => {
                        placed = placed_at(ctx, at, task);
                        &placed
                    }
                    _ => ctx,
                };
                let judgement = self
                    .templar
                    .judge(condition, ctx)
                    .map_err(|err| WhenError {
                        err,
                        at: at.clone(),
                    })?;
                if let Some(warning) = judgement.delimiters_warning(condition) {
                    self.warn(warning);
                }
                if judgement.not_boolean.is_some() {
                    // Only a condition written in the task's own file is
                    // placed where it is; another is placed at the task,
                    // as Ansible does for a condition without a position.
                    let here = at
                        .as_ref()
                        .filter(|at| at.file == task.location.file)
                        .and_then(|at| at.pos);
                    self.deprecate_broken_conditional(task, here, &judgement);
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
            KeywordError::NotBoolean(match self.semantics() {
                Semantics::Ansible218 => format!(
                    "the field '{keyword}' has an invalid value ({text}), and could not be converted to bool. The error was: The value '{text}' is not a valid boolean.  Valid booleans include: 'yes', 'on', 'true', '1', 't', 'y', 1, 1.0, True, 'no', 'off', 'false', '0', 'f', 'n', 0, 0.0, False"
                ),
                Semantics::Ansible219 => format!(
                    "Task failed: Error processing keyword '{keyword}': The value {} could not be converted to 'bool'.",
                    enka_template::pyrepr::repr(&value)
                ),
            })
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

    /// A `loop_control.break_when` that could not be evaluated.
    pub(super) fn conditional_failure(&self, task: &Task, err: &TemplateError) -> Flow {
        let message = match self.semantics() {
            Semantics::Ansible218 => conditional_error(err),
            Semantics::Ansible219 => condition_error_219(err, None),
        };
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }

    /// The error of a condition written at `at` in `task`'s file, as the
    /// run's line words a task's failure for it: 2.18's quoted condition
    /// and where it is written, 2.19's `Task failed:` and its origin.
    /// `keyword` names the condition's keyword where 2.21 names it.
    pub(super) fn condition_failure_text(
        &self,
        task: &Task,
        at: Option<enka_yaml::Pos>,
        err: &TemplateError,
        keyword: Option<&str>,
    ) -> String {
        match self.semantics() {
            Semantics::Ansible218 if err.message() == enka_template::UNSAFE_CONDITION => {
                conditional_error(err)
            }
            Semantics::Ansible218 => located(conditional_error(err), task, at),
            Semantics::Ansible219 => {
                let written = Location {
                    file: task.location.file.clone(),
                    pos: at,
                };
                format!(
                    "Task failed: {}{}",
                    self.expression_failed(keyword),
                    condition_error_219(err, Some(&written))
                )
            }
        }
    }

    /// 2.21's words before a `when` or `until` that failed (`A 'when'
    /// expression failed: `); nothing before 2.21.
    fn expression_failed(&self, keyword: Option<&str>) -> String {
        match keyword {
            Some(keyword) if self.templar.options().release_at_least(21) => {
                let article = if keyword.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "An"
                } else {
                    "A"
                };
                format!("{article} '{keyword}' expression failed: ")
            }
            _ => String::new(),
        }
    }

    /// The `index`-th condition of task keyword `keyword` (`until`) could
    /// not be evaluated: Ansible's message, then where it is written.
    pub(super) fn keyword_condition_failure(
        &self,
        task: &Task,
        keyword: &str,
        index: usize,
        err: &TemplateError,
    ) -> Flow {
        let at = condition_at(task, keyword, index);
        let message = self.condition_failure_text(task, at, err, Some(keyword));
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }

    /// A `when` that could not be evaluated: Ansible's message, then where
    /// the condition is written, as its errors show it.
    pub(super) fn when_failure(&self, task: &Task, when: &WhenError) -> Flow {
        let message = match self.semantics() {
            Semantics::Ansible218 => {
                let mut message = conditional_error(&when.err);
                if let Some(excerpt) = when.at.as_ref().and_then(ansible_excerpt) {
                    message.push_str("\n\n");
                    message.push_str(&excerpt);
                }
                message
            }
            Semantics::Ansible219 => format!(
                "Task failed: {}{}",
                self.expression_failed(Some("when")),
                condition_error_219(&when.err, when.at.as_ref())
            ),
        };
        Flow::Failed(self.failure(task, message.clone(), fail_result(&message)))
    }
}

pub(super) fn all_true(
    templar: &Templar,
    conditions: &[Value],
    ctx: &Context,
) -> Result<bool, TemplateError> {
    all_true_at(templar, conditions, ctx).map_err(|(_, err)| err)
}

/// [`all_true`], with the index of the condition that failed.
pub(super) fn all_true_at(
    templar: &Templar,
    conditions: &[Value],
    ctx: &Context,
) -> Result<bool, (usize, TemplateError)> {
    for (index, condition) in conditions.iter().enumerate() {
        if !templar
            .evaluate(condition, ctx)
            .map_err(|err| (index, err))?
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Where the `index`-th condition of `task`'s keyword `keyword` (`until`,
/// `changed_when`, `failed_when`) is written.
pub(super) fn condition_at(task: &Task, keyword: &str, index: usize) -> Option<enka_yaml::Pos> {
    task.condition_positions
        .iter()
        .find(|(name, _)| &**name == keyword)
        .and_then(|(_, positions)| positions.get(index).copied().flatten())
}

/// `message`, then where it happened in `task`'s file (at `at`), as
/// Ansible's errors with a positioned object show it; `message` alone
/// without a position.
pub(super) fn located(mut message: String, task: &Task, at: Option<enka_yaml::Pos>) -> String {
    let written = Location {
        file: task.location.file.clone(),
        pos: at,
    };
    if let Some(excerpt) = ansible_excerpt(&written) {
        message.push_str("\n\n");
        message.push_str(&excerpt);
    }
    message
}

/// 2.19's message for a condition that could not be evaluated: the
/// error's own, a result that is no boolean naming where it came from.
/// (2.19 names the origin of the value; for a value a variable holds that
/// is where the variable is written, which enka does not track: it names
/// the condition, the origin of every value the condition computes.)
pub(super) fn condition_error_219(err: &TemplateError, at: Option<&Location>) -> String {
    let message = err.message_in(Semantics::Ansible219);
    const NOT_BOOLEAN: &str = ". Conditionals must have a boolean result.";
    match (at, message.strip_suffix(NOT_BOOLEAN)) {
        (
            Some(Location {
                file,
                pos: Some(pos),
            }),
            Some(head),
        ) if head.starts_with("Conditional result (") => {
            format!(
                "{head} at '{}:{}:{}'{NOT_BOOLEAN}",
                file.display(),
                pos.line,
                pos.col
            )
        }
        _ => message.into_owned(),
    }
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
