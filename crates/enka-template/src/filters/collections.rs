//! Dicts and lists: `combine`, `dict2items`, `items2dict`, `flatten`,
//! `min`, `max`, `sort`, `join`, `zip`, `subelements`, `random`,
//! `shuffle`, `map`, `json_query`, `extract` (the set filters are in
//! `sets`).

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, State, Value};
use rand::Rng;
use rand::seq::SliceRandom;

use super::{defined, defined_deep, invalid};
use crate::context::Context;
use crate::pyrandom::{PyRandom, Range};
use crate::pyrepr;

/// Jinja's `selectattr`/`rejectattr`, where (as with Ansible's undefined) a
/// missing attribute judged by truthiness alone is an error, while tests
/// such as `defined` see it as undefined.
pub(super) fn select_by_attr(
    state: &mut State,
    value: &Value,
    attr: &str,
    args: &[Value],
    keep: bool,
) -> Result<Value, Error> {
    let mut out = Vec::new();
    for item in items(value, if keep { "selectattr" } else { "rejectattr" })? {
        let mut field = item.clone();
        for part in attr.split('.') {
            field = field.get_attr(part).unwrap_or(Value::UNDEFINED);
        }
        // Jinja's attribute getter gives Ansible's strict undefined, which
        // fails when the test (or truth) uses it.
        let missing = || {
            Error::new(
                minijinja::ErrorKind::UndefinedError,
                format!(
                    "'{} object' has no attribute '{attr}'",
                    pyrepr::type_name(&item)
                ),
            )
        };
        let passed = match args.split_first() {
            None => {
                if field.is_undefined() {
                    return Err(missing());
                }
                field.is_true()
            }
            Some((test, test_args)) => {
                let name = test
                    .as_str()
                    .ok_or_else(|| invalid("the test name must be a string"))?;
                check_plugin_name(name)?;
                if field.is_undefined() && !crate::strict::takes_undefined(name) {
                    return Err(missing());
                }
                let mut call = vec![field];
                call.extend(test_args.iter().cloned());
                state.perform_test(name, &call)?
            }
        };
        if passed == keep {
            out.push(item);
        }
    }
    Ok(Value::from(out))
}

/// Jinja's `items`: a mapping's pairs; nothing for an undefined value.
pub(super) fn items_filter(state: &State, value: &Value) -> Result<Value, Error> {
    match value.kind() {
        // Jinja's `items` makes nothing of an undefined value; 2.19 fails
        // the filter given one first.
        ValueKind::Undefined if super::semantics(state) == crate::Semantics::Ansible219 => {
            Err(super::undefined_part("the value", "items"))
        }
        ValueKind::Undefined => Ok(Value::from(Vec::<Value>::new())),
        ValueKind::Map => Ok(Value::from(
            value
                .try_iter()?
                .map(|key| {
                    let item = value.get_item(&key).unwrap_or_default();
                    super::tuple(vec![key, item])
                })
                .collect::<Vec<_>>(),
        )),
        _ => Err(invalid("Can only get item pairs from a mapping.")),
    }
}

/// Jinja's `sort` (minijinja's), after Python's checks: the value must be
/// iterable and, sorted by itself, its unequal items comparable (timsort
/// compares neighbours first, so that is where Python's TypeError shows).
pub(super) fn sort(state: &State, value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    super::iterable(value, "sort")?;
    if !kwargs.has("attribute") {
        let items: Vec<Value> = value.try_iter()?.collect();
        // Jinja sorts by one-item lists of the items, which compare equal
        // items without `<`.
        for pair in items.windows(2) {
            if pair[1] != pair[0] {
                crate::pycompare::compare(&pair[1], "<", &pair[0])?;
            }
        }
    }
    minijinja::filters::sort(state, value.clone(), kwargs)
}

/// Jinja's `join` (minijinja's), failing as Python's `str()` of an
/// undefined item does.
pub(super) fn join(
    state: &mut State,
    value: &Value,
    joiner: Option<Value>,
    attribute: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    defined(value, "join")?;
    if matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
        // What the joined text will take, asked of the memory budget first:
        // a list may repeat one long string many times over.
        let joiner_len = joiner.as_ref().map_or(0, |j| pyrepr::to_text(j).len());
        let mut bytes = 0usize;
        for item in value.try_iter()? {
            let item = match attribute.as_ref().and_then(Value::as_str) {
                Some(name) => item.get_attr(name).unwrap_or(Value::UNDEFINED),
                None => item,
            };
            if crate::is_strict_undefined(&item) {
                return Err(super::undefined_part("an item", "join"));
            }
            bytes = bytes
                .saturating_add(item.as_str().map_or(0, str::len))
                .saturating_add(joiner_len);
        }
        crate::budget::check(bytes, "join")?;
    }
    let joiner = joiner.map(|j| Value::from(pyrepr::to_text(&j)));
    let joiner = match &joiner {
        Some(j) => Some(minijinja::value::StringInput::new(state, j)?),
        None => None,
    };
    let attribute = attribute.map(|a| pyrepr::to_text(&a));
    minijinja::filters::join(state, value, joiner, attribute.as_deref(), kwargs)
}

/// Refuses a test named at run time that Ansible's plugin loader would not
/// load: a name that is neither an identifier nor `ns.coll.name`, and not
/// one of Jinja's operator tests (`==`, `<`, …), found before the loader.
fn check_plugin_name(name: &str) -> Result<(), Error> {
    if matches!(name, "==" | "!=" | ">" | ">=" | "<" | "<=") {
        return Ok(());
    }
    let identifier = |part: &str| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    let parts: Vec<&str> = name.split('.').collect();
    let valid = match parts.as_slice() {
        [one] => identifier(one),
        [_, _, _, ..] => parts.iter().all(|p| identifier(p)),
        _ => false,
    };
    if valid {
        return Ok(());
    }
    let qualified = if parts.len() == 1 {
        format!("ansible.builtin.{name}")
    } else {
        name.to_owned()
    };
    Err(crate::error::Cause::RuntimeSyntax.error(
        minijinja::ErrorKind::InvalidOperation,
        format!("Could not load \"{name}\": 'invalid plugin name: {qualified}'"),
    ))
}

pub(crate) fn items(value: &Value, what: &str) -> Result<Vec<Value>, Error> {
    defined(value, what)?;
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map | ValueKind::String => {
            Ok(value.try_iter()?.collect())
        }
        _ => Err(invalid(format!(
            "{what} expects a list, got {}",
            pyrepr::type_name(value)
        ))),
    }
}

fn map_pairs(value: &Value) -> Vec<(Value, Value)> {
    value
        .try_iter()
        .into_iter()
        .flatten()
        .map(|k| {
            let v = value.get_item(&k).unwrap_or_default();
            (k, v)
        })
        .collect()
}

fn is_map(value: &Value) -> bool {
    value.kind() == ValueKind::Map
}

/// Ansible's `combine_vars(a, b, merge=True)`: mappings merged
/// recursively (lists replaced), anything else replaced by `b`.
pub fn merge_hash(a: &Value, b: &Value) -> Value {
    if is_map(a) && is_map(b) {
        merge(a, b, true, "replace").unwrap_or_else(|_| b.clone())
    } else {
        b.clone()
    }
}

fn merge(a: &Value, b: &Value, recursive: bool, list_merge: &str) -> Result<Value, Error> {
    let mut out = map_pairs(a);
    for (key, value) in map_pairs(b) {
        let slot = out.iter_mut().find(|(k, _)| *k == key);
        let merged = match &slot {
            Some((_, existing)) if recursive && is_map(existing) && is_map(&value) => {
                merge(existing, &value, true, list_merge)?
            }
            Some((_, existing))
                if existing.kind() == ValueKind::Seq
                    && value.kind() == ValueKind::Seq
                    && list_merge != "replace" =>
            {
                merge_lists(existing, &value, list_merge)?
            }
            _ => value,
        };
        match slot {
            Some((_, v)) => *v = merged,
            None => out.push((key, merged)),
        }
    }
    Ok(Value::from_pairs(out))
}

fn merge_lists(old: &Value, new: &Value, how: &str) -> Result<Value, Error> {
    let old: Vec<Value> = old.try_iter()?.collect();
    let new: Vec<Value> = new.try_iter()?.collect();
    let result = match how {
        "keep" => old,
        "append" => old.into_iter().chain(new).collect(),
        "prepend" => new.into_iter().chain(old).collect(),
        "append_rp" => old
            .into_iter()
            .filter(|x| !new.contains(x))
            .chain(new.iter().cloned())
            .collect(),
        "prepend_rp" => {
            let kept: Vec<Value> = old.into_iter().filter(|x| !new.contains(x)).collect();
            new.into_iter().chain(kept).collect()
        }
        other => {
            return Err(invalid(format!(
                "combine: list_merge must be one of replace, keep, append, prepend, append_rp, prepend_rp; got {other:?}"
            )));
        }
    };
    Ok(Value::from(result))
}

/// Ansible's `combine`: the terms flattened one level (`[a, b] | combine`),
/// nulls skipped, merged left to right; one term is returned as it is.
pub(super) fn combine(first: &Value, rest: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut recursive = false;
    let mut list_merge = "replace".to_owned();
    for key in kwargs.args() {
        match key {
            "recursive" => recursive = kwargs.get::<bool>("recursive")?,
            "list_merge" => list_merge = kwargs.get::<String>("list_merge")?,
            _ => {
                return Err(invalid(
                    "'recursive' and 'list_merge' are the only valid keyword arguments",
                ));
            }
        }
    }
    let is_null = |v: &Value| v.is_none() || matches!(v.as_str(), Some("None" | "null"));
    let mut dicts = Vec::new();
    for term in std::iter::once(first).chain(rest.iter()) {
        defined(term, "combine")?;
        if is_null(term) {
            continue;
        }
        if term.kind() == ValueKind::Seq {
            dicts.extend(term.try_iter()?.filter(|item| !is_null(item)));
        } else {
            dicts.push(term.clone());
        }
    }
    for dict in &dicts {
        defined_deep(dict, "combine")?;
    }
    let mut dicts = dicts.into_iter();
    let Some(mut result) = dicts.next() else {
        return Ok(Value::from_pairs(std::iter::empty::<(Value, Value)>()));
    };
    for dict in dicts {
        if !is_map(&result) || !is_map(&dict) {
            return Err(invalid(format!(
                "failed to combine variables, expected dicts but got a '{}' and a '{}'",
                pyrepr::type_name(&result),
                pyrepr::type_name(&dict)
            )));
        }
        result = merge(&result, &dict, recursive, &list_merge)?;
    }
    Ok(result)
}

pub(super) fn dict2items(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let key_name = kwargs
        .get::<Option<String>>("key_name")?
        .unwrap_or_else(|| "key".into());
    let value_name = kwargs
        .get::<Option<String>>("value_name")?
        .unwrap_or_else(|| "value".into());
    kwargs.assert_all_used()?;
    defined(value, "dict2items")?;
    if !is_map(value) {
        return Err(invalid(format!(
            "dict2items requires a dictionary, got <class '{}'> instead.",
            pyrepr::type_name(value)
        )));
    }
    Ok(Value::from(
        map_pairs(value)
            .into_iter()
            .map(|(k, v)| {
                Value::from_pairs([
                    (Value::from(key_name.as_str()), k),
                    (Value::from(value_name.as_str()), v),
                ])
            })
            .collect::<Vec<_>>(),
    ))
}

pub(super) fn items2dict(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let key_name = kwargs
        .get::<Option<String>>("key_name")?
        .unwrap_or_else(|| "key".into());
    let value_name = kwargs
        .get::<Option<String>>("value_name")?
        .unwrap_or_else(|| "value".into());
    kwargs.assert_all_used()?;
    defined(value, "items2dict")?;
    if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
        return Err(invalid(format!(
            "items2dict requires a list, got <class '{}'> instead.",
            pyrepr::type_name(value)
        )));
    }
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    for item in value.try_iter()? {
        if !is_map(&item) {
            return Err(invalid(format!(
                "items2dict requires a list of dictionaries, got {} instead.",
                pyrepr::repr(value)
            )));
        }
        let key = item.get_attr(&key_name)?;
        let val = item.get_attr(&value_name)?;
        if key.is_undefined() || val.is_undefined() {
            return Err(invalid(format!(
                "items2dict requires each dictionary in the list to contain the keys '{key_name}' and '{value_name}', got {} instead.",
                pyrepr::repr(value)
            )));
        }
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = val,
            None => pairs.push((key, val)),
        }
    }
    Ok(Value::from_pairs(pairs))
}

/// Python's `dict(...)` as a Jinja global: a mapping, a list of pairs,
/// and keyword arguments.
pub fn dict_global(args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    // Taken as they come (an `Option` would read an undefined value as
    // none given): Python's dict() iterates what it is given, so an
    // undefined value fails.
    let mut pairs: Vec<(Value, Value)> = match args.as_slice() {
        [] => Vec::new(),
        [value] => map_pairs(&to_dict(super::defined(value, "dict")?)?),
        more => {
            return Err(invalid(format!(
                "dict expected at most 1 argument, got {}",
                more.len()
            )));
        }
    };
    for key in kwargs.args() {
        let v = kwargs.get::<Value>(key)?;
        match pairs.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
            Some(slot) => slot.1 = v,
            None => pairs.push((Value::from(key), v)),
        }
    }
    Ok(Value::from_pairs(pairs))
}

pub(super) fn to_dict(value: &Value) -> Result<Value, Error> {
    if is_map(value) {
        return Ok(value.clone());
    }
    let mut pairs = Vec::new();
    for item in items(value, "dict")? {
        let parts: Vec<Value> = items(&item, "dict")?;
        if parts.len() != 2 {
            return Err(invalid("dict requires a list of key/value pairs"));
        }
        pairs.push((parts[0].clone(), parts[1].clone()));
    }
    Ok(Value::from_pairs(pairs))
}

fn flatten_into(out: &mut Vec<Value>, values: Vec<Value>, levels: Option<i64>, skip_nulls: bool) {
    for element in values {
        let is_null = element.is_none() || matches!(element.as_str(), Some("None" | "null"));
        if skip_nulls && is_null {
            continue;
        }
        if element.kind() == ValueKind::Seq {
            match levels {
                None => flatten_into(
                    out,
                    element.try_iter().into_iter().flatten().collect(),
                    None,
                    skip_nulls,
                ),
                Some(n) if n >= 1 => flatten_into(
                    out,
                    element.try_iter().into_iter().flatten().collect(),
                    Some(n - 1),
                    skip_nulls,
                ),
                Some(_) => out.push(element),
            }
        } else {
            out.push(element);
        }
    }
}

pub(super) fn flatten(value: &Value, levels: Option<i64>, kwargs: Kwargs) -> Result<Value, Error> {
    let levels = match levels {
        Some(l) => Some(l),
        None => kwargs.get::<Option<i64>>("levels")?,
    };
    let skip_nulls = kwargs.get::<Option<bool>>("skip_nulls")?.unwrap_or(true);
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    flatten_into(&mut out, items(value, "flatten")?, levels, skip_nulls);
    Ok(Value::from(out))
}

fn extreme(
    value: &Value,
    kwargs: Kwargs,
    want: std::cmp::Ordering,
    what: &str,
) -> Result<Value, Error> {
    let attribute = kwargs.get::<Option<String>>("attribute")?;
    let case_sensitive = kwargs
        .get::<Option<bool>>("case_sensitive")?
        .unwrap_or(false);
    kwargs.assert_all_used()?;
    let values = items(value, what)?;
    let key = |v: &Value| -> Value {
        let v = match &attribute {
            Some(attr) => attr
                .split('.')
                .try_fold(v.clone(), |acc, part| acc.get_attr(part))
                .unwrap_or_default(),
            None => v.clone(),
        };
        match (case_sensitive, v.as_str()) {
            (false, Some(s)) => Value::from(s.to_lowercase()),
            _ => v,
        }
    };
    let mut best: Option<(Value, Value)> = None;
    // Python's min and max compare with `<` and `>`, their TypeErrors
    // and an undefined value's error included.
    let op = if want == std::cmp::Ordering::Less {
        "<"
    } else {
        ">"
    };
    for v in values {
        let k = key(&v);
        if crate::is_strict_undefined(&k) {
            return Err(super::undefined_part("an item", what));
        }
        let replace = match &best {
            None => true,
            Some((bk, _)) => crate::pycompare::compare(&k, op, bk)?,
        };
        if replace {
            best = Some((k, v));
        }
    }
    Ok(best.map(|(_, v)| v).unwrap_or(Value::UNDEFINED))
}

pub(super) fn min(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    extreme(value, kwargs, std::cmp::Ordering::Less, "min")
}

pub(super) fn max(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    extreme(value, kwargs, std::cmp::Ordering::Greater, "max")
}

pub(super) fn sum(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let attribute = kwargs.get::<Option<String>>("attribute")?;
    let start = kwargs
        .get::<Option<Value>>("start")?
        .unwrap_or(Value::from(0));
    kwargs.assert_all_used()?;
    let mut total = start;
    for v in items(value, "sum")? {
        let v = match &attribute {
            Some(attr) => attr
                .split('.')
                .try_fold(v.clone(), |acc, part| acc.get_attr(part))?,
            None => v,
        };
        total = add_values(&total, &v)?;
    }
    Ok(total)
}

fn add_values(a: &Value, b: &Value) -> Result<Value, Error> {
    // A bool adds as the int 0 or 1.
    let as_number = |v: &Value| match v.kind() {
        ValueKind::Bool => Value::from(i64::from(v.is_true())),
        _ => v.clone(),
    };
    let (a, b) = (&as_number(a), &as_number(b));
    if a.is_integer() && b.is_integer() {
        let (x, y) = (i128::try_from(a.clone())?, i128::try_from(b.clone())?);
        return Ok(Value::from(x + y));
    }
    if a.is_number() && b.is_number() {
        return Ok(Value::from(
            f64::try_from(a.clone())? + f64::try_from(b.clone())?,
        ));
    }
    if a.kind() == ValueKind::Seq && b.kind() == ValueKind::Seq {
        let mut items: Vec<Value> = a.try_iter()?.collect();
        items.extend(b.try_iter()?);
        return Ok(Value::from(items));
    }
    Err(invalid(format!(
        "unsupported operand type(s) for +: '{}' and '{}'",
        pyrepr::type_name(a),
        pyrepr::type_name(b)
    )))
}

pub(super) fn zip(first: &Value, rest: Rest<Value>) -> Result<Value, Error> {
    let mut lists = vec![items(first, "zip")?];
    for r in rest.iter() {
        lists.push(items(r, "zip")?);
    }
    let len = lists.iter().map(Vec::len).min().unwrap_or(0);
    Ok(Value::from(
        (0..len)
            .map(|i| Value::from(lists.iter().map(|l| l[i].clone()).collect::<Vec<_>>()))
            .collect::<Vec<_>>(),
    ))
}

pub(super) fn zip_longest(
    first: &Value,
    rest: Rest<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let fill = kwargs
        .get::<Option<Value>>("fillvalue")?
        .unwrap_or(Value::from(()));
    kwargs.assert_all_used()?;
    let mut lists = vec![items(first, "zip_longest")?];
    for r in rest.iter() {
        lists.push(items(r, "zip_longest")?);
    }
    let len = lists.iter().map(Vec::len).max().unwrap_or(0);
    Ok(Value::from(
        (0..len)
            .map(|i| {
                Value::from(
                    lists
                        .iter()
                        .map(|l| l.get(i).cloned().unwrap_or_else(|| fill.clone()))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>(),
    ))
}

/// Ansible's `subelements`: each element paired with each item of the list
/// its key path (a list, or a dotted string) names.
pub(super) fn subelements(
    value: &Value,
    path: &Value,
    skip_missing: Option<bool>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let skip_missing = match skip_missing {
        Some(skip) => skip,
        None => kwargs.get::<Option<bool>>("skip_missing")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let elements: Vec<Value> = match value.kind() {
        ValueKind::Map => map_pairs(value).into_iter().map(|(_, v)| v).collect(),
        ValueKind::Seq => value.try_iter()?.collect(),
        _ => return Err(invalid("obj must be a list of dicts or a nested dict")),
    };
    let keys: Vec<Value> = match (path.kind(), path.as_str()) {
        (ValueKind::Seq, _) => path.try_iter()?.collect(),
        (_, Some(text)) => text.split('.').map(Value::from).collect(),
        _ => return Err(invalid("subelements must be a list or a string")),
    };
    let mut out = Vec::new();
    for element in elements {
        let mut current = element.clone();
        for key in &keys {
            if !is_map(&current) {
                return Err(invalid(format!(
                    "the key {} should point to a dictionary, got '{}'",
                    pyrepr::to_text(key),
                    pyrepr::repr(&current)
                )));
            }
            match current.get_item(key).ok().filter(|v| !v.is_undefined()) {
                Some(next) => current = next,
                None if skip_missing => {
                    current = Value::from(Vec::<Value>::new());
                    break;
                }
                None => {
                    return Err(invalid(format!(
                        "could not find {} key in iterated item {}",
                        pyrepr::repr(key),
                        pyrepr::repr(&current)
                    )));
                }
            }
        }
        if current.kind() != ValueKind::Seq {
            return Err(invalid(format!(
                "the key {} should point to a list, got {}",
                pyrepr::repr(keys.last().unwrap_or(&Value::UNDEFINED)),
                pyrepr::repr(&current)
            )));
        }
        for sub in current.try_iter()? {
            out.push(super::tuple(vec![element.clone(), sub]));
        }
    }
    Ok(Value::from(out))
}

fn context(state: &State) -> Option<Context> {
    super::context(state)
}

/// Python's `Random(seed)` when a seed is given (the same value every
/// run, as Ansible's); `None` draws from the templar's generator.
fn seeded(seed: Option<&Value>) -> Result<Option<PyRandom>, Error> {
    seed.filter(|s| !s.is_none())
        .map(|seed| PyRandom::new(seed).map_err(|e| invalid(e.to_string())))
        .transpose()
}

/// The `seed=` given, an undefined one included (minijinja reads an
/// undefined `Option` as none; Python's `Random` refuses it).
fn seed_argument(kwargs: &Kwargs) -> Result<Option<Value>, Error> {
    if kwargs.has("seed") {
        kwargs.get::<Value>("seed").map(Some)
    } else {
        Ok(None)
    }
}

/// A draw from the templar's generator (a fresh one outside a render).
fn unseeded<T>(state: &State, f: impl FnOnce(&mut dyn rand::RngCore) -> T) -> T {
    match context(state) {
        Some(ctx) => ctx.templar().with_rng(|rng| f(rng)),
        None => f(&mut rand::rng()),
    }
}

/// Ansible's `random`: a random element of a sequence, or
/// `randrange(start, end, step)` of an integer `end`.
pub(super) fn random(
    state: &State,
    value: &Value,
    start: Option<i64>,
    step: Option<i64>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let start = match start {
        Some(s) => Some(s),
        None => kwargs.get::<Option<i64>>("start")?,
    };
    let step = match step {
        Some(s) => Some(s),
        None => kwargs.get::<Option<i64>>("step")?,
    };
    let seed = seed_argument(&kwargs)?;
    kwargs.assert_all_used()?;
    defined(value, "random")?;
    if value.is_integer() {
        let end = i64::try_from(value.clone())?;
        // `if not start: start = 0`, `if not step: step = 1`.
        let start = start.unwrap_or(0);
        let step = step.filter(|&s| s != 0).unwrap_or(1);
        let range = Range::new(start, end, step).map_err(invalid)?;
        let index = match seeded(seed.as_ref())? {
            Some(mut rng) => rng.below(range.count),
            None => unseeded(state, |rng| rng.random_range(0..range.count)),
        };
        return Ok(Value::from(range.at(index)));
    }
    if !matches!(
        value.kind(),
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map | ValueKind::String
    ) {
        return Err(invalid("random can only be used on sequences and integers"));
    }
    if start.unwrap_or(0) != 0 || step.unwrap_or(0) != 0 {
        return Err(invalid(
            "start and step can only be used with integer values",
        ));
    }
    let values = items(value, "random")?;
    if values.is_empty() {
        return Err(invalid("random: cannot choose from an empty sequence"));
    }
    let count = values.len();
    let index = match seeded(seed.as_ref())? {
        Some(mut rng) => rng.below(count as u64) as usize,
        None => unseeded(state, |rng| rng.random_range(0..count)),
    };
    Ok(values[index].clone())
}

/// Ansible's `shuffle`: seeded only by a true seed (`if seed:`).
pub(super) fn shuffle(state: &State, value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let seed = seed_argument(&kwargs)?;
    kwargs.assert_all_used()?;
    // Ansible's randomize_list returns what it cannot make a list of as is,
    // and the list unshuffled when the seed fails (`if seed:` on an
    // undefined value, a seed Random refuses).
    let Ok(mut values) = items(value, "shuffle") else {
        return Ok(value.clone());
    };
    match seed {
        Some(seed) if seed.is_undefined() => {}
        Some(seed) if seed.is_true() => {
            if let Ok(mut rng) = PyRandom::new(&seed) {
                rng.shuffle(&mut values);
            }
        }
        _ => unseeded(state, |rng| values.shuffle(rng)),
    }
    Ok(Value::from(values))
}

/// What `map` iterates: nothing for an undefined value (the environment's
/// chainable undefined), else the value's items.
fn map_items(value: &Value) -> Result<Vec<Value>, Error> {
    if value.is_undefined() {
        return Ok(Vec::new());
    }
    Ok(value.try_iter()?.collect())
}

/// Jinja's `map`: by `attribute=` (with `default=`) when no filter is
/// named, else the named filter applied to each item with the remaining
/// arguments, keyword ones included (minijinja's drops those).
pub(super) fn map(
    state: &mut minijinja::State<'_, '_>,
    value: &Value,
    args: Rest<minijinja::value::ValueOrKwargs>,
) -> Result<Value, Error> {
    let args = args.into_values();
    let (positional, kwargs): (&[Value], Kwargs) = minijinja::value::from_args(&args)?;
    if positional.is_empty() && kwargs.has("attribute") {
        let attribute: Value = kwargs.get("attribute")?;
        let default: Value = if kwargs.has("default") {
            kwargs.get("default")?
        } else {
            Value::UNDEFINED
        };
        kwargs.assert_all_used()?;
        let mut out = Vec::new();
        let ctx = context(state);
        for item in map_items(value)? {
            let found = match attribute.as_str() {
                // Jinja's attribute getter: dotted parts, digits as indexes.
                Some(path) => path.split('.').try_fold(item, |current, part| {
                    let next = match part.parse::<i64>() {
                        Ok(index) => current.get_item(&Value::from(index)),
                        Err(_) => current.get_attr(part),
                    }?;
                    if next.is_undefined()
                        && default.is_undefined()
                        && let Some(ctx) = &ctx
                    {
                        ctx.read_missing_attribute(&current, &Value::from(part));
                    }
                    Ok(next)
                }),
                None => item.get_item(&attribute),
            };
            out.push(match found {
                Ok(v) if !v.is_undefined() => v,
                Ok(_) => default.clone(),
                Err(_) if !default.is_undefined() => default.clone(),
                Err(err) => return Err(err),
            });
        }
        return Ok(Value::from(out));
    }
    let name = positional
        .first()
        .ok_or_else(|| invalid("map: a filter name or attribute= is required"))?;
    let name = name
        .as_str()
        .ok_or_else(|| invalid("map: the filter name must be a string"))?;
    // The keyword arguments go on to the filter, which checks them.
    for key in kwargs.args() {
        kwargs.get::<Value>(key)?;
    }
    let filter_args = &args[1..];
    let mut out = Vec::new();
    for item in map_items(value)? {
        let mut call = Vec::with_capacity(filter_args.len() + 1);
        call.push(item);
        call.extend(filter_args.iter().cloned());
        out.push(state.apply_filter(name, &call)?);
    }
    Ok(Value::from(out))
}

/// Ansible's `rekey_on_member`: a dict of the items (of a list, or a
/// dict's values) keyed by each one's `key`.
pub(super) fn rekey_on_member(
    state: &State,
    value: &Value,
    key: &Value,
    duplicates: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let duplicates = match duplicates {
        Some(d) => d,
        None => kwargs
            .get::<Option<String>>("duplicates")?
            .unwrap_or_else(|| "error".to_owned()),
    };
    kwargs.assert_all_used()?;
    if duplicates != "error" && duplicates != "overwrite" {
        return Err(invalid(format!(
            "duplicates parameter to rekey_on_member has unknown value: {duplicates}"
        )));
    }
    defined(value, "rekey_on_member")?;
    // Ansible's message formats the key, which an undefined one refuses.
    defined(key, "rekey_on_member")?;
    let items: Vec<Value> = match value.kind() {
        ValueKind::Map => map_pairs(value).into_iter().map(|(_, v)| v).collect(),
        ValueKind::Seq | ValueKind::Iterable => value.try_iter()?.collect(),
        _ => return Err(invalid("Type is not a valid list, set, or dict")),
    };
    let mut out: Vec<(Value, Value)> = Vec::new();
    for item in items {
        if !is_map(&item) {
            return Err(invalid("List item is not a valid dict"));
        }
        let member = item
            .get_item(key)
            .ok()
            .filter(|v| !v.is_undefined())
            .ok_or_else(|| invalid(format!("Key {} was not found", pyrepr::to_text(key))))?;
        match out.iter_mut().find(|(k, _)| *k == member) {
            Some(_) if duplicates == "error" => {
                return Err(invalid(match super::semantics(state) {
                    crate::Semantics::Ansible218 => format!(
                        "Key {} is not unique, cannot correctly turn into dict",
                        pyrepr::to_text(&member)
                    ),
                    crate::Semantics::Ansible219 => format!(
                        "The filter plugin 'ansible.builtin.rekey_on_member' failed: Key {} is not unique, cannot convert to dict.",
                        pyrepr::repr(&member)
                    ),
                }));
            }
            Some(slot) => slot.1 = item,
            None => out.push((member, item)),
        }
    }
    Ok(Value::from_pairs(out))
}

/// Jinja's `environment.getitem` as `extract` uses it: an undefined
/// container or a missing key gives an undefined value (which `default`
/// replaces), not an error.
pub(super) fn extract(
    item: &Value,
    container: &Value,
    morekeys: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let morekeys = match morekeys {
        Some(keys) => Some(keys),
        None => kwargs.get::<Option<Value>>("morekeys")?,
    };
    kwargs.assert_all_used()?;
    fn get(container: &Value, key: &Value) -> Value {
        if container.is_undefined() {
            return Value::UNDEFINED;
        }
        container.get_item(key).unwrap_or(Value::UNDEFINED)
    }
    let mut value = get(container, item);
    if let Some(more) = morekeys {
        let keys = if more.kind() == ValueKind::Seq {
            more.try_iter()?.collect()
        } else {
            vec![more]
        };
        for key in keys {
            value = get(&value, &key);
        }
    }
    Ok(value)
}

pub(super) fn json_query(value: &Value, expr: &str) -> Result<Value, Error> {
    let json = crate::convert::to_json(value)?;
    let compiled = jmespath::compile(expr)
        .map_err(|e| invalid(format!("JMESPathError in json_query filter plugin:\n{e}")))?;
    let data = jmespath::Variable::from_json(&json.to_string())
        .map_err(|e| invalid(format!("json_query: {e}")))?;
    let result = compiled
        .search(data)
        .map_err(|e| invalid(format!("JMESPathError in json_query filter plugin:\n{e}")))?;
    let result: serde_json::Value =
        serde_json::to_value(&*result).map_err(|e| invalid(format!("json_query: {e}")))?;
    Ok(crate::convert::from_json(&result))
}
