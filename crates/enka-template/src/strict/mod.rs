//! Python's strictness where minijinja is lenient, as ansible-core's
//! templating has it:
//!
//! - **Undefined values.** Ansible's `AnsibleUndefined` may be chained
//!   (`a.b.c | default(1)` works when `a` has no `b`), but using one fails
//!   the template: as a condition (`{% if %}`, an inline `if`, `and`/`or`,
//!   `not`), as a loop's items, as an operand, as what most filters and
//!   tests take, as a method's receiver or argument. minijinja's chainable
//!   mode reads it as false, empty or unequal instead, so `when:
//!   d.missing == 1` would skip a task that Ansible fails.
//! - **Ordering and membership between types** (`'three' > 3`, `1 in
//!   'abc'`, `x in 3`), a TypeError in Python, which minijinja orders by
//!   type instead (`pycompare.rs`).
//!
//! minijinja has no hook for either, so each template is rewritten once,
//! when it is compiled, from minijinja's own parse of it (`walk.rs` finds
//! the places, `edit.rs` rewrites the text): an expression used so is
//! wrapped in `__enka_strict(expr, 'expr')`, which passes its value through
//! and fails on an undefined one, naming it; a comparison `a < b` becomes
//! `__enka_compare(a, '<', b)`. Jinja's plain undefined (an inline `if`
//! without `else`) passes, as in Jinja.

mod edit;
mod walk;

use std::borrow::Cow;

use minijinja::machinery::parse;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, Value};

const STRICT: &str = "__enka_strict";
const PLUGIN_ARG: &str = "__enka_plugin_arg";
const COMPARE: &str = "__enka_compare";
const ITERABLE: &str = "__enka_iterable";
const SLICEABLE: &str = "__enka_sliceable";
const STEP: &str = "__enka_step";

/// Registers the functions the rewritten templates call, for the line
/// `semantics` follows.
pub fn register(env: &mut Environment<'static>, semantics: crate::Semantics) {
    env.add_function(STRICT, defined);
    if semantics.passes_markers() {
        // 2.19: the plugin gets the undefined value and hands it back.
        env.add_function(PLUGIN_ARG, |value: Value, _text: &str| value);
    } else {
        env.add_function(PLUGIN_ARG, defined);
    }
    let omit_is_text = !semantics.native();
    env.add_function(SLICEABLE, move |value: Value, text: &str| {
        let value = defined(value, text)?;
        // 2.19's omit is a sentinel of its own, no text to slice.
        let class = match () {
            _ if value.is_none() => "NoneType",
            _ if !omit_is_text && value.as_str() == Some(crate::omit_token()) => "_OmitType",
            _ => return Ok(value),
        };
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("'{class}' object is not subscriptable"),
        ))
    });
    env.add_function(STEP, |step: Value, sliced: Value| {
        let negative = i64::try_from(step.clone()).is_ok_and(|s| s < 0);
        if negative && sliced.len() == Some(0) {
            return Value::from(1);
        }
        step
    });
    env.add_function(ITERABLE, |value: Value, text: &str| {
        let value = defined(value, text)?;
        match value.kind() {
            // A loop's `loop.last` needs the length, which minijinja does
            // not know while it iterates a string.
            ValueKind::String => Ok(Value::from(
                value
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .map(|c| crate::context::keep_unsafe(&value, Value::from(c.to_string())))
                    .collect::<Vec<_>>(),
            )),
            ValueKind::None | ValueKind::Number | ValueKind::Bool => Err(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "'{}' object is not iterable",
                    crate::pyrepr::type_name(&value)
                ),
            )),
            _ => Ok(value),
        }
    });
    env.add_function(COMPARE, |lhs: Value, op: &str, rhs: Value| {
        crate::pycompare::compare(&lhs, op, &rhs)
    });
}

/// Whether test `name` looks at an undefined value without failing on it
/// (`defined`, the type tests): `selectattr` asks for a missing attribute.
pub(crate) fn takes_undefined(name: &str) -> bool {
    walk::LENIENT_TESTS.contains(&name.strip_prefix("ansible.builtin.").unwrap_or(name))
}

/// `value`, unless it is undefined (Jinja's plain undefined passes).
fn defined(value: Value, text: &str) -> Result<Value, Error> {
    if crate::is_strict_undefined(&value) {
        return Err(crate::error::Cause::UndefinedUse(text.to_owned())
            .error(ErrorKind::UndefinedError, format!("'{text}' is undefined")));
    }
    Ok(value)
}

/// `source` rewritten; borrowed when there is nothing to rewrite (or when
/// it does not parse: minijinja then reports the error on what the author
/// wrote).
pub fn rewrite(source: &str) -> Cow<'_, str> {
    if !source.contains("{{") && !source.contains("{%") {
        return Cow::Borrowed(source);
    }
    let Ok(tree) = parse(source, "<template>", SyntaxConfig::default()) else {
        return Cow::Borrowed(source);
    };
    let Some(tokens) = edit::Tokens::of(source) else {
        return Cow::Borrowed(source);
    };
    let Some(uses) = walk::uses(&tree, source) else {
        return Cow::Borrowed(source);
    };
    if uses.is_empty() {
        return Cow::Borrowed(source);
    }
    Cow::Owned(edit::apply(source, &tokens, &uses))
}

#[cfg(test)]
mod tests;
