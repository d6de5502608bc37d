//! Strings: `escape`, `split`, `regex_replace`, `regex_search`, `regex_findall`,
//! `regex_escape`, `quote`, `indent`, `truncate`, `capitalize`, `format`.
//!
//! Regular expressions use Python's syntax (`(?P<name>…)`, lookarounds,
//! backreferences), so fancy-regex is used rather than `regex`.

use std::sync::Mutex;

use fancy_regex::{Captures, Regex, RegexBuilder};
use minijinja::value::{Kwargs, Rest, ValueKind, ValueOrKwargs};
use minijinja::{Error, State, Value};

use super::{defined, invalid};
use crate::pyrepr;

/// Ansible's `comment(style='plain', **kw)`: `text` decorated line by line
/// as a comment of `style`, each part overridable by keyword
/// (`decoration`, `beginning`, `prefix`, `prefix_count`, `postfix`,
/// `postfix_count`, `end`, `newline`).
pub(super) fn comment(
    value: &Value,
    style: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    super::defined(value, "comment")?;
    let Some(text) = value.as_str() else {
        return Err(super::invalid(format!(
            "'{}' object has no attribute 'replace'",
            pyrepr::type_name(value)
        )));
    };
    let style = match style {
        Some(style) => style,
        None => kwargs
            .get::<Option<String>>("style")?
            .unwrap_or_else(|| "plain".into()),
    };
    let (beginning, decoration, end) = match style.as_str() {
        "plain" => ("", "# ", ""),
        "erlang" => ("", "% ", ""),
        "c" => ("", "// ", ""),
        "cblock" => ("/*", " * ", " */"),
        "xml" => ("<!--", " - ", "-->"),
        other => return Err(super::invalid(format!("'{other}'"))),
    };
    let given = |name: &str| -> Result<Option<String>, Error> {
        Ok(kwargs
            .get::<Option<Value>>(name)?
            .map(|v| pyrepr::to_text(&v)))
    };
    let count = |name: &str| -> Result<usize, Error> {
        match kwargs.get::<Option<Value>>(name)? {
            None => Ok(1),
            Some(v) => pyrepr::to_text(&v)
                .trim()
                .parse::<i64>()
                .map(|n| n.max(0) as usize)
                .map_err(|_| {
                    super::invalid(format!(
                        "invalid literal for int() with base 10: '{}'",
                        pyrepr::to_text(&v)
                    ))
                }),
        }
    };
    let prepostfix = given("decoration")?.unwrap_or_else(|| decoration.to_owned());
    let newline = given("newline")?.unwrap_or_else(|| "\n".to_owned());
    let beginning = given("beginning")?.unwrap_or_else(|| beginning.to_owned());
    let prefix = given("prefix")?.unwrap_or_else(|| prepostfix.trim_end().to_owned());
    let decoration = given("decoration")?.unwrap_or_else(|| decoration.to_owned());
    let postfix = given("postfix")?.unwrap_or_else(|| prepostfix.trim_end().to_owned());
    let end = given("end")?.unwrap_or_else(|| end.to_owned());
    let prefix_count = count("prefix_count")?;
    let postfix_count = count("postfix_count")?;
    let mut out = String::new();
    if !beginning.is_empty() {
        out.push_str(&beginning);
        out.push_str(&newline);
    }
    if !prefix.is_empty() {
        let line = if prefix == newline {
            newline.clone()
        } else {
            format!("{prefix}{newline}")
        };
        out.push_str(&line.repeat(prefix_count));
    }
    let decorated = format!(
        "{decoration}{}",
        text.replace(&newline, &format!("{newline}{decoration}"))
    );
    out.push_str(&decorated.replace(
        &format!("{decoration}{newline}"),
        &format!("{}{newline}", decoration.trim_end()),
    ));
    for _ in 0..postfix_count {
        out.push_str(&newline);
        out.push_str(&postfix);
    }
    if !end.is_empty() {
        out.push_str(&newline);
        out.push_str(&end);
    }
    // Other keywords are ignored, as Ansible's dict update ignores them:
    // no assert_all_used.
    Ok(Value::from(out))
}

/// Jinja's `format`: Python's printf-style `%` formatting. minijinja's lacks
/// the `%r` and `%a` conversions; each argument they format is replaced by
/// its Python `repr` (or `ascii`) and formatted with `%s`, so width and
/// precision apply to the repr as they do in Python.
pub(super) fn format(
    state: &mut State,
    format_str: &Value,
    args: Rest<ValueOrKwargs>,
) -> Result<Value, Error> {
    defined(format_str, "format")?;
    // Jinja formats `soft_str(value)`: any value as its text.
    let text_value;
    let format_str = if format_str.as_str().is_some() {
        format_str
    } else {
        text_value = Value::from(pyrepr::to_text(format_str));
        &text_value
    };
    let mut args = args.into_values();
    // Python's `text % args`: every positional value must be converted (a
    // mapping is formatting by name, which may leave values unused).
    if let Some(text) = format_str.as_str()
        && args.iter().all(|a| a.kind() != ValueKind::Map)
        && crate::operators::conversions(text) < args.len()
    {
        return Err(invalid(
            "not all arguments converted during string formatting",
        ));
    }
    let rewritten = format_str
        .as_str()
        .and_then(|text| repr_conversions(text, &mut args));
    let format_str = rewritten.map_or_else(|| format_str.clone(), Value::from);
    // Python's `%s` writes an argument with str(), which an undefined one
    // refuses (`%r` took its repr above).
    if args.iter().any(crate::is_strict_undefined) {
        return Err(super::undefined_part("an argument", "format"));
    }
    let args = args.into_iter().map(ValueOrKwargs::from).collect();
    minijinja::filters::format(state, &format_str, Rest(args))
}

/// Python's `format % args` (the `%` operator on a string), with the
/// `format` filter's conversions.
pub(crate) fn python_format(
    state: &mut State,
    format_str: &Value,
    args: Rest<Value>,
) -> Result<Value, Error> {
    let args = args.0.into_iter().map(ValueOrKwargs::from).collect();
    format(state, format_str, Rest(args))
}

/// Rewrites the `%r`/`%a` conversions of a printf-style format as `%s` and
/// their arguments as reprs; `None` when there are none.
fn repr_conversions(text: &str, args: &mut [Value]) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut next_arg = 0;
    let mut rewrote = false;
    let mut i = 0;
    while i < chars.len() {
        out.push(chars[i]);
        if chars[i] != '%' {
            i += 1;
            continue;
        }
        i += 1;
        if chars.get(i) == Some(&'%') {
            out.push('%');
            i += 1;
            continue;
        }
        let key = mapping_key(&chars, &mut i);
        // The spec after the key, pushed once the conversion is known.
        let spec_start = out.len();
        while let Some(c @ ('-' | '+' | ' ' | '#' | '0')) = chars.get(i) {
            out.push(*c);
            i += 1;
        }
        for part in 0..2 {
            if part == 1 {
                if chars.get(i) != Some(&'.') {
                    break;
                }
                out.push('.');
                i += 1;
            }
            if chars.get(i) == Some(&'*') {
                out.push('*');
                next_arg += 1;
                i += 1;
            }
            while let Some(c) = chars.get(i).filter(|c| c.is_ascii_digit()) {
                out.push(*c);
                i += 1;
            }
        }
        while let Some(c @ ('h' | 'l' | 'L')) = chars.get(i) {
            out.push(*c);
            i += 1;
        }
        let Some(&conversion) = chars.get(i) else {
            break;
        };
        i += 1;
        let key_spec = |name: &str| format!("({name})");
        if conversion == 'r' || conversion == 'a' {
            rewrote = true;
            // A key formatted as a repr gets a key of its own, so that
            // `%(k)r and %(k)s` still formats `k` itself the second time.
            if let Some(key) = &key {
                out.insert_str(spec_start, &key_spec(&format!("{key}\u{1}{conversion}")));
            }
            out.push('s');
            let as_repr = |value: &Value| {
                let repr = pyrepr::repr(value);
                Value::from(if conversion == 'a' {
                    ascii(&repr)
                } else {
                    repr
                })
            };
            match &key {
                Some(key) => add_repr_key(args, key, conversion, as_repr),
                None => {
                    if let Some(value) = args.get_mut(next_arg) {
                        *value = as_repr(value);
                    }
                }
            }
        } else {
            if let Some(key) = &key {
                out.insert_str(spec_start, &key_spec(key));
            }
            out.push(conversion);
        }
        if key.is_none() {
            next_arg += 1;
        }
    }
    rewrote.then_some(out)
}

/// `%(key)` at `chars[*i]`: a mapping key, parentheses nested as Python
/// counts them; `*i` moves past it.
fn mapping_key(chars: &[char], i: &mut usize) -> Option<String> {
    if chars.get(*i) != Some(&'(') {
        return None;
    }
    let start = *i + 1;
    let mut depth = 1;
    *i += 1;
    while *i < chars.len() && depth > 0 {
        match chars[*i] {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        *i += 1;
    }
    Some(chars[start..i.saturating_sub(1)].iter().collect())
}

/// Adds `<key>\u{1}<conversion>` to the format's mapping, holding the repr
/// of `key`'s value, so that the same key can still be formatted as itself.
fn add_repr_key(
    args: &mut [Value],
    key: &str,
    conversion: char,
    as_repr: impl Fn(&Value) -> Value,
) {
    if let Some(mapping) = args.first_mut()
        && let Ok(value) = mapping.get_item(&Value::from(key))
    {
        let mut entries = crate::convert::entries(mapping);
        entries.push((
            Value::from(format!("{key}\u{1}{conversion}")),
            as_repr(&value),
        ));
        *mapping = if mapping.is_kwargs() {
            let kwargs: Kwargs = entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            Value::from(kwargs)
        } else {
            Value::from_iter(entries)
        };
    }
}

/// Python's `ascii()` of a repr: non-ASCII characters escaped.
fn ascii(repr: &str) -> String {
    let mut out = String::with_capacity(repr.len());
    for c in repr.chars() {
        match c as u32 {
            0..=0x7f => out.push(c),
            code @ 0x80..=0xff => out.push_str(&format!("\\x{code:02x}")),
            code @ 0x100..=0xffff => out.push_str(&format!("\\u{code:04x}")),
            code => out.push_str(&format!("\\U{code:08x}")),
        }
    }
    out
}

/// Jinja's `escape` (HTML, since Ansible never autoescapes). minijinja
/// passes "safe" strings through unescaped; enka uses that flag for
/// Ansible's unsafe data (see template::context), which Jinja escapes like
/// any other text. The result is markup, as minijinja's and Jinja's are.
pub(super) fn escape(value: &Value) -> Value {
    let text = match value.as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(value.to_string()),
    };
    Value::from_safe_string(minijinja::HtmlEscape(&text).to_string())
}

/// Jinja's `replace(s, old, new, count=None)`.
pub(super) fn replace(
    state: &State,
    value: &Value,
    old: String,
    new: String,
    count: Option<usize>,
) -> Result<Value, Error> {
    // A container written as text shows what it holds; from 2.19 an
    // undefined value inside fails that.
    if super::semantics(state) == crate::Semantics::Ansible219 {
        super::defined_deep(value, "replace")?;
    }
    let s = text(value, "replace")?;
    Ok(Value::from(match count {
        Some(n) => s.replacen(&old, &new, n),
        None => s.replace(&old, &new),
    }))
}

/// Jinja's `wordcount`: runs of word characters.
pub(super) fn wordcount(value: &Value) -> Result<Value, Error> {
    let s = text(value, "wordcount")?;
    let mut count = 0;
    let mut in_word = false;
    for c in s.chars() {
        let word = c.is_alphanumeric() || c == '_';
        if word && !in_word {
            count += 1;
        }
        in_word = word;
    }
    Ok(Value::from(count))
}

/// Jinja's `center(s, width=80)`, with Python's padding rule.
pub(super) fn center(value: &Value, width: Option<usize>) -> Result<Value, Error> {
    let s = text(value, "center")?;
    let width = width.unwrap_or(80);
    let len = s.chars().count();
    if len >= width {
        return Ok(Value::from(s));
    }
    let total = width - len;
    let left = total / 2 + (total & width & 1);
    Ok(Value::from(format!(
        "{}{s}{}",
        " ".repeat(left),
        " ".repeat(total - left)
    )))
}

fn text(value: &Value, what: &str) -> Result<String, Error> {
    defined(value, what)?;
    Ok(pyrepr::to_text(value))
}

/// Python's `str.split(sep=None, maxsplit=-1)`.
pub(crate) fn python_split(
    s: &str,
    sep: Option<&str>,
    maxsplit: i64,
) -> Result<Vec<String>, Error> {
    let limit = usize::try_from(maxsplit).ok();
    match sep {
        None => {
            let mut out = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if limit.is_some_and(|l| out.len() >= l) {
                    out.push(rest.to_owned());
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                out.push(rest[..end].to_owned());
                rest = rest[end..].trim_start();
            }
            Ok(out)
        }
        Some("") => Err(invalid("empty separator")),
        Some(sep) => Ok(match limit {
            Some(l) => s.splitn(l + 1, sep).map(str::to_owned).collect(),
            None => s.split(sep).map(str::to_owned).collect(),
        }),
    }
}

/// Ansible's `split`: `str.split` itself, which takes only a string.
pub(super) fn split(
    value: &Value,
    sep: Option<Value>,
    maxsplit: Option<i64>,
) -> Result<Value, Error> {
    defined(value, "split")?;
    let Some(s) = value.as_str() else {
        return Err(invalid(format!(
            "descriptor 'split' for 'str' objects doesn't apply to a '{}' object",
            pyrepr::type_name(value)
        )));
    };
    let sep = sep.filter(|v| !v.is_none()).map(|v| pyrepr::to_text(&v));
    Ok(Value::from(python_split(
        s,
        sep.as_deref(),
        maxsplit.unwrap_or(-1),
    )?))
}

/// A pattern error in the words of Python's `re` where they differ
/// (roles and tests match on them), else fancy-regex's own.
pub(crate) fn python_regex_error(error: &fancy_regex::Error) -> String {
    use fancy_regex::{Error as E, ParseError as P};
    match error {
        E::ParseError(at, P::TargetNotRepeatable | P::InvalidRepeat) => {
            format!("nothing to repeat at position {at}")
        }
        E::ParseError(at, P::UnclosedOpenParen) => {
            format!("missing ), unterminated subpattern at position {at}")
        }
        E::ParseError(at, P::TrailingBackslash) => {
            format!("bad escape (end of pattern) at position {at}")
        }
        other => other.to_string(),
    }
}

/// [`python_regex_error`] for an error of `pattern`, which also places
/// what only the pattern shows (an unclosed `[` where Python's `re` does).
pub fn python_regex_message(pattern: &str, error: &fancy_regex::Error) -> String {
    use fancy_regex::{Error as E, ParseError as P};
    if let E::ParseError(_, P::InvalidClass) = error
        && let Some(at) = pattern.rfind('[')
    {
        return format!(
            "unterminated character set at position {}",
            pattern[..at].chars().count()
        );
    }
    python_regex_error(error)
}

/// Compiled patterns, keyed by source and flags: roles use a handful of
/// patterns over and over.
fn compile(pattern: &str, ignorecase: bool, multiline: bool) -> Result<Regex, Error> {
    type Cache = std::collections::HashMap<(String, bool, bool), Regex>;
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    let key = (pattern.to_owned(), ignorecase, multiline);
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(Cache::new);
    if let Some(re) = cache.get(&key) {
        return Ok(re.clone());
    }
    let re = RegexBuilder::new(pattern)
        .case_insensitive(ignorecase)
        .multi_line(multiline)
        .build()
        .map_err(|e| invalid(format!("invalid regular expression {pattern:?}: {e}")))?;
    if cache.len() > 1024 {
        cache.clear();
    }
    cache.insert(key, re.clone());
    Ok(re)
}

/// Expands a Python `re.sub` replacement (`\1`, `\g<1>`, `\g<name>`, `\n`).
fn expand(replacement: &str, caps: &Captures<'_, str>, names: &[Option<&str>]) -> String {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(d) if d.is_ascii_digit() => {
                let mut num = d.to_string();
                if let Some(&n) = chars.peek().filter(|n| n.is_ascii_digit()) {
                    num.push(n);
                    chars.next();
                }
                let idx: usize = num.parse().unwrap_or(0);
                out.push_str(caps.get(idx).map_or("", |m| m.as_str()));
            }
            Some('g') if chars.peek() == Some(&'<') => {
                chars.next();
                let name: String = chars.by_ref().take_while(|&c| c != '>').collect();
                let group = match name.parse::<usize>() {
                    Ok(idx) => caps.get(idx),
                    Err(_) => names
                        .iter()
                        .position(|n| *n == Some(name.as_str()))
                        .and_then(|idx| caps.get(idx)),
                };
                out.push_str(group.map_or("", |m| m.as_str()));
            }
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

pub(super) fn regex_replace(
    value: &Value,
    pattern: Option<String>,
    replacement: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    let count = kwargs.get::<Option<usize>>("count")?.unwrap_or(0);
    let mandatory_count = kwargs.get::<Option<usize>>("mandatory_count")?.unwrap_or(0);
    let pattern = match pattern {
        Some(p) => p,
        None => kwargs.get::<Option<String>>("pattern")?.unwrap_or_default(),
    };
    let replacement = match replacement {
        Some(r) => r,
        None => kwargs
            .get::<Option<String>>("replacement")?
            .unwrap_or_default(),
    };
    kwargs.assert_all_used()?;
    let s = text(value, "regex_replace")?;
    let re = compile(&pattern, ignorecase, multiline)?;
    let names: Vec<Option<&str>> = re.capture_names().collect();
    let mut out = String::new();
    let mut last = 0;
    let mut replaced = 0;
    for caps in re.captures_iter(s.as_str()) {
        let caps = caps.map_err(|e| invalid(format!("regex_replace: {e}")))?;
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&s[last..m.start()]);
        out.push_str(&expand(&replacement, &caps, &names));
        last = m.end();
        replaced += 1;
        if count > 0 && replaced >= count {
            break;
        }
    }
    out.push_str(&s[last..]);
    if mandatory_count > 0 && replaced != mandatory_count {
        return Err(invalid(format!(
            "'{pattern}' should match {mandatory_count} times, but matches {replaced} times in '{s}'"
        )));
    }
    Ok(Value::from(out))
}

pub(super) fn regex_search(
    value: &Value,
    pattern: String,
    groups: Rest<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let s = text(value, "regex_search")?;
    // The group arguments are read before the search, as Ansible does.
    let groups = groups
        .iter()
        .map(|arg| group_reference(arg))
        .collect::<Result<Vec<_>, _>>()?;
    let re = compile(&pattern, ignorecase, multiline)?;
    let names: Vec<Option<&str>> = re.capture_names().collect();
    let Some(caps) = re
        .captures(s.as_str())
        .map_err(|e| invalid(format!("regex_search: {e}")))?
    else {
        return Ok(Value::from(()));
    };
    if groups.is_empty() {
        return Ok(Value::from(caps.get(0).map_or("", |m| m.as_str())));
    }
    let mut items = Vec::new();
    for group in groups {
        let index = match group {
            GroupRef::Name(name) => names.iter().position(|n| *n == Some(name)),
            GroupRef::Number(index) => (index < names.len()).then_some(index),
        }
        .ok_or_else(|| invalid("no such group"))?;
        items.push(
            caps.get(index)
                .map_or(Value::from(()), |m| Value::from(m.as_str())),
        );
    }
    Ok(Value::from(items))
}

/// A group `regex_search` is asked for.
enum GroupRef<'a> {
    Name(&'a str),
    Number(usize),
}

/// Reads a group argument as Ansible does: `\g<name>` or `\N`, matched
/// from its start (`re.match`); one that starts so but does not match fails
/// as Python does on the match it did not get.
fn group_reference(arg: &str) -> Result<GroupRef<'_>, Error> {
    let no_match = || invalid("'NoneType' object has no attribute 'group'");
    if let Some(rest) = arg.strip_prefix("\\g") {
        // `\\g<(\S+)>`: the longest run without spaces that ends in `>`.
        let run = rest.strip_prefix('<').ok_or_else(no_match)?;
        let run = &run[..run.find(char::is_whitespace).unwrap_or(run.len())];
        let end = run.rfind('>').filter(|&end| end > 0).ok_or_else(no_match)?;
        return Ok(GroupRef::Name(&run[..end]));
    }
    if let Some(rest) = arg.strip_prefix('\\') {
        let digits = &rest[..rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len())];
        if digits.is_empty() {
            return Err(no_match());
        }
        // Python's int() takes any length; a group number that large is
        // no group.
        return Ok(GroupRef::Number(digits.parse().unwrap_or(usize::MAX)));
    }
    Err(invalid("Unknown argument"))
}

pub(super) fn regex_findall(
    value: &Value,
    pattern: String,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let s = text(value, "regex_findall")?;
    let re = compile(&pattern, ignorecase, multiline)?;
    let groups = re.captures_len() - 1;
    let mut out = Vec::new();
    for caps in re.captures_iter(s.as_str()) {
        let caps = caps.map_err(|e| invalid(format!("regex_findall: {e}")))?;
        let get = |i: usize| Value::from(caps.get(i).map_or("", |m| m.as_str()));
        out.push(match groups {
            0 => get(0),
            1 => get(1),
            n => Value::from((1..=n).map(get).collect::<Vec<_>>()),
        });
    }
    Ok(Value::from(out))
}

/// Python's `re.escape`.
pub(super) fn regex_escape(
    value: &Value,
    re_type: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let re_type = match re_type {
        Some(re_type) => Some(re_type),
        None => kwargs.get::<Option<String>>("re_type")?,
    };
    kwargs.assert_all_used()?;
    let s = text(value, "regex_escape")?;
    match re_type.as_deref().unwrap_or("python") {
        "python" => Ok(Value::from(s.chars().fold(String::new(), |mut out, c| {
            if "()[]{}?*+-|^$\\.&~# \t\n\r\x0b\x0c".contains(c) {
                out.push('\\');
            }
            out.push(c);
            out
        }))),
        "posix_basic" => Ok(Value::from(s.chars().fold(String::new(), |mut out, c| {
            if ".[]\\*^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
            out
        }))),
        "posix_extended" => Err(invalid("Regex type (posix_extended) not yet implemented")),
        other => Err(invalid(format!("Invalid regex type ({other})"))),
    }
}

/// Python's `shlex.quote`.
pub(super) fn quote(value: &Value) -> Result<Value, Error> {
    let s = if value.is_none() {
        String::new()
    } else {
        text(value, "quote")?
    };
    if s.is_empty() {
        return Ok(Value::from("''"));
    }
    if s.chars()
        .all(|c| c.is_alphanumeric() && c.is_ascii() || "@%+=:,./-_".contains(c))
    {
        return Ok(Value::from(s));
    }
    Ok(Value::from(format!("'{}'", s.replace('\'', "'\"'\"'"))))
}

/// Python's `str.splitlines()`.
fn splitlines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes: Vec<(usize, char)> = s.char_indices().collect();
    let mut i = 0;
    while i < bytes.len() {
        let (pos, c) = bytes[i];
        let is_break = matches!(
            c,
            '\n' | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if is_break {
            out.push(&s[start..pos]);
            let mut next = pos + c.len_utf8();
            if c == '\r' && i + 1 < bytes.len() && bytes[i + 1].1 == '\n' {
                next += 1;
                i += 1;
            }
            start = next;
        }
        i += 1;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Jinja's `indent(s, width=4, first=False, blank=False)`.
pub(super) fn indent(
    value: &Value,
    width: Option<Value>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let width = match width {
        Some(w) => w,
        None => kwargs
            .get::<Option<Value>>("width")?
            .unwrap_or(Value::from(4)),
    };
    let first = match first {
        Some(f) => f,
        None => kwargs.get::<Option<bool>>("first")?.unwrap_or(false),
    };
    let blank = match blank {
        Some(b) => b,
        None => kwargs.get::<Option<bool>>("blank")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let indention = match width.as_str() {
        Some(s) => s.to_owned(),
        None => " ".repeat(
            usize::try_from(width)
                .map_err(|_| invalid("indent: width must be a number or a string"))?,
        ),
    };
    let s = indent_input(value)? + "\n";
    let lines = splitlines(&s);
    let mut rv = if blank {
        lines.join(&format!("\n{indention}"))
    } else {
        let mut iter = lines.into_iter();
        let mut rv = iter.next().unwrap_or_default().to_owned();
        for line in iter {
            rv.push('\n');
            if !line.is_empty() {
                rv.push_str(&indention);
            }
            rv.push_str(line);
        }
        rv
    };
    if first {
        rv = indention + &rv;
    }
    Ok(Value::from(rv))
}

/// What Jinja's `indent` does to its input first, `s += "\n"`: a string
/// grows, any other type raises (a list grows too, then has no
/// `splitlines`).
fn indent_input(value: &Value) -> Result<String, Error> {
    defined(value, "indent")?;
    match (value.as_str(), value.kind()) {
        (Some(s), _) => Ok(s.to_owned()),
        (None, ValueKind::Seq | ValueKind::Iterable) => {
            Err(invalid("'list' object has no attribute 'splitlines'"))
        }
        _ => Err(invalid(format!(
            "unsupported operand type(s) for +=: '{}' and 'str'",
            pyrepr::type_name(value)
        ))),
    }
}

/// Jinja's `truncate(s, length=255, killwords=False, end='...', leeway=None)`,
/// each argument by position or by name (awx-operator passes all four by
/// position).
pub(super) fn truncate(value: &Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    if args.len() > 4 {
        return Err(Error::new(
            minijinja::ErrorKind::TooManyArguments,
            "truncate takes at most 4 arguments",
        ));
    }
    let positional = |index: usize| args.get(index).filter(|v| !v.is_none());
    let length = match positional(0) {
        Some(l) => usize::try_from(l.clone())
            .map_err(|_| invalid("truncate: length must be an integer"))?,
        None => kwargs.get::<Option<usize>>("length")?.unwrap_or(255),
    };
    let killwords = match positional(1) {
        Some(k) => k.is_true(),
        None => kwargs.get::<Option<bool>>("killwords")?.unwrap_or(false),
    };
    let end = match positional(2) {
        Some(e) => pyrepr::to_text(e),
        None => kwargs
            .get::<Option<String>>("end")?
            .unwrap_or_else(|| "...".into()),
    };
    let leeway = match positional(3) {
        Some(l) => usize::try_from(l.clone())
            .map_err(|_| invalid("truncate: leeway must be an integer"))?,
        None => kwargs.get::<Option<usize>>("leeway")?.unwrap_or(5),
    };
    kwargs.assert_all_used()?;
    defined(value, "truncate")?;
    if length < end.chars().count() {
        return Err(invalid("expected length >= len(end)"));
    }
    if value.as_str().is_none() {
        return truncate_other(value, length + leeway);
    }
    let s = pyrepr::to_text(value);
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= length + leeway {
        return Ok(Value::from(s));
    }
    let cut = length - end.chars().count();
    let head: String = chars[..cut].iter().collect();
    if killwords {
        return Ok(Value::from(head + &end));
    }
    let head = match head.rfind(' ') {
        Some(i) => head[..i].to_owned(),
        None => head,
    };
    Ok(Value::from(head + &end))
}

/// `truncate` of what is not a string: Python's `len` of it, the value
/// itself when short enough, else the TypeError of slicing it as text.
fn truncate_other(value: &Value, most: usize) -> Result<Value, Error> {
    let sized = matches!(
        value.kind(),
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map | ValueKind::Bytes
    );
    let len = value
        .len()
        .or_else(|| value.try_iter().ok().map(Iterator::count));
    let Some(len) = len.filter(|_| sized) else {
        return Err(invalid(format!(
            "object of type '{}' has no len()",
            pyrepr::type_name(value)
        )));
    };
    if len <= most {
        return Ok(value.clone());
    }
    Err(invalid(format!(
        "'{}' object has no attribute 'rsplit'",
        pyrepr::type_name(value)
    )))
}

/// Python's `str.capitalize`: first character upper case, the rest lower.
pub(super) fn capitalize(value: &Value) -> Result<Value, Error> {
    let s = text(value, "capitalize")?;
    let mut chars = s.chars();
    Ok(Value::from(match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + &chars.as_str().to_lowercase(),
        None => String::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_split_semantics() {
        assert_eq!(
            python_split("  a b\tc ", None, -1).unwrap(),
            ["a", "b", "c"]
        );
        assert_eq!(
            python_split("a,b,,c", Some(","), -1).unwrap(),
            ["a", "b", "", "c"]
        );
        assert_eq!(python_split("a,b,c", Some(","), 1).unwrap(), ["a", "b,c"]);
        assert_eq!(python_split("a b c", None, 1).unwrap(), ["a", "b c"]);
        assert!(python_split("x", Some(""), -1).is_err());
    }

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(splitlines("a\nb\r\nc\rd\n"), ["a", "b", "c", "d"]);
        assert_eq!(splitlines("a\n\nb"), ["a", "", "b"]);
        assert_eq!(splitlines(""), Vec::<&str>::new());
    }
}
