//! Python methods on values (`name.zfill(4)`, `items.index(x)`), beyond
//! what minijinja-contrib's `pycompat` provides.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, State, Value};

use super::context::keep_unsafe;
use super::filters::{invalid, tuple};
use super::pyrepr;

/// What a Python method's failure becomes: 2.18 raises it; 2.19 keeps it
/// in the value the call gives, which fails only where it is used
/// (`{% set _ = d.pop('missing') %}` renders).
pub(crate) fn captured(state: &State, result: Result<Value, Error>) -> Result<Value, Error> {
    match result {
        Err(err)
            if err.kind() == ErrorKind::InvalidOperation
                && crate::filters::semantics(state) == crate::Semantics::Ansible219 =>
        {
            if let Some(ctx) = crate::filters::context(state) {
                ctx.read_failed_call(err.detail().unwrap_or_default().to_owned());
            }
            Ok(Value::UNDEFINED)
        }
        other => other,
    }
}

/// The unknown-method callback: ours first, then pycompat's. A value an
/// object holds under that name (an imported template's macro, `m.hi()`)
/// is left to minijinja, which calls it, as Jinja's attribute lookup finds
/// it.
pub fn call_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let result = python_method(state, value, method, args);
    captured(state, result)
}

fn python_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if crate::filters::semantics(state).passes_markers() {
        // 2.19: a method of an undefined value, or called with one, is not
        // called; the first undefined value is its result.
        let marker = crate::filters::first_marker(std::slice::from_ref(value))
            .or_else(|| crate::filters::first_marker(args));
        if let Some(marker) = marker {
            return Ok(marker);
        }
    }
    let handled = match value.kind() {
        ValueKind::String => string_method(value.as_str().unwrap_or_default(), method, args)?,
        ValueKind::Seq => seq_method(value, method, args)?,
        ValueKind::Map if method == "copy" => Some(value.clone()),
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::UndefinedError,
                format!("cannot call method '{method}' of an undefined value"),
            ));
        }
        _ => None,
    };
    let result = match handled {
        Some(result) => Ok(result),
        None => minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
            .map_err(|e| {
                let stored = value.get_attr(method).is_ok_and(|v| !v.is_undefined());
                if e.kind() == ErrorKind::UnknownMethod && !stored {
                    // Jinja looks the method up as an attribute, gets an
                    // undefined value, and calling that raises.
                    Error::new(
                        ErrorKind::UndefinedError,
                        format!(
                            "'{} object' has no attribute '{method}'",
                            pyrepr::type_name(value)
                        ),
                    )
                } else {
                    e
                }
            }),
    }?;
    Ok(if UNSAFE_KEEPING.contains(&method) {
        keep_unsafe(value, result)
    } else {
        result
    })
}

/// The str methods whose result `AnsibleUnsafeText` keeps unsafe
/// (ansible.utils.unsafe_proxy); others (`find`, `isdigit`...) give plain
/// values.
const UNSAFE_KEEPING: &[&str] = &[
    "capitalize",
    "casefold",
    "center",
    "removeprefix",
    "removesuffix",
    "expandtabs",
    "format",
    "format_map",
    "join",
    "ljust",
    "lower",
    "lstrip",
    "partition",
    "replace",
    "rjust",
    "rpartition",
    "rstrip",
    "split",
    "rsplit",
    "splitlines",
    "strip",
    "swapcase",
    "title",
    "translate",
    "upper",
    "zfill",
];

/// Python's `str.title`: a cased character after an uncased one (or at
/// the start) upper case, every other cased character lower case.
fn python_title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut after_cased = false;
    for c in s.chars() {
        let cased = c.is_lowercase() || c.is_uppercase();
        if !cased {
            out.push(c);
        } else if after_cased {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        after_cased = cased;
    }
    out
}

/// Python's `str.split(sep=None, maxsplit=-1)` as a method.
fn python_split_method(s: &str, args: &[Value]) -> Result<Value, Error> {
    if args.len() > 2 {
        return Err(invalid(format!(
            "split() takes at most 2 arguments ({} given)",
            args.len()
        )));
    }
    let sep = match args.first().filter(|v| !v.is_none()) {
        Some(sep) => Some(sep.as_str().map(str::to_owned).ok_or_else(|| {
            invalid(format!(
                "must be str or None, not {}",
                pyrepr::type_name(sep)
            ))
        })?),
        None => None,
    };
    let maxsplit = match args.get(1) {
        Some(n) if n.is_integer() => i64::try_from(n.clone())?,
        Some(n) => {
            return Err(invalid(format!(
                "'{}' object cannot be interpreted as an integer",
                pyrepr::type_name(n)
            )));
        }
        None => -1,
    };
    let parts = super::filters::python_split(s, sep.as_deref(), maxsplit)?;
    Ok(Value::from(parts))
}

/// Python's `str.join(iterable)`: every item a string.
fn python_join(s: &str, items: &Value) -> Result<Value, Error> {
    let iter = match items.kind() {
        ValueKind::String => {
            let text = items.as_str().unwrap_or_default();
            return Ok(Value::from(
                text.chars().map(String::from).collect::<Vec<_>>().join(s),
            ));
        }
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => items.try_iter()?,
        _ => return Err(invalid("can only join an iterable")),
    };
    let mut parts = Vec::new();
    for (index, item) in iter.enumerate() {
        match item.as_str() {
            Some(text) => parts.push(text.to_owned()),
            None => {
                return Err(invalid(format!(
                    "sequence item {index}: expected str instance, {} found",
                    pyrepr::type_name(&item)
                )));
            }
        }
    }
    Ok(Value::from(parts.join(s)))
}

fn arg_str(args: &[Value], i: usize) -> Option<String> {
    args.get(i).filter(|v| !v.is_none()).map(pyrepr::to_text)
}

/// A width argument; Python pads nothing for a negative one.
fn arg_usize(args: &[Value], i: usize, what: &str) -> Result<usize, Error> {
    args.get(i)
        .and_then(|v| i64::try_from(v.clone()).ok())
        .map(|width| usize::try_from(width).unwrap_or(0))
        .ok_or_else(|| invalid(format!("{what}() expects an integer width")))
}

fn pad(s: &str, width: usize, fill: char, align: char) -> String {
    let len = s.chars().count();
    if len >= width {
        return s.to_owned();
    }
    let total = width - len;
    let (left, right) = match align {
        '<' => (0, total),
        '>' => (total, 0),
        // Python centres with the extra space on the right, unless the
        // string length and the padding are both odd.
        _ => {
            let left = total / 2 + (total & width & 1);
            (left, total - left)
        }
    };
    let fill_str = |n: usize| std::iter::repeat_n(fill, n).collect::<String>();
    format!("{}{s}{}", fill_str(left), fill_str(right))
}

fn fill_char(args: &[Value]) -> Result<char, Error> {
    match arg_str(args, 1) {
        None => Ok(' '),
        Some(f) if f.chars().count() == 1 => Ok(f.chars().next().unwrap_or(' ')),
        Some(_) => Err(invalid(
            "The fill character must be exactly one character long",
        )),
    }
}

// Long: one arm per Python method, a table read top to bottom; each arm is
// the method's few lines.
/// Python's `str` methods that take arguments, by name.
fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    Ok(Some(match method {
        "zfill" => {
            let width = arg_usize(args, 0, "zfill")?;
            let len = s.chars().count();
            if len >= width {
                Value::from(s)
            } else {
                let (sign, digits) = match s.chars().next() {
                    Some(c @ ('+' | '-')) => (c.to_string(), &s[1..]),
                    _ => (String::new(), s),
                };
                Value::from(format!("{sign}{}{digits}", "0".repeat(width - len)))
            }
        }
        "title" if args.is_empty() => Value::from(python_title(s)),
        "split" if args.iter().all(|a| !a.is_kwargs()) => python_split_method(s, args)?,
        "join" if args.len() == 1 => python_join(s, &args[0])?,
        "center" => Value::from(pad(s, arg_usize(args, 0, "center")?, fill_char(args)?, '^')),
        "ljust" => Value::from(pad(s, arg_usize(args, 0, "ljust")?, fill_char(args)?, '<')),
        "rjust" => Value::from(pad(s, arg_usize(args, 0, "rjust")?, fill_char(args)?, '>')),
        "index" | "rindex" => {
            let needle =
                arg_str(args, 0).ok_or_else(|| invalid(format!("{method}() takes a substring")))?;
            let found = if method == "index" {
                s.find(&needle)
            } else {
                s.rfind(&needle)
            };
            match found {
                Some(byte) => Value::from(s[..byte].chars().count()),
                None => return Err(invalid("substring not found")),
            }
        }
        "partition" | "rpartition" => {
            let sep =
                arg_str(args, 0).ok_or_else(|| invalid(format!("{method}() takes a separator")))?;
            if sep.is_empty() {
                return Err(invalid("empty separator"));
            }
            let parts = if method == "partition" {
                s.split_once(&sep)
            } else {
                s.rsplit_once(&sep)
            };
            let triple = match (parts, method) {
                (Some((a, b)), _) => [a.to_owned(), sep, b.to_owned()],
                (None, "partition") => [s.to_owned(), String::new(), String::new()],
                (None, _) => [String::new(), String::new(), s.to_owned()],
            };
            tuple(triple.into_iter().map(Value::from).collect())
        }
        "rsplit" => {
            let sep = arg_str(args, 0);
            let maxsplit = args
                .get(1)
                .and_then(|v| i64::try_from(v.clone()).ok())
                .unwrap_or(-1);
            let mut parts = match (sep.as_deref(), usize::try_from(maxsplit)) {
                (Some(sep), Ok(n)) => s.rsplitn(n + 1, sep).map(str::to_owned).collect::<Vec<_>>(),
                (Some(sep), Err(_)) => s.rsplit(sep).map(str::to_owned).collect(),
                (None, _) => {
                    let mut parts = Vec::new();
                    let mut rest = s.trim_end();
                    let mut splits = maxsplit;
                    while !rest.is_empty() && splits != 0 {
                        match rest.rfind(char::is_whitespace) {
                            Some(i) => {
                                let ws_len = rest[i..].chars().next().map_or(1, char::len_utf8);
                                parts.push(rest[i + ws_len..].to_owned());
                                rest = rest[..i].trim_end();
                                splits -= 1;
                            }
                            None => break,
                        }
                    }
                    if !rest.is_empty() {
                        parts.push(rest.to_owned());
                    }
                    parts
                }
            };
            parts.reverse();
            Value::from(parts)
        }
        "swapcase" => Value::from(
            s.chars()
                .flat_map(|c| {
                    if c.is_uppercase() {
                        c.to_lowercase().collect::<Vec<_>>()
                    } else {
                        c.to_uppercase().collect::<Vec<_>>()
                    }
                })
                .collect::<String>(),
        ),
        "casefold" => Value::from(s.to_lowercase()),
        "istitle" => {
            // Upper case only after uncased characters, lower case only after
            // cased ones, and at least one cased character.
            let mut cased = false;
            let mut previous_cased = false;
            let mut ok = true;
            for c in s.chars() {
                if c.is_uppercase() {
                    ok &= !previous_cased;
                    previous_cased = true;
                    cased = true;
                } else if c.is_lowercase() {
                    ok &= previous_cased;
                    previous_cased = true;
                    cased = true;
                } else {
                    previous_cased = false;
                }
            }
            Value::from(ok && cased)
        }
        "isdecimal" => Value::from(!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
        "expandtabs" => {
            let size = args
                .first()
                .and_then(|v| usize::try_from(v.clone()).ok())
                .unwrap_or(8);
            let mut out = String::new();
            let mut col = 0;
            for c in s.chars() {
                match c {
                    '\t' if size > 0 => {
                        let n = size - col % size;
                        out.push_str(&" ".repeat(n));
                        col += n;
                    }
                    '\t' => {}
                    '\n' | '\r' => {
                        out.push(c);
                        col = 0;
                    }
                    c => {
                        out.push(c);
                        col += 1;
                    }
                }
            }
            Value::from(out)
        }
        _ => return Ok(None),
    }))
}

fn seq_method(value: &Value, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    Ok(Some(match method {
        "index" => {
            let needle = args
                .first()
                .ok_or_else(|| invalid("index() takes exactly one argument"))?;
            match value.try_iter()?.position(|v| &v == needle) {
                Some(i) => Value::from(i),
                None => return Err(invalid(format!("{} is not in list", pyrepr::repr(needle)))),
            }
        }
        "copy" => value.clone(),
        _ => return Ok(None),
    }))
}
