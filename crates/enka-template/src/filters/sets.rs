//! The set filters: `unique`, `union`, `difference`, `intersect`,
//! `symmetric_difference`, as Ansible computes them with Python's sets
//! (numbers in CPython's set order, see `pyset`) or, for what cannot be a
//! set member, by comparing items.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use super::collections::items;
use super::pyset::{self, NumberSet};
use super::{defined, invalid};
use crate::pyrepr;

/// [`items`] for the set filters, whose Python code hashes each item:
/// an undefined item fails there.
fn set_items(value: &Value, what: &str) -> Result<Vec<Value>, Error> {
    let items = items(value, what)?;
    if items.iter().any(crate::is_strict_undefined) {
        return Err(super::undefined_part("an item", what));
    }
    Ok(items)
}

fn dedup(values: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(values.len());
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Ansible's `unique`: Jinja's (case-insensitive unless
/// `case_sensitive=True`, keyed by `attribute`), falling back to an exact
/// comparison when an item cannot be a set member (a dict or a list),
/// which Ansible refuses when `case_sensitive=False` or `attribute` was
/// asked for.
pub(super) fn unique(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let attribute = kwargs.get::<Option<String>>("attribute")?;
    // Python's truth of whatever is given (`case_sensitive='true'`).
    let case_sensitive = kwargs
        .get::<Option<Value>>("case_sensitive")?
        .map(|v| v.is_true());
    kwargs.assert_all_used()?;
    super::iterable(value, "unique")?;
    let values = set_items(value, "unique")?;
    let fold = !case_sensitive.unwrap_or(false);
    let unhashable = |v: &Value| {
        matches!(v.kind(), ValueKind::Map) || (v.kind() == ValueKind::Seq && !v.is_tuple())
    };
    let mut keys = Vec::with_capacity(values.len());
    for v in &values {
        let key = match &attribute {
            Some(attr) => v.get_attr(attr).unwrap_or_default(),
            None => v.clone(),
        };
        if unhashable(&key) {
            if case_sensitive == Some(false) || attribute.is_some() {
                return Err(invalid(format!(
                    "Jinja2's unique filter failed and we cannot fall back to Ansible's version as it does not support the parameters supplied. unhashable type: '{}'",
                    pyrepr::type_name(&key)
                )));
            }
            return Ok(Value::from(dedup(values)));
        }
        keys.push(match (fold, key.as_str()) {
            (true, Some(s)) => Value::from(s.to_lowercase()),
            _ => key,
        });
    }
    let mut seen: Vec<Value> = Vec::new();
    let mut out = Vec::new();
    for (v, key) in values.into_iter().zip(keys) {
        if !seen.contains(&key) {
            seen.push(key);
            out.push(v);
        }
    }
    Ok(Value::from(out))
}

/// Both operands as Python sets of numbers, when every item of each is a
/// number or boolean: then Ansible's result has the order of CPython's
/// table, which [`pyset`] reproduces. `None` when some item is anything
/// else: unhashable items make Ansible fall back to first-seen order, and
/// strings hash with a per-run seed, so no order is Ansible's for them.
fn number_sets(a: &[Value], b: &[Value]) -> Option<(NumberSet, NumberSet)> {
    let hashed = |items: &[Value]| -> Option<Vec<(i64, Value)>> {
        items
            .iter()
            .map(|v| pyset::number_hash(v).map(|h| (h, v.clone())))
            .collect()
    };
    Some((
        NumberSet::from_items(hashed(a)?),
        NumberSet::from_items(hashed(b)?),
    ))
}

pub(super) fn union(a: &Value, b: &Value) -> Result<Value, Error> {
    let mut all = set_items(a, "union")?;
    let b = set_items(b, "union")?;
    if let Some((a, b)) = number_sets(&all, &b) {
        return Ok(Value::from(a.union(&b).into_values()));
    }
    all.extend(b);
    Ok(Value::from(dedup(all)))
}

pub(super) fn difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let a = set_items(a, "difference")?;
    // As for `intersect`: Ansible's fallback never looks at `b` then.
    defined(b, "difference")?;
    if a.is_empty() {
        return Ok(Value::from(a));
    }
    let b = set_items(b, "difference")?;
    if let Some((a, b)) = number_sets(&a, &b) {
        return Ok(Value::from(a.difference(&b).into_values()));
    }
    Ok(Value::from(dedup(
        a.into_iter().filter(|x| !b.contains(x)).collect(),
    )))
}

pub(super) fn intersect(a: &Value, b: &Value) -> Result<Value, Error> {
    let a = set_items(a, "intersect")?;
    // Ansible falls back to `[x for x in a if x in b]`, which never looks
    // at `b` when `a` is empty.
    defined(b, "intersect")?;
    if a.is_empty() {
        return Ok(Value::from(a));
    }
    let b = set_items(b, "intersect")?;
    if let Some((a, b)) = number_sets(&a, &b) {
        return Ok(Value::from(a.intersection(&b).into_values()));
    }
    Ok(Value::from(dedup(
        a.into_iter().filter(|x| b.contains(x)).collect(),
    )))
}

pub(super) fn symmetric_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let a_items = set_items(a, "symmetric_difference")?;
    let b_items = set_items(b, "symmetric_difference")?;
    if let Some((a, b)) = number_sets(&a_items, &b_items) {
        return Ok(Value::from(a.symmetric_difference(&b).into_values()));
    }
    let mut all = a_items.clone();
    all.extend(b_items.iter().cloned());
    Ok(Value::from(
        dedup(all)
            .into_iter()
            .filter(|x| !(a_items.contains(x) && b_items.contains(x)))
            .collect::<Vec<_>>(),
    ))
}
