//! Encodings: base64, JSON and YAML in and out, and hashes.
//!
//! Output text follows Python's `json.dumps` and PyYAML's `yaml.dump` with
//! Ansible's arguments, since rendered manifests are compared and hashed.

use std::fmt::Write as _;

use base64::Engine as _;
use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

use super::{defined, invalid};
use crate::pyrepr;
use crate::{convert, pyrepr::float_repr};

/// Ansible's namespace for `to_uuid`.
const UUID_NAMESPACE_ANSIBLE: uuid::Uuid = uuid::uuid!("361E6D51-FAEC-444A-9079-341386DA8E2E");

/// `to_uuid(namespace=…)`: the name-based (SHA-1, version 5) UUID of the
/// text, in Ansible's namespace or the one given.
pub(super) fn to_uuid(
    value: &Value,
    namespace: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let name = text_of(value, "to_uuid")?;
    let namespace = match namespace {
        Some(namespace) => Some(namespace),
        None => kwargs.get::<Option<Value>>("namespace")?,
    };
    kwargs.assert_all_used()?;
    let namespace = match namespace {
        None => UUID_NAMESPACE_ANSIBLE,
        Some(given) => {
            let text = pyrepr::to_text(&given);
            uuid::Uuid::try_parse(text.trim())
                .map_err(|e| invalid(format!("Invalid value '{text}' for 'namespace': {e}")))?
        }
    };
    Ok(Value::from(
        uuid::Uuid::new_v5(&namespace, name.as_bytes()).to_string(),
    ))
}

fn text_of(value: &Value, what: &str) -> Result<String, Error> {
    defined(value, what)?;
    Ok(match value.kind() {
        ValueKind::Bytes => {
            String::from_utf8_lossy(value.as_bytes().unwrap_or_default()).into_owned()
        }
        _ => pyrepr::to_text(value),
    })
}

/// The Python codecs `b64encode`/`b64decode` take as `encoding=`, by
/// Python's normalised name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Utf8,
    Utf16 { little: bool, bom: bool },
    Utf32 { little: bool, bom: bool },
    Latin1,
    Ascii,
}

impl Codec {
    fn named(name: Option<&str>) -> Result<Self, Error> {
        let Some(name) = name else {
            return Ok(Codec::Utf8);
        };
        let normal = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        Ok(match normal.as_str() {
            "utf_8" | "utf8" | "u8" | "utf" => Codec::Utf8,
            "utf_16" | "utf16" | "u16" => Codec::Utf16 {
                little: true,
                bom: true,
            },
            "utf_16_le" | "utf_16le" | "utf16le" => Codec::Utf16 {
                little: true,
                bom: false,
            },
            "utf_16_be" | "utf_16be" | "utf16be" => Codec::Utf16 {
                little: false,
                bom: false,
            },
            "utf_32" | "utf32" | "u32" => Codec::Utf32 {
                little: true,
                bom: true,
            },
            "utf_32_le" | "utf_32le" | "utf32le" => Codec::Utf32 {
                little: true,
                bom: false,
            },
            "utf_32_be" | "utf_32be" | "utf32be" => Codec::Utf32 {
                little: false,
                bom: false,
            },
            "latin_1" | "latin1" | "latin" | "l1" | "iso_8859_1" | "iso8859_1" | "8859"
            | "cp819" => Codec::Latin1,
            "ascii" | "us_ascii" | "646" => Codec::Ascii,
            _ => return Err(invalid(format!("unknown encoding: {name}"))),
        })
    }

    /// The text's bytes in this codec (Python's `str.encode`, strict).
    fn encode(self, text: &str) -> Result<Vec<u8>, Error> {
        Ok(match self {
            Codec::Utf8 => text.as_bytes().to_vec(),
            Codec::Utf16 { little, bom } => {
                let mut out = Vec::new();
                let units = bom.then_some(0xFEFF).into_iter().chain(text.encode_utf16());
                for unit in units {
                    out.extend(if little {
                        unit.to_le_bytes()
                    } else {
                        unit.to_be_bytes()
                    });
                }
                out
            }
            Codec::Utf32 { little, bom } => {
                let mut out = Vec::new();
                let chars = bom
                    .then_some(0xFEFF)
                    .into_iter()
                    .chain(text.chars().map(u32::from));
                for c in chars {
                    out.extend(if little {
                        c.to_le_bytes()
                    } else {
                        c.to_be_bytes()
                    });
                }
                out
            }
            Codec::Latin1 | Codec::Ascii => {
                let limit = if self == Codec::Latin1 { 0xFF } else { 0x7F };
                text.chars()
                    .map(|c| {
                        u8::try_from(u32::from(c))
                            .ok()
                            .filter(|b| u32::from(*b) <= limit)
                            .ok_or_else(|| {
                                invalid(format!(
                                    "'{}' codec can't encode character {c:?}",
                                    if limit == 0xFF { "latin-1" } else { "ascii" }
                                ))
                            })
                    })
                    .collect::<Result<_, _>>()?
            }
        })
    }

    /// The bytes as text in this codec (Python's `bytes.decode`, strict).
    fn decode(self, bytes: &[u8]) -> Result<String, Error> {
        let bad = |what: &str| invalid(format!("b64decode: the decoded data is not valid {what}"));
        match self {
            Codec::Utf8 => String::from_utf8(bytes.to_vec()).map_err(|_| bad("UTF-8")),
            Codec::Utf16 { mut little, bom } => {
                let mut data = bytes;
                if bom && data.len() >= 2 {
                    match data[..2] {
                        [0xFF, 0xFE] => data = &data[2..],
                        [0xFE, 0xFF] => (little, data) = (false, &data[2..]),
                        _ => {}
                    }
                }
                if !data.len().is_multiple_of(2) {
                    return Err(bad("UTF-16"));
                }
                let units = data.chunks_exact(2).map(|pair| {
                    let pair = [pair[0], pair[1]];
                    if little {
                        u16::from_le_bytes(pair)
                    } else {
                        u16::from_be_bytes(pair)
                    }
                });
                char::decode_utf16(units)
                    .collect::<Result<String, _>>()
                    .map_err(|_| bad("UTF-16"))
            }
            Codec::Utf32 { mut little, bom } => {
                let mut data = bytes;
                if bom && data.len() >= 4 {
                    match data[..4] {
                        [0xFF, 0xFE, 0, 0] => data = &data[4..],
                        [0, 0, 0xFE, 0xFF] => (little, data) = (false, &data[4..]),
                        _ => {}
                    }
                }
                if !data.len().is_multiple_of(4) {
                    return Err(bad("UTF-32"));
                }
                data.chunks_exact(4)
                    .map(|quad| {
                        let quad = [quad[0], quad[1], quad[2], quad[3]];
                        let code = if little {
                            u32::from_le_bytes(quad)
                        } else {
                            u32::from_be_bytes(quad)
                        };
                        char::from_u32(code).ok_or_else(|| bad("UTF-32"))
                    })
                    .collect()
            }
            Codec::Latin1 => Ok(bytes.iter().map(|b| char::from(*b)).collect()),
            Codec::Ascii => bytes
                .iter()
                .map(|b| {
                    b.is_ascii()
                        .then(|| char::from(*b))
                        .ok_or_else(|| bad("ASCII"))
                })
                .collect(),
        }
    }
}

pub(super) fn b64encode(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let codec = Codec::named(kwargs.get::<Option<&str>>("encoding")?)?;
    kwargs.assert_all_used()?;
    let bytes = match value.kind() {
        ValueKind::Bytes => value.as_bytes().unwrap_or_default().to_vec(),
        _ => codec.encode(&text_of(value, "b64encode")?)?,
    };
    crate::budget::check(bytes.len().div_ceil(3) * 4, "b64encode")?;
    Ok(Value::from(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

pub(super) fn b64decode(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let codec = Codec::named(kwargs.get::<Option<&str>>("encoding")?)?;
    kwargs.assert_all_used()?;
    let text = text_of(value, "b64decode")?;
    // Python's b64decode ignores characters outside the alphabet.
    let cleaned: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        .collect();
    // binascii's padding rules: a last group of 2 or 3 characters must be
    // padded to 4; one of 1 is no data at all.
    let data = cleaned.trim_end_matches('=');
    let padding = cleaned.len() - data.len();
    match data.len() % 4 {
        1 => {
            return Err(invalid(format!(
                "Invalid base64-encoded string: number of data characters ({}) cannot be 1 more than a multiple of 4",
                data.len()
            )));
        }
        rest @ (2 | 3) if padding < 4 - rest => return Err(invalid("Incorrect padding")),
        _ => {}
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(cleaned.trim_end_matches('='))
        .or_else(|_| {
            base64::engine::general_purpose::STANDARD_NO_PAD.decode(cleaned.trim_end_matches('='))
        })
        .map_err(|e| invalid(format!("b64decode: {e}")))?;
    codec.decode(&bytes).map(Value::from)
}

/// Options of Python's `json.dumps` that Ansible's filters pass.
struct JsonStyle {
    indent: Option<usize>,
    sort_keys: bool,
    item_sep: String,
    key_sep: String,
    ensure_ascii: bool,
}

/// A string as Python's `json.dumps` writes it; with `ensure_ascii`,
/// everything outside printable ASCII (DEL included) is a `\u` escape.
pub fn json_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && (!c.is_ascii() || c == '\u{7f}') => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_dump(
    out: &mut String,
    value: &Value,
    style: &JsonStyle,
    level: usize,
) -> Result<(), Error> {
    let newline = |out: &mut String, level: usize| {
        if let Some(indent) = style.indent {
            out.push('\n');
            out.push_str(&" ".repeat(indent * level));
        }
    };
    match value.kind() {
        ValueKind::Undefined => return Err(defined(value, "to_json").unwrap_err()),
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if value.is_integer() {
                let _ = write!(out, "{value}");
            } else {
                let f = f64::try_from(value.clone()).unwrap_or(0.0);
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else {
                    out.push_str(&float_repr(f));
                }
            }
        }
        ValueKind::String => {
            let text = value.as_str().unwrap_or_default();
            // A list may repeat one long string many times over.
            crate::budget::check(text.len(), "writing JSON")?;
            json_string(out, text, style.ensure_ascii)
        }
        ValueKind::Bytes => {
            return Err(invalid("Object of type bytes is not JSON serializable"));
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, level + 1);
                json_dump(out, item, style, level + 1)?;
            }
            newline(out, level);
            out.push(']');
        }
        ValueKind::Map => {
            let mut pairs: Vec<(String, Value)> = value
                .try_iter()?
                .map(|k| {
                    let v = value.get_item(&k).unwrap_or_default();
                    (convert::key_string(&k), v)
                })
                .collect();
            if pairs.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if style.sort_keys {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, level + 1);
                json_string(out, k, style.ensure_ascii);
                out.push_str(&style.key_sep);
                json_dump(out, v, style, level + 1)?;
            }
            newline(out, level);
            out.push('}');
        }
        _ => match crate::pytime::to_json(value) {
            Some(json) => match json? {
                serde_json::Value::String(text) => json_string(out, &text, style.ensure_ascii),
                other => out.push_str(&other.to_string()),
            },
            None => json_string(out, &value.to_string(), style.ensure_ascii),
        },
    }
    Ok(())
}

fn json_style(
    kwargs: &Kwargs,
    indent: Option<usize>,
    sort_keys: bool,
    nice: bool,
) -> Result<JsonStyle, Error> {
    let indent = kwargs.get::<Option<usize>>("indent")?.or(indent);
    let sort_keys = kwargs
        .get::<Option<bool>>("sort_keys")?
        .unwrap_or(sort_keys);
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(true);
    let (item_sep, key_sep) = match kwargs.get::<Option<Vec<String>>>("separators")? {
        Some(seps) if seps.len() == 2 => (seps[0].clone(), seps[1].clone()),
        Some(_) => return Err(invalid("separators must be a pair of strings")),
        None if nice || indent.is_some() => (",".to_owned(), ": ".to_owned()),
        None => (", ".to_owned(), ": ".to_owned()),
    };
    Ok(JsonStyle {
        indent,
        sort_keys,
        item_sep,
        key_sep,
        ensure_ascii,
    })
}

/// `json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False)`,
/// as Ansible's callbacks dump results.
pub fn python_json(value: &Value, indent: Option<usize>) -> Result<String, Error> {
    sorted_json(value, indent, false)
}

/// `json.dumps(value, indent=indent, sort_keys=True)`: non-ASCII text
/// escaped, as the callbacks write a diff's mapping.
pub fn python_json_ascii(value: &Value, indent: Option<usize>) -> Result<String, Error> {
    sorted_json(value, indent, true)
}

fn sorted_json(value: &Value, indent: Option<usize>, ensure_ascii: bool) -> Result<String, Error> {
    let style = JsonStyle {
        indent,
        sort_keys: true,
        item_sep: if indent.is_some() { "," } else { ", " }.to_owned(),
        key_sep: ": ".to_owned(),
        ensure_ascii,
    };
    let mut out = String::new();
    json_dump(&mut out, value, &style, 0)?;
    Ok(out)
}

pub(super) fn to_json(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let style = json_style(&kwargs, None, false, false)?;
    let _ = kwargs.get::<Option<Value>>("vault_to_text")?;
    let _ = kwargs.get::<Option<Value>>("preprocess_unsafe")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    json_dump(&mut out, value, &style, 0)?;
    Ok(Value::from(out))
}

pub(super) fn to_nice_json(
    value: &Value,
    indent: Option<usize>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let style = json_style(&kwargs, Some(indent.unwrap_or(4)), true, true)?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    json_dump(&mut out, value, &style, 0)?;
    Ok(Value::from(out))
}

pub(super) fn from_json(state: &State, value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    kwargs.assert_all_used()?;
    defined(value, "from_json")?;
    // Python's json.loads takes only text.
    if !matches!(value.kind(), ValueKind::String | ValueKind::Bytes) {
        return Err(invalid(format!(
            "the JSON object must be str, bytes or bytearray, not {}",
            pyrepr::type_name(value)
        )));
    }
    let text = text_of(value, "from_json")?;
    let python_313 = super::python_at_least(state, (3, 13));
    crate::pyjson::loads(&text, python_313).map_err(|e| {
        // 2.19 words every filter's failure as its plugin's.
        let message = match super::semantics(state) {
            crate::Semantics::Ansible218 => e.to_string(),
            crate::Semantics::Ansible219 => {
                format!("The filter plugin 'ansible.builtin.from_json' failed: {e}")
            }
        };
        crate::error::Cause::Python(e.class()).error(ErrorKind::InvalidOperation, message)
    })
}

/// Ansible's `from_yaml`: a string parsed; any other value, an undefined
/// one included, as it is.
pub(super) fn from_yaml(value: &Value) -> Result<Value, Error> {
    let Some(text) = value.as_str() else {
        return Ok(value.clone());
    };
    match enka_yaml::load_one(text).map_err(|e| invalid(format!("from_yaml: {e}")))? {
        Some(node) => Ok(convert::from_yaml(&node)),
        None => Ok(Value::from(())),
    }
}

/// Ansible's `from_yaml_all`: documents of a string; any other value, an
/// undefined one included, as it is.
pub(super) fn from_yaml_all(value: &Value) -> Result<Value, Error> {
    let Some(text) = value.as_str() else {
        return Ok(value.clone());
    };
    let docs = enka_yaml::load_all(text).map_err(|e| invalid(format!("from_yaml_all: {e}")))?;
    Ok(Value::from(
        docs.iter().map(convert::from_yaml).collect::<Vec<_>>(),
    ))
}

pub(super) fn to_yaml(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let flow = kwargs.get::<Option<Value>>("default_flow_style")?;
    let indent = kwargs.get::<Option<usize>>("indent")?.unwrap_or(2);
    let width = kwargs.get::<Option<usize>>("width")?;
    let _ = kwargs.get::<Option<bool>>("allow_unicode")?;
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(true);
    let _ = kwargs.get::<Option<bool>>("explicit_start")?;
    kwargs.assert_all_used()?;
    let flow = match flow {
        None => FlowStyle::Auto,
        Some(v) if v.is_none() => FlowStyle::Auto,
        Some(v) if v.is_true() => FlowStyle::Always,
        Some(_) => FlowStyle::Never,
    };
    let _ = width;
    yaml_dump(value, indent.max(2), flow, sort_keys).map(Value::from)
}

pub(super) fn to_nice_yaml(
    value: &Value,
    indent: Option<usize>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let indent = match indent {
        Some(i) => i,
        None => kwargs.get::<Option<usize>>("indent")?.unwrap_or(4),
    };
    let _ = kwargs.get::<Option<usize>>("width")?;
    let _ = kwargs.get::<Option<bool>>("allow_unicode")?;
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(true);
    kwargs.assert_all_used()?;
    yaml_dump(value, indent.max(2), FlowStyle::Never, sort_keys).map(Value::from)
}

#[derive(Clone, Copy, PartialEq)]
enum FlowStyle {
    /// PyYAML's `default_flow_style=None`: flow style for collections that
    /// hold only scalars.
    Auto,
    Always,
    Never,
}

fn is_collection(v: &Value) -> bool {
    matches!(
        v.kind(),
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map
    )
}

fn entries(value: &Value, sort_keys: bool) -> Vec<(Value, Value)> {
    let mut pairs = crate::convert::entries(value);
    if sort_keys {
        pairs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    }
    pairs
}

struct YamlStyle {
    indent: usize,
    flow: FlowStyle,
    sort_keys: bool,
}

/// PyYAML-style `yaml.dump` (sorted keys, block or flow style, indentless
/// sequences inside mappings).
fn yaml_dump(
    value: &Value,
    indent: usize,
    flow: FlowStyle,
    sort_keys: bool,
) -> Result<String, Error> {
    defined(value, "to_yaml")?;
    let style = YamlStyle {
        indent,
        flow,
        sort_keys,
    };
    let mut out = String::new();
    if !is_collection(value) || flow_for(value, flow) {
        let text = if is_collection(value) {
            flow_node(value, sort_keys, 2 * indent, indent)?
        } else {
            // A document's own scalar continues at the indent.
            scalar_block(value, indent)?
        };
        out.push_str(&text);
        out.push('\n');
        return Ok(out);
    }
    block_node(&mut out, value, 0, false, &style)?;
    Ok(out)
}

fn flow_for(value: &Value, flow: FlowStyle) -> bool {
    // Empty collections are always written `[]` and `{}`.
    if value.len() == Some(0) {
        return true;
    }
    match flow {
        FlowStyle::Always => true,
        FlowStyle::Never => false,
        FlowStyle::Auto => {
            let empty = value.len() == Some(0);
            empty
                || value.try_iter().into_iter().flatten().all(|k| {
                    let child = if value.kind() == ValueKind::Map {
                        value.get_item(&k).unwrap_or_default()
                    } else {
                        k
                    };
                    !is_collection(&child)
                })
        }
    }
}

fn block_node(
    out: &mut String,
    value: &Value,
    level: usize,
    continuing: bool,
    style: &YamlStyle,
) -> Result<(), Error> {
    let pad = " ".repeat(level);
    let mut first = true;
    if value.kind() == ValueKind::Map {
        for (k, v) in entries(value, style.sort_keys) {
            if !(first && continuing) {
                out.push_str(&pad);
            }
            first = false;
            out.push_str(&scalar(&k, false)?);
            out.push(':');
            child(out, &v, level, true, style)?;
        }
    } else {
        for item in value.try_iter()? {
            if !(first && continuing) {
                out.push_str(&pad);
            }
            first = false;
            out.push('-');
            child(out, &item, level, false, style)?;
        }
    }
    Ok(())
}

fn child(
    out: &mut String,
    v: &Value,
    level: usize,
    in_map: bool,
    style: &YamlStyle,
) -> Result<(), Error> {
    if is_collection(v) && !flow_for(v, style.flow) {
        if in_map {
            out.push('\n');
            // PyYAML indents a mapping under a key, but not a sequence.
            let next = if v.kind() == ValueKind::Map {
                level + style.indent
            } else {
                level
            };
            block_node(out, v, next, false, style)
        } else {
            out.push_str(&" ".repeat(style.indent - 1));
            block_node(out, v, level + style.indent, true, style)
        }
    } else {
        let text = if is_collection(v) {
            flow_node(v, style.sort_keys, level + 2 * style.indent, style.indent)?
        } else {
            scalar_block(v, level + style.indent)?
        };
        out.push(' ');
        out.push_str(&text);
        out.push('\n');
        Ok(())
    }
}

/// A flow collection whose scalars continue at indent `level` (PyYAML's:
/// two indents past the block it stands in, one more per nesting).
fn flow_node(value: &Value, sort_keys: bool, level: usize, indent: usize) -> Result<String, Error> {
    let mut out = String::new();
    if value.kind() == ValueKind::Map {
        out.push('{');
        for (i, (k, v)) in entries(value, sort_keys).into_iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&scalar(&k, true)?);
            out.push_str(": ");
            out.push_str(&if is_collection(&v) {
                flow_node(&v, sort_keys, level + indent, indent)?
            } else {
                scalar_at(&v, true, level)?
            });
        }
        out.push('}');
    } else {
        out.push('[');
        for (i, item) in value.try_iter()?.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&if is_collection(&item) {
                flow_node(&item, sort_keys, level + indent, indent)?
            } else {
                scalar_at(&item, true, level)?
            });
        }
        out.push(']');
    }
    Ok(out)
}

fn scalar_block(value: &Value, level: usize) -> Result<String, Error> {
    scalar_at(value, false, level)
}

/// A scalar as PyYAML writes it at indent `level`, in a flow collection or
/// not.
fn scalar_at(value: &Value, flow: bool, level: usize) -> Result<String, Error> {
    let text = scalar(value, flow)?;
    if !(text.starts_with('\'') && text.contains('\n')) {
        return Ok(text);
    }
    // PyYAML (write_single_quoted) writes a run of line breaks inside
    // single quotes as one more line break than the run has, so that each
    // survives folding, then continues at the current indent.
    let mut out = String::with_capacity(text.len() * 2);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\n' {
            out.push(c);
            continue;
        }
        let mut breaks = 1;
        while chars.next_if_eq(&'\n').is_some() {
            breaks += 1;
        }
        out.push_str(&"\n".repeat(breaks + 1));
        out.push_str(&" ".repeat(level));
    }
    Ok(out)
}

fn plain_allowed(s: &str, flow: bool) -> bool {
    if s.is_empty() || s.starts_with(' ') || s.ends_with(' ') {
        return false;
    }
    if !matches!(
        enka_yaml::resolve::resolve_plain(s),
        enka_yaml::resolve::Resolved::Str
    ) {
        return false;
    }
    let first = s.chars().next().unwrap_or(' ');
    if "#,[]{}&*!|>'\"%@`".contains(first) {
        return false;
    }
    let followed_by_space = s.chars().nth(1).is_none_or(|c| c == ' ');
    if first == '-' && followed_by_space {
        return false;
    }
    if (first == '?' || first == ':') && (flow || followed_by_space) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    if flow && s.contains([',', '[', ']', '{', '}']) {
        return false;
    }
    if s == "~" || s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    s.chars()
        .all(|c| c != '\n' && c != '\t' && !c.is_control() && c != '\u{feff}')
}

fn scalar(value: &Value, flow: bool) -> Result<String, Error> {
    Ok(match value.kind() {
        ValueKind::Undefined => return Err(defined(value, "to_yaml").unwrap_err()),
        ValueKind::None => "null".to_owned(),
        ValueKind::Bool => if value.is_true() { "true" } else { "false" }.to_owned(),
        ValueKind::Number => {
            if value.is_integer() {
                value.to_string()
            } else {
                let f = f64::try_from(value.clone()).unwrap_or(0.0);
                if f.is_nan() {
                    ".nan".into()
                } else if f.is_infinite() {
                    if f > 0.0 {
                        ".inf".into()
                    } else {
                        "-.inf".into()
                    }
                } else {
                    // PyYAML: `repr(f).lower()`, with `.0` added before a bare exponent.
                    let r = float_repr(f).to_lowercase();
                    if !r.contains('.') && r.contains('e') {
                        r.replacen('e', ".0e", 1)
                    } else {
                        r
                    }
                }
            }
        }
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default();
            if plain_allowed(s, flow) {
                s.to_owned()
            } else if s
                .chars()
                .all(|c| c == '\n' || !(c.is_control() || c == '\u{feff}'))
                // PyYAML's analyze_scalar: a space next to a line break
                // cannot be single-quoted (folding would eat it).
                && !s.contains(" \n")
                && !s.contains("\n ")
            {
                format!("'{}'", s.replace('\'', "''"))
            } else {
                let mut out = String::new();
                json_string(&mut out, s, false);
                out
            }
        }
        _ => {
            let s = pyrepr::to_text(value);
            format!("'{}'", s.replace('\'', "''"))
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn digest(algorithm: &str, data: &[u8]) -> Result<String, Error> {
    use sha2::Digest;
    Ok(match algorithm {
        "sha1" => hex(&sha1::Sha1::digest(data)),
        "md5" => hex(&md5::Md5::digest(data)),
        "sha224" => hex(&sha2::Sha224::digest(data)),
        "sha256" => hex(&sha2::Sha256::digest(data)),
        "sha384" => hex(&sha2::Sha384::digest(data)),
        "sha512" => hex(&sha2::Sha512::digest(data)),
        other => return Err(invalid(format!("hash: unsupported hash type {other:?}"))),
    })
}

pub(super) fn hash(value: &Value, hashtype: Option<String>) -> Result<Value, Error> {
    let text = text_of(value, "hash")?;
    digest(hashtype.as_deref().unwrap_or("sha1"), text.as_bytes()).map(Value::from)
}

pub(super) fn sha1(value: &Value) -> Result<Value, Error> {
    hash(value, Some("sha1".into()))
}

pub(super) fn md5(value: &Value) -> Result<Value, Error> {
    hash(value, Some("md5".into()))
}

/// Jinja's `tojson`: minijinja's, its keys sorted under 2.19, whose
/// environment keeps Jinja's `sort_keys=True` (2.18's dumped them in order).
pub(super) fn tojson(
    state: &State,
    value: &Value,
    indent: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let value = match super::semantics(state) {
        crate::Semantics::Ansible219 => sorted_keys(value),
        crate::Semantics::Ansible218 => value.clone(),
    };
    minijinja::filters::tojson(&value, indent, kwargs)
}

/// `value` with every mapping's keys in sorted order, at any depth.
fn sorted_keys(value: &Value) -> Value {
    match value.kind() {
        ValueKind::Map => {
            let mut pairs: Vec<(Value, Value)> = crate::convert::entries(value)
                .into_iter()
                .map(|(key, item)| (key, sorted_keys(&item)))
                .collect();
            pairs.sort_by(|(a, _), (b, _)| a.cmp(b));
            Value::from_pairs(pairs)
        }
        ValueKind::Seq => Value::from(
            value
                .try_iter()
                .into_iter()
                .flatten()
                .map(|item| sorted_keys(&item))
                .collect::<Vec<_>>(),
        ),
        _ => value.clone(),
    }
}
