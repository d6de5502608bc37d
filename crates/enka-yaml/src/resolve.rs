//! PyYAML's implicit resolver for plain scalars (YAML 1.1), which is what
//! Ansible uses, and explicit `!!type` tags.

use super::Value;

/// What a plain scalar resolves to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolved {
    /// `~`, `null`, `Null`, `NULL` or empty.
    Null,
    /// A YAML 1.1 boolean.
    Bool(bool),
    /// An integer in any YAML 1.1 form.
    Int(i64),
    /// A float; YAML 1.1 floats need a dot.
    Float(f64),
    /// The merge key `<<`.
    Merge,
    /// A string.
    Str,
}

/// Resolves a plain (unquoted, untagged) scalar.
pub fn resolve_plain(text: &str) -> Resolved {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true);
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false);
        }
        "<<" => return Resolved::Merge,
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return Resolved::Int(i);
    }
    if let Some(f) = parse_float(text) {
        return Resolved::Float(f);
    }
    Resolved::Str
}

/// Applies an explicit core tag (`!!str`, `!!int`, …) to a scalar.
pub fn resolve_tagged(suffix: &str, text: &str) -> Result<Value, String> {
    match suffix {
        "str" => Ok(Value::Str(text.to_owned())),
        "int" => parse_int(text)
            .map(Value::Int)
            .ok_or_else(|| format!("invalid !!int value {text:?}")),
        "float" => parse_float(text)
            .or_else(|| parse_int(text).map(|i| i as f64))
            .map(Value::Float)
            .ok_or_else(|| format!("invalid !!float value {text:?}")),
        "bool" => match resolve_plain(text) {
            Resolved::Bool(b) => Ok(Value::Bool(b)),
            _ => Err(format!("invalid !!bool value {text:?}")),
        },
        "null" => Ok(Value::Null),
        _ => Ok(Value::Str(text.to_owned())),
    }
}

fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

/// `[-+]?0b[01_]+ | [-+]?0[0-7_]+ | [-+]?(0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+ | [-+]?[1-9][0-9_]*(:[0-5]?[0-9])+`
fn parse_int(text: &str) -> Option<i64> {
    let (negative, body) = split_sign(text);
    if body.is_empty() {
        return None;
    }
    let magnitude: i64 = if let Some(bits) = body.strip_prefix("0b") {
        digits(bits, 2)?
    } else if let Some(hex) = body.strip_prefix("0x") {
        digits(hex, 16)?
    } else if body.contains(':') {
        sexagesimal_int(body)?
    } else if body.len() > 1 && body.starts_with('0') {
        digits(&body[1..], 8)?
    } else {
        if !body.as_bytes()[0].is_ascii_digit() {
            return None;
        }
        digits(body, 10)?
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn digits(text: &str, radix: u32) -> Option<i64> {
    if text.is_empty() || !text.chars().all(|c| c == '_' || c.is_digit(radix)) {
        return None;
    }
    let cleaned: String = text.chars().filter(|&c| c != '_').collect();
    if cleaned.is_empty() {
        return None;
    }
    i64::from_str_radix(&cleaned, radix).ok()
}

fn sexagesimal_int(body: &str) -> Option<i64> {
    let mut parts = body.split(':');
    let first = parts.next()?;
    if first.is_empty() || first.starts_with('0') {
        return None;
    }
    let mut value = digits(first, 10)?;
    for part in parts {
        if part.is_empty() || part.len() > 2 || !part.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let n: i64 = part.parse().ok()?;
        if n > 59 {
            return None;
        }
        value = value.checked_mul(60)?.checked_add(n)?;
    }
    Some(value)
}

/// `[-+]?([0-9][0-9_]*)\.[0-9_]*([eE][-+][0-9]+)? | \.[0-9_]+([eE][-+][0-9]+)?
///  | [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)`
fn parse_float(text: &str) -> Option<f64> {
    if matches!(text, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    let (negative, body) = split_sign(text);
    let sign = if negative { -1.0 } else { 1.0 };
    if matches!(body, ".inf" | ".Inf" | ".INF") {
        return Some(sign * f64::INFINITY);
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    if let Some(exp) = exponent {
        let (_, exp_digits) = split_sign(exp);
        if !(exp.starts_with(['-', '+']))
            || exp_digits.is_empty()
            || !exp_digits.chars().all(|c| c.is_ascii_digit())
        {
            return None;
        }
    }
    let dot = mantissa.find('.')?;
    let (int_part, frac_part) = (&mantissa[..dot], &mantissa[dot + 1..]);
    if !frac_part.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    if int_part.contains(':') {
        if exponent.is_some() {
            return None;
        }
        let whole = sexagesimal_int(int_part)? as f64;
        let frac: String = frac_part.chars().filter(|&c| c != '_').collect();
        let frac: f64 = if frac.is_empty() {
            0.0
        } else {
            format!("0.{frac}").parse().ok()?
        };
        return Some(sign * (whole + frac));
    }
    if int_part.is_empty() {
        if negative || text.starts_with('+') || frac_part.is_empty() {
            return None;
        }
    } else if !int_part.as_bytes()[0].is_ascii_digit()
        || !int_part.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let cleaned: String = body.chars().filter(|&c| c != '_').collect();
    let cleaned = if cleaned.starts_with('.') {
        format!("0{cleaned}")
    } else {
        cleaned
    };
    let cleaned = cleaned.replace(".e", ".0e").replace(".E", ".0E");
    let value: f64 = cleaned.trim_end_matches('.').parse().ok()?;
    Some(sign * value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints() {
        for (text, want) in [
            ("0", 0),
            ("-0", 0),
            ("12", 12),
            ("+12", 12),
            ("010", 8),
            ("0o10", i64::MIN),
            ("0x_1f", 31),
            ("0b1_0", 2),
            ("1_000", 1000),
            ("190:20:30", 685_230),
            ("-1:00", -60),
        ] {
            let got = parse_int(text);
            if want == i64::MIN {
                assert_eq!(got, None, "{text}");
            } else {
                assert_eq!(got, Some(want), "{text}");
            }
        }
        for text in ["1.0", "abc", "08", "1:60", "0x", "_1", "1e3", "0:30"] {
            assert_eq!(parse_int(text), None, "{text}");
        }
    }

    #[test]
    fn floats() {
        for (text, want) in [
            ("1.5", 1.5),
            ("-1.5", -1.5),
            ("1.", 1.0),
            (".5", 0.5),
            ("1.0e+3", 1000.0),
            ("1.0e-3", 0.001),
            ("1_0.5", 10.5),
            ("1:30.5", 90.5),
            ("-.inf", f64::NEG_INFINITY),
        ] {
            assert_eq!(parse_float(text), Some(want), "{text}");
        }
        for text in ["1e3", "1.0e3", "1", "abc", ".", "-.5e3", "1.2.3"] {
            assert_eq!(parse_float(text), None, "{text}");
        }
        assert!(parse_float(".NaN").is_some_and(f64::is_nan));
    }

    #[test]
    fn plain_scalars() {
        assert_eq!(resolve_plain("Yes"), Resolved::Bool(true));
        assert_eq!(resolve_plain("OFF"), Resolved::Bool(false));
        assert_eq!(resolve_plain("yEs"), Resolved::Str);
        assert_eq!(resolve_plain("~"), Resolved::Null);
        assert_eq!(resolve_plain("<<"), Resolved::Merge);
        assert_eq!(resolve_plain("v1"), Resolved::Str);
    }
}
