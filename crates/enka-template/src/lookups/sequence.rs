//! The `sequence` lookup (`with_sequence`): numbers from `start` to `end`
//! or `count` of them, each formatted with a printf-style `format`, as
//! ansible-core's `LookupModule` of `sequence` makes them.

use minijinja::{Error, Value};

use super::invalid;
use crate::pyrepr;

/// The sequence every term describes, one after the other. From 2.19 the
/// options alone describe one when no term is given.
pub(super) fn run(
    terms: &[Value],
    options: &[(String, Value)],
    semantics: crate::Semantics,
) -> Result<Vec<Value>, Error> {
    let blank = [Value::from("")];
    let terms = if semantics.native() && terms.is_empty() && !options.is_empty() {
        &blank[..]
    } else {
        terms
    };
    let mut out = Vec::new();
    for term in terms {
        let mut spec = Spec::from_options(options, semantics)?;
        let text = pyrepr::to_text(term);
        if !spec.parse_shortcut(&text)? {
            spec.parse_key_values(&text)?;
        }
        let (start, end, stride) = spec.bounds()?;
        if stride == 0 {
            continue;
        }
        // range(start, end + adjust, stride), in i128 so that no bound
        // near i64's limits overflows.
        let adjust: i128 = if stride > 0 { 1 } else { -1 };
        let (stop, stride) = (i128::from(end) + adjust, i128::from(stride));
        let mut i = i128::from(start);
        while (stride > 0 && i < stop) || (stride < 0 && i > stop) {
            let n = i64::try_from(i).map_err(|_| invalid("with_sequence: number out of range"))?;
            out.push(Value::from(printf_int(&spec.format, n)?));
            if out.len() > MAX_ITEMS {
                return Err(invalid(format!(
                    "with_sequence: more than {MAX_ITEMS} items in {text:?}"
                )));
            }
            i += stride;
        }
    }
    Ok(out)
}

/// A bound on what one lookup makes: enough for any real loop, and a
/// `count=1e12` in a custom resource cannot eat the operator's memory.
const MAX_ITEMS: usize = 1_000_000;

/// The lookup's options, as `set_option` leaves them.
struct Spec {
    start: i64,
    end: Option<i64>,
    count: Option<i64>,
    stride: i64,
    format: String,
    /// Which line's words refuse a value.
    semantics: crate::Semantics,
}

impl Spec {
    fn from_options(
        options: &[(String, Value)],
        semantics: crate::Semantics,
    ) -> Result<Self, Error> {
        let mut spec = Spec {
            semantics,
            start: 1,
            end: None,
            count: None,
            stride: 1,
            format: "%d".to_owned(),
        };
        for (key, value) in options {
            spec.set(key, &pyrepr::to_text(value))?;
        }
        Ok(spec)
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        match key {
            "start" => self.start = integer(key, value, self.semantics)?,
            "end" => self.end = Some(integer(key, value, self.semantics)?),
            "count" => self.count = Some(integer(key, value, self.semantics)?),
            "stride" => self.stride = integer(key, value, self.semantics)?,
            "format" => self.format = value.to_owned(),
            other => {
                return Err(invalid(format!(
                    "unrecognized arguments to with_sequence: ['{other}']"
                )));
            }
        }
        Ok(())
    }

    /// `[start-]end[/stride][:format]`; false when `term` is not that form.
    fn parse_shortcut(&mut self, term: &str) -> Result<bool, Error> {
        let (numbers, format) = match term.split_once(':') {
            Some((numbers, format)) if !format.is_empty() => (numbers, Some(format)),
            Some(_) => return Ok(false),
            None => (term, None),
        };
        let (range, stride) = match numbers.split_once('/') {
            Some((range, stride)) => (range, Some(stride)),
            None => (numbers, None),
        };
        let (start, end) = match range.split_once('-') {
            Some((start, end)) => (Some(start), end),
            None => (None, range),
        };
        let all = [start, Some(end), stride];
        if !all.iter().flatten().all(|n| is_shortcut_number(n)) {
            return Ok(false);
        }
        for (key, value) in [("start", start), ("end", Some(end)), ("stride", stride)] {
            if let Some(value) = value {
                self.set(key, value)?;
            }
        }
        if let Some(format) = format {
            self.format = format.to_owned();
        }
        Ok(true)
    }

    fn parse_key_values(&mut self, term: &str) -> Result<(), Error> {
        let mut unknown = Vec::new();
        for (key, value) in crate::freeform::parse_kv(term) {
            if matches!(
                key.as_str(),
                "start" | "end" | "count" | "stride" | "format"
            ) {
                self.set(&key, &value)?;
            } else {
                unknown.push(format!("'{key}'"));
            }
        }
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(invalid(format!(
                "unrecognized arguments to with_sequence: [{}]",
                unknown.join(", ")
            )))
        }
    }

    /// `(start, end, stride)` after `sanity_check`.
    fn bounds(&self) -> Result<(i64, i64, i64), Error> {
        let (mut start, mut stride) = (self.start, self.stride);
        let end = match (self.count, self.end) {
            (None, None) => return Err(invalid("must specify count or end in with_sequence")),
            (Some(_), Some(_)) => {
                return Err(invalid("can't specify both count and end in with_sequence"));
            }
            (Some(0), None) => {
                start = 0;
                stride = 0;
                0
            }
            (Some(count), None) => count
                .checked_mul(stride)
                .and_then(|n| n.checked_add(start))
                .and_then(|n| n.checked_sub(1))
                .ok_or_else(|| invalid("with_sequence: the count is too large"))?,
            (None, Some(end)) => end,
        };
        if stride > 0 && end < start {
            return Err(invalid("to count backwards make stride negative"));
        }
        if stride < 0 && end > start {
            return Err(invalid("to count forward don't make stride negative"));
        }
        if self.format.matches('%').count() != 1 {
            return Err(invalid(format!("bad formatting string: {}", self.format)));
        }
        Ok((start, end, stride))
    }
}

/// The shortcut's `0?x?[0-9a-f]+`, any case.
fn is_shortcut_number(text: &str) -> bool {
    let digits = text.strip_prefix('0').unwrap_or(text);
    let digits = digits.strip_prefix(['x', 'X']).unwrap_or(digits);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An `integer` option as Ansible's config manager converts it: a decimal
/// number with no fraction (`0x10` is refused, `010` is ten).
fn integer(key: &str, value: &str, semantics: crate::Semantics) -> Result<i64, Error> {
    let text = value.trim();
    // The config manager's words; 2.18's ValueError has no message of its
    // own, 2.19's names the value.
    let refused = || {
        invalid(match semantics {
            crate::Semantics::Ansible218 => format!(
                "Invalid type for configuration option plugin_type: lookup plugin: sequence setting: {key} (from Direct): "
            ),
            crate::Semantics::Ansible219 => format!(
                "Config '{key}' for 'sequence' lookup plugin from 'Direct' has an invalid value: Invalid value provided for 'integer': '{value}'"
            ),
        })
    };
    if let Ok(n) = text.parse::<i64>() {
        return Ok(n);
    }
    let number: f64 = text.parse().map_err(|_| refused())?;
    if number.fract() == 0.0 && number.abs() < i64::MAX as f64 {
        Ok(number as i64)
    } else {
        Err(refused())
    }
}

/// Python's `format % n` for a format with exactly one conversion.
fn printf_int(format: &str, n: i64) -> Result<String, Error> {
    let problem = || invalid(format!("problem formatting {n} with '{format}'"));
    let Some(percent) = format.find('%') else {
        return Err(problem());
    };
    let (before, spec) = format.split_at(percent);
    let mut chars = spec[1..].char_indices().peekable();
    let mut flags = Flags::default();
    while let Some(&(_, c)) = chars.peek() {
        match c {
            '-' => flags.left = true,
            '0' => flags.zero = true,
            '+' => flags.plus = true,
            ' ' => flags.space = true,
            '#' => flags.alternate = true,
            _ => break,
        }
        chars.next();
    }
    let width = number(&mut chars);
    let mut precision = None;
    if chars.peek().is_some_and(|&(_, c)| c == '.') {
        chars.next();
        precision = Some(number(&mut chars));
    }
    // Python would build the string; a role's format never needs this
    // much, and a bound keeps a typo from eating the operator's memory.
    if width > MAX_FIELD || precision.is_some_and(|p| p > MAX_FIELD) {
        return Err(problem());
    }
    while chars
        .peek()
        .is_some_and(|&(_, c)| matches!(c, 'h' | 'l' | 'L'))
    {
        chars.next();
    }
    let Some((at, conversion)) = chars.next() else {
        return Err(problem());
    };
    let after = &spec[1 + at + conversion.len_utf8()..];
    let negative = n < 0;
    let magnitude = n.unsigned_abs();
    let (prefix, digits, numeric) = match conversion {
        'd' | 'i' | 'u' => ("", magnitude.to_string(), true),
        'o' => (
            if flags.alternate { "0o" } else { "" },
            format!("{magnitude:o}"),
            true,
        ),
        'x' => (
            if flags.alternate { "0x" } else { "" },
            format!("{magnitude:x}"),
            true,
        ),
        'X' => (
            if flags.alternate { "0X" } else { "" },
            format!("{magnitude:X}"),
            true,
        ),
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' => (
            "",
            float_digits(magnitude as f64, conversion, precision, flags.alternate),
            true,
        ),
        'c' => {
            let c = u32::try_from(n)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(problem)?;
            ("", truncate(&c.to_string(), precision), false)
        }
        's' | 'r' | 'a' => ("", truncate(&n.to_string(), precision), false),
        _ => return Err(problem()),
    };
    let digits = match (numeric, precision, conversion) {
        (true, Some(p), 'd' | 'i' | 'u' | 'o' | 'x' | 'X') if digits.len() < p => {
            format!("{}{digits}", "0".repeat(p - digits.len()))
        }
        _ => digits,
    };
    let sign = match (numeric, negative) {
        (false, _) => "",
        (true, true) => "-",
        (true, false) if flags.plus => "+",
        (true, false) if flags.space => " ",
        _ => "",
    };
    let body_len = sign.len() + prefix.len() + digits.chars().count();
    let pad = width.saturating_sub(body_len);
    let body = if flags.left {
        format!("{sign}{prefix}{digits}{}", " ".repeat(pad))
    } else if flags.zero && numeric {
        format!("{sign}{prefix}{}{digits}", "0".repeat(pad))
    } else {
        format!("{}{sign}{prefix}{digits}", " ".repeat(pad))
    };
    Ok(format!("{before}{body}{after}"))
}

/// The decimal digits at the front of `chars` (none is 0), saturating.
fn number(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> usize {
    let mut n = 0usize;
    while let Some(digit) = chars.peek().and_then(|&(_, c)| c.to_digit(10)) {
        n = n.saturating_mul(10).saturating_add(digit as usize);
        chars.next();
    }
    n
}

/// The widest field or precision a format may ask for.
const MAX_FIELD: usize = 10_000;

#[derive(Default)]
struct Flags {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alternate: bool,
}

fn truncate(text: &str, precision: Option<usize>) -> String {
    match precision {
        Some(p) => text.chars().take(p).collect(),
        None => text.to_owned(),
    }
}

/// `%e`, `%f` and `%g` of a non-negative number, as Python writes them.
fn float_digits(x: f64, conversion: char, precision: Option<usize>, alternate: bool) -> String {
    let p = precision.unwrap_or(6);
    let text = match conversion.to_ascii_lowercase() {
        'f' => format!("{x:.p$}"),
        'e' => exponent_form(x, p),
        _ => {
            let p = p.max(1);
            let exponent = exponent_of(&exponent_form(x, p - 1));
            let text = if (-4..p as i32).contains(&exponent) {
                let decimals = (p as i32 - 1 - exponent).max(0) as usize;
                format!("{x:.decimals$}")
            } else {
                exponent_form(x, p - 1)
            };
            if alternate {
                text
            } else {
                strip_fraction_zeros(&text)
            }
        }
    };
    if conversion.is_ascii_uppercase() {
        text.to_uppercase()
    } else {
        text
    }
}

/// `1.500000e+02`: Rust's `{:e}` with Python's signed, two-digit exponent.
fn exponent_form(x: f64, precision: usize) -> String {
    let text = format!("{x:.precision$e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

fn exponent_of(text: &str) -> i32 {
    text.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

/// `%g` drops the zeros that end a fraction, and a bare point.
fn strip_fraction_zeros(text: &str) -> String {
    let (number, exponent) = match text.find('e') {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let number = if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    };
    format!("{number}{exponent}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(term: &str) -> Result<Vec<String>, String> {
        run(&[Value::from(term)], &[], crate::Semantics::Ansible218)
            .map(|items| items.iter().map(pyrepr::to_text).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn shortcut_and_key_value_forms() {
        assert_eq!(seq("5").unwrap(), ["1", "2", "3", "4", "5"]);
        assert_eq!(seq("2-10/4").unwrap(), ["2", "6", "10"]);
        assert_eq!(seq("3:host%02d").unwrap(), ["host01", "host02", "host03"]);
        assert_eq!(seq("start=10 end=8 stride=-1").unwrap(), ["10", "9", "8"]);
        assert_eq!(seq("start=0 count=3 stride=2").unwrap(), ["0", "2", "4"]);
        assert_eq!(seq("count=0").unwrap(), Vec::<String>::new());
        let near_max = format!("start={} end={} stride=5", i64::MAX - 3, i64::MAX);
        assert_eq!(seq(&near_max).unwrap().len(), 1);
    }

    #[test]
    fn refuses_what_ansible_refuses() {
        assert!(
            seq("start=1")
                .unwrap_err()
                .contains("must specify count or end")
        );
        assert!(
            seq("end=1 count=2")
                .unwrap_err()
                .contains("can't specify both")
        );
        assert!(
            seq("start=5 end=1")
                .unwrap_err()
                .contains("make stride negative")
        );
        assert!(
            seq("end=3 format=%d%d")
                .unwrap_err()
                .contains("bad formatting")
        );
        assert!(
            seq("end=3 colour=red")
                .unwrap_err()
                .contains("unrecognized")
        );
    }

    #[test]
    fn printf_matches_python() {
        // Each expected string is what Python 3.11 prints for `format % n`.
        for (format, n, want) in [
            ("%d", -7, "-7"),
            ("%05d", -7, "-0007"),
            ("%-4d|", 7, "7   |"),
            ("%+d", 7, "+7"),
            ("%#x", 255, "0xff"),
            ("%04X", 255, "00FF"),
            ("%#o", 8, "0o10"),
            ("%.3d", 5, "005"),
            ("%e", 150, "1.500000e+02"),
            ("%g", 150, "150"),
            ("%g", 12345678, "1.23457e+07"),
            ("%.2f", 3, "3.00"),
            ("%c", 65, "A"),
            ("%s!", 4, "4!"),
        ] {
            assert_eq!(printf_int(format, n).unwrap(), want, "{format} % {n}");
        }
        assert!(printf_int("%y", 1).is_err());
        assert!(printf_int("%99999999999999999999999d", 1).is_err());
    }
}
