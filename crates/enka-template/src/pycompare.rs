//! Python's ordering (`<`, `<=`, `>`, `>=`) and membership (`in`, `not
//! in`), which raise a TypeError between values Python does not compare
//! (`'three' > 3`, `1 in 'abc'`, `x in 3`) where minijinja orders values of
//! different types by type. `strict.rs` rewrites each such comparison into
//! a call of [`compare`] when the template is compiled.

use std::cmp::Ordering;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

use crate::pyrepr::type_name;

/// `lhs op rhs`, for `op` one of `<`, `<=`, `>`, `>=`, `in`, `not in`.
pub fn compare(lhs: &Value, op: &str, rhs: &Value) -> Result<bool, Error> {
    match op {
        "in" => contains(rhs, lhs),
        "not in" => contains(rhs, lhs).map(|found| !found),
        _ => {
            let ordering = order(lhs, rhs, op)?;
            Ok(match op {
                "<" => ordering == Ordering::Less,
                "<=" => ordering != Ordering::Greater,
                ">" => ordering == Ordering::Greater,
                _ => ordering != Ordering::Less,
            })
        }
    }
}

fn type_error(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

fn is_number(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Number | ValueKind::Bool)
}

fn is_sequence(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable)
}

/// How Python orders `lhs` against `rhs`, or its TypeError.
fn order(lhs: &Value, rhs: &Value, op: &str) -> Result<Ordering, Error> {
    let unordered = || {
        type_error(format!(
            "'{op}' not supported between instances of '{}' and '{}'",
            type_name(lhs),
            type_name(rhs)
        ))
    };
    match (lhs.kind(), rhs.kind()) {
        _ if is_number(lhs) && is_number(rhs) => {
            let (a, b) = (as_number(lhs), as_number(rhs));
            // NaN orders against nothing: every comparison is false.
            Ok(a.partial_cmp(&b).unwrap_or(Ordering::Equal)).map(|o| {
                if a.is_nan() || b.is_nan() {
                    nan_ordering(op)
                } else {
                    o
                }
            })
        }
        (ValueKind::String, ValueKind::String) => Ok(lhs
            .as_str()
            .unwrap_or_default()
            .cmp(rhs.as_str().unwrap_or_default())),
        _ if is_sequence(lhs) && is_sequence(rhs) => {
            let (a, b): (Vec<Value>, Vec<Value>) = (items(lhs), items(rhs));
            for (x, y) in a.iter().zip(&b) {
                if x != y {
                    return order(x, y, op);
                }
            }
            Ok(a.len().cmp(&b.len()))
        }
        // Datetimes and dates order among their own kind.
        _ if type_name(lhs) == type_name(rhs) && crate::pytime::type_name(lhs).is_some() => {
            lhs.partial_cmp(rhs).ok_or_else(unordered)
        }
        _ => Err(unordered()),
    }
}

/// An ordering that makes `op` false, for a NaN operand.
fn nan_ordering(op: &str) -> Ordering {
    match op {
        "<" | "<=" => Ordering::Greater,
        _ => Ordering::Less,
    }
}

fn as_number(value: &Value) -> f64 {
    match value.kind() {
        ValueKind::Bool => f64::from(u8::from(value.is_true())),
        _ => f64::try_from(value.clone()).unwrap_or(f64::NAN),
    }
}

fn items(value: &Value) -> Vec<Value> {
    value.try_iter().map(Iterator::collect).unwrap_or_default()
}

/// Python's `needle in haystack`.
fn contains(haystack: &Value, needle: &Value) -> Result<bool, Error> {
    match haystack.kind() {
        ValueKind::String => match needle.as_str() {
            Some(needle) => Ok(haystack.as_str().unwrap_or_default().contains(needle)),
            None => Err(type_error(format!(
                "'in <string>' requires string as left operand, not {}",
                type_name(needle)
            ))),
        },
        ValueKind::Map => {
            if matches!(needle.kind(), ValueKind::Seq | ValueKind::Map) {
                return Err(type_error(format!(
                    "unhashable type: '{}'",
                    type_name(needle)
                )));
            }
            Ok(haystack.get_item(needle).is_ok_and(|v| !v.is_undefined()))
        }
        // Python compares item by item until one is equal; an undefined
        // item met first raises.
        ValueKind::Seq | ValueKind::Iterable => {
            for item in haystack.try_iter()? {
                if crate::is_strict_undefined(&item) {
                    return Err(Error::new(
                        ErrorKind::UndefinedError,
                        "an item of the collection looked in is undefined",
                    ));
                }
                if &item == needle {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        // Jinja's plain undefined iterates as nothing.
        ValueKind::Undefined if crate::is_silent_undefined(haystack) => Ok(false),
        _ => Err(type_error(format!(
            "argument of type '{}' is not iterable",
            type_name(haystack)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(json: serde_json::Value) -> Value {
        crate::convert::from_json(&json)
    }

    #[test]
    fn orders_as_python_does() {
        assert!(compare(&v(1.into()), "<", &v(2.5.into())).unwrap());
        assert!(compare(&v(true.into()), "<", &v(2.into())).unwrap());
        assert!(compare(&v("b".into()), ">", &v("a".into())).unwrap());
        assert!(
            compare(
                &v(serde_json::json!([1, 2])),
                "<",
                &v(serde_json::json!([1, 3]))
            )
            .unwrap()
        );
        assert!(
            compare(
                &v(serde_json::json!([1])),
                "<",
                &v(serde_json::json!([1, 0]))
            )
            .unwrap()
        );
        let err = compare(&v("three".into()), ">", &v(3.into())).unwrap_err();
        assert_eq!(
            err.detail(),
            Some("'>' not supported between instances of 'str' and 'int'")
        );
        assert!(compare(&v(serde_json::json!({})), "<", &v(serde_json::json!({}))).is_err());
        assert!(compare(&Value::from(()), "<", &v(1.into())).is_err());
    }

    #[test]
    fn membership_as_python_does() {
        assert!(compare(&v("b".into()), "in", &v("abc".into())).unwrap());
        assert!(compare(&v(2.into()), "in", &v(serde_json::json!([1, 2]))).unwrap());
        assert!(compare(&v("k".into()), "in", &v(serde_json::json!({"k": 1}))).unwrap());
        assert!(compare(&v("z".into()), "not in", &v(serde_json::json!({"k": 1}))).unwrap());
        let err = compare(&v(1.into()), "in", &v("abc".into())).unwrap_err();
        assert_eq!(
            err.detail(),
            Some("'in <string>' requires string as left operand, not int")
        );
        let err = compare(&v(1.into()), "in", &v(3.into())).unwrap_err();
        assert_eq!(err.detail(), Some("argument of type 'int' is not iterable"));
    }
}
