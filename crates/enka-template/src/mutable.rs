//! Python's mutable list and dict inside a template.
//!
//! Real roles build lists in loops the Jinja2 way, which Ansible's Python
//! values allow:
//!
//! ```jinja
//! {% set names = [] %}{% for p in pods %}{% set _ = names.append(p.name) %}{% endfor %}
//! ```
//!
//! minijinja's values are immutable, so an empty list or dict literal that a
//! `{% set %}` gives a name is compiled to one of these objects instead
//! ([`rewrite_set_literals`]): `append`, `extend`, `insert`, `pop`,
//! `remove`, `clear` (lists) and `update`, `pop`, `setdefault`, `clear`
//! (dicts) change it in place, as in Python; every other use sees an
//! ordinary sequence or mapping.

use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

/// A list that `append` and friends change in place.
#[derive(Debug, Default)]
pub struct MutableList(Mutex<Vec<Value>>);

/// A dict that `update` and friends change in place.
#[derive(Debug, Default)]
pub struct MutableDict(Mutex<Vec<(Value, Value)>>);

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn items_of(value: &Value) -> Result<Vec<Value>, Error> {
    Ok(value.try_iter()?.collect())
}

impl MutableList {
    fn snapshot(&self) -> Value {
        Value::from(locked(&self.0).clone())
    }
}

impl Object for MutableList {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let items = locked(&self.0);
        let index = i64::try_from(key.clone()).ok()?;
        let index = if index < 0 {
            items.len() as i64 + index
        } else {
            index
        };
        usize::try_from(index)
            .ok()
            .and_then(|i| items.get(i).cloned())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(locked(&self.0).clone())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(locked(&self.0).len())
    }

    fn call_method(
        self: &Arc<Self>,
        state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let arg = |i: usize| {
            args.get(i).cloned().ok_or_else(|| {
                Error::new(
                    ErrorKind::MissingArgument,
                    format!("list.{method}() takes an argument"),
                )
            })
        };
        match method {
            "append" => locked(&self.0).push(arg(0)?),
            "extend" => {
                let more = items_of(&arg(0)?)?;
                locked(&self.0).extend(more);
            }
            "insert" => {
                let at = i64::try_from(arg(0)?)?;
                let mut items = locked(&self.0);
                let len = items.len() as i64;
                let at = if at < 0 {
                    (len + at).max(0)
                } else {
                    at.min(len)
                };
                items.insert(at as usize, arg(1)?);
            }
            "pop" => {
                let mut items = locked(&self.0);
                let len = items.len() as i64;
                let at = match args.first() {
                    Some(v) => i64::try_from(v.clone())?,
                    None => -1,
                };
                let at = if at < 0 { len + at } else { at };
                if at < 0 || at >= len {
                    return Err(super::filters::invalid("pop index out of range"));
                }
                return Ok(items.remove(at as usize));
            }
            "remove" => {
                let wanted = arg(0)?;
                let mut items = locked(&self.0);
                let Some(at) = items.iter().position(|v| *v == wanted) else {
                    return Err(super::filters::invalid("list.remove(x): x not in list"));
                };
                items.remove(at);
            }
            "clear" => locked(&self.0).clear(),
            _ => return super::methods::call_method(state, &self.snapshot(), method, args),
        }
        Ok(Value::from(()))
    }
}

impl MutableDict {
    fn snapshot(&self) -> Value {
        Value::from_pairs(locked(&self.0).clone())
    }

    fn set(&self, key: Value, value: Value) {
        let mut entries = locked(&self.0);
        match entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => entries.push((key, value)),
        }
    }
}

impl Object for MutableDict {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        locked(&self.0)
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(locked(&self.0).iter().map(|(k, _)| k.clone()).collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(locked(&self.0).len())
    }

    fn call_method(
        self: &Arc<Self>,
        state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "update" => {
                for other in args {
                    if other.kind() != ValueKind::Map {
                        return Err(super::filters::invalid("dict.update() takes a mapping"));
                    }
                    for key in other.try_iter()? {
                        let value = other.get_item(&key)?;
                        self.set(key, value);
                    }
                }
                Ok(Value::from(()))
            }
            "setdefault" => {
                let key = args.first().cloned().unwrap_or_default();
                if let Some(existing) = self.get_value(&key) {
                    return Ok(existing);
                }
                let value = args.get(1).cloned().unwrap_or(Value::from(()));
                self.set(key, value.clone());
                Ok(value)
            }
            "pop" => {
                let key = args.first().cloned().unwrap_or_default();
                let mut entries = locked(&self.0);
                match entries.iter().position(|(k, _)| *k == key) {
                    Some(at) => Ok(entries.remove(at).1),
                    None => args
                        .get(1)
                        .cloned()
                        .ok_or_else(|| super::filters::invalid(format!("KeyError: {key}"))),
                }
            }
            "clear" => {
                locked(&self.0).clear();
                Ok(Value::from(()))
            }
            _ => super::methods::call_method(state, &self.snapshot(), method, args),
        }
    }
}

/// Registers the constructors the rewritten literals call.
pub fn register(env: &mut minijinja::Environment<'static>) {
    env.add_function("__enka_list", || Value::from_object(MutableList::default()));
    env.add_function("__enka_dict", || Value::from_object(MutableDict::default()));
}

/// `{% set name = [] %}` and `{% set name = {} %}` (with any whitespace
/// control) become mutable objects; everything else is left as written.
pub fn rewrite_set_literals(source: &str) -> std::borrow::Cow<'_, str> {
    if !source.contains("{%") || !source.contains("set") {
        return std::borrow::Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len() + 16);
    let mut rest = source;
    let mut changed = false;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let block = &rest[start..];
        let Some(end) = block.find("%}") else {
            out.push_str(block);
            rest = "";
            break;
        };
        let whole = &block[..end + 2];
        match rewrite_block(whole) {
            Some(rewritten) => {
                out.push_str(&rewritten);
                changed = true;
            }
            None => out.push_str(whole),
        }
        rest = &block[end + 2..];
    }
    out.push_str(rest);
    if changed {
        std::borrow::Cow::Owned(out)
    } else {
        std::borrow::Cow::Borrowed(source)
    }
}

/// `{%- set x = [] -%}` → `{%- set x = __enka_list() -%}`.
fn rewrite_block(block: &str) -> Option<String> {
    let inner = block.strip_prefix("{%")?.strip_suffix("%}")?;
    let (open, inner) = match inner.strip_prefix(['-', '+']) {
        Some(rest) => (&block[2..3], rest),
        None => ("", inner),
    };
    let (inner, close) = match inner.strip_suffix(['-', '+']) {
        Some(rest) => (rest, &inner[inner.len() - 1..]),
        None => (inner, ""),
    };
    let rest = inner.trim_start().strip_prefix("set")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let (name, value) = rest.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let constructor = match value.trim() {
        "[]" | "[ ]" => "__enka_list()",
        "{}" | "{ }" => "__enka_dict()",
        _ => return None,
    };
    Some(format!("{{%{open} set {name} = {constructor} {close}%}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_empty_literals_given_a_name_are_rewritten() {
        assert_eq!(
            rewrite_set_literals("{% set parts = [] %}{{ x }}{%- set d = {} -%}"),
            "{% set parts = __enka_list() %}{{ x }}{%- set d = __enka_dict() -%}"
        );
        for unchanged in [
            "{% set parts = [1] %}",
            "{{ [] }}",
            "{% if x %}[]{% endif %}",
            "{% set a, b = [] %}",
        ] {
            assert_eq!(rewrite_set_literals(unchanged), unchanged);
        }
    }

    #[test]
    fn lists_and_dicts_change_in_place() {
        let mut env = minijinja::Environment::new();
        register(&mut env);
        env.set_unknown_method_callback(super::super::methods::call_method);
        let source = rewrite_set_literals(
            "{% set parts = [] %}{% for i in [1, 2, 3] %}{% set _ = parts.append(i * 2) %}{% endfor %}\
             {% set _ = parts.extend([7]) %}{% set _ = parts.insert(0, 0) %}{% set last = parts.pop() %}\
             {% set d = {} %}{% set _ = d.update({'a': 1}) %}{% set _ = d.update({'b': parts | length}) %}\
             {{ parts | join(',') }} {{ last }} {{ d.a }}{{ d.b }} {{ d | list | join('') }} {{ parts | length }}",
        );
        let out = env.render_str(&source, ()).unwrap();
        assert_eq!(out, "0,2,4,6 7 14 ab 4");
    }
}
