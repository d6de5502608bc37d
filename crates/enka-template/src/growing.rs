//! The operators that build values, `*`, `~` and `+`, as filters that ask
//! the render's memory budget ([`crate::budget`]) for what they are about to
//! build, then build it as minijinja's own operators do ([`crate::operators`]
//! rewrites the template to call them).
//!
//! Only strings and lists grow: numbers, tuples and every error go to
//! minijinja's own operator, compiled once in an environment of its own, so
//! results and messages stay minijinja's.

use std::sync::OnceLock;

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, Expression, Value, context};

use crate::budget;

pub(crate) const TIMES: &str = "__enka_times";
pub(crate) const CONCAT: &str = "__enka_concat";
pub(crate) const PLUS: &str = "__enka_plus";

/// Whether filter `name` is one of these operators.
pub(crate) fn is_operator(name: &str) -> bool {
    [TIMES, CONCAT, PLUS].contains(&name)
}

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_filter(TIMES, times);
    env.add_filter(CONCAT, concat);
    env.add_filter(PLUS, plus);
}

/// `lhs * rhs`: a string or list repeated is checked first.
fn times(lhs: &Value, rhs: &Value) -> Result<Value, Error> {
    let repeated = |value: &Value, count: &Value| -> Option<usize> {
        let count = count.as_usize()?;
        if let Some(text) = value.as_str() {
            return Some(text.len().saturating_mul(count));
        }
        if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
            return None;
        }
        Some(budget::list_bytes(value.len()?.saturating_mul(count)))
    };
    if let Some(bytes) = repeated(lhs, rhs).or_else(|| repeated(rhs, lhs)) {
        budget::check(bytes, "repeating a value")?;
    }
    native(Native::Times, lhs, rhs)
}

/// `lhs ~ rhs`: both as text, joined.
fn concat(lhs: &Value, rhs: &Value) -> Result<Value, Error> {
    let text = |value: &Value| -> Result<Option<String>, Error> {
        if value.as_str().is_some() {
            return Ok(None);
        }
        let text = value.to_string();
        budget::check(text.len(), "a value as text")?;
        Ok(Some(text))
    };
    let (left, right) = (text(lhs)?, text(rhs)?);
    let left = left.as_deref().or(lhs.as_str()).unwrap_or_default();
    let right = right.as_deref().or(rhs.as_str()).unwrap_or_default();
    budget::check(left.len() + right.len(), "joining text with `~`")?;
    Ok(Value::from([left, right].concat()))
}

/// `lhs + rhs`: strings and lists joined are checked first (a list joined
/// stays lazy in minijinja, but what reads it builds it whole).
fn plus(lhs: &Value, rhs: &Value) -> Result<Value, Error> {
    if let (Some(left), Some(right)) = (lhs.as_str(), rhs.as_str()) {
        budget::check(left.len() + right.len(), "joining text with `+`")?;
        return Ok(Value::from([left, right].concat()));
    }
    let is_list = |v: &Value| matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable);
    if is_list(lhs) && is_list(rhs) {
        let items = lhs
            .len()
            .unwrap_or(0)
            .saturating_add(rhs.len().unwrap_or(0));
        budget::check(budget::list_bytes(items), "joining lists with `+`")?;
    }
    native(Native::Plus, lhs, rhs)
}

#[derive(Clone, Copy)]
enum Native {
    Times,
    Plus,
}

/// `lhs <op> rhs` by minijinja itself.
fn native(op: Native, lhs: &Value, rhs: &Value) -> Result<Value, Error> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    static TIMES: OnceLock<Option<Expression<'static, 'static>>> = OnceLock::new();
    static PLUS: OnceLock<Option<Expression<'static, 'static>>> = OnceLock::new();
    let env = ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
        env
    });
    let (cell, source) = match op {
        Native::Times => (&TIMES, "a * b"),
        Native::Plus => (&PLUS, "a + b"),
    };
    let expression = cell
        .get_or_init(|| env.compile_expression(source).ok())
        .as_ref()
        .ok_or_else(|| Error::new(minijinja::ErrorKind::InvalidOperation, source))?;
    // The error is raised again without the helper's place, so that the
    // template's own span is the one reported.
    expression
        .eval(context! { a => lhs, b => rhs })
        .map_err(|err| match err.detail() {
            Some(detail) => Error::new(err.kind(), detail.to_owned()),
            None => Error::from(err.kind()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_strings_are_minijinjas_results() {
        let num = |v: i64| Value::from(v);
        assert_eq!(times(&num(6), &num(7)).unwrap(), num(42));
        assert_eq!(plus(&num(6), &num(7)).unwrap(), num(13));
        assert_eq!(
            times(&Value::from("ab"), &num(3)).unwrap(),
            Value::from("ababab")
        );
        assert_eq!(
            concat(&Value::from("a"), &num(1)).unwrap(),
            Value::from("a1")
        );
        let list = plus(&Value::from(vec![1]), &Value::from(vec![2])).unwrap();
        assert_eq!(list.len(), Some(2));
        assert!(plus(&Value::from("a"), &num(1)).is_err());
    }

    #[test]
    fn growing_past_the_budget_fails_before_building() {
        let _scope = budget::enter(1 << 20);
        let err = times(&Value::from("x"), &Value::from(100_000_000)).unwrap_err();
        assert!(err.to_string().contains("repeating a value"), "{err}");
        let half = Value::from("y".repeat(600 * 1024));
        assert!(concat(&half, &half).is_err());
        assert!(plus(&half, &half).is_err());
        let list = Value::from(vec![0; 1000]);
        assert!(times(&list, &Value::from(100_000)).is_err());
    }
}
