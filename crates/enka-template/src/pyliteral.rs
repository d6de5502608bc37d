//! Python's `ast.literal_eval`, as Ansible applies it to rendered text.
//!
//! Ansible 2.18 turns a template's text output that starts with `[` or `{`,
//! or equals `True`/`False`, back into data with `literal_eval`, after
//! mapping the names `true`, `false` and `null` to Python's constants. Text
//! that is not a valid literal stays text. Tuples and sets become lists.

use std::iter::Peekable;
use std::str::CharIndices;

use minijinja::Value;

/// Nesting bound, so a hostile `[[[[…` cannot exhaust the stack.
const MAX_DEPTH: usize = 200;

/// Parses `text` as a Python literal, or returns `None` if it is not one;
/// `true`, `false` and `null` are read as Python's constants, as Ansible's
/// templating reads rendered text.
pub fn literal_eval(text: &str) -> Option<Value> {
    parse(text, true)
}

/// Python's own `ast.literal_eval`: `true`, `false` and `null` are names,
/// so no literal (an INI inventory's values).
pub fn python_literal_eval(text: &str) -> Option<Value> {
    parse(text, false)
}

fn parse(text: &str, json_names: bool) -> Option<Value> {
    let mut parser = Parser {
        src: text,
        chars: text.char_indices().peekable(),
        depth: 0,
        json_names,
    };
    parser.skip_space(false);
    let value = parser.expr()?;
    parser.skip_space(false);
    if parser.chars.peek().is_some() {
        return None;
    }
    Some(value)
}

/// Ansible's rule for converting rendered text back to data.
pub fn convert_rendered(text: String) -> Value {
    let looks_like_data = text.starts_with(['[', '{']) || text == "True" || text == "False";
    if let Some(value) = looks_like_data.then(|| literal_eval(&text)).flatten() {
        return value;
    }
    Value::from(text)
}

struct Parser<'a> {
    src: &'a str,
    chars: Peekable<CharIndices<'a>>,
    depth: usize,
    /// Whether `true`, `false` and `null` are constants.
    json_names: bool,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|&(_, c)| c)
    }

    fn bump(&mut self) -> Option<char> {
        self.chars.next().map(|(_, c)| c)
    }

    /// Skips blanks and comments; inside brackets newlines are blanks too,
    /// and at top level Python's `eval` mode allows only trailing ones.
    fn skip_space(&mut self, in_brackets: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\x0c' => {
                    self.bump();
                }
                '\n' | '\r' => {
                    self.bump();
                }
                '\\' if in_brackets => {
                    let mut look = self.chars.clone();
                    look.next();
                    if matches!(look.peek(), Some(&(_, '\n'))) {
                        self.bump();
                        self.bump();
                    } else {
                        return;
                    }
                }
                '#' => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                _ => return,
            }
        }
    }

    fn expr(&mut self) -> Option<Value> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let value = self.atom_with_sign();
        self.depth -= 1;
        value
    }

    fn atom_with_sign(&mut self) -> Option<Value> {
        match self.peek()? {
            '-' | '+' => {
                let negative = self.bump() == Some('-');
                self.skip_space(true);
                let value = self.atom_with_sign()?;
                if !value.is_number() {
                    return None;
                }
                if !negative {
                    return Some(value);
                }
                if value.is_integer() {
                    let i = i128::try_from(value).ok()?;
                    Some(Value::from(i.checked_neg()?))
                } else {
                    Some(Value::from(-f64::try_from(value).ok()?))
                }
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Option<Value> {
        let c = self.peek()?;
        match c {
            '[' => {
                self.bump();
                Some(Value::from(self.items(']')?))
            }
            '(' => {
                self.bump();
                self.skip_space(true);
                let items = self.items(')')?;
                Some(Value::from(items))
            }
            '{' => {
                self.bump();
                self.dict_or_set()
            }
            '\'' | '"' => self.strings(String::new()),
            c if c.is_ascii_digit() || c == '.' => self.number(),
            c if c.is_alphabetic() || c == '_' => {
                let start = self.chars.peek()?.0;
                let mut end = start;
                while let Some(&(i, c)) = self.chars.peek() {
                    if c.is_alphanumeric() || c == '_' {
                        end = i + c.len_utf8();
                        self.bump();
                    } else {
                        break;
                    }
                }
                let word = &self.src[start..end];
                match word {
                    "True" => Some(Value::from(true)),
                    "False" => Some(Value::from(false)),
                    "None" => Some(Value::from(())),
                    "true" if self.json_names => Some(Value::from(true)),
                    "false" if self.json_names => Some(Value::from(false)),
                    "null" if self.json_names => Some(Value::from(())),
                    _ => {
                        let prefix = word.to_ascii_lowercase();
                        if matches!(self.peek(), Some('\'' | '"'))
                            && matches!(prefix.as_str(), "r" | "u" | "b" | "br" | "rb")
                        {
                            self.prefixed_string(&prefix)
                        } else {
                            None
                        }
                    }
                }
            }
            _ => None,
        }
    }

    fn items(&mut self, close: char) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        loop {
            self.skip_space(true);
            if self.peek()? == close {
                self.bump();
                return Some(items);
            }
            items.push(self.expr()?);
            self.skip_space(true);
            match self.bump()? {
                ',' => {}
                c if c == close => return Some(items),
                _ => return None,
            }
        }
    }

    fn dict_or_set(&mut self) -> Option<Value> {
        self.skip_space(true);
        if self.peek()? == '}' {
            self.bump();
            return Some(Value::from_pairs(std::iter::empty::<(Value, Value)>()));
        }
        let first = self.expr()?;
        self.skip_space(true);
        if self.peek()? != ':' {
            // A set literal; Ansible would keep a set, enka has none.
            let mut items = vec![first];
            loop {
                self.skip_space(true);
                match self.bump()? {
                    '}' => return Some(Value::from(items)),
                    ',' => {
                        self.skip_space(true);
                        if self.peek()? == '}' {
                            self.bump();
                            return Some(Value::from(items));
                        }
                        items.push(self.expr()?);
                    }
                    _ => return None,
                }
            }
        }
        let mut pairs: Vec<(Value, Value)> = Vec::new();
        let mut key = first;
        loop {
            self.skip_space(true);
            if self.bump()? != ':' {
                return None;
            }
            self.skip_space(true);
            let value = self.expr()?;
            // A repeated key keeps its first place and takes the last value,
            // as in a Python dict; the map from_pairs builds does exactly
            // that (a scan of the earlier pairs here was quadratic).
            pairs.push((key, value));
            self.skip_space(true);
            match self.bump()? {
                '}' => return Some(Value::from_pairs(pairs)),
                ',' => {
                    self.skip_space(true);
                    if self.peek()? == '}' {
                        self.bump();
                        return Some(Value::from_pairs(pairs));
                    }
                    key = self.expr()?;
                }
                _ => return None,
            }
        }
    }

    /// One or more adjacent string literals, concatenated as Python does.
    fn strings(&mut self, mut acc: String) -> Option<Value> {
        acc.push_str(&self.string_body(false)?);
        loop {
            let mut look = self.chars.clone();
            while matches!(look.peek(), Some(&(_, ' ' | '\t'))) {
                look.next();
            }
            match look.peek() {
                Some(&(_, '\'' | '"')) => {
                    self.chars = look;
                    acc.push_str(&self.string_body(false)?);
                }
                _ => return Some(Value::from(acc)),
            }
        }
    }

    fn prefixed_string(&mut self, prefix: &str) -> Option<Value> {
        let raw = prefix.contains('r');
        let body = self.string_body(raw)?;
        if prefix.contains('b') {
            if !body.is_ascii() {
                return None;
            }
            return Some(Value::from_bytes(body.into_bytes()));
        }
        Some(Value::from(body))
    }

    fn string_body(&mut self, raw: bool) -> Option<String> {
        let quote = self.bump()?;
        let triple = {
            let mut look = self.chars.clone();
            matches!((look.next(), look.next()), (Some((_, a)), Some((_, b))) if a == quote && b == quote)
        };
        if triple {
            self.bump();
            self.bump();
        }
        let mut out = String::new();
        loop {
            let c = self.bump()?;
            if c == quote {
                if !triple {
                    return Some(out);
                }
                let mut look = self.chars.clone();
                if matches!((look.next(), look.next()), (Some((_, a)), Some((_, b))) if a == quote && b == quote)
                {
                    self.bump();
                    self.bump();
                    return Some(out);
                }
                out.push(c);
                continue;
            }
            if c == '\n' && !triple {
                return None;
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let escaped = self.bump()?;
            if raw {
                out.push('\\');
                out.push(escaped);
                continue;
            }
            match escaped {
                '\n' => {}
                '\\' => out.push('\\'),
                '\'' => out.push('\''),
                '"' => out.push('"'),
                'a' => out.push('\x07'),
                'b' => out.push('\x08'),
                'f' => out.push('\x0c'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'v' => out.push('\x0b'),
                '0'..='7' => {
                    let mut code = escaped.to_digit(8)?;
                    for _ in 0..2 {
                        match self.peek().and_then(|c| c.to_digit(8)) {
                            Some(d) => {
                                code = code * 8 + d;
                                self.bump();
                            }
                            None => break,
                        }
                    }
                    out.push(char::from_u32(code)?);
                }
                'x' => out.push(self.hex_escape(2)?),
                'u' => out.push(self.hex_escape(4)?),
                'U' => out.push(self.hex_escape(8)?),
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
        }
    }

    fn hex_escape(&mut self, len: usize) -> Option<char> {
        let mut code = 0u32;
        for _ in 0..len {
            code = code * 16 + self.bump()?.to_digit(16)?;
        }
        char::from_u32(code)
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.chars.peek()?.0;
        let mut end = start;
        let mut prev = '\0';
        while let Some(&(i, c)) = self.chars.peek() {
            let sign_after_exponent = (c == '+' || c == '-') && matches!(prev, 'e' | 'E');
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || sign_after_exponent {
                end = i + c.len_utf8();
                prev = c;
                self.bump();
            } else {
                break;
            }
        }
        parse_number(&self.src[start..end])
    }
}

fn parse_number(text: &str) -> Option<Value> {
    if text.ends_with('_') || text.contains("__") {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let radix = match lower.get(..2) {
        Some("0x") => Some(16),
        Some("0o") => Some(8),
        Some("0b") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let digits = lower[2..].trim_start_matches('_').replace('_', "");
        return i128::from_str_radix(&digits, radix).ok().map(Value::from);
    }
    if lower.ends_with('j') {
        return None;
    }
    let cleaned = text.replace('_', "");
    let is_float = cleaned.contains(['.', 'e', 'E']);
    if is_float {
        if !cleaned.chars().any(|c| c.is_ascii_digit()) {
            return None;
        }
        return cleaned.parse::<f64>().ok().map(Value::from);
    }
    if cleaned.len() > 1 && cleaned.starts_with('0') && cleaned.chars().any(|c| c != '0') {
        // Python 3 rejects `010`.
        return None;
    }
    cleaned.parse::<i128>().ok().map(|i| {
        i64::try_from(i)
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(i))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyrepr::to_text;

    fn eval(text: &str) -> Option<String> {
        literal_eval(text).map(|v| to_text(&v))
    }

    #[test]
    fn lists_dicts_and_scalars() {
        assert_eq!(
            eval("[1, 'a', 2.5, None, True]").as_deref(),
            Some("[1, 'a', 2.5, None, True]")
        );
        assert_eq!(
            eval("{'a': [1, {'b': \"x\"}]}").as_deref(),
            Some("{'a': [1, {'b': 'x'}]}")
        );
        assert_eq!(
            eval("[true, false, null]").as_deref(),
            Some("[True, False, None]")
        );
        assert_eq!(eval("(1, 2)").as_deref(), Some("[1, 2]"));
        assert_eq!(eval("[1,]").as_deref(), Some("[1]"));
        assert_eq!(eval("{}").as_deref(), Some("{}"));
        assert_eq!(
            eval("[-1, +2, -1.5e3]").as_deref(),
            Some("[-1, 2, -1500.0]")
        );
        assert_eq!(
            eval("[0x1f, 0o17, 0b11, 1_000]").as_deref(),
            Some("[31, 15, 3, 1000]")
        );
        assert_eq!(eval("{'a': 1, 'a': 2}").as_deref(), Some("{'a': 2}"));
        assert_eq!(
            eval("{'a': 1, 'b': 2, 'a': 3}").as_deref(),
            Some("{'a': 3, 'b': 2}")
        );
        assert_eq!(eval("['a' 'b']").as_deref(), Some("['ab']"));
        assert_eq!(eval("[\n 1,  # one\n 2\n]\n").as_deref(), Some("[1, 2]"));
        assert_eq!(eval("['\\n\\x41\\u00e9']").as_deref(), Some("['\\nAé']"));
        assert_eq!(eval("[r'\\n']").as_deref(), Some("['\\\\n']"));
        assert_eq!(eval("['''tri'ple''']").as_deref(), Some("[\"tri'ple\"]"));
    }

    #[test]
    fn non_literals_are_rejected() {
        for text in [
            "[a]", "[1, 2", "{'a'}x", "[1 2]", "[010]", "[1j]", "{1: }", "[x.y]", "[1] [2]", "[[[",
            "['a\nb']",
        ] {
            assert_eq!(eval(text), None, "{text:?}");
        }
    }

    #[test]
    fn conversion_rule() {
        assert_eq!(convert_rendered("True".into()), Value::from(true));
        assert_eq!(convert_rendered("3".into()), Value::from("3"));
        assert_eq!(convert_rendered("[1, 2]".into()).len(), Some(2));
        assert_eq!(convert_rendered("[oops".into()), Value::from("[oops"));
        assert_eq!(convert_rendered(" [1]".into()), Value::from(" [1]"));
        assert_eq!(convert_rendered("None".into()), Value::from("None"));
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let text = "[".repeat(10_000) + &"]".repeat(10_000);
        assert_eq!(literal_eval(&text), None);
    }

    /// A rendered dict of many keys (a custom resource's spec copied with
    /// `set_fact`) parses back in linear time: each key was compared with
    /// every earlier one (6 s for 20 000 keys in a debug build). Not a speed
    /// target; a bound on what one object can cost.
    #[test]
    fn a_dict_of_many_keys_parses_in_linear_time() {
        let text = format!(
            "{{{}}}",
            (0..100_000)
                .map(|i| format!("'key{i}': {i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let started = std::time::Instant::now();
        let value = literal_eval(&text).expect("a dict");
        assert_eq!(value.len(), Some(100_000));
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }
}
