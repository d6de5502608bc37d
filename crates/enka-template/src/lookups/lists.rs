//! The lookups that reshape lists: `nested`, `together`, `indexed_items`,
//! `subelements` and `random_choice`, as ansible-core's plugins of those
//! names build their results (tuples are lists here, as they are in JSON).

use minijinja::value::ValueKind;
use minijinja::{Error, Value};

use super::invalid;
use crate::pyrepr;

/// `listify_lookup_plugin_terms` once the term is templated: a string or a
/// scalar becomes a one-item list, an iterable stays as it is.
fn listify(term: &Value) -> Vec<Value> {
    match term.kind() {
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => {
            term.try_iter().map(Iterator::collect).unwrap_or_default()
        }
        _ => vec![term.clone()],
    }
}

/// `LookupBase._flatten`: lists among `values` spliced in, one level.
fn flatten_once(values: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for value in values {
        if value.kind() == ValueKind::Seq {
            out.extend(value.try_iter().into_iter().flatten());
        } else {
            out.push(value);
        }
    }
    out
}

/// `with_nested`: the cartesian product of the lists, each combination
/// flattened one level.
pub(super) fn nested(terms: &[Value], limit: usize) -> Result<Vec<Value>, Error> {
    let mut lists = terms.iter().map(listify);
    let Some(first) = lists.next() else {
        return Err(invalid(
            "with_nested requires at least one element in the nested list",
        ));
    };
    let mut result = first;
    for list in lists {
        if result.len().saturating_mul(list.len()) > limit {
            return Err(invalid(format!(
                "with_nested would make more than {limit} combinations"
            )));
        }
        let mut combined = Vec::with_capacity(result.len() * list.len());
        for x in &result {
            for y in &list {
                combined.push(Value::from(flatten_once([x.clone(), y.clone()])));
            }
        }
        result = combined;
    }
    // The plugin flattens each combination once more: with one list, that
    // is each of its items (a string becomes its characters).
    result
        .into_iter()
        .map(|combination| match combination.kind() {
            ValueKind::Seq => Ok(Value::from(flatten_once(
                combination.try_iter().into_iter().flatten(),
            ))),
            ValueKind::String => Ok(Value::from(
                combination
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .map(|c| Value::from(c.to_string()))
                    .collect::<Vec<_>>(),
            )),
            ValueKind::Map => Ok(Value::from(flatten_once(
                combination.try_iter().into_iter().flatten(),
            ))),
            _ => Err(invalid(format!(
                "'{}' object is not iterable",
                pyrepr::type_name(&combination)
            ))),
        })
        .collect()
}

/// `with_together`: the lists side by side, the short ones padded with
/// `None`.
pub(super) fn together(terms: &[Value]) -> Result<Vec<Value>, Error> {
    if terms.is_empty() {
        return Err(invalid(
            "with_together requires at least one element in each list",
        ));
    }
    let lists: Vec<Vec<Value>> = terms.iter().map(listify).collect();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..longest)
        .map(|i| {
            let row = lists
                .iter()
                .map(|list| list.get(i).cloned().unwrap_or(Value::from(())));
            Value::from(flatten_once(row))
        })
        .collect())
}

/// `with_indexed_items`: `[index, item]` for each item, the terms
/// flattened one level first.
pub(super) fn indexed_items(terms: &[Value]) -> Vec<Value> {
    flatten_once(terms.iter().cloned())
        .into_iter()
        .enumerate()
        .map(|(i, item)| Value::from(vec![Value::from(i), item]))
        .collect()
}

/// `random_choice`: one of the terms, or none when there are none.
pub(super) fn random_choice(terms: &[Value]) -> Vec<Value> {
    use rand::seq::IndexedRandom;
    terms
        .choose(&mut rand::rng())
        .cloned()
        .into_iter()
        .collect()
}

/// `with_subelements`: `[item, subitem]` for each element of the list
/// found at the dotted key of each item. As Ansible pops that list out of
/// the item, `item.0` no longer holds it.
pub(super) fn subelements(
    terms: &[Value],
    semantics: crate::Semantics,
) -> Result<Vec<Value>, Error> {
    let terms_error = |detail: &str| {
        invalid(format!(
            "subelements lookup expects a list of two or three items, {detail}"
        ))
    };
    if !(2..=3).contains(&terms.len()) {
        return Err(terms_error(""));
    }
    let (items, path) = (&terms[0], &terms[1]);
    let Some(path) = path.as_str() else {
        return Err(terms_error(
            "first a dict or a list, second a string pointing to the subkey",
        ));
    };
    // 2.18 listifies the first term (a scalar or a string is a list of
    // one); 2.19 takes a list or a mapping only.
    let listed = matches!(
        items.kind(),
        ValueKind::Map | ValueKind::Seq | ValueKind::Iterable
    );
    if semantics.native() && !listed {
        return Err(terms_error(
            "first a dict or a list, second a string pointing to the subkey",
        ));
    }
    let elements: Vec<Value> = match items.kind() {
        ValueKind::Map => {
            if skipped(items) {
                return Ok(Vec::new());
            }
            items
                .try_iter()?
                .map(|key| items.get_item(&key).unwrap_or_default())
                .collect()
        }
        _ => listify(items),
    };
    let skip_missing = match terms.get(2) {
        None => false,
        Some(flags) if flags.kind() == ValueKind::Map => flags
            .get_attr("skip_missing")
            .ok()
            .is_some_and(|v| lenient_bool(&v)),
        Some(_) => {
            return Err(terms_error(
                "the optional third item must be a dict with flags ('skip_missing',)",
            ));
        }
    };
    let keys: Vec<&str> = path.split('.').collect();
    let mut out = Vec::new();
    for element in elements {
        if element.kind() != ValueKind::Map {
            return Err(invalid(format!(
                "subelements lookup expects a dictionary, got '{}'",
                pyrepr::to_text(&element)
            )));
        }
        if skipped(&element) {
            continue;
        }
        let Some(sublist) = sublist_at(&element, &keys, skip_missing)? else {
            continue;
        };
        let item = without_path(&element, &keys);
        for subitem in sublist {
            out.push(Value::from(vec![item.clone(), subitem]));
        }
    }
    Ok(out)
}

/// The list at `keys` inside `element`; `None` when a key is missing (or
/// a step is no mapping) and `skip_missing` allows it.
fn sublist_at(
    element: &Value,
    keys: &[&str],
    skip_missing: bool,
) -> Result<Option<Vec<Value>>, Error> {
    let mut value = element.clone();
    for (i, key) in keys.iter().enumerate() {
        let Some(next) = get(&value, key) else {
            if skip_missing {
                return Ok(None);
            }
            return Err(invalid(format!(
                "could not find '{key}' key in iterated item '{}'",
                pyrepr::to_text(&value)
            )));
        };
        let last = i + 1 == keys.len();
        match (last, next.kind()) {
            (true, ValueKind::Seq) => return Ok(Some(next.try_iter()?.collect())),
            (true, _) => {
                return Err(invalid(format!(
                    "the key {key} should point to a list, got '{}'",
                    pyrepr::to_text(&next)
                )));
            }
            (false, ValueKind::Map) => value = next,
            (false, _) if skip_missing => return Ok(None),
            (false, _) => {
                return Err(invalid(format!(
                    "the key {key} should point to a dictionary, got '{}'",
                    pyrepr::to_text(&next)
                )));
            }
        }
    }
    Ok(None)
}

fn get(map: &Value, key: &str) -> Option<Value> {
    map.get_item(&Value::from(key))
        .ok()
        .filter(|v| !v.is_undefined())
}

/// `element` with the last key of `keys` removed from the mapping the
/// others lead to.
fn without_path(element: &Value, keys: &[&str]) -> Value {
    let Some((first, rest)) = keys.split_first() else {
        return element.clone();
    };
    let Ok(entries) = element.try_iter() else {
        return element.clone();
    };
    let pairs: Vec<(Value, Value)> = entries
        .filter_map(|key| {
            let value = element.get_item(&key).unwrap_or_default();
            if key.as_str() != Some(*first) {
                return Some((key, value));
            }
            if rest.is_empty() {
                None
            } else {
                Some((key, without_path(&value, rest)))
            }
        })
        .collect();
    Value::from_pairs(pairs)
}

/// A registered result that was skipped as a whole: its `skipped` is
/// anything but `False` itself (`is not False`).
fn skipped(map: &Value) -> bool {
    get(map, "skipped").is_some_and(|v| v.kind() != ValueKind::Bool || v.is_true())
}

/// `boolean(value, strict=False)` of Ansible's convert_bool.
fn lenient_bool(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Bool => value.is_true(),
        ValueKind::Number => f64::try_from(value.clone()).is_ok_and(|f| f == 1.0),
        ValueKind::String => matches!(
            value.as_str().unwrap_or_default().to_lowercase().as_str(),
            "y" | "yes" | "on" | "1" | "true" | "t"
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subelements_218(terms: &[Value]) -> Result<Vec<Value>, Error> {
        subelements(terms, crate::Semantics::Ansible218)
    }

    fn json(values: &[Value]) -> String {
        serde_json::to_string(values).unwrap()
    }

    fn yaml(text: &str) -> Value {
        let json: serde_json::Value = serde_yaml::from_str(text).unwrap();
        crate::convert::from_json(&json)
    }

    #[test]
    fn nested_is_the_product_flattened_one_level() {
        let got = nested(&[yaml("[1, 2]"), yaml("[a, [b, [c]]]")], 100).unwrap();
        assert_eq!(json(&got), r#"[[1,"a"],[1,"b","c"],[2,"a"],[2,"b","c"]]"#);
        let one = nested(&[yaml("[ab, [x]]")], 100).unwrap();
        assert_eq!(json(&one), r#"[["a","b"],["x"]]"#);
        assert!(nested(&[yaml("[1, 2]"), yaml("[3, 4]")], 3).is_err());
    }

    #[test]
    fn together_pads_with_none() {
        let got = together(&[yaml("[1, 2]"), yaml("[a]")]).unwrap();
        assert_eq!(json(&got), r#"[[1,"a"],[2,null]]"#);
    }

    #[test]
    fn indexed_items_counts_from_zero() {
        let got = indexed_items(&[yaml("[a, b]"), yaml("c")]);
        assert_eq!(json(&got), r#"[[0,"a"],[1,"b"],[2,"c"]]"#);
    }

    #[test]
    fn subelements_pops_the_list_out_of_the_item() {
        let users = yaml("[{name: a, auth: {keys: [k1, k2]}}, {name: b}]");
        let got = subelements_218(&[
            users.clone(),
            Value::from("auth.keys"),
            yaml("{skip_missing: true}"),
        ])
        .unwrap();
        assert_eq!(
            json(&got),
            r#"[[{"name":"a","auth":{}},"k1"],[{"name":"a","auth":{}},"k2"]]"#
        );
        let scalar = subelements_218(&[Value::from(9001), Value::from("groups")]).unwrap_err();
        assert!(
            scalar
                .to_string()
                .contains("expects a dictionary, got '9001'")
        );
        let missing = subelements_218(&[users, Value::from("auth.keys")]).unwrap_err();
        assert!(missing.to_string().contains("could not find 'auth' key"));
    }
}
