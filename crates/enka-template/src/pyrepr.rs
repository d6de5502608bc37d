//! Python's `str()` and `repr()` for template values.
//!
//! Ansible renders a template to text with Python's `str()` of each output
//! node, then parses text that looks like a list, dict or bool back with
//! `ast.literal_eval`. Printing exactly as Python does is therefore part of
//! the typing rules, not cosmetics: `{{ [1, 'a'] }}` must print `[1, 'a']`.

use std::fmt::Write as _;

use minijinja::Value;
use minijinja::value::ValueKind;

/// Python's `str(value)`: strings print raw, containers print their `repr`.
pub fn to_text(value: &Value) -> String {
    let mut out = String::new();
    write_str(&mut out, value);
    out
}

/// Appends Python's `str(value)` to `out`.
pub fn write_str(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::String => out.push_str(value.as_str().unwrap_or_default()),
        _ => write_repr(out, value),
    }
}

/// Python's `repr(value)`.
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

/// Appends Python's `repr(value)` to `out`.
pub fn write_repr(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::Undefined if crate::is_silent_undefined(value) => out.push_str("Undefined"),
        ValueKind::Undefined => out.push_str("AnsibleUndefined"),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => write_number(out, value),
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Bytes => write_bytes_repr(out, value.as_bytes().unwrap_or_default()),
        ValueKind::Seq if value.is_tuple() => {
            out.push('(');
            let len = value.len().unwrap_or(0);
            if let Ok(iter) = value.try_iter() {
                for (i, item) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item);
                }
            }
            out.push_str(if len == 1 { ",)" } else { ")" });
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(iter) = value.try_iter() {
                for (i, item) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(iter) = value.try_iter() {
                for (i, key) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &key);
                    out.push_str(": ");
                    let item = value.get_item(&key).unwrap_or_default();
                    write_repr(out, &item);
                }
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

fn write_number(out: &mut String, value: &Value) {
    match (value.is_integer(), f64::try_from(value.clone())) {
        (false, Ok(f)) => out.push_str(&float_repr(f)),
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

/// Python's `repr(float)` (YAML's floats are written with it too).
pub use enka_yaml::float_repr;

/// Python's `str.isprintable()` for one character, close enough for repr:
/// control and format characters and non-space separators are escaped.
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E
        | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xD800..=0xDFFF | 0xE000..=0xF8FF)
}

/// Python's `repr(str)`.
pub fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push(quote);
}

/// Python's `repr(bytes)`.
pub fn write_bytes_repr(out: &mut String, bytes: &[u8]) {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    out.push('b');
    out.push(quote);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b if b as char == quote => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(b as char),
            b => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push(quote);
}

/// Python's type name for a value, as `type_debug` reports it.
pub fn type_name(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined if crate::is_silent_undefined(value) => "Undefined",
        ValueKind::Undefined => "AnsibleUndefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number => {
            if value.is_integer() {
                "int"
            } else {
                "float"
            }
        }
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ if crate::globals::is_python_class(value) => "type",
        _ => super::pytime::type_name(value).unwrap_or("object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        for (f, want) in [
            (1.0, "1.0"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (123.456, "123.456"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn strings_repr_like_python() {
        let r = |s: &str| {
            let mut out = String::new();
            write_str_repr(&mut out, s);
            out
        };
        assert_eq!(r("abc"), "'abc'");
        assert_eq!(r("it's"), "\"it's\"");
        assert_eq!(r("both ' and \""), "'both \\' and \"'");
        assert_eq!(r("a\nb\\"), "'a\\nb\\\\'");
        assert_eq!(r("\u{7}"), "'\\x07'");
        assert_eq!(r("\u{a0}"), "'\\xa0'");
        assert_eq!(r("日本"), "'日本'");
        assert_eq!(r("\u{200b}"), "'\\u200b'");
    }

    #[test]
    fn containers_repr_like_python() {
        let v: Value = serde_json::from_str::<serde_json::Value>(
            r#"{"a": [1, 2.0, "x", null, true], "b": {}}"#,
        )
        .map(minijinja::value::Serde)
        .map(Value::from)
        .unwrap();
        assert_eq!(to_text(&v), "{'a': [1, 2.0, 'x', None, True], 'b': {}}");
        assert_eq!(to_text(&Value::from("plain")), "plain");
    }
}
