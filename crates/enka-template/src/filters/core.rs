//! Types and defaults: `default`, `mandatory`, `bool`, `int`, `float`,
//! `string`, `ternary`, `type_debug`, `length`, `attr`.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

use super::{defined, invalid};
use crate::{Semantics, pyrepr};

/// Jinja's `default(value, default_value='', boolean=False)`.
pub(super) fn default(
    state: &State,
    value: &Value,
    args: Rest<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    // 2.19 stores a filter's input before calling it, and Jinja's own
    // undefined value (an inline `if` that was false) cannot be stored.
    if value.is_undefined()
        && crate::is_silent_undefined(value)
        && super::semantics(state) == crate::Semantics::Ansible219
    {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "Error rendering template: Type 'Undefined' is unsupported for variable storage.",
        ));
    }
    if args.len() > 2 {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "default takes at most 2 arguments",
        ));
    }
    // An undefined default is returned as it is (`x | d(y)` is undefined
    // when both are), so the arguments are read as values, not options.
    let default_value = match args.first() {
        Some(v) => v.clone(),
        None => kwargs
            .get::<Option<Value>>("default_value")?
            .unwrap_or_else(|| Value::from("")),
    };
    let boolean = match args.get(1) {
        Some(b) => b.is_true(),
        None => kwargs.get::<Option<bool>>("boolean")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    if value.is_undefined() || (boolean && !value.is_true()) {
        Ok(default_value)
    } else {
        Ok(value.clone())
    }
}

/// Ansible's `mandatory`: a filter error naming the undefined variable
/// (the name is filled in from the template's source, which knows it).
pub(super) fn mandatory(value: &Value, msg: Option<String>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(match msg {
            Some(msg) => Error::new(ErrorKind::InvalidOperation, msg),
            None => crate::error::Cause::MandatoryUndefined.error(
                ErrorKind::InvalidOperation,
                "Mandatory variable not defined.",
            ),
        });
    }
    Ok(value.clone())
}

/// Ansible's `boolean(value)` (module_utils' convert_bool): `Some(truth)`
/// for what it lists as true or false, `None` for anything else, which
/// `strict=False` reads as false and a strict call refuses.
pub fn ansible_boolean(value: &Value) -> Option<bool> {
    match value.kind() {
        ValueKind::Bool => Some(value.is_true()),
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(1.0) => Some(true),
            Ok(0.0) => Some(false),
            _ => None,
        },
        ValueKind::String => {
            match value
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_lowercase()
                .as_str()
            {
                "y" | "yes" | "on" | "1" | "true" | "t" => Some(true),
                "n" | "no" | "off" | "0" | "false" | "f" => Some(false),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Ansible's `to_bool`: true for `True`, `1` and the strings `yes`, `on`,
/// `1`, `true` (any case); false for everything else, including `None`.
pub fn to_bool(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Bool => value.is_true(),
        ValueKind::None | ValueKind::Undefined => false,
        ValueKind::String => matches!(
            value.as_str().unwrap_or_default().to_lowercase().as_str(),
            "yes" | "on" | "1" | "true"
        ),
        ValueKind::Number => f64::try_from(value.clone()).is_ok_and(|f| f == 1.0),
        _ => false,
    }
}

/// The `bool` filter: like [`to_bool`], but `None` stays `None` (2.18;
/// 2.19 makes it `False`).
pub(super) fn to_bool_filter(state: &State, value: &Value) -> Result<Value, Error> {
    defined(value, "bool")?;
    if value.is_none() {
        return Ok(match super::semantics(state) {
            Semantics::Ansible218 => Value::from(()),
            Semantics::Ansible219 => Value::from(false),
        });
    }
    Ok(Value::from(to_bool(value)))
}

/// Python's `int(str, base)`, which allows surrounding whitespace, a sign,
/// underscores between digits and a matching base prefix.
fn parse_python_int(text: &str, base: i64) -> Option<i128> {
    // Python refuses any other base with a ValueError.
    let base = u32::try_from(base)
        .ok()
        .filter(|&b| b == 0 || (2..=36).contains(&b))?;
    let t = text.trim();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let prefix = match t.get(..2).map(str::to_ascii_lowercase).as_deref() {
        Some("0x") => Some(16),
        Some("0o") => Some(8),
        Some("0b") => Some(2),
        _ => None,
    };
    let (radix, digits) = match (base, prefix) {
        // Base 0 reads the prefix; after one, an underscore may come first.
        (0, Some(radix)) => (radix, t[2..].strip_prefix('_').unwrap_or(&t[2..])),
        // Without one it is decimal, where only zero may start with 0.
        (0, None) if t.starts_with('0') && t.contains(|c| !matches!(c, '0' | '_')) => return None,
        (0, None) => (10, t),
        (base, Some(radix)) if radix == base => (base, t[2..].strip_prefix('_').unwrap_or(&t[2..])),
        (base, _) => (base, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let cleaned = digits.replace('_', "");
    let n = i128::from_str_radix(&cleaned, radix).ok()?;
    Some(if negative { -n } else { n })
}

/// Python's `float(str)`.
pub fn parse_python_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if matches!(body, "inf" | "infinity" | "nan") {
        let f = if body == "nan" {
            f64::NAN
        } else {
            f64::INFINITY
        };
        return Some(if lower.starts_with('-') { -f } else { f });
    }
    if t.is_empty() || t.contains("__") || t.starts_with('_') || t.ends_with('_') {
        return None;
    }
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_'))
    {
        return None;
    }
    t.replace('_', "").parse().ok()
}

fn int_value(i: i128) -> Value {
    i64::try_from(i)
        .map(Value::from)
        .unwrap_or_else(|_| Value::from(i))
}

/// Jinja's `int(value, default=0, base=10)`: `"42.7"` gives 42, and anything
/// that is not a number gives `default`.
pub(super) fn int(
    value: &Value,
    default: Option<Value>,
    base: Option<i64>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    defined(value, "int")?;
    let default = match default {
        Some(d) => d,
        None => kwargs
            .get::<Option<Value>>("default")?
            .unwrap_or(Value::from(0)),
    };
    let base = match base {
        Some(b) => b,
        None => kwargs.get::<Option<i64>>("base")?.unwrap_or(10),
    };
    kwargs.assert_all_used()?;
    match value.kind() {
        ValueKind::Bool => Ok(Value::from(i64::from(value.is_true()))),
        ValueKind::Number if value.is_integer() => Ok(value.clone()),
        ValueKind::Number => {
            let f = f64::try_from(value.clone()).map_err(|_| invalid("cannot convert to int"))?;
            float_to_int(f)
                .map(int_value)
                .ok_or_else(|| invalid("cannot convert float infinity or NaN to integer"))
        }
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default();
            if let Some(i) = parse_python_int(s, base) {
                return Ok(int_value(i));
            }
            match parse_python_float(s) {
                Some(f) if f.is_finite() => Ok(float_to_int(f).map(int_value).unwrap_or(default)),
                Some(f) if f.is_infinite() => {
                    Err(invalid("cannot convert float infinity to integer"))
                }
                _ => Ok(default),
            }
        }
        _ => Ok(default),
    }
}

fn float_to_int(f: f64) -> Option<i128> {
    if !f.is_finite() {
        return None;
    }
    let t = f.trunc();
    if t.abs() >= 1.7e38 {
        return None;
    }
    Some(t as i128)
}

/// Jinja's `float(value, default=0.0)`.
pub(super) fn float(value: &Value, default: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = match default {
        Some(d) => d,
        None => kwargs
            .get::<Option<Value>>("default")?
            .unwrap_or(Value::from(0.0)),
    };
    kwargs.assert_all_used()?;
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => Value::from(f64::try_from(value.clone()).unwrap_or(0.0)),
        ValueKind::String => parse_python_float(value.as_str().unwrap_or_default())
            .map(Value::from)
            .unwrap_or(default),
        _ => default,
    })
}

/// Python's `str(value)`.
pub(super) fn string(value: &Value) -> Result<Value, Error> {
    defined(value, "string")?;
    Ok(Value::from(pyrepr::to_text(value)))
}

pub(super) fn ternary(
    value: &Value,
    true_val: Value,
    false_val: Value,
    none_val: Option<Value>,
) -> Result<Value, Error> {
    defined(value, "ternary")?;
    if let Some(none_val) = none_val.filter(|v| value.is_none() && !v.is_none()) {
        return Ok(none_val);
    }
    Ok(if value.is_true() { true_val } else { false_val })
}

/// Python's type name; an unsafe string (from the custom resource, a
/// lookup, a module's result) is 2.18's `AnsibleUnsafeText`. Unsafe
/// strings are the ones minijinja marks safe (see `template::context`).
/// 2.19's untrusted text is a plain `str`, and its undefined value an
/// `UndefinedMarker`.
pub(super) fn type_debug(state: &State, value: &Value) -> Value {
    match super::semantics(state) {
        Semantics::Ansible218 if value.kind() == ValueKind::String && value.is_safe() => {
            Value::from("AnsibleUnsafeText")
        }
        Semantics::Ansible219 if crate::is_strict_undefined(value) => {
            Value::from("UndefinedMarker")
        }
        _ => Value::from(pyrepr::type_name(value)),
    }
}

/// `length`/`count`, which fail on undefined values as Ansible's do.
pub(super) fn length(value: &Value) -> Result<Value, Error> {
    defined(value, "length")?;
    match value.kind() {
        ValueKind::String => Ok(Value::from(
            value.as_str().unwrap_or_default().chars().count(),
        )),
        _ => value.len().map(Value::from).ok_or_else(|| {
            invalid(format!(
                "object of type '{}' has no len()",
                pyrepr::type_name(value)
            ))
        }),
    }
}

/// Jinja's `attr(name)`: Python's `getattr`, which finds a dict's, a
/// list's or a string's methods (shown as Python prints a bound method)
/// but never their items: `{'a': 1} | attr('a')` is undefined, failing
/// where it is used, as in Ansible. Other objects (an imported template's
/// macros) answer as minijinja's attribute lookup does.
pub(super) fn attr(state: &State, value: &Value, name: &Value) -> Result<Value, Error> {
    let methods: &[&str] = match value.kind() {
        ValueKind::Map => DICT_METHODS,
        ValueKind::Seq => LIST_METHODS,
        ValueKind::String => STR_METHODS,
        ValueKind::Number | ValueKind::Bool | ValueKind::None => &[],
        _ => {
            return Ok(name.as_str().map_or(Value::UNDEFINED, |n| {
                value.get_attr(n).unwrap_or(Value::UNDEFINED)
            }));
        }
    };
    if let Some(method) = name.as_str().filter(|n| methods.contains(n)) {
        return Ok(Value::from(format!(
            "<built-in method {method} of {} object>",
            pyrepr::type_name(value)
        )));
    }
    if let Some(ctx) = super::context(state) {
        ctx.read_missing_attribute(value, name);
    }
    Ok(Value::UNDEFINED)
}

const DICT_METHODS: &[&str] = &[
    "clear",
    "copy",
    "fromkeys",
    "get",
    "items",
    "keys",
    "pop",
    "popitem",
    "setdefault",
    "update",
    "values",
];

const LIST_METHODS: &[&str] = &[
    "append", "clear", "copy", "count", "extend", "index", "insert", "pop", "remove", "reverse",
    "sort",
];

const STR_METHODS: &[&str] = &[
    "capitalize",
    "casefold",
    "center",
    "count",
    "encode",
    "endswith",
    "expandtabs",
    "find",
    "format",
    "format_map",
    "index",
    "isalnum",
    "isalpha",
    "isascii",
    "isdecimal",
    "isdigit",
    "isidentifier",
    "islower",
    "isnumeric",
    "isprintable",
    "isspace",
    "istitle",
    "isupper",
    "join",
    "ljust",
    "lower",
    "lstrip",
    "maketrans",
    "partition",
    "removeprefix",
    "removesuffix",
    "replace",
    "rfind",
    "rindex",
    "rjust",
    "rpartition",
    "rsplit",
    "rstrip",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "swapcase",
    "title",
    "translate",
    "upper",
    "zfill",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_int_parsing() {
        assert_eq!(parse_python_int(" 42 ", 10), Some(42));
        assert_eq!(parse_python_int("-1_000", 10), Some(-1000));
        assert_eq!(parse_python_int("0x1f", 16), Some(31));
        assert_eq!(parse_python_int("1f", 16), Some(31));
        assert_eq!(parse_python_int("0x1f", 10), None);
        assert_eq!(parse_python_int("4.2", 10), None);
        assert_eq!(parse_python_int("", 10), None);
        // Base 0 reads the prefix, as Python's int(text, 0).
        assert_eq!(parse_python_int("0o17", 0), Some(15));
        assert_eq!(parse_python_int("0X1F", 0), Some(31));
        assert_eq!(parse_python_int("0b101", 0), Some(5));
        assert_eq!(parse_python_int("0x_1f", 0), Some(31));
        assert_eq!(parse_python_int("17", 0), Some(17));
        assert_eq!(parse_python_int("00", 0), Some(0));
        assert_eq!(parse_python_int("017", 0), None);
        // Bases Python refuses, which no longer panic.
        for base in [-1, 1, 37, 100] {
            assert_eq!(parse_python_int("10", base), None, "base {base}");
        }
        assert_eq!(parse_python_int("z", 36), Some(35));
    }

    #[test]
    fn to_bool_matches_ansible() {
        for (v, want) in [
            (Value::from("Yes"), true),
            (Value::from("on"), true),
            (Value::from("1"), true),
            (Value::from("TRUE"), true),
            (Value::from("y"), false),
            (Value::from(1), true),
            (Value::from(2), false),
            (Value::from(1.0), true),
            (Value::from(()), false),
            (Value::from(true), true),
        ] {
            assert_eq!(to_bool(&v), want, "{v:?}");
        }
    }
}
