//! Conversions between template values, JSON and YAML nodes.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, Value};
use serde_json::Value as Json;

/// A mapping's keys and values in order (nothing for a value that is not
/// one).
pub fn entries(mapping: &Value) -> Vec<(Value, Value)> {
    mapping
        .try_iter()
        .into_iter()
        .flatten()
        .map(|key| {
            let value = mapping.get_item(&key).unwrap_or_default();
            (key, value)
        })
        .collect()
}

/// `mapping` with `key` set to `value` (last, replacing any it had).
pub fn with_entry(mapping: &Value, key: &str, value: Value) -> Value {
    let mut pairs = entries(mapping);
    pairs.retain(|(k, _)| k.as_str() != Some(key));
    pairs.push((Value::from(key), value));
    Value::from_pairs(pairs)
}

/// A template value as JSON. Undefined values are an error, like Ansible's
/// JSON encoder failing on `AnsibleUndefined`.
pub fn to_json(value: &Value) -> Result<serde_json::Value, Error> {
    if let Some(view) = value.downcast_object_ref::<JsonView>() {
        return Ok(view.node().clone());
    }
    Ok(match value.kind() {
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::UndefinedError,
                "an undefined value cannot be serialized",
            ));
        }
        ValueKind::None => serde_json::Value::Null,
        ValueKind::Bool => serde_json::Value::Bool(value.is_true()),
        ValueKind::Number => {
            if value.is_integer() {
                match i64::try_from(value.clone()) {
                    Ok(i) => serde_json::Value::from(i),
                    Err(_) => serde_json::Value::from(f64::try_from(value.clone()).unwrap_or(0.0)),
                }
            } else {
                let f = f64::try_from(value.clone()).unwrap_or(0.0);
                serde_json::Number::from_f64(f)
                    .map(serde_json::Value::Number)
                    .unwrap_or(serde_json::Value::Null)
            }
        }
        ValueKind::String => {
            serde_json::Value::String(value.as_str().unwrap_or_default().to_owned())
        }
        ValueKind::Bytes => serde_json::Value::String(
            String::from_utf8_lossy(value.as_bytes().unwrap_or_default()).into_owned(),
        ),
        ValueKind::Seq | ValueKind::Iterable => {
            let mut items = Vec::with_capacity(value.len().unwrap_or(0));
            for item in value.try_iter()? {
                items.push(to_json(&item)?);
            }
            serde_json::Value::Array(items)
        }
        ValueKind::Map => {
            let mut map = serde_json::Map::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                map.insert(key_string(&key), to_json(&item)?);
            }
            serde_json::Value::Object(map)
        }
        _ => match super::pytime::to_json(value) {
            Some(json) => json?,
            None => serde_json::Value::String(value.to_string()),
        },
    })
}

/// How a mapping key becomes a JSON object key (Python's `json.dumps`).
pub fn key_string(key: &Value) -> String {
    match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
        ValueKind::None => "null".to_owned(),
        ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_owned(),
        _ => crate::pyrepr::to_text(key),
    }
}

/// JSON as a template value, keeping object key order.
pub fn from_json(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::from(()),
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(0.0))
            }
        }
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => {
            Value::from(items.iter().map(from_json).collect::<Vec<_>>())
        }
        serde_json::Value::Object(map) => Value::from_pairs(
            map.iter()
                .map(|(k, v)| (Value::from(k.as_str()), from_json(v))),
        ),
    }
}

/// `json` as a template value whose strings are all unsafe (Ansible's
/// `wrap_var`): data from a custom resource or the API, never templated.
pub fn from_json_unsafe(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::String(s) => Value::from_safe_string(s.clone()),
        serde_json::Value::Array(items) => {
            Value::from(items.iter().map(from_json_unsafe).collect::<Vec<_>>())
        }
        serde_json::Value::Object(map) => Value::from_pairs(
            map.iter()
                .map(|(k, v)| (Value::from(k.as_str()), from_json_unsafe(v))),
        ),
        scalar => from_json(scalar),
    }
}

/// A parsed YAML node as a template value. A node tagged `!unsafe` is
/// Ansible's `wrap_var` of what it holds: its strings are never templated.
pub fn from_yaml(node: &enka_yaml::Node) -> Value {
    let value = from_yaml_untagged(node);
    if node.tag.as_deref() == Some("unsafe") {
        return crate::context::mark_unsafe(&value);
    }
    value
}

fn from_yaml_untagged(node: &enka_yaml::Node) -> Value {
    match &node.value {
        enka_yaml::Value::Null => Value::from(()),
        enka_yaml::Value::Bool(b) => Value::from(*b),
        enka_yaml::Value::Int(i) => Value::from(*i),
        enka_yaml::Value::Float(f) => Value::from(*f),
        enka_yaml::Value::Str(s) => Value::from(s.as_str()),
        enka_yaml::Value::Seq(items) => {
            Value::from(items.iter().map(from_yaml).collect::<Vec<_>>())
        }
        enka_yaml::Value::Map(entries) => {
            let mut pairs: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                let key = from_yaml(k);
                let value = from_yaml(v);
                match pairs.iter_mut().find(|(existing, _)| *existing == key) {
                    Some(slot) => slot.1 = value,
                    None => pairs.push((key, value)),
                }
            }
            Value::from_pairs(pairs)
        }
    }
}

/// One step from a JSON document's root to a node.
#[derive(Debug, Clone)]
enum Step {
    Key(Arc<str>),
    Index(usize),
}

/// A read-only view of a node inside a shared JSON document.
///
/// Objects from the API can be large (a list of custom resources with
/// their managed fields) while a role reads a few fields of them, so they
/// are handed to templates as views and converted only where read.
#[derive(Debug)]
pub struct JsonView {
    root: Arc<Json>,
    path: Vec<Step>,
    /// Strings read through this view are unsafe (never templated).
    unsafe_strings: bool,
}

/// The member `key` of a JSON object, as a lazy view sharing its root.
pub fn json_view_member(root: Arc<Json>, key: &str) -> Value {
    match root.get(key) {
        Some(Json::Object(_) | Json::Array(_)) => Value::from_object(JsonView {
            root,
            path: vec![Step::Key(Arc::from(key))],
            unsafe_strings: false,
        }),
        Some(scalar) => from_json(scalar),
        None => Value::from(()),
    }
}

/// `json` as a template value that converts lazily.
pub fn json_view(json: Arc<Json>) -> Value {
    match &*json {
        Json::Object(_) | Json::Array(_) => Value::from_object(JsonView {
            root: json,
            path: Vec::new(),
            unsafe_strings: false,
        }),
        scalar => from_json(scalar),
    }
}

impl JsonView {
    /// The node this view points at.
    pub fn node(&self) -> &Json {
        let mut node = &*self.root;
        for step in &self.path {
            node = match (step, node) {
                (Step::Key(k), Json::Object(map)) => map.get(&**k).unwrap_or(&Json::Null),
                (Step::Index(i), Json::Array(items)) => items.get(*i).unwrap_or(&Json::Null),
                _ => &Json::Null,
            };
        }
        node
    }

    fn child(&self, json: &Json, step: Step) -> Value {
        match json {
            Json::Object(_) | Json::Array(_) => {
                let mut path = Vec::with_capacity(self.path.len() + 1);
                path.extend(self.path.iter().cloned());
                path.push(step);
                Value::from_object(JsonView {
                    root: self.root.clone(),
                    path,
                    unsafe_strings: self.unsafe_strings,
                })
            }
            scalar if self.unsafe_strings => from_json_unsafe(scalar),
            scalar => from_json(scalar),
        }
    }

    /// Whether strings read through this view are unsafe.
    pub fn is_unsafe(&self) -> bool {
        self.unsafe_strings
    }

    /// The same node, with every string read through it unsafe.
    pub fn to_unsafe(&self) -> Value {
        Value::from_object(JsonView {
            root: self.root.clone(),
            path: self.path.clone(),
            unsafe_strings: true,
        })
    }
}

impl Object for JsonView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.node() {
            Json::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match self.node() {
            Json::Object(map) => {
                let k = key.as_str()?;
                let (stored, json) = map.get_key_value(k)?;
                Some(self.child(json, Step::Key(Arc::from(stored.as_str()))))
            }
            Json::Array(items) => {
                let index = i64::try_from(key.clone()).ok()?;
                let index = if index < 0 {
                    items.len().checked_sub(index.unsigned_abs() as usize)?
                } else {
                    index as usize
                };
                items
                    .get(index)
                    .map(|json| self.child(json, Step::Index(index)))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.node() {
            Json::Object(map) => {
                Enumerator::Values(map.keys().map(|k| Value::from(k.as_str())).collect())
            }
            Json::Array(items) => Enumerator::Seq(items.len()),
            _ => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.node() {
            Json::Object(map) => Some(map.len()),
            Json::Array(items) => Some(items.len()),
            _ => Some(0),
        }
    }

    fn is_true(self: &Arc<Self>) -> bool {
        self.enumerator_len().unwrap_or(0) > 0
    }
}
