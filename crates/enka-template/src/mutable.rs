//! Python's mutable list and dict inside a template.
//!
//! Real roles change values in place the Jinja2 way, which Ansible's Python
//! values allow:
//!
//! ```jinja
//! {% set names = [] %}{% for p in pods %}{% set _ = names.append(p.name) %}{% endfor %}
//! {% set _ = labels.update(extra) %}{% for c in containers %}{% set _ = c.update({'image': i}) %}{% endfor %}
//! ```
//!
//! minijinja's values are immutable, so a template that calls a mutating
//! method (`append`, `extend`, `insert`, `pop`, `remove`, `clear`, `sort`,
//! `reverse`; `update`, `setdefault`, `popitem`) is rewritten once, when it
//! is compiled ([`rewrite`]): each name such a call reaches through
//! (`labels` in `labels.a.update(…)`), and each name given to one by `{%
//! set %}` or a loop, is made one of these objects, deeply, when the
//! template starts and where `{% set %}` binds it. Items are the same
//! objects wherever they are reached from, so a change is seen through
//! every alias, as in Python; the variables themselves are not changed, as
//! Ansible templates each from a copy. Every other use sees an ordinary
//! sequence or mapping.

use std::sync::{Arc, Mutex};

use std::borrow::Cow;
use std::collections::BTreeSet;

use minijinja::machinery::{Span, Token, tokenize};
use minijinja::syntax::SyntaxConfig;
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
    fn mutate(
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
            "reverse" => locked(&self.0).reverse(),
            "sort" => self.sort(args)?,
            _ => return super::methods::call_method(state, &self.snapshot(), method, args),
        }
        Ok(Value::from(()))
    }

    fn snapshot(&self) -> Value {
        Value::from(locked(&self.0).clone())
    }

    /// `list.sort(reverse=False)`: Python's stable sort by `<`, which
    /// fails on items of types Python does not order (`[1, 'a']`).
    fn sort(&self, args: &[Value]) -> Result<(), Error> {
        let (kwargs,): (minijinja::value::Kwargs,) = minijinja::value::from_args(args)
            .map_err(|_| super::filters::invalid("sort() takes no positional arguments"))?;
        let reverse = kwargs.get::<Option<bool>>("reverse")?.unwrap_or(false);
        if kwargs
            .get::<Option<Value>>("key")?
            .is_some_and(|key| !key.is_none())
        {
            return Err(super::filters::invalid(
                "sort(key=…) is not supported in a template",
            ));
        }
        kwargs.assert_all_used()?;
        let mut items = locked(&self.0).clone();
        let mut failure = None;
        // Python sorts the reversed list and reverses the result, so equal
        // items keep their order.
        if reverse {
            items.reverse();
        }
        items.sort_by(|a, b| match crate::pycompare::compare(b, "<", a) {
            Ok(true) => std::cmp::Ordering::Greater,
            Ok(false) => match crate::pycompare::compare(a, "<", b) {
                Ok(true) => std::cmp::Ordering::Less,
                Ok(false) => std::cmp::Ordering::Equal,
                Err(err) => {
                    failure.get_or_insert(err);
                    std::cmp::Ordering::Equal
                }
            },
            Err(err) => {
                failure.get_or_insert(err);
                std::cmp::Ordering::Equal
            }
        });
        if reverse {
            items.reverse();
        }
        if let Some(err) = failure {
            return Err(err);
        }
        *locked(&self.0) = items;
        Ok(())
    }
}

impl Object for MutableList {
    fn call_method(
        self: &Arc<Self>,
        state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let result = self.mutate(state, method, args);
        super::methods::captured(state, result)
    }

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
}

impl MutableDict {
    fn mutate(
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
            "popitem" => locked(&self.0)
                .pop()
                .map(|(key, value)| Value::from(vec![key, value]))
                .ok_or_else(|| {
                    super::filters::invalid("KeyError: 'popitem(): dictionary is empty'")
                }),
            _ => super::methods::call_method(state, &self.snapshot(), method, args),
        }
    }

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
    fn call_method(
        self: &Arc<Self>,
        state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let result = self.mutate(state, method, args);
        super::methods::captured(state, result)
    }

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
}

/// Registers the function the rewritten templates call.
pub fn register(env: &mut minijinja::Environment<'static>) {
    env.add_function(MUTABLE, |value: Value| mutable(&value));
}

const MUTABLE: &str = "__enka_mutable";

/// `value` as mutable objects all the way down: plain lists and mappings
/// are copied into [`MutableList`] and [`MutableDict`]; mutable ones are
/// kept (so an alias stays one); anything else (strings, a `namespace()`,
/// undefined) is passed as it is.
fn mutable(value: &Value) -> Value {
    let plain_list = value.downcast_object_ref::<Vec<Value>>().is_some();
    let plain_map = value
        .downcast_object_ref::<indexmap::IndexMap<Value, Value>>()
        .is_some()
        || value
            .downcast_object_ref::<crate::convert::JsonView>()
            .is_some();
    match value.kind() {
        ValueKind::Seq if plain_list || plain_map => {
            let items = value.try_iter().into_iter().flatten();
            Value::from_object(MutableList(Mutex::new(
                items.map(|v| mutable(&v)).collect(),
            )))
        }
        ValueKind::Map if plain_map => {
            let entries = value
                .try_iter()
                .into_iter()
                .flatten()
                .map(|key| {
                    let item = value.get_item(&key).unwrap_or_default();
                    (key, mutable(&item))
                })
                .collect();
            Value::from_object(MutableDict(Mutex::new(entries)))
        }
        _ => value.clone(),
    }
}

/// The methods that change a list or a dict in place.
const MUTATORS: &[&str] = &[
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
    "update",
    "setdefault",
    "popitem",
];

/// `source` with every name a mutating method reaches made mutable (see
/// the module's documentation); borrowed when it calls none.
pub fn rewrite(source: &str) -> Cow<'_, str> {
    let calls_one = source.match_indices('.').any(|(at, _)| {
        let after = &source[at + 1..];
        MUTATORS.iter().any(|m| {
            after
                .strip_prefix(m)
                .is_some_and(|rest| rest.starts_with('('))
        })
    });
    if !calls_one {
        return Cow::Borrowed(source);
    }
    let Ok(tokens) =
        tokenize(source, false, SyntaxConfig::default()).collect::<Result<Vec<_>, _>>()
    else {
        return Cow::Borrowed(source);
    };
    let names = mutated_names(&tokens);
    if names.is_empty() {
        return Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len() + 64);
    for name in &names {
        out.push_str(&format!("{{% set {name} = {MUTABLE}({name}) %}}"));
    }
    let mut copied = 0;
    for binding in bindings(&tokens) {
        if let Binding::Set { name, value } = binding
            && names.contains(name)
        {
            out.push_str(&source[copied..value.start_offset as usize]);
            out.push_str(MUTABLE);
            out.push('(');
            out.push_str(&source[value.start_offset as usize..value.end_offset as usize]);
            out.push(')');
            copied = value.end_offset as usize;
        }
    }
    out.push_str(&source[copied..]);
    Cow::Owned(out)
}

/// The names a mutating call reaches through, and, until none is added,
/// the names bound to them (`{% set b = a %}`, `{% for c in cs %}`): what
/// an alias changes, its source sees.
fn mutated_names<'s>(tokens: &[(Token<'s>, Span)]) -> BTreeSet<&'s str> {
    let mut names: BTreeSet<&str> = (0..tokens.len())
        .filter(|&i| is_mutating_call(tokens, i))
        .filter_map(|i| receiver_root(tokens, i))
        .collect();
    let bindings = bindings(tokens);
    loop {
        let before = names.len();
        for binding in &bindings {
            let (bound, source) = match binding {
                Binding::Set { name, value } => (vec![*name], value_root(tokens, value)),
                Binding::For { targets, iter } => (targets.clone(), value_root(tokens, iter)),
            };
            if let Some(source) = source
                && bound.iter().any(|name| names.contains(name))
            {
                names.insert(source);
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// Whether the tokens at `i` are `. <mutator> (`.
fn is_mutating_call(tokens: &[(Token<'_>, Span)], i: usize) -> bool {
    matches!(tokens[i].0, Token::Dot)
        && matches!(tokens.get(i + 1), Some((Token::Ident(m), _)) if MUTATORS.contains(m))
        && matches!(tokens.get(i + 2), Some((Token::ParenOpen, _)))
}

/// The name a receiver ending before the `.` at `dot` starts from: `a` in
/// `a.b['c'].d(x).append(…)`; none for a literal.
fn receiver_root<'s>(tokens: &[(Token<'s>, Span)], dot: usize) -> Option<&'s str> {
    let mut j = dot.checked_sub(1)?;
    loop {
        match tokens[j].0 {
            Token::Ident(name) => {
                if j >= 1 && matches!(tokens[j - 1].0, Token::Dot) {
                    j = j.checked_sub(2)?;
                    continue;
                }
                return (!CONSTANTS.contains(&name)).then_some(name);
            }
            Token::BracketClose | Token::ParenClose => {
                j = crate::operators::matching_open(tokens, j)?.checked_sub(1)?;
            }
            _ => return None,
        }
    }
}

/// Where a name gets a value: `{% set name = value %}` (the value's
/// extent) and `{% for targets in iter %}` (the iterable's first token).
enum Binding<'s> {
    Set { name: &'s str, value: Span },
    For { targets: Vec<&'s str>, iter: Span },
}

fn bindings<'s>(tokens: &[(Token<'s>, Span)]) -> Vec<Binding<'s>> {
    let mut found = Vec::new();
    for (i, (token, _)) in tokens.iter().enumerate() {
        if !matches!(token, Token::BlockStart) {
            continue;
        }
        let at = |n: usize| tokens.get(i + n).map(|(t, _)| t);
        let end = tokens[i..]
            .iter()
            .position(|(t, _)| matches!(t, Token::BlockEnd))
            .map_or(tokens.len(), |n| i + n);
        match (at(1), at(2), at(3)) {
            (Some(Token::Ident("set")), Some(Token::Ident(name)), Some(Token::Assign))
                if end > i + 4 =>
            {
                let (first, last) = (tokens[i + 4].1, tokens[end - 1].1);
                found.push(Binding::Set {
                    name,
                    value: Span {
                        end_offset: last.end_offset,
                        end_line: last.end_line,
                        end_col: last.end_col,
                        ..first
                    },
                });
            }
            (Some(Token::Ident("for")), ..) => {
                let targets = tokens[i + 2..end]
                    .iter()
                    .take_while(|(t, _)| !matches!(t, Token::Ident("in")))
                    .filter_map(|(t, _)| match t {
                        Token::Ident(name) => Some(*name),
                        _ => None,
                    })
                    .collect::<Vec<_>>();
                if let Some((_, iter)) = tokens.get(i + 3 + targets.len() * 2 - 1) {
                    found.push(Binding::For {
                        targets,
                        iter: *iter,
                    });
                }
            }
            _ => {}
        }
    }
    found
}

/// The name a bound value starts from (`a` in `a.b`, `a | default({})`);
/// none for a literal or a call (`namespace(…)`, `dict(…)`).
fn value_root<'s>(tokens: &[(Token<'s>, Span)], value: &Span) -> Option<&'s str> {
    let first = tokens
        .iter()
        .position(|(_, span)| span.start_offset == value.start_offset)?;
    match (&tokens[first].0, tokens.get(first + 1).map(|(t, _)| t)) {
        (Token::Ident(_), Some(Token::ParenOpen)) => None,
        (Token::Ident(name), _) if !CONSTANTS.contains(name) => Some(name),
        _ => None,
    }
}

/// Words that read as names but are not variables.
const CONSTANTS: &[&str] = &[
    "not", "none", "None", "true", "True", "false", "False", "loop",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_mutating_call_reaches_is_rewritten() {
        assert_eq!(
            rewrite("{% set parts = [] %}{{ x }}{% set _ = parts.append(1) %}"),
            "{% set parts = __enka_mutable(parts) %}{% set parts = __enka_mutable([]) %}{{ x }}{% set _ = parts.append(1) %}"
        );
        assert_eq!(
            rewrite("{% set b = a.spec %}{%- set _ = b.update({'y': 2}) -%}"),
            "{% set a = __enka_mutable(a) %}{% set b = __enka_mutable(b) %}{% set b = __enka_mutable(a.spec) %}{%- set _ = b.update({'y': 2}) -%}"
        );
        assert_eq!(
            rewrite("{% for k, c in cs.items() %}{% set _ = c['x'].append(k) %}{% endfor %}"),
            "{% set c = __enka_mutable(c) %}{% set cs = __enka_mutable(cs) %}{% for k, c in cs.items() %}{% set _ = c['x'].append(k) %}{% endfor %}"
        );
        for unchanged in [
            "{% set parts = [1] %}",
            "{{ [] }}",
            "{{ [].append(1) }}",
            "{% set a, b = [] %}",
            "{{ s.split(',') }}",
        ] {
            assert_eq!(rewrite(unchanged), unchanged);
        }
    }

    fn render(source: &str, ctx: Value) -> String {
        let mut env = minijinja::Environment::new();
        register(&mut env);
        env.set_unknown_method_callback(super::super::methods::call_method);
        env.render_str(&rewrite(source), ctx).unwrap()
    }

    #[test]
    fn lists_and_dicts_change_in_place() {
        let out = render(
            "{% set parts = [] %}{% for i in [1, 2, 3] %}{% set _ = parts.append(i * 2) %}{% endfor %}\
             {% set _ = parts.extend([7]) %}{% set _ = parts.insert(0, 0) %}{% set last = parts.pop() %}\
             {% set d = {} %}{% set _ = d.update({'a': 1}) %}{% set _ = d.update({'b': parts | length}) %}\
             {{ parts | join(',') }} {{ last }} {{ d.a }}{{ d.b }} {{ d | list | join('') }} {{ parts | length }}",
            Value::from(()),
        );
        assert_eq!(out, "0,2,4,6 7 14 ab 4");
    }

    #[test]
    fn a_change_is_seen_through_every_alias() {
        let ctx = crate::convert::from_json(&serde_json::json!({
            "cs": [{"n": 1}, {"n": 2}],
            "labels": {"a": "1"},
        }));
        let out = render(
            "{% for c in cs %}{% set _ = c.update({'m': c.n * 10}) %}{% endfor %}\
             {% set l = labels %}{% set _ = l.setdefault('b', '2') %}\
             {% set o = [3, 1, 2] %}{% set _ = o.sort(reverse=true) %}\
             {{ cs | map(attribute='m') | join(',') }} {{ labels | list | join(',') }} {{ o | join(',') }}",
            ctx,
        );
        assert_eq!(out, "10,20 a,b 3,2,1");
    }
}
