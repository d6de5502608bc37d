//! Python's `json.loads`, which Ansible's `from_json` is: integers past 64
//! bits stay integers (up to 128 bits, minijinja's widest), `NaN` and
//! `Infinity` are read, a repeated key keeps its first place and its last
//! value, and a document that is no JSON fails with `JSONDecodeError`'s
//! words and place (`Expecting value: line 1 column 1 (char 0)`), which a
//! Failure condition quotes. Python 3.13 words a trailing comma its own way.

use minijinja::Value;

/// Why a text is no JSON Python reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// `json.decoder.JSONDecodeError`: its message, with the place.
    #[error("{message}: line {line} column {column} (char {index})")]
    Invalid {
        message: &'static str,
        line: usize,
        column: usize,
        index: usize,
    },
    /// Python's RecursionError, past its recursion limit; here past
    /// [`MAX_DEPTH`], so a hostile document cannot exhaust the stack.
    #[error("maximum recursion depth exceeded while decoding a JSON {0} from a unicode string")]
    TooDeep(&'static str),
}

/// How deep arrays and objects may nest: below Python's default recursion
/// limit (1000 frames), which real documents never approach.
const MAX_DEPTH: usize = 500;

impl DecodeError {
    /// The Python class of the error.
    pub(crate) fn class(&self) -> &'static str {
        match self {
            DecodeError::Invalid { .. } => "json.decoder.JSONDecodeError",
            DecodeError::TooDeep(_) => "RecursionError",
        }
    }
}

/// `json.loads(text)`; `python_313` words trailing commas as 3.13 does.
pub(crate) fn loads(text: &str, python_313: bool) -> Result<Value, DecodeError> {
    let chars: Vec<char> = text.chars().collect();
    let parser = Parser {
        chars: &chars,
        python_313,
        depth: std::cell::Cell::new(0),
    };
    let start = parser.skip_space(0);
    let (value, end) = parser.value(start)?;
    let end = parser.skip_space(end);
    if end != chars.len() {
        return Err(parser.error("Extra data", end));
    }
    Ok(value)
}

/// Where an array or object goes on after an item.
enum Next {
    /// Past its closing bracket.
    End(usize),
    /// At its next item.
    Item(usize),
}

struct Parser<'a> {
    chars: &'a [char],
    python_313: bool,
    /// How many arrays and objects enclose the value being read.
    depth: std::cell::Cell<usize>,
}

impl Parser<'_> {
    fn error(&self, message: &'static str, index: usize) -> DecodeError {
        let before = &self.chars[..index.min(self.chars.len())];
        let line = before.iter().filter(|&&c| c == '\n').count() + 1;
        let column = match before.iter().rposition(|&c| c == '\n') {
            Some(newline) => index - newline,
            None => index + 1,
        };
        DecodeError::Invalid {
            message,
            line,
            column,
            index,
        }
    }

    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).copied()
    }

    fn skip_space(&self, mut i: usize) -> usize {
        while matches!(self.at(i), Some(' ' | '\t' | '\n' | '\r')) {
            i += 1;
        }
        i
    }

    fn starts_with(&self, i: usize, word: &str) -> bool {
        word.chars()
            .enumerate()
            .all(|(n, c)| self.at(i + n) == Some(c))
    }

    /// The value starting at `i` and where it ends.
    fn value(&self, i: usize) -> Result<(Value, usize), DecodeError> {
        let literal = |word: &str, value: Value| {
            self.starts_with(i, word)
                .then(|| (value, i + word.chars().count()))
        };
        let found = match self.at(i) {
            Some('"') => return self.string(i + 1).map(|(s, end)| (Value::from(s), end)),
            Some('{') => return self.nested("object", || self.object(i + 1)),
            Some('[') => return self.nested("array", || self.array(i + 1)),
            Some('n') => literal("null", Value::from(())),
            Some('t') => literal("true", Value::from(true)),
            Some('f') => literal("false", Value::from(false)),
            Some('N') => literal("NaN", Value::from(f64::NAN)),
            Some('I') => literal("Infinity", Value::from(f64::INFINITY)),
            Some('-') if self.starts_with(i, "-Infinity") => {
                literal("-Infinity", Value::from(f64::NEG_INFINITY))
            }
            _ => self.number(i),
        };
        found.ok_or_else(|| self.error("Expecting value", i))
    }

    /// An array or object read one level deeper, refused past [`MAX_DEPTH`].
    fn nested(
        &self,
        what: &'static str,
        read: impl FnOnce() -> Result<(Value, usize), DecodeError>,
    ) -> Result<(Value, usize), DecodeError> {
        if self.depth.get() >= MAX_DEPTH {
            return Err(DecodeError::TooDeep(what));
        }
        self.depth.set(self.depth.get() + 1);
        let read = read();
        self.depth.set(self.depth.get() - 1);
        read
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`: an int without a
    /// fraction or exponent, else a float.
    fn number(&self, start: usize) -> Option<(Value, usize)> {
        let digits = |mut i: usize| {
            let from = i;
            while self.at(i).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
            }
            (i > from).then_some(i)
        };
        let mut i = start + usize::from(self.at(start) == Some('-'));
        i = match self.at(i) {
            Some('0') => i + 1,
            Some('1'..='9') => digits(i)?,
            _ => return None,
        };
        let integer_end = i;
        if self.at(i) == Some('.')
            && let Some(end) = digits(i + 1)
        {
            i = end;
        }
        if matches!(self.at(i), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.at(i + 1), Some('+' | '-')));
            if let Some(end) = digits(i + 1 + sign) {
                i = end;
            }
        }
        let text: String = self.chars[start..i].iter().collect();
        let value = if i == integer_end {
            match text.parse::<i128>() {
                Ok(n) => i64::try_from(n).map_or_else(|_| Value::from(n), Value::from),
                // Past 128 bits minijinja holds no integer: the nearest float.
                Err(_) => Value::from(text.parse::<f64>().ok()?),
            }
        } else {
            Value::from(text.parse::<f64>().ok()?)
        };
        Some((value, i))
    }

    /// The string whose first character after the quote is at `start`.
    fn string(&self, start: usize) -> Result<(String, usize), DecodeError> {
        let mut out = String::new();
        let mut i = start;
        loop {
            let Some(c) = self.at(i) else {
                return Err(self.error("Unterminated string starting at", start - 1));
            };
            match c {
                '"' => return Ok((out, i + 1)),
                '\\' => {
                    let (decoded, end) = self.escape(i)?;
                    out.push_str(&decoded);
                    i = end;
                }
                c if (c as u32) < 0x20 => {
                    return Err(self.error("Invalid control character at", i));
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
    }

    /// The escape whose backslash is at `i`, and where it ends.
    fn escape(&self, i: usize) -> Result<(String, usize), DecodeError> {
        let simple = match self.at(i + 1) {
            Some('"') => '"',
            Some('\\') => '\\',
            Some('/') => '/',
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('u') => return self.unicode_escape(i + 1),
            None => return Err(self.error("Unterminated string starting at", i)),
            Some(_) => return Err(self.error("Invalid \\escape", i)),
        };
        Ok((simple.to_string(), i + 2))
    }

    /// `\uXXXX` (the `u` at `u`), a surrogate pair read as one character; a
    /// lone surrogate, which Rust's strings cannot hold, is U+FFFD.
    fn unicode_escape(&self, u: usize) -> Result<(String, usize), DecodeError> {
        let hex = |at: usize| -> Option<u32> {
            let digits: String = self.chars.get(at..at + 4)?.iter().collect();
            u32::from_str_radix(&digits, 16)
                .ok()
                .filter(|_| digits.chars().all(|c| c.is_ascii_hexdigit()))
        };
        let first = hex(u + 1).ok_or_else(|| self.error("Invalid \\uXXXX escape", u))?;
        let end = u + 5;
        if (0xd800..0xdc00).contains(&first)
            && self.at(end) == Some('\\')
            && self.at(end + 1) == Some('u')
            && let Some(second) = hex(end + 2).filter(|s| (0xdc00..0xe000).contains(s))
        {
            let joined = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
            let c = char::from_u32(joined).unwrap_or('\u{fffd}');
            return Ok((c.to_string(), end + 6));
        }
        Ok((char::from_u32(first).unwrap_or('\u{fffd}').to_string(), end))
    }

    fn object(&self, start: usize) -> Result<(Value, usize), DecodeError> {
        let mut entries: indexmap::IndexMap<Value, Value> = indexmap::IndexMap::new();
        let mut i = self.skip_space(start);
        if self.at(i) == Some('}') {
            return Ok((Value::from_pairs(entries), i + 1));
        }
        loop {
            if self.at(i) != Some('"') {
                return Err(self.error("Expecting property name enclosed in double quotes", i));
            }
            let (key, end) = self.string(i + 1)?;
            i = self.skip_space(end);
            if self.at(i) != Some(':') {
                return Err(self.error("Expecting ':' delimiter", i));
            }
            i = self.skip_space(i + 1);
            let (value, end) = self.value(i)?;
            // A repeated key keeps its first place and takes the last value.
            entries.insert(Value::from(key), value);
            match self.after_item(end, '}', "object")? {
                Next::End(after) => return Ok((Value::from_pairs(entries), after)),
                Next::Item(at) => i = at,
            }
        }
    }

    fn array(&self, start: usize) -> Result<(Value, usize), DecodeError> {
        let mut items = Vec::new();
        let mut i = self.skip_space(start);
        if self.at(i) == Some(']') {
            return Ok((Value::from(items), i + 1));
        }
        loop {
            let (value, end) = self.value(i)?;
            items.push(value);
            match self.after_item(end, ']', "array")? {
                Next::End(after) => return Ok((Value::from(items), after)),
                Next::Item(at) => i = at,
            }
        }
    }

    /// What follows an item of an array or object ending at `end`: its
    /// `close`, or a comma and the next item (3.13 refuses a trailing one).
    fn after_item(&self, end: usize, close: char, what: &str) -> Result<Next, DecodeError> {
        let i = self.skip_space(end);
        match self.at(i) {
            Some(c) if c == close => Ok(Next::End(i + 1)),
            Some(',') => {
                let next = self.skip_space(i + 1);
                if self.python_313 && self.at(next) == Some(close) {
                    return Err(self.error(
                        match what {
                            "object" => "Illegal trailing comma before end of object",
                            _ => "Illegal trailing comma before end of array",
                        },
                        i,
                    ));
                }
                Ok(Next::Item(next))
            }
            _ => Err(self.error("Expecting ',' delimiter", i)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What CPython 3.11's `json.loads` says of each (and 3.13's where it
    /// differs), recorded by running it.
    #[test]
    fn errors_are_pythons() {
        for (text, want) in [
            ("", "Expecting value: line 1 column 1 (char 0)"),
            (
                "{",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            (
                "{\"a\"",
                "Expecting ':' delimiter: line 1 column 5 (char 4)",
            ),
            ("{\"a\": }", "Expecting value: line 1 column 7 (char 6)"),
            (
                "{\"a\": 1,}",
                "Expecting property name enclosed in double quotes: line 1 column 9 (char 8)",
            ),
            (
                "{\"a\": 1 \"b\"}",
                "Expecting ',' delimiter: line 1 column 9 (char 8)",
            ),
            ("[1,]", "Expecting value: line 1 column 4 (char 3)"),
            ("[1 2]", "Expecting ',' delimiter: line 1 column 4 (char 3)"),
            (
                "\"abc",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            (
                "\"a\u{1}\"",
                "Invalid control character at: line 1 column 3 (char 2)",
            ),
            ("\"\\x\"", "Invalid \\escape: line 1 column 2 (char 1)"),
            (
                "\"\\u12zz\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            ("01", "Extra data: line 1 column 2 (char 1)"),
            ("[-]", "Expecting value: line 1 column 2 (char 1)"),
            (
                "  \n  [\n1,\n]",
                "Expecting value: line 4 column 1 (char 10)",
            ),
        ] {
            assert_eq!(
                loads(text, false).unwrap_err().to_string(),
                want,
                "{text:?}"
            );
        }
        assert_eq!(
            loads("{\"a\":1 , }", true).unwrap_err().to_string(),
            "Illegal trailing comma before end of object: line 1 column 8 (char 7)"
        );
        assert_eq!(
            loads("[1,  ]", true).unwrap_err().to_string(),
            "Illegal trailing comma before end of array: line 1 column 3 (char 2)"
        );
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            loads(&deep, false).unwrap_err().class(),
            "RecursionError",
            "a hostile depth is refused, not overflowing the stack"
        );
        assert!(loads(&format!("{}1{}", "[".repeat(400), "]".repeat(400)), false).is_ok());
    }

    #[test]
    fn values_are_pythons() {
        let v = loads(
            "[1e400, -0, -0.0, 123456789012345678901, \"\\ud83d\\ude00\", NaN]",
            false,
        )
        .unwrap();
        assert_eq!(
            v.get_item(&Value::from(0)).unwrap(),
            Value::from(f64::INFINITY)
        );
        assert_eq!(v.get_item(&Value::from(1)).unwrap(), Value::from(0));
        assert_eq!(
            v.get_item(&Value::from(3)).unwrap(),
            Value::from(123_456_789_012_345_678_901_i128)
        );
        assert_eq!(v.get_item(&Value::from(4)).unwrap(), Value::from("😀"));
        let d = loads("{\"a\":1,\"a\":2,\"b\":3}", false).unwrap();
        let keys: Vec<Value> = d.try_iter().unwrap().collect();
        assert_eq!(keys, [Value::from("a"), Value::from("b")]);
        assert_eq!(d.get_attr("a").unwrap(), Value::from(2));
    }
}
