//! Builds [`Node`] trees from saphyr-parser's spanned events.

use std::collections::HashMap;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use super::resolve::{Resolved, resolve_plain, resolve_tagged};
use super::{Error, Node, Pos, Value};

/// Anchored nodes are copied on alias; this bounds the "billion laughs" by
/// the memory the copies take: each node's own size plus the bytes of its
/// text, so a few aliases of a long string count as much as many of a
/// short one, and nine aliases of nine aliases of "lol" as the nodes they
/// make.
const MAX_ALIAS_EXPANSION: usize = 10_000_000;

/// Collections nested deeper than this are refused: every later step
/// (conversion, templating, dropping the tree) recurses over the tree, and
/// a custom-resource string of 10 000 nested levels would overflow the
/// stack. PyYAML has no bound but Python's own recursion limit (1000).
pub const MAX_DEPTH: usize = 512;

/// How many closing brackets [`load_all`] re-indents before it gives up.
const MAX_FLOW_REINDENTS: usize = 64;

/// Parses every document of a YAML stream.
///
/// PyYAML does not check indentation inside a flow collection, so JSON
/// pasted as a value with its closing `}` at the left margin loads under
/// Ansible (ansible-core's own `filter_core` vars do this), while the YAML
/// spec and saphyr-parser refuse it. A line whose first character is a
/// closing bracket can never be block content, so such a line is indented
/// one column and the stream parsed again. Nor does PyYAML check the
/// indentation of a quoted scalar's continuation lines (upstream's own
/// molecule tests close a multi-line `'{{ lookup(...` at its key's column):
/// those lines are indented past the opening quote, which changes nothing
/// of the value (a continuation line's leading blanks are folded away), and
/// the stream parsed again. Other errors stand.
pub fn load_all(text: &str) -> Result<Vec<Node>, Error> {
    let mut error = match parse(text) {
        Ok(documents) => return Ok(documents),
        Err(error) => error,
    };
    let mut lenient = text.to_owned();
    for _ in 0..MAX_FLOW_REINDENTS {
        if !reindent_closing_bracket(&mut lenient, &error)
            && !reindent_quoted_scalar(&mut lenient, &error)
        {
            break;
        }
        match parse(&lenient) {
            Ok(documents) => return Ok(documents),
            Err(next) => error = next,
        }
    }
    Err(error)
}

/// Indents the error's line by one column when the error is saphyr's
/// indentation check and the line starts with `}` or `]`.
fn reindent_closing_bracket(text: &mut String, error: &Error) -> bool {
    if error.message != "invalid indentation" {
        return false;
    }
    let Some(line_start) = line_offset(text, error.pos.line) else {
        return false;
    };
    let rest = &text[line_start.min(text.len())..];
    if !rest.trim_start_matches(' ').starts_with(['}', ']']) {
        return false;
    }
    text.insert(line_start, ' ');
    true
}

/// Byte offset of the start of 1-based `line` in `text`.
fn line_offset(text: &str, line: u32) -> Option<usize> {
    text.split_inclusive('\n')
        .take(line.saturating_sub(1) as usize)
        .map(str::len)
        .try_fold(0usize, |start, len| start.checked_add(len))
}

/// When the error is saphyr's indentation check of a quoted scalar (at its
/// opening quote), indents every continuation line of that scalar that
/// starts left of the quote to one column past it.
fn reindent_quoted_scalar(text: &mut String, error: &Error) -> bool {
    if error.message != "invalid indentation in quoted scalar" {
        return false;
    }
    let Some(line_start) = line_offset(text, error.pos.line) else {
        return false;
    };
    let quote_col = error.pos.col.saturating_sub(1) as usize;
    let Some((quote_at, quote)) = text[line_start.min(text.len())..]
        .char_indices()
        .nth(quote_col)
        .map(|(i, c)| (line_start + i, c))
    else {
        return false;
    };
    if quote != '\'' && quote != '"' {
        return false;
    }
    // Where each continuation line starts, up to the closing quote.
    let mut continuation_starts = Vec::new();
    let mut chars = text[quote_at + 1..].char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' if quote == '\'' => {
                if chars.peek().is_some_and(|(_, next)| *next == '\'') {
                    chars.next();
                } else {
                    break;
                }
            }
            '"' if quote == '"' => break,
            '\\' if quote == '"' => {
                chars.next();
            }
            '\n' => continuation_starts.push(quote_at + 1 + i + 1),
            _ => {}
        }
    }
    let wanted = quote_col + 1;
    let mut changed = false;
    // From the end, so earlier offsets stay right.
    for start in continuation_starts.into_iter().rev() {
        let line = &text[start..];
        let indent = line.len() - line.trim_start_matches(' ').len();
        let blank = line[indent..].starts_with(['\n', '\r']) || line[indent..].is_empty();
        if !blank && indent < wanted {
            text.insert_str(start, &" ".repeat(wanted - indent));
            changed = true;
        }
    }
    changed
}

fn parse(text: &str) -> Result<Vec<Node>, Error> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| Error {
            pos: Pos {
                line: to_u32(e.marker().line()),
                col: to_u32(e.marker().col() + 1),
            },
            message: e.info().to_owned(),
        })?;
        builder.on_event(event, span)?;
    }
    Ok(builder.documents)
}

/// Parses a stream that must hold at most one document; an empty stream is
/// `None`, like PyYAML's `safe_load` returning `None`.
pub fn load_one(text: &str) -> Result<Option<Node>, Error> {
    let mut docs = load_all(text)?;
    if docs.len() > 1 {
        return Err(Error {
            pos: docs[1].pos,
            message: "expected a single document in the stream, but found another document".into(),
        });
    }
    Ok(docs.pop())
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn pos_of(span: &Span) -> Pos {
    Pos {
        line: to_u32(span.start.line()),
        col: to_u32(span.start.col() + 1),
    }
}

enum Frame {
    Seq {
        node: Node,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        node: Node,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        pending_key: Option<Node>,
    },
}

#[derive(Default)]
struct Builder {
    documents: Vec<Node>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    expanded: usize,
}

fn local_tag(tag: Option<&Tag>) -> Option<Arc<str>> {
    let tag = tag?;
    if tag.handle == "!" {
        Some(Arc::from(tag.suffix.as_str()))
    } else {
        None
    }
}

impl Builder {
    fn on_event(&mut self, event: Event<'_>, span: Span) -> Result<(), Error> {
        let pos = pos_of(&span);
        match event {
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => Ok(()),
            Event::Alias(id) => {
                let node = self.anchors.get(&id).cloned().ok_or_else(|| Error {
                    pos,
                    message: "found undefined alias".into(),
                })?;
                let left = MAX_ALIAS_EXPANSION.saturating_sub(self.expanded);
                self.expanded = self.expanded.saturating_add(expansion_cost(&node, left));
                if self.expanded > MAX_ALIAS_EXPANSION {
                    return Err(Error {
                        pos,
                        message: format!(
                            "aliases expand to more than {} MB of data (a YAML alias bomb?)",
                            MAX_ALIAS_EXPANSION / 1_000_000
                        ),
                    });
                }
                self.push(node)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = scalar_value(&text, style, tag.as_deref())
                    .map_err(|message| Error { pos, message })?;
                let node = Node {
                    value,
                    pos,
                    tag: local_tag(tag.as_deref()),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push(node)
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_depth(pos)?;
                self.stack.push(Frame::Seq {
                    node: Node {
                        value: Value::Null,
                        pos,
                        tag: local_tag(tag.as_deref()),
                    },
                    anchor,
                    items: Vec::new(),
                });
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                self.check_depth(pos)?;
                self.stack.push(Frame::Map {
                    node: Node {
                        value: Value::Null,
                        pos,
                        tag: local_tag(tag.as_deref()),
                    },
                    anchor,
                    entries: Vec::new(),
                    pending_key: None,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq {
                        mut node,
                        anchor,
                        items,
                    }) => {
                        node.value = Value::Seq(items);
                        (node, anchor)
                    }
                    Some(Frame::Map {
                        mut node,
                        anchor,
                        entries,
                        ..
                    }) => {
                        node.value = Value::Map(apply_merge_keys(entries)?);
                        (node, anchor)
                    }
                    None => {
                        return Err(Error {
                            pos,
                            message: "unbalanced collection end".into(),
                        });
                    }
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push(node)
            }
        }
    }

    fn check_depth(&self, pos: Pos) -> Result<(), Error> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Error {
                pos,
                message: format!("collections nested deeper than {MAX_DEPTH} levels"),
            });
        }
        Ok(())
    }

    fn push(&mut self, node: Node) -> Result<(), Error> {
        match self.stack.last_mut() {
            None => self.documents.push(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                pending_key,
                ..
            }) => match pending_key.take() {
                // A mapping or a list cannot be a key: Python cannot hash it
                // (`s: {{ x }}` unquoted is a mapping inside a mapping).
                None => {
                    let unhashable = match node.value {
                        Value::Map(_) => Some("AnsibleMapping"),
                        Value::Seq(_) => Some("AnsibleSequence"),
                        _ => None,
                    };
                    if let Some(kind) = unhashable {
                        return Err(Error {
                            pos: node.pos,
                            message: format!("found unacceptable key (unhashable type: '{kind}')"),
                        });
                    }
                    *pending_key = Some(node);
                }
                Some(key) => entries.push((key, node)),
            },
        }
        Ok(())
    }
}

/// What copying `node` costs: one per node and one per byte of text.
/// The bytes a copy of `node` takes, counted until past `limit` (a copy
/// larger than that is refused, however much larger).
fn expansion_cost(node: &Node, limit: usize) -> usize {
    let mut cost = std::mem::size_of::<Node>();
    match &node.value {
        Value::Seq(items) => {
            for item in items {
                if cost > limit {
                    break;
                }
                cost = cost.saturating_add(expansion_cost(item, limit - cost));
            }
        }
        Value::Map(entries) => {
            for (key, value) in entries {
                if cost > limit {
                    break;
                }
                cost = cost.saturating_add(expansion_cost(key, limit - cost));
                cost = cost.saturating_add(expansion_cost(value, limit.saturating_sub(cost)));
            }
        }
        Value::Str(text) => cost = cost.saturating_add(text.len()),
        _ => {}
    }
    cost
}

fn scalar_value(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    if let Some(tag) = tag {
        if tag.handle == "tag:yaml.org,2002:" || tag.handle == "!!" {
            return resolve_tagged(&tag.suffix, text);
        }
        // Local tags (`!unsafe`, `!vault`) keep the text as a string.
        return Ok(Value::Str(text.to_owned()));
    }
    if style != ScalarStyle::Plain {
        return Ok(Value::Str(text.to_owned()));
    }
    Ok(match resolve_plain(text) {
        Resolved::Null => Value::Null,
        Resolved::Bool(b) => Value::Bool(b),
        Resolved::Int(i) => Value::Int(i),
        Resolved::Float(f) => Value::Float(f),
        Resolved::Str | Resolved::Merge => Value::Str(text.to_owned()),
    })
}

/// Expands `<<: *anchor` and `<<: [*a, *b]` as PyYAML does: explicit keys
/// win over merged ones, and earlier merge sources win over later ones.
fn apply_merge_keys(entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, Error> {
    if !entries
        .iter()
        .any(|(k, _)| k.as_str() == Some("<<") && k.tag.is_none())
    {
        return Ok(entries);
    }
    let mut merged: Vec<(Node, Node)> = Vec::new();
    let mut own: Vec<(Node, Node)> = Vec::new();
    for (key, value) in entries {
        if key.as_str() != Some("<<") {
            own.push((key, value));
            continue;
        }
        let sources: Vec<Node> = match value.value {
            Value::Map(_) => vec![value],
            Value::Seq(items) => items,
            _ => {
                return Err(Error {
                    pos: value.pos,
                    message: "expected a mapping or list of mappings for merging".into(),
                });
            }
        };
        for source in sources {
            let Value::Map(source_entries) = source.value else {
                return Err(Error {
                    pos: source.pos,
                    message: "expected a mapping for merging".into(),
                });
            };
            for (k, v) in source_entries {
                if !merged.iter().any(|(m, _)| m.value == k.value) {
                    merged.push((k, v));
                }
            }
        }
    }
    merged.retain(|(k, _)| !own.iter().any(|(o, _)| o.value == k.value));
    merged.extend(own);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Node {
        load_one(text).unwrap().unwrap()
    }

    #[test]
    fn positions_are_one_based_lines_and_columns() {
        let doc = one("- name: first\n  debug: msg=hi\n- name: second\n  fail: {}\n");
        let items = doc.as_seq().unwrap();
        assert_eq!(items[0].pos, Pos { line: 1, col: 3 });
        assert_eq!(items[1].pos, Pos { line: 3, col: 3 });
        let fail = items[1].get("fail").unwrap();
        assert_eq!(fail.pos, Pos { line: 4, col: 9 });
        let (key, _) = &items[1].as_map().unwrap()[1];
        assert_eq!(key.pos, Pos { line: 4, col: 3 });
    }

    #[test]
    fn yaml_1_1_booleans_resolve_only_when_plain() {
        let doc = one("a: yes\nb: 'yes'\nc: off\nd: On\ne: y\nf: \"no\"\ng: NO\n");
        let get = |k| doc.get(k).unwrap().value.clone();
        assert_eq!(get("a"), Value::Bool(true));
        assert_eq!(get("b"), Value::Str("yes".into()));
        assert_eq!(get("c"), Value::Bool(false));
        assert_eq!(get("d"), Value::Bool(true));
        assert_eq!(
            get("e"),
            Value::Str("y".into()),
            "PyYAML does not treat y as a bool"
        );
        assert_eq!(get("f"), Value::Str("no".into()));
        assert_eq!(get("g"), Value::Bool(false));
    }

    #[test]
    fn numbers_follow_pyyaml() {
        let doc = one(
            "oct: 0644\nhex: 0x1F\nbin: 0b101\nsexa: 1:30\nexp: 1e3\nflt: 1.5\nneg: -7\nund: 1_000\nport: \"22:22\"\ninf: .inf\n",
        );
        let get = |k| doc.get(k).unwrap().value.clone();
        assert_eq!(get("oct"), Value::Int(420));
        assert_eq!(get("hex"), Value::Int(31));
        assert_eq!(get("bin"), Value::Int(5));
        assert_eq!(get("sexa"), Value::Int(90));
        assert_eq!(get("exp"), Value::Str("1e3".into()));
        assert_eq!(get("flt"), Value::Float(1.5));
        assert_eq!(get("neg"), Value::Int(-7));
        assert_eq!(get("und"), Value::Int(1000));
        assert_eq!(get("port"), Value::Str("22:22".into()));
        assert_eq!(get("inf"), Value::Float(f64::INFINITY));
    }

    #[test]
    fn nulls_and_explicit_tags() {
        let doc = one("a: ~\nb:\nc: null\nd: !!str 12\ne: !!int '7'\nf: !unsafe '{{ x }}'\n");
        assert_eq!(doc.get("a").unwrap().value, Value::Null);
        assert_eq!(doc.get("b").unwrap().value, Value::Null);
        assert_eq!(doc.get("c").unwrap().value, Value::Null);
        assert_eq!(doc.get("d").unwrap().value, Value::Str("12".into()));
        assert_eq!(doc.get("e").unwrap().value, Value::Int(7));
        let f = doc.get("f").unwrap();
        assert_eq!(f.tag.as_deref(), Some("unsafe"));
        assert_eq!(f.value, Value::Str("{{ x }}".into()));
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let doc = one("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\nlist: [*b]\n");
        let derived = doc.get("derived").unwrap().to_json();
        assert_eq!(derived, serde_json::json!({"x": 1, "y": 3}));
        assert_eq!(
            doc.get("list").unwrap().to_json(),
            serde_json::json!([{"x": 1, "y": 2}])
        );
    }

    #[test]
    fn a_mapping_or_a_list_as_a_key_is_refused() {
        for text in ["a: {{ x }}\n", "? [1, 2]\n: v\n"] {
            let err = load_one(text).unwrap_err();
            assert!(err.message.contains("unacceptable key"), "{text}: {err:?}");
        }
    }

    #[test]
    fn a_quoted_scalar_continued_at_its_keys_column_loads_as_in_pyyaml() {
        // Upstream's memcached-molecule-operator test tasks; PyYAML gives
        // the values below (its continuation lines are not indentation).
        let text = "- vars:\n    deploy: '{{ lookup(\"k8s\",\n      kind=\"Deployment\"\n    )}}'\n    other: \"a\n  b \\\"c\\\"\nd\"\n    last: 'it''s\nfine'\n";
        let docs = load_all(text).unwrap();
        let json = docs[0].to_json();
        assert_eq!(
            json[0]["vars"]["deploy"],
            "{{ lookup(\"k8s\", kind=\"Deployment\" )}}"
        );
        assert_eq!(json[0]["vars"]["other"], "a b \"c\" d");
        assert_eq!(json[0]["vars"]["last"], "it's fine");
    }

    #[test]
    fn a_closing_bracket_at_the_margin_loads_as_in_pyyaml() {
        let node = one("a: {\n  \"b\": [\n 1\n]\n}\nc: 2\n");
        let Value::Map(entries) = &node.value else {
            panic!("not a map: {node:?}");
        };
        assert_eq!(entries.len(), 2);
        // Block content out of place is still an error.
        assert!(load_all("a:\n  b: 1\n c: 2\n").is_err());
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = load_all("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.pos.line >= 1, "{err}");
        let err = load_all("a: b: c\n").unwrap_err();
        assert_eq!(err.pos.line, 1, "{err}");
    }

    #[test]
    fn alias_bombs_are_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let prev = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let err = load_all(&text).unwrap_err();
        assert!(err.message.contains("aliases expand"), "{err}");
    }

    #[test]
    fn aliases_of_long_strings_are_bounded_by_size() {
        // 115 KB of YAML that would expand to about 1 GB.
        let mut text = format!("a: &a \"{}\"\nb: [", "x".repeat(10_000));
        text.push_str(&vec!["*a"; 100_000].join(", "));
        text.push_str("]\n");
        let err = load_all(&text).unwrap_err();
        assert!(
            err.message.contains("aliases expand to more than 10 MB"),
            "{err}"
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        // Flow collections meet saphyr-parser's own bound first.
        for (open, close) in [("[", "]"), ("{a: ", "}")] {
            let text = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
            let err = load_all(&text).unwrap_err();
            assert!(
                err.message.contains("nested deeper than 512")
                    || err.message.contains("recursion limit exceeded"),
                "{err}"
            );
        }
        let mut block = String::new();
        for level in 0..10_000 {
            block.push_str(&" ".repeat(level));
            block.push_str("a:\n");
        }
        let err = load_all(&block).unwrap_err();
        assert!(err.message.contains("nested deeper than 512"), "{err}");
        let fine = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(load_all(&fine).is_ok());
        let mut fine_block = String::new();
        for level in 0..500 {
            fine_block.push_str(&" ".repeat(level));
            fine_block.push_str("a:\n");
        }
        assert!(load_all(&fine_block).is_ok());
    }

    #[test]
    fn an_empty_stream_is_none() {
        assert_eq!(load_one("").unwrap(), None);
        assert_eq!(load_one("# only a comment\n").unwrap(), None);
        assert!(load_one("a: 1\n---\nb: 2\n").is_err());
        assert_eq!(load_all("a: 1\n---\nb: 2\n").unwrap().len(), 2);
    }
}
