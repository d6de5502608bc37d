//! Python's `%` operator: `'%s-%s' % (a, b)` and `'%05d' % n` format a
//! string; between numbers it is the remainder, floored as Python floors it.
//!
//! minijinja's `%` is only the numeric remainder and has no hook for other
//! types, so a template whose expressions use `%` is rewritten once, when
//! it is compiled: `L % R` becomes `(L) | __enka_percent(R)`. Operands are
//! found on minijinja's own tokens with Jinja's precedence: the left one
//! reaches back over `*`, `/`, `//`, `%`, `**`, filters and postfix
//! accesses, the right one is a unary operand with its postfixes, filters
//! and `**`.

use std::borrow::Cow;

use minijinja::machinery::{Span, Token, tokenize};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::filters::{invalid, python_format};
use super::pyrepr;

const FILTER: &str = "__enka_percent";
/// For a right operand written as a tuple, `(a, b)`: its items are the
/// arguments. Any other value, a list included, is one argument, as in
/// Python; minijinja has no tuples to tell them apart at run time.
const TUPLE_FILTER: &str = "__enka_percent_tuple";

pub fn register(env: &mut Environment<'static>) {
    env.add_filter(FILTER, |state: &mut State, lhs: &Value, rhs: &Value| {
        percent(state, lhs, rhs, false)
    });
    env.add_filter(
        TUPLE_FILTER,
        |state: &mut State, lhs: &Value, rhs: &Value| percent(state, lhs, rhs, true),
    );
}

/// `source` with every `%` operator turned into the filter; borrowed when
/// there is none (or when the source does not tokenize: minijinja then
/// reports the error on what the author wrote).
pub fn rewrite(source: &str) -> Cow<'_, str> {
    if !source.contains('%') {
        return Cow::Borrowed(source);
    }
    let mut text = Cow::Borrowed(source);
    // Each pass rewrites the first `%` left; a template has only so many.
    for _ in 0..source.matches('%').count() {
        let Some(tokens) = tokens(&text) else {
            return text;
        };
        let Some(at) = tokens.iter().position(|(t, _)| matches!(t, Token::Mod)) else {
            return text;
        };
        let (Some(first), Some(last)) = (left_operand(&tokens, at), right_operand(&tokens, at))
        else {
            return text;
        };
        let start = tokens[first].1.start_offset as usize;
        let op = tokens[at].1;
        let end = tokens[last].1.end_offset as usize;
        let filter = if is_tuple(&tokens, at + 1, last) {
            TUPLE_FILTER
        } else {
            FILTER
        };
        let rewritten = format!(
            "{}({}) | {filter}({}){}",
            &text[..start],
            text[start..op.start_offset as usize].trim_end(),
            text[op.end_offset as usize..end].trim_start(),
            &text[end..]
        );
        text = Cow::Owned(rewritten);
    }
    text
}

fn tokens(source: &str) -> Option<Vec<(Token<'_>, Span)>> {
    tokenize(source, false, SyntaxConfig::default())
        .collect::<Result<Vec<_>, _>>()
        .ok()
}

const KEYWORDS: &[&str] = &["and", "or", "not", "if", "else", "in", "is"];

fn is_keyword(token: &Token<'_>) -> bool {
    matches!(token, Token::Ident(name) if KEYWORDS.contains(name))
}

/// A token that can end an operand: a name, a literal or a closing bracket.
fn ends_operand(token: &Token<'_>) -> bool {
    match token {
        Token::Ident(_) => !is_keyword(token),
        Token::Str(_)
        | Token::String(_)
        | Token::Int(_)
        | Token::Int128(_)
        | Token::Float(_)
        | Token::ParenClose
        | Token::BracketClose
        | Token::BraceClose => true,
        _ => false,
    }
}

/// The index of the first token of the left operand of the `%` at `at`.
fn left_operand(tokens: &[(Token<'_>, Span)], at: usize) -> Option<usize> {
    let mut first = None;
    let mut i = at;
    while i > 0 {
        i -= 1;
        match &tokens[i].0 {
            Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                i = matching_open(tokens, i)?;
                first = Some(i);
            }
            token @ Token::Ident(_) if is_keyword(token) => break,
            token if ends_operand(token) => first = Some(i),
            Token::Dot
            | Token::Pipe
            | Token::Mul
            | Token::Div
            | Token::FloorDiv
            | Token::Mod
            | Token::Pow => {}
            // A sign after an operator is unary and binds tighter; after an
            // operand it is binary `+`/`-`, which binds looser.
            Token::Plus | Token::Minus => {
                if i > 0 && ends_operand(&tokens[i - 1].0) {
                    break;
                }
                first = Some(i);
            }
            _ => break,
        }
    }
    first
}

/// The index of the last token of the right operand of the `%` at `at`.
fn right_operand(tokens: &[(Token<'_>, Span)], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        while matches!(tokens.get(i)?.0, Token::Plus | Token::Minus) {
            i += 1;
        }
        let mut last = match &tokens.get(i)?.0 {
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => matching_close(tokens, i)?,
            token if ends_operand(token) => i,
            _ => return None,
        };
        // Postfixes and filters.
        loop {
            match tokens.get(last + 1).map(|(t, _)| t) {
                Some(Token::Dot) => last += 2,
                Some(Token::BracketOpen | Token::ParenOpen) => {
                    last = matching_close(tokens, last + 1)?;
                }
                Some(Token::Pipe) => {
                    last += 2;
                    if matches!(tokens.get(last + 1).map(|(t, _)| t), Some(Token::Dot)) {
                        // A dotted filter name.
                        continue;
                    }
                }
                _ => break,
            }
            tokens.get(last)?;
        }
        // `**` binds tighter than `%`: its right side belongs here too.
        if matches!(tokens.get(last + 1).map(|(t, _)| t), Some(Token::Pow)) {
            i = last + 2;
            continue;
        }
        return Some(last);
    }
}

/// Whether tokens `first..=last` are one parenthesised tuple: `()`, or a
/// comma at the top level inside the parentheses.
fn is_tuple(tokens: &[(Token<'_>, Span)], first: usize, last: usize) -> bool {
    if !matches!(tokens[first].0, Token::ParenOpen) || matching_close(tokens, first) != Some(last) {
        return false;
    }
    if last == first + 1 {
        return true;
    }
    let mut depth = 0usize;
    for (token, _) in &tokens[first + 1..last] {
        match token {
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => depth += 1,
            Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                depth = depth.saturating_sub(1);
            }
            Token::Comma if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

fn matching_open(tokens: &[(Token<'_>, Span)], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    for i in (0..=close).rev() {
        match tokens[i].0 {
            Token::ParenClose | Token::BracketClose | Token::BraceClose => depth += 1,
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn matching_close(tokens: &[(Token<'_>, Span)], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, (token, _)) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => depth += 1,
            Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `lhs % rhs` as Python computes it.
fn percent(state: &mut State, lhs: &Value, rhs: &Value, tuple: bool) -> Result<Value, Error> {
    if let Some(format) = lhs.as_str() {
        let args: Vec<Value> = if tuple {
            rhs.try_iter()?.collect()
        } else {
            vec![rhs.clone()]
        };
        // A mapping may hold more than the format names; any other values
        // must all be used.
        if (tuple || rhs.kind() != ValueKind::Map) && conversions(format) < args.len() {
            return Err(invalid(
                "not all arguments converted during string formatting",
            ));
        }
        return python_format(state, lhs, Rest(args));
    }
    remainder(lhs, rhs)
}

/// How many values a printf-style format takes (`%%` none, each `*` one
/// more).
fn conversions(format: &str) -> usize {
    let mut count = 0;
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        for c in chars.by_ref() {
            match c {
                '%' => break,
                '*' => count += 1,
                c if c.is_ascii_alphabetic() && !matches!(c, 'h' | 'l' | 'L') => {
                    count += 1;
                    break;
                }
                _ => {}
            }
        }
    }
    count
}

/// Python's remainder: the sign of the divisor, ints kept ints.
fn remainder(lhs: &Value, rhs: &Value) -> Result<Value, Error> {
    let unsupported = || {
        Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "unsupported operand type(s) for %: '{}' and '{}'",
                pyrepr::type_name(lhs),
                pyrepr::type_name(rhs)
            ),
        )
    };
    if lhs.kind() != ValueKind::Number || rhs.kind() != ValueKind::Number {
        return Err(unsupported());
    }
    let integer = |v: &Value| {
        v.is_integer()
            .then(|| i128::try_from(v.clone()).ok())
            .flatten()
    };
    if let (Some(a), Some(b)) = (integer(lhs), integer(rhs)) {
        if b == 0 {
            return Err(invalid("integer modulo by zero"));
        }
        let r = a.rem_euclid(b);
        let r = if b < 0 && r != 0 { r + b } else { r };
        return Ok(Value::from(r));
    }
    let a = f64::try_from(lhs.clone()).map_err(|_| unsupported())?;
    let b = f64::try_from(rhs.clone()).map_err(|_| unsupported())?;
    if b == 0.0 {
        return Err(invalid("float modulo"));
    }
    let r = a % b;
    Ok(Value::from(if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_with_jinja_precedence() {
        for (source, want) in [
            (
                "{{ '%s-%s' % (a, b) }}",
                "{{ ('%s-%s') | __enka_percent_tuple((a, b)) }}",
            ),
            ("{{ '%s' % (a) }}", "{{ ('%s') | __enka_percent((a)) }}"),
            (
                "{{ '%s' % [a, b] }}",
                "{{ ('%s') | __enka_percent([a, b]) }}",
            ),
            ("{{ x + y % 2 }}", "{{ x + (y) | __enka_percent(2) }}"),
            (
                "{{ a * b % c.d[0] | int }}",
                "{{ (a * b) | __enka_percent(c.d[0] | int) }}",
            ),
            (
                "{{ loop.index % 2 == 0 }}",
                "{{ (loop.index) | __enka_percent(2) == 0 }}",
            ),
            (
                "{{ not n % -2 ** 3 }}",
                "{{ not (n) | __enka_percent(-2 ** 3) }}",
            ),
            (
                "{% if n % 2 %}odd{% endif %}",
                "{% if (n) | __enka_percent(2) %}odd{% endif %}",
            ),
            (
                "{{ '%d' % n % 7 }}",
                "{{ (('%d') | __enka_percent(n)) | __enka_percent(7) }}",
            ),
            ("{{ '%' }} 100%", "{{ '%' }} 100%"),
            ("{% set x = 1 %}", "{% set x = 1 %}"),
        ] {
            assert_eq!(rewrite(source), want, "{source}");
        }
    }

    #[test]
    fn counts_conversions() {
        assert_eq!(conversions("%s-%s"), 2);
        assert_eq!(conversions("100%% %05.2f"), 1);
        assert_eq!(conversions("%(a)s %*d"), 3);
    }

    #[test]
    fn remainder_is_floored_like_python() {
        assert_eq!(
            remainder(&Value::from(-7), &Value::from(3)).unwrap(),
            Value::from(2)
        );
        assert_eq!(
            remainder(&Value::from(7), &Value::from(-3)).unwrap(),
            Value::from(-2)
        );
        assert_eq!(
            remainder(&Value::from(-7.5), &Value::from(2)).unwrap(),
            Value::from(0.5)
        );
        assert!(remainder(&Value::from(1), &Value::from(0)).is_err());
    }
}
