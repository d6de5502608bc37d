//! YAML as Ansible reads it: YAML 1.1 scalars (PyYAML's resolver), with the
//! source position of every node.
//!
//! serde_yaml reads YAML 1.2 and forgets positions, but roles rely on YAML 1.1
//! (`wait: yes`, `gather_facts: no`, `mode: 0644`) and `enka check` must point
//! at `file:line:column`. So documents are parsed into [`Node`]s from
//! saphyr-parser's spanned events, and plain scalars are resolved here with
//! PyYAML's rules (see [`resolve`]).

#![forbid(unsafe_code)]

mod float;
mod load;
pub mod resolve;

pub use float::float_repr;

use std::fmt;
use std::sync::Arc;

pub use load::{load_all, load_one};

/// A position in a source file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A YAML node with its position and explicit tag, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The resolved value.
    pub value: Value,
    /// Where the node starts.
    pub pos: Pos,
    /// A local tag such as `!unsafe` or `!vault`, without the `!`.
    pub tag: Option<Arc<str>>,
}

/// A resolved YAML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `~`, `null`, or nothing.
    Null,
    /// YAML 1.1 booleans, including `yes`/`no`/`on`/`off`.
    Bool(bool),
    /// Integers, including `0x`, `0b`, leading-zero octal and sexagesimal.
    Int(i64),
    /// Floats; YAML 1.1 requires a dot, so `1e3` stays a string.
    Float(f64),
    /// Everything else, and every quoted or block scalar.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in source order. Duplicate keys are kept here; later wins
    /// when converted, as in PyYAML.
    Map(Vec<(Node, Node)>),
}

/// A key a mapping defines again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// Where the mapping starts (PyYAML 5's message names it).
    pub mapping: Pos,
    /// Where the key is written again (2.19's message names it).
    pub key: Pos,
    /// The key.
    pub name: String,
}

impl Node {
    /// Every string tagged `!<tag>` in the node, in document order.
    pub fn tagged_strings(&self, tag: &str) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_tagged(tag, &mut out);
        out
    }

    fn collect_tagged<'a>(&'a self, tag: &str, out: &mut Vec<&'a str>) {
        match &self.value {
            Value::Str(text) if self.tag.as_deref() == Some(tag) => out.push(text),
            Value::Seq(items) => items.iter().for_each(|n| n.collect_tagged(tag, out)),
            Value::Map(entries) => entries.iter().for_each(|(_, v)| v.collect_tagged(tag, out)),
            _ => {}
        }
    }

    /// The node with every string tagged `!<tag>` replaced by what `replace`
    /// gives for it (untagged), or by null where it gives `None`. Mapping
    /// keys are left alone.
    pub fn replace_tagged(
        &self,
        tag: &str,
        replace: &mut dyn FnMut(&str, Pos) -> Option<String>,
    ) -> Node {
        let value = match &self.value {
            Value::Str(text) if self.tag.as_deref() == Some(tag) => {
                return Node {
                    value: replace(text, self.pos).map_or(Value::Null, Value::Str),
                    pos: self.pos,
                    tag: None,
                };
            }
            Value::Seq(items) => Value::Seq(
                items
                    .iter()
                    .map(|n| n.replace_tagged(tag, replace))
                    .collect(),
            ),
            Value::Map(entries) => Value::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.replace_tagged(tag, replace)))
                    .collect(),
            ),
            other => other.clone(),
        };
        Node {
            value,
            pos: self.pos,
            tag: self.tag.clone(),
        }
    }

    /// The node as a mapping, if it is one.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The node as a sequence, if it is one.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// The node as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of key `key` in a mapping (the last one, like PyYAML).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// Keys that a mapping defines twice (PyYAML keeps the last).
    pub fn duplicate_keys(&self) -> Vec<DuplicateKey> {
        let mut out = Vec::new();
        self.collect_duplicates(&mut out);
        out
    }

    /// The node with each repeated key's last value at the key's first
    /// place, as a Python dict built from the mapping has it.
    pub fn keep_last_duplicates(&mut self) {
        match &mut self.value {
            Value::Map(entries) => {
                let mut kept: Vec<(Node, Node)> = Vec::with_capacity(entries.len());
                for (key, value) in std::mem::take(entries) {
                    let slot = key
                        .as_str()
                        .and_then(|name| kept.iter().position(|(k, _)| k.as_str() == Some(name)));
                    match slot {
                        Some(i) => kept[i].1 = value,
                        None => kept.push((key, value)),
                    }
                }
                for (_, value) in &mut kept {
                    value.keep_last_duplicates();
                }
                *entries = kept;
            }
            Value::Seq(items) => items.iter_mut().for_each(Node::keep_last_duplicates),
            _ => {}
        }
    }

    fn collect_duplicates(&self, out: &mut Vec<DuplicateKey>) {
        match &self.value {
            Value::Map(entries) => {
                for (i, (key, _)) in entries.iter().enumerate() {
                    if let Some(name) = key.as_str()
                        && entries[..i].iter().any(|(k, _)| k.as_str() == Some(name))
                    {
                        out.push(DuplicateKey {
                            mapping: self.pos,
                            key: key.pos,
                            name: name.to_owned(),
                        });
                    }
                }
                for (_, value) in entries {
                    value.collect_duplicates(out);
                }
            }
            Value::Seq(items) => items.iter().for_each(|item| item.collect_duplicates(out)),
            _ => {}
        }
    }

    /// A short name of the node's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Seq(_) => "list",
            Value::Map(_) => "mapping",
        }
    }

    /// Converts to JSON, dropping positions. Mapping keys become strings the
    /// way Python's `str()` would print them.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Seq(items) => {
                serde_json::Value::Array(items.iter().map(Node::to_json).collect())
            }
            Value::Map(entries) => {
                let mut map = serde_json::Map::with_capacity(entries.len());
                for (k, v) in entries {
                    map.insert(k.key_string(), v.to_json());
                }
                serde_json::Value::Object(map)
            }
        }
    }

    /// The node rendered as a mapping key.
    pub fn key_string(&self) -> String {
        match &self.value {
            Value::Null => "None".into(),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => float_repr(*f),
            Value::Str(s) => s.clone(),
            Value::Seq(_) | Value::Map(_) => {
                serde_json::to_string(&self.to_json()).unwrap_or_default()
            }
        }
    }
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pos}: {message}")]
pub struct Error {
    /// Where the parser stopped.
    pub pos: Pos,
    /// What it found wrong.
    pub message: String,
}

/// What Python's `json.loads` says about `text`, in its words, when `text`
/// looks like JSON (starts with `{` or `[`) and is not valid JSON. Ansible
/// reads every data file as JSON first, and its error for a file neither
/// parser accepts gives both reasons; for a JSON file the JSON one is the
/// useful one.
pub fn json_error(text: &str) -> Option<String> {
    let first = text.trim_start().chars().next()?;
    if first != '{' && first != '[' {
        return None;
    }
    let err = serde_json::from_str::<serde::de::IgnoredAny>(text).err()?;
    let (line, column) = (err.line(), err.column());
    let full = err.to_string();
    let what = full
        .rsplit_once(" at line ")
        .map_or(full.as_str(), |(what, _)| what);
    let what = match what {
        "expected value" | "EOF while parsing a value" => "Expecting value".to_owned(),
        "trailing characters" => "Extra data".to_owned(),
        "key must be a string" | "EOF while parsing an object" => {
            "Expecting property name enclosed in double quotes".to_owned()
        }
        "expected `:`" => "Expecting ':' delimiter".to_owned(),
        "expected `,` or `}`" | "expected `,` or `]`" | "EOF while parsing a list" => {
            "Expecting ',' delimiter".to_owned()
        }
        other => other.to_owned(),
    };
    // Python counts the offset in characters from 0; serde_json's column
    // is 1-based and counts bytes, close enough for the ASCII of JSON's
    // syntax.
    let offset: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(|l| l.chars().count())
        .sum::<usize>()
        + column.saturating_sub(1);
    Some(format!(
        "{what}: line {line} column {column} (char {offset})"
    ))
}

#[cfg(test)]
mod json_error_tests {
    use super::json_error;

    /// Expected texts are Python 3.11's `json.loads` errors for the same input.
    #[test]
    fn json_errors_read_as_pythons() {
        let cases = [
            ("{ }}", "Extra data: line 1 column 4 (char 3)"),
            ("{\"a\": }", "Expecting value: line 1 column 7 (char 6)"),
            (
                "{\"a\" 1}",
                "Expecting ':' delimiter: line 1 column 6 (char 5)",
            ),
            (
                "{1: 2}",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            (
                "[1,\n 2 x]",
                "Expecting ',' delimiter: line 2 column 4 (char 7)",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(json_error(text).as_deref(), Some(expected), "{text:?}");
        }
        assert_eq!(json_error("a: [1"), None, "not JSON-looking");
        assert_eq!(json_error("{\"a\": 1}"), None, "valid");
    }
}
