//! How a condition came out ([`Judgement`]), the settings that decide what
//! a result that is not a boolean does ([`ConditionalInspections`]), and
//! ansible-core 2.19's conditionals (`TemplateEngine.evaluate_conditional`):
//! a condition is a string expression whose result must be a boolean.
//!
//! - `when: true` is used as is; `null` (no condition) holds;
//! - any other value that is not a string is refused, as is an empty one;
//! - a condition that is one whole template (`"{{ x }}"`) is templated
//!   first: a result that is not text is the result, text is evaluated as
//!   an expression, unless it came from untrusted data;
//! - a result that is not a boolean is a broken conditional: an error,
//!   unless `ANSIBLE_ALLOW_BROKEN_CONDITIONALS` lets it pass (a deprecation
//!   then, judged by truthiness).

use minijinja::Value;
use minijinja::value::ValueKind;

use crate::error::{Error, ErrorKind};
use crate::{Context, Semantics, Templar, context, pyrepr};

impl Templar {
    /// [`Templar::judge`] under 2.19's rules.
    pub(crate) fn judge_strictly(
        &self,
        condition: &Value,
        ctx: &Context,
    ) -> Result<Judgement, Error> {
        if ctx.depth == 0 {
            ctx.reset();
        }
        let expr = match condition.kind() {
            ValueKind::None | ValueKind::Undefined => return Ok(Judgement::boolean(true)),
            ValueKind::Bool => return Ok(Judgement::boolean(condition.is_true())),
            ValueKind::String if condition.is_safe() => return Err(untrusted()),
            ValueKind::String => condition.as_str().unwrap_or_default().trim(),
            _ => return Err(broken("Conditional expressions must be strings.")),
        };
        if expr.is_empty() {
            return empty_condition();
        }
        let mut delimiters = false;
        let mut text = std::borrow::Cow::Borrowed(expr);
        if is_all_template(expr) {
            delimiters = true;
            let templated = self.render_str(expr, ctx)?;
            if templated.kind() != ValueKind::String {
                return judged(&templated, delimiters);
            }
            if context::contains_unsafe(&templated) {
                return Err(untrusted().in_template(expr));
            }
            text = std::borrow::Cow::Owned(pyrepr::to_text(&templated));
        }
        if !delimiters && context::is_possibly_template(&text) {
            text = std::borrow::Cow::Owned(self.constants_templated(&text, ctx)?);
        }
        let (holds, not_boolean) = self.truth_of(&text, ctx)?;
        match not_boolean {
            None => Ok(Judgement {
                delimiters,
                ..Judgement::boolean(holds)
            }),
            Some(type_name) => not_a_boolean(holds, &type_name, delimiters),
        }
    }
}

impl Templar {
    /// A trusted expression with its string literals that hold a template
    /// rendered (2.19 trusts a conditional expression's constants as
    /// templates: `"dude" == "du{{ 'de' }}"` holds). Delimiters outside a
    /// literal are left for the parser to refuse.
    fn constants_templated(&self, expr: &str, ctx: &Context) -> Result<String, Error> {
        use minijinja::machinery::Token;
        let mut out = String::with_capacity(expr.len());
        let mut copied = 0;
        let tokens = minijinja::machinery::tokenize(expr, true, Default::default());
        for token in tokens {
            let Ok((token, span)) = token else {
                return Ok(expr.to_owned());
            };
            let literal = match &token {
                Token::Str(text) => *text,
                Token::String(text) => text,
                _ => continue,
            };
            if !context::is_possibly_template(literal) {
                continue;
            }
            // An undefined value inside stays a template until used (2.19
            // makes it a lazy marker): a lookup may never read it.
            let rendered = match self.render_str(literal, ctx) {
                Ok(value) => pyrepr::to_text(&value),
                Err(err) if err.is_undefined() => continue,
                Err(err) => return Err(err),
            };
            let (start, end) = (span.start_offset as usize, span.end_offset as usize);
            out.push_str(&expr[copied..start]);
            out.push_str(&jinja_string_literal(&rendered));
            copied = end;
        }
        out.push_str(&expr[copied..]);
        Ok(out)
    }
}

/// `text` as a Jinja string literal.
fn jinja_string_literal(text: &str) -> String {
    let mut literal = String::with_capacity(text.len() + 2);
    literal.push('"');
    for c in text.chars() {
        match c {
            '\\' => literal.push_str("\\\\"),
            '"' => literal.push_str("\\\""),
            '\n' => literal.push_str("\\n"),
            '\r' => literal.push_str("\\r"),
            '\t' => literal.push_str("\\t"),
            c => literal.push(c),
        }
    }
    literal.push('"');
    literal
}

/// Whether the whole condition is one template, as 2.19 asks
/// (`is_possibly_all_template`): it starts and ends with Jinja delimiters.
pub fn is_all_template(expr: &str) -> bool {
    (expr.starts_with("{{") && expr.ends_with("}}"))
        || (expr.starts_with("{%") && expr.ends_with("%}"))
}

/// A templated condition's value as the result.
fn judged(value: &Value, delimiters: bool) -> Result<Judgement, Error> {
    if value.kind() == ValueKind::Bool {
        return Ok(Judgement {
            delimiters,
            ..Judgement::boolean(value.is_true())
        });
    }
    not_a_boolean(value.is_true(), pyrepr::type_name(value), delimiters)
}

fn not_a_boolean(holds: bool, type_name: &str, delimiters: bool) -> Result<Judgement, Error> {
    let truth = if holds { "True" } else { "False" };
    let message = format!(
        "Conditional result ({truth}) was derived from value of type '{type_name}'. Conditionals must have a boolean result."
    );
    if allow_broken() {
        return Ok(Judgement {
            holds,
            not_boolean: Some(type_name.to_owned()),
            delimiters,
        });
    }
    Err(broken(&message))
}

/// An empty condition: refused, or true where broken conditionals pass.
fn empty_condition() -> Result<Judgement, Error> {
    if allow_broken() {
        return Ok(Judgement::boolean(true));
    }
    Err(broken("Empty conditional expressions are not allowed."))
}

/// 2.18's refusal of a condition marked unsafe. The string has no place
/// in a file (Ansible's unsafe text carries none), so the message names none.
pub const UNSAFE_CONDITION: &str = "Conditional is marked as unsafe, and cannot be evaluated.";

impl Templar {
    /// [`Templar::judge`] under 2.18's rules: a string is judged by
    /// truthiness, a result that is no boolean only deprecated (unless the
    /// backported inspection refuses it).
    pub(crate) fn judge_leniently(
        &self,
        condition: &Value,
        ctx: &Context,
    ) -> Result<Judgement, Error> {
        let judgement = match condition.kind() {
            ValueKind::None | ValueKind::Undefined => Judgement::boolean(true),
            ValueKind::Bool => Judgement::boolean(condition.is_true()),
            ValueKind::String if condition.is_safe() => {
                return Err(Error::new(ErrorKind::Invalid, UNSAFE_CONDITION)
                    .in_template(condition.as_str().unwrap_or_default()));
            }
            ValueKind::String => {
                let expr = condition.as_str().unwrap_or_default();
                if expr.is_empty() {
                    return Ok(Judgement::boolean(true));
                }
                self.evaluate_str(expr, ctx)?
            }
            _ => Judgement {
                holds: condition.is_true(),
                not_boolean: Some(pyrepr::type_name(condition).to_owned()),
                delimiters: false,
            },
        };
        let inspections = ConditionalInspections::get();
        match &judgement.not_boolean {
            Some(_) if !inspections.enabled => Ok(Judgement {
                not_boolean: None,
                ..judgement
            }),
            Some(type_name) if !inspections.allow_broken(Semantics::Ansible218) => Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "Conditional result was of type '{type_name}'. Conditional results must be True or False when `ALLOW_BROKEN_CONDITIONALS` is disabled, which is the default in Ansible Core >= 2.19."
                ),
            )),
            _ => Ok(judgement),
        }
    }

    /// 2.19's `resolve_to_container` for a template that names one
    /// variable (`{{ conditions }}`): its list or mapping as written, the
    /// templates inside left for the caller. `None` for anything else.
    pub fn container_as_written(&self, source: &str, ctx: &Context) -> Option<Value> {
        let name = crate::source::single_var(source.trim())?;
        let var = ctx.vars.get(name)?;
        matches!(
            var.value.kind(),
            minijinja::value::ValueKind::Seq | minijinja::value::ValueKind::Map
        )
        .then_some(var.value)
    }
}

/// 2.19's refusal of an expression from an untrusted source (`!unsafe`,
/// a module's result, a custom resource).
pub(crate) fn untrusted() -> Error {
    Error::new(
        ErrorKind::Invalid,
        "Encountered untrusted template or expression.",
    )
}

fn broken(message: &str) -> Error {
    Error::new(ErrorKind::Invalid, message.to_owned())
}

/// `ANSIBLE_ALLOW_BROKEN_CONDITIONALS` under 2.19 (false unless set).
fn allow_broken() -> bool {
    crate::ConditionalInspections::get().allow_broken(crate::Semantics::Ansible219)
}

/// How a conditional came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// Whether it holds.
    pub holds: bool,
    /// The Python type name of a result that was not a boolean.
    pub not_boolean: Option<String>,
    /// The condition held `{{ }}` or `{% %}`, which Ansible warns about.
    pub delimiters: bool,
}

impl Judgement {
    /// Ansible's warning for a condition written with `{{ }}` or `{% %}`
    /// (Conditional._check_conditional), or `None`.
    pub fn delimiters_warning(&self, condition: &Value) -> Option<String> {
        self.delimiters.then(|| {
            format!(
                "conditional statements should not include jinja2 templating delimiters such as {{{{ }}}} or {{% %}}. Found: {}",
                pyrepr::to_text(condition)
            )
        })
    }

    /// 2.18's deprecation of a result that was not a boolean, `place`
    /// saying where the condition is written (`location file 6:13`,
    /// `unknown location (conditional: 1)`), or `None`.
    pub fn not_boolean_deprecation(&self, place: &str) -> Option<String> {
        let type_name = self.not_boolean.as_deref()?;
        let result = if self.holds { "True" } else { "False" };
        Some(format!(
            "Conditional result at {place} was of type '{type_name}'. Conditional results should only be True or False. The result was interpreted as {result}."
        ))
    }

    pub(crate) fn boolean(holds: bool) -> Self {
        Judgement {
            holds,
            not_boolean: None,
            delimiters: false,
        }
    }
}

/// ansible-core's settings for conditionals whose result is not a
/// boolean, read from the environment as its config reads them.
pub(crate) struct ConditionalInspections {
    /// `_ANSIBLE_DISABLE_BACKPORTED_INSPECTIONS` is not set: results are
    /// inspected at all (2.18's backport).
    pub(crate) enabled: bool,
    /// `ANSIBLE_ALLOW_BROKEN_CONDITIONALS` when set: such a result is
    /// deprecated, not an error. Unset, 2.18 allows it and 2.19 does not.
    allow_broken_setting: Option<bool>,
}

impl ConditionalInspections {
    /// Whether a result that is not a boolean passes under `semantics`.
    pub(crate) fn allow_broken(&self, semantics: Semantics) -> bool {
        self.allow_broken_setting
            .unwrap_or(semantics == Semantics::Ansible218)
    }

    /// Read once per process: conditions are evaluated on every reconcile.
    pub(crate) fn get() -> &'static Self {
        static INSPECTIONS: std::sync::OnceLock<ConditionalInspections> =
            std::sync::OnceLock::new();
        INSPECTIONS.get_or_init(Self::from_env)
    }

    fn from_env() -> Self {
        let flag = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| crate::predicates::strict_boolean(&Value::from(v)))
        };
        ConditionalInspections {
            enabled: !flag("_ANSIBLE_DISABLE_BACKPORTED_INSPECTIONS").unwrap_or(false),
            allow_broken_setting: flag("ANSIBLE_ALLOW_BROKEN_CONDITIONALS"),
        }
    }
}
