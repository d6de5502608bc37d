//! ansible-core 2.19's native results (its `AnsibleEnvironment.concat`).
//!
//! 2.19 renders every template natively: the output nodes of a render are
//! collected, nodes that are `None` are dropped, and then no node left gives
//! `None`, one node gives that node's value with its type (`{{ x | length }}`
//! is the integer 3), and more than one are joined as text. Nothing is parsed
//! back with `literal_eval` (`{{ '[1, 2]' }}` stays a string).
//!
//! minijinja renders to text only, so a render in this mode goes through the
//! environment's formatter, which sees every value a `{{ }}` outputs: it
//! keeps the value and writes a marker in its place. The text between
//! markers is the template's own data (the `Text` nodes).

use std::cell::RefCell;

use minijinja::Value;
use minijinja::value::ValueKind;

use crate::error::{Error, ErrorKind};

/// Wraps the index of a kept value in the rendered text: a private-use
/// character no template writes and no value prints (values print through
/// the marker, never beside it).
const MARK: char = '\u{10FFFD}';

thread_local! {
    /// The values of the render in progress on this thread, when it is a
    /// native one. Renders nest (a lazily templated variable is rendered
    /// inside the render that reads it), each with its own list.
    static CAPTURED: RefCell<Option<Vec<Value>>> = const { RefCell::new(None) };
}

/// Whether the render in progress keeps its output values.
pub(crate) fn capturing() -> bool {
    CAPTURED.with(|c| c.borrow().is_some())
}

/// Keeps `value` as an output node of the render in progress and writes
/// its marker.
pub(crate) fn capture(out: &mut minijinja::Output<'_>, value: &Value) -> std::fmt::Result {
    let index = CAPTURED.with(|c| {
        let mut captured = c.borrow_mut();
        let values = captured.get_or_insert_with(Vec::new);
        values.push(value.clone());
        values.len() - 1
    });
    write!(out, "{MARK}{index}{MARK}")
}

/// Whether `source` has output that other template code reads before it
/// reaches the result: a macro's or `call` block's body, a `{% set %}` or
/// `{% filter %}` block, macros of an imported template. minijinja hands
/// such output on as text, so a render of it cannot keep its values: it is
/// rendered as text (2.19's result of a macro call is its text too).
pub(crate) fn nests_output(source: &str) -> bool {
    source.split("{%").skip(1).any(|tag| {
        let tag = tag.trim_start_matches(['-', '+']).trim_start();
        let keyword: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        match keyword.as_str() {
            "macro" | "call" | "filter" | "import" | "from" => true,
            // `{% set name %}…{% endset %}`, not `{% set name = … %}`.
            "set" => tag
                .split("%}")
                .next()
                .is_some_and(|statement| !statement.contains('=')),
            _ => false,
        }
    })
}

/// One output node of a render.
enum Node {
    Text(String),
    Value(Value),
}

/// Runs `f` with the renders it starts on this thread keeping their
/// output values (`Some`) or printing them as text (`None`), and puts the
/// outer render's state back after: renders nest.
pub(crate) fn with_capture<T>(keep: bool, f: impl FnOnce() -> T) -> (T, Vec<Value>) {
    let outer = CAPTURED.with(|c| c.replace(keep.then(Vec::new)));
    let result = f();
    let values = CAPTURED.with(|c| c.replace(outer)).unwrap_or_default();
    (result, values)
}

/// The result 2.19 makes of a native render's text and kept values.
/// `trailing_newlines` are the source's, which Jinja drops and Ansible
/// puts back on a text result only.
pub(crate) fn finish(
    text: &str,
    values: Vec<Value>,
    trailing_newlines: usize,
) -> Result<Value, Error> {
    let value = concat(nodes(text, values))?;
    Ok(match value.as_str() {
        Some(text) if value.kind() == ValueKind::String => {
            let have = text.len() - text.trim_end_matches('\n').len();
            if have >= trailing_newlines {
                value
            } else {
                let mut text = text.to_owned();
                text.extend(std::iter::repeat_n('\n', trailing_newlines - have));
                Value::from(text)
            }
        }
        // A sequence minijinja keeps lazy (`a + b` of lists, a filter's
        // generator) is the list Ansible's native result makes of it.
        _ if value.kind() == ValueKind::Iterable
            && value
                .as_object()
                .is_none_or(|o| o.downcast_ref::<crate::Context>().is_none()) =>
        {
            Value::from(
                value
                    .try_iter()
                    .map(Iterator::collect::<Vec<_>>)
                    .unwrap_or_default(),
            )
        }
        _ => value,
    })
}

/// The rendered text cut into its nodes: the template's own text, and the
/// kept values where their markers are.
fn nodes(text: &str, values: Vec<Value>) -> Vec<Node> {
    let mut values: Vec<Option<Value>> = values.into_iter().map(Some).collect();
    let mut nodes = Vec::new();
    let mut parts = text.split(MARK);
    if let Some(first) = parts.next().filter(|t| !t.is_empty()) {
        nodes.push(Node::Text(first.to_owned()));
    }
    // After the first part, parts alternate: an index, then text.
    while let Some(index) = parts.next() {
        let kept = index
            .parse::<usize>()
            .ok()
            .and_then(|i| values.get_mut(i))
            .and_then(Option::take);
        match kept {
            Some(value) => nodes.push(Node::Value(value)),
            None => nodes.push(Node::Text(format!("{MARK}{index}{MARK}"))),
        }
        if let Some(text) = parts.next().filter(|t| !t.is_empty()) {
            nodes.push(Node::Text(text.to_owned()));
        }
    }
    nodes
}

/// 2.19's concat: `None` nodes dropped; none left is `None`, one is its
/// value, more are joined as text.
fn concat(nodes: Vec<Node>) -> Result<Value, Error> {
    let mut nodes: Vec<Node> = nodes
        .into_iter()
        .filter(|n| !matches!(n, Node::Value(v) if v.is_none()))
        .collect();
    match nodes.len() {
        0 => Ok(Value::from(())),
        1 => match nodes.pop() {
            Some(Node::Value(value)) => finalize(value),
            Some(Node::Text(text)) => Ok(Value::from(text)),
            None => Ok(Value::from(())),
        },
        _ => {
            let mut joined = String::new();
            for node in &nodes {
                match node {
                    Node::Text(text) => joined.push_str(text),
                    Node::Value(value) if value.is_undefined() => {}
                    Node::Value(value) => crate::pyrepr::write_str(&mut joined, value),
                }
            }
            Ok(Value::from(joined))
        }
    }
}

/// A template's one value as a variable may hold it: an undefined value (an
/// inline `if` that was false) cannot be stored.
fn finalize(value: Value) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::Invalid,
            "Error rendering template: Type 'Undefined' is unsupported for variable storage.",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(text: &str, values: Vec<Value>) -> Result<Value, Error> {
        concat(nodes(text, values))
    }

    #[test]
    fn output_read_by_template_code_is_found() {
        for nested in [
            "{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m(n) }}",
            "{%- set x %}{{ 1 }}{% endset %}{{ x }}",
            "{% filter upper %}{{ 'a' }}{% endfilter %}",
            "{% from 'm.j2' import m %}{{ m() }}",
        ] {
            assert!(nests_output(nested), "{nested}");
        }
        for flat in [
            "{% set x = 1 %}{{ x }}",
            "{% for i in l %}{{ i }}{% endfor %}",
            "{{ x }}",
        ] {
            assert!(!nests_output(flat), "{flat}");
        }
    }

    #[test]
    fn one_value_keeps_its_type_and_more_are_text() {
        let one = format!("{MARK}0{MARK}");
        assert_eq!(kept(&one, vec![Value::from(3)]).unwrap(), Value::from(3));
        let two = format!("{MARK}0{MARK}{MARK}1{MARK}");
        assert_eq!(
            kept(&two, vec![Value::from(1), Value::from(2)]).unwrap(),
            Value::from("12")
        );
        let none_dropped = format!("{MARK}0{MARK}{MARK}1{MARK}");
        assert_eq!(
            kept(&none_dropped, vec![Value::from(1), Value::from(())]).unwrap(),
            Value::from(1)
        );
        assert!(kept("", vec![]).unwrap().is_none());
        assert_eq!(
            kept(&format!("a{MARK}0{MARK}"), vec![Value::from(1)]).unwrap(),
            Value::from("a1")
        );
    }
}
