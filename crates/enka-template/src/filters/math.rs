//! Ansible's `mathstuff` filters that enka had sent to the worker:
//! `log`, `pow`, `root`, `human_readable`, `human_to_bytes`, and the
//! combinatorial `product`, `permutations`, `combinations`, computed as
//! Python's `math`, `itertools` and Ansible's `formatters` compute them.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use super::{defined, invalid, tuple};
use crate::pyrepr;

/// An argument given by position or by keyword, as Python binds it.
fn argument<T>(positional: Option<T>, kwargs: &Kwargs, name: &str) -> Result<Option<T>, Error>
where
    T: for<'a> minijinja::value::ArgType<'a, Output = T>,
{
    let by_name = kwargs.get::<Option<T>>(name)?;
    match (positional, by_name) {
        (Some(_), Some(_)) => Err(invalid(format!(
            "got multiple values for argument '{name}'"
        ))),
        (positional, by_name) => Ok(positional.or(by_name)),
    }
}

/// A real number as Python's `math` functions take one (a bool is an
/// int), or the TypeError's text.
fn real(value: &Value) -> Result<f64, String> {
    match value.kind() {
        ValueKind::Number => f64::try_from(value.clone()).map_err(|e| e.to_string()),
        ValueKind::Bool => Ok(if value.is_true() { 1.0 } else { 0.0 }),
        _ => Err(format!(
            "must be real number, not {}",
            pyrepr::type_name(value)
        )),
    }
}

/// Python's `math` raises ValueError for a result outside the domain and
/// OverflowError for one too large.
fn checked(result: f64, inputs_finite: bool) -> Result<Value, Error> {
    if result.is_nan() && inputs_finite {
        return Err(invalid("math domain error"));
    }
    if result.is_infinite() && inputs_finite {
        return Err(invalid("math range error"));
    }
    Ok(Value::from(result))
}

/// Jinja's `abs`: Python's `abs()`, booleans counting as integers.
pub(super) fn abs(value: &Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Bool => Ok(Value::from(i64::from(value.is_true()))),
        ValueKind::Number if value.is_integer() => i64::try_from(value.clone())
            .map(|n| Value::from(n.unsigned_abs()))
            .or_else(|_| i128::try_from(value.clone()).map(|n| Value::from(n.unsigned_abs()))),
        ValueKind::Number => f64::try_from(value.clone()).map(|f| Value::from(f.abs())),
        _ => Err(invalid(format!(
            "bad operand type for abs(): '{}'",
            pyrepr::type_name(value)
        ))),
    }
}

/// `log(x, base=e)`: `math.log10` for base 10, else `math.log(x, base)`.
pub(super) fn log(value: &Value, base: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    defined(value, "log")?;
    let base = argument(base, &kwargs, "base")?;
    kwargs.assert_all_used()?;
    let wrong = |e: String| invalid(format!("log() can only be used on numbers: {e}"));
    let x = real(value).map_err(wrong)?;
    if x <= 0.0 {
        return Err(invalid("math domain error"));
    }
    let result = match &base {
        None => x.ln(),
        Some(b) => {
            let b = real(b).map_err(wrong)?;
            if b <= 0.0 {
                return Err(invalid("math domain error"));
            }
            if b == 10.0 {
                x.log10()
            } else if b == 1.0 {
                return Err(invalid("float division by zero"));
            } else {
                x.ln() / b.ln()
            }
        }
    };
    Ok(Value::from(result))
}

/// `pow(x, y)`: `math.pow`, always a float.
pub(super) fn pow(value: &Value, exponent: &Value) -> Result<Value, Error> {
    defined(value, "pow")?;
    let wrong = |e: String| invalid(format!("pow() can only be used on numbers: {e}"));
    let x = real(value).map_err(wrong)?;
    let y = real(exponent).map_err(wrong)?;
    if x == 0.0 && y < 0.0 {
        return Err(invalid("math domain error"));
    }
    checked(x.powf(y), x.is_finite() && y.is_finite())
}

/// `root(x, base=2)`: `math.sqrt`, else `math.pow(x, 1.0 / base)`.
pub(super) fn root(value: &Value, base: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    defined(value, "root")?;
    let base = argument(base, &kwargs, "base")?;
    kwargs.assert_all_used()?;
    let wrong = |e: String| invalid(format!("root() can only be used on numbers: {e}"));
    let x = real(value).map_err(wrong)?;
    let domain = || wrong("math domain error".to_owned());
    let base = match &base {
        Some(b) => real(b).map_err(wrong)?,
        None => 2.0,
    };
    if base == 2.0 {
        if x < 0.0 {
            return Err(domain());
        }
        return Ok(Value::from(x.sqrt()));
    }
    if base == 0.0 {
        return Err(invalid("float division by zero"));
    }
    let exponent = 1.0 / base;
    if x < 0.0 && exponent.fract() != 0.0 {
        return Err(domain());
    }
    Ok(Value::from(x.powf(exponent)))
}

/// The binary prefixes of Ansible's `formatters`, largest first.
const SIZE_RANGES: [(char, u128); 9] = [
    ('Y', 1 << 80),
    ('Z', 1 << 70),
    ('E', 1 << 60),
    ('P', 1 << 50),
    ('T', 1 << 40),
    ('G', 1 << 30),
    ('M', 1 << 20),
    ('K', 1 << 10),
    ('B', 1),
];

/// `human_readable(size, isbits=False, unit=None)`: formatters'
/// `bytes_to_human`, `'%.2f %s'` of the size in the largest unit it
/// reaches (or the unit asked for).
pub(super) fn human_readable(
    value: &Value,
    isbits: Option<Value>,
    unit: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    defined(value, "human_readable")?;
    let isbits = argument(isbits, &kwargs, "isbits")?.is_some_and(|b| b.is_true());
    let unit = argument(unit, &kwargs, "unit")?.filter(|u| !u.is_none());
    kwargs.assert_all_used()?;
    let size = real(value).map_err(|_| {
        invalid(format!(
            "human_readable() failed on bad input: '>=' not supported between instances of '{}' and 'int'",
            pyrepr::type_name(value)
        ))
    })?;
    let unit = unit.map(|u| pyrepr::to_text(&u).to_uppercase());
    let (mut suffix, limit) = SIZE_RANGES
        .iter()
        .find(|(suffix, limit)| match &unit {
            None => size >= *limit as f64,
            Some(unit) => unit.starts_with(*suffix),
        })
        .map(|(suffix, limit)| (suffix.to_string(), *limit))
        .unwrap_or_else(|| ("B".to_owned(), 1));
    let base = if isbits { "bits" } else { "Bytes" };
    if limit != 1 {
        suffix.push_str(&base[..1]);
    } else {
        suffix = base.to_owned();
    }
    Ok(Value::from(format!("{:.2} {suffix}", size / limit as f64)))
}

/// `human_to_bytes(size, default_unit=None, isbits=False)`: formatters'
/// `human_to_bytes`, an int.
pub(super) fn human_to_bytes(
    value: &Value,
    default_unit: Option<Value>,
    isbits: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    defined(value, "human_to_bytes")?;
    let default_unit = argument(default_unit, &kwargs, "default_unit")?.filter(|u| !u.is_none());
    let isbits = argument(isbits, &kwargs, "isbits")?.is_some_and(|b| b.is_true());
    kwargs.assert_all_used()?;
    let text = pyrepr::to_text(value);
    let cannot = || {
        invalid(format!(
            "human_to_bytes() can't interpret following string: {text}"
        ))
    };
    let (number, unit) = split_size(&text).ok_or_else(cannot)?;
    let number: f64 = number.parse().map_err(|_| cannot())?;
    let unit = match unit {
        Some(unit) => unit.to_owned(),
        None => match default_unit {
            Some(unit) => pyrepr::to_text(&unit),
            None => return Ok(round_half_even(number)),
        },
    };
    let Some(first) = unit.chars().next() else {
        return Err(cannot());
    };
    let range = first.to_ascii_uppercase();
    let limit = SIZE_RANGES
        .iter()
        .find(|(suffix, _)| *suffix == range)
        .map(|(_, limit)| *limit)
        .ok_or_else(cannot)?;
    if unit.chars().count() > 1 {
        let (full_name, short) = unit_names(range, isbits);
        if unit.to_lowercase() != full_name && unit != short {
            return Err(cannot());
        }
    }
    Ok(round_half_even(number * limit as f64))
}

/// `^([0-9]*\.?[0-9]+)(?:\s*([A-Za-z]+))?\s*$`: the number and its unit.
fn split_size(text: &str) -> Option<(&str, Option<&str>)> {
    let trimmed = text.trim_end();
    let number_end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let number = &trimmed[..number_end];
    let valid_number = {
        let (int, frac) = number.split_once('.').unwrap_or(("", number));
        int.bytes().all(|b| b.is_ascii_digit())
            && !frac.is_empty()
            && frac.bytes().all(|b| b.is_ascii_digit())
    };
    if !valid_number {
        return None;
    }
    let rest = trimmed[number_end..].trim_start();
    if rest.is_empty() {
        return Some((number, None));
    }
    rest.chars()
        .all(|c| c.is_ascii_alphabetic())
        .then_some((number, Some(rest)))
}

/// The long and short names formatters accepts for a unit: `kilobyte` /
/// `KB`, `kilobit` / `Kb`; `byte` / `B` and `bit` / `b` for plain bytes.
fn unit_names(range: char, isbits: bool) -> (String, String) {
    let prefix = match range {
        'B' => "",
        'K' => "kilo",
        'M' => "mega",
        'G' => "giga",
        'T' => "tera",
        'P' => "peta",
        'E' => "exa",
        'Z' => "zeta",
        _ => "yotta",
    };
    let (name, letter) = if isbits { ("bit", 'b') } else { ("byte", 'B') };
    let short = if range == 'B' {
        letter.to_string()
    } else {
        format!("{range}{letter}")
    };
    (format!("{prefix}{name}"), short)
}

/// Python's `int(round(x))`: halves to the even neighbour.
/// Jinja's `round(value, precision=0, method='common')` (minijinja's), as
/// Python computes it: a bool is the int 0 or 1, and `ceil` and `floor`
/// divide by `10 ** precision`, so they give a float even for an int.
pub(super) fn round(
    value: &Value,
    precision: Option<Value>,
    method: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    defined(value, "round")?;
    let value = match value.kind() {
        ValueKind::Bool => Value::from(i64::from(value.is_true())),
        _ => value.clone(),
    };
    let precision = match precision {
        Some(p) => Some(i32::try_from(p)?),
        None => kwargs.get::<Option<i32>>("precision")?,
    };
    let method = match method {
        Some(m) => Some(pyrepr::to_text(&m)),
        None => kwargs.get::<Option<String>>("method")?,
    };
    kwargs.assert_all_used()?;
    let floored = matches!(method.as_deref(), Some("ceil" | "floor"));
    let rounded = minijinja::filters::round(
        value,
        precision,
        method.as_deref(),
        Kwargs::from_iter(std::iter::empty::<(&str, Value)>()),
    )?;
    if floored && rounded.is_integer() {
        return Ok(Value::from(f64::try_from(rounded)?));
    }
    Ok(rounded)
}

fn round_half_even(x: f64) -> Value {
    let rounded = x.round_ties_even();
    if rounded.abs() < i64::MAX as f64 {
        Value::from(rounded as i64)
    } else {
        Value::from(rounded as i128)
    }
}

/// The items of an iterable as `itertools` takes them: a string's
/// characters, a mapping's keys.
fn pool(value: &Value, what: &str) -> Result<Vec<Value>, Error> {
    super::iterable(value, what)?;
    if let Some(text) = value.as_str() {
        return Ok(text.chars().map(|c| Value::from(c.to_string())).collect());
    }
    Ok(value.try_iter()?.collect())
}

/// A count argument as itertools takes it: a non-negative int.
fn count(value: &Value, what: &str) -> Result<usize, Error> {
    let n = match value.kind() {
        ValueKind::Bool => i64::from(value.is_true()),
        ValueKind::Number if value.is_integer() => {
            i64::try_from(value.clone()).map_err(|e| invalid(e.to_string()))?
        }
        _ => {
            return Err(invalid(format!(
                "'{}' object cannot be interpreted as an integer",
                pyrepr::type_name(value)
            )));
        }
    };
    usize::try_from(n).map_err(|_| invalid(format!("{what} must be non-negative")))
}

/// `product(*iterables, repeat=1)`: the cartesian product, as tuples.
pub(super) fn product(
    value: &Value,
    rest: minijinja::value::Rest<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let repeat = kwargs.get::<Option<Value>>("repeat")?;
    kwargs.assert_all_used()?;
    let repeat = match &repeat {
        Some(r) => count(r, "repeat argument")?,
        None => 1,
    };
    let mut pools = vec![pool(value, "product")?];
    for other in rest.iter() {
        pools.push(pool(other, "product")?);
    }
    let size = pools
        .iter()
        .fold(1usize, |n, pool| n.saturating_mul(pool.len()));
    let total = (0..repeat.min(64)).fold(1usize, |n, _| n.saturating_mul(size));
    within_limit(if size > 1 { total } else { size }, "product")?;
    within_limit(repeat.saturating_mul(pools.len()), "product")?;
    let pools: Vec<Vec<Value>> = (0..repeat).flat_map(|_| pools.iter().cloned()).collect();
    let mut rows: Vec<Vec<Value>> = vec![Vec::new()];
    for pool in &pools {
        let mut next = Vec::with_capacity(rows.len() * pool.len());
        for row in &rows {
            for item in pool {
                let mut extended = row.clone();
                extended.push(item.clone());
                next.push(extended);
            }
        }
        rows = next;
    }
    Ok(Value::from(rows.into_iter().map(tuple).collect::<Vec<_>>()))
}

/// `permutations(iterable, r=None)`: r-length orderings, in itertools'
/// order.
pub(super) fn permutations(
    value: &Value,
    r: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let r = argument(r, &kwargs, "r")?;
    kwargs.assert_all_used()?;
    let items = pool(value, "permutations")?;
    let r = match r.filter(|r| !r.is_none()) {
        Some(r) => count(&r, "r")?,
        None => items.len(),
    };
    let n = items.len();
    if r <= n {
        within_limit(
            (n - r + 1..=n).fold(1usize, |acc, k| acc.saturating_mul(k)),
            "permutations",
        )?;
    }
    let mut out = Vec::new();
    if r <= items.len() {
        let mut chosen = Vec::with_capacity(r);
        let mut used = vec![false; items.len()];
        permute(&items, r, &mut chosen, &mut used, &mut out);
    }
    Ok(Value::from(out))
}

/// The most tuples `product`, `permutations` and `combinations` make:
/// Python would build them all, lazily; a template turns them into a list,
/// and a bound keeps `range(20) | permutations` from hanging a reconcile.
const MAX_RESULTS: usize = 1_000_000;

fn within_limit(count: usize, filter: &str) -> Result<(), Error> {
    if count > MAX_RESULTS {
        return Err(invalid(format!(
            "{filter}: {count} results would be made, more than the limit of {MAX_RESULTS}"
        )));
    }
    Ok(())
}

fn permute(
    items: &[Value],
    r: usize,
    chosen: &mut Vec<usize>,
    used: &mut [bool],
    out: &mut Vec<Value>,
) {
    if chosen.len() == r {
        out.push(tuple(chosen.iter().map(|&i| items[i].clone()).collect()));
        return;
    }
    for i in 0..items.len() {
        if !used[i] {
            used[i] = true;
            chosen.push(i);
            permute(items, r, chosen, used, out);
            chosen.pop();
            used[i] = false;
        }
    }
}

/// `combinations(iterable, r)`: r-length selections in input order.
pub(super) fn combinations(
    value: &Value,
    r: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let r = argument(r, &kwargs, "r")?;
    kwargs.assert_all_used()?;
    let items = pool(value, "combinations")?;
    let r = match r {
        Some(r) => count(&r, "r")?,
        None => {
            return Err(invalid(
                "combinations() missing required argument 'r' (pos 2)",
            ));
        }
    };
    let n = items.len();
    if r <= n {
        // C(n, r), built up as C(n - r + i, i) so that each step divides.
        let k = r.min(n - r);
        let combos = (1..=k).try_fold(1u128, |acc, i| {
            let next = acc.checked_mul((n - k + i) as u128)? / i as u128;
            Some(next)
        });
        within_limit(
            combos.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX)),
            "combinations",
        )?;
    }
    let mut out = Vec::new();
    if r <= items.len() {
        let mut indices: Vec<usize> = (0..r).collect();
        loop {
            out.push(tuple(indices.iter().map(|&i| items[i].clone()).collect()));
            // The rightmost index that can still move right.
            let Some(i) = (0..r).rev().find(|&i| indices[i] != i + items.len() - r) else {
                break;
            };
            indices[i] += 1;
            for j in i + 1..r {
                indices[j] = indices[j - 1] + 1;
            }
        }
    }
    Ok(Value::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_split_as_formatters_regex_reads_them() {
        assert_eq!(split_size("10"), Some(("10", None)));
        assert_eq!(split_size("1.5 MB"), Some(("1.5", Some("MB"))));
        assert_eq!(split_size(".5K"), Some((".5", Some("K"))));
        assert_eq!(split_size("10M  "), Some(("10", Some("M"))));
        assert_eq!(split_size("1."), None);
        assert_eq!(split_size("1.2.3"), None);
        assert_eq!(split_size("-1"), None);
        assert_eq!(split_size("1 2"), None);
        assert_eq!(split_size(""), None);
    }

    #[test]
    fn round_half_even_rounds_as_python() {
        assert_eq!(round_half_even(2.5), Value::from(2));
        assert_eq!(round_half_even(3.5), Value::from(4));
        // Python's round(1.2e24): the exact value of the nearest double.
        assert_eq!(
            round_half_even(1.2e24),
            Value::from(1_200_000_000_000_000_033_554_432i128)
        );
    }
}
