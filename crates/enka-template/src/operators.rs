//! Python's operators where minijinja's differ: `%` formats a string
//! (`'%s-%s' % (a, b)`, `'%05d' % n`) and is Python's floored remainder
//! between numbers; `-` between datetimes makes a timedelta. And the
//! operators that build values (`*`, `~`, `+`), which must ask the render's
//! memory budget before they build ([`crate::budget`], [`crate::growing`]).
//!
//! minijinja's operators have no hook for other types, so a template using
//! them is rewritten once, when it is compiled: `L % R` becomes
//! `(L) | __enka_percent(R)`, `L * R` `(L) | __enka_times(R)` and so on,
//! and, in a template that can make a datetime (`to_datetime`, `now(`),
//! `L - R` becomes `(L) | __enka_minus(R)`.
//! Operands are found on minijinja's own tokens with its precedence: the
//! left one reaches back over operators that bind as tightly or more
//! (same-level ones too, being left-associative), the right one over those
//! that bind more tightly. Line breaks between an operand and its operator
//! are kept, so lines keep their numbers.

use std::borrow::Cow;

use minijinja::machinery::{Span, Token, tokenize};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::context::keep_unsafe;
use super::filters::{invalid, python_format};
use super::{pyrepr, pytime};

const PERCENT: &str = "__enka_percent";
/// For a right operand written as a tuple, `(a, b)`: its items are the
/// arguments. Any other value, a list included, is one argument, as in
/// Python; minijinja has no tuples to tell them apart at run time.
const PERCENT_TUPLE: &str = "__enka_percent_tuple";
const MINUS: &str = "__enka_minus";

pub fn register(env: &mut Environment<'static>) {
    env.add_filter(PERCENT, |state: &mut State, lhs: &Value, rhs: &Value| {
        percent(state, lhs, rhs, false)
    });
    env.add_filter(
        PERCENT_TUPLE,
        |state: &mut State, lhs: &Value, rhs: &Value| percent(state, lhs, rhs, true),
    );
    env.add_filter(MINUS, minus);
}

/// The operators rewritten, and how tightly each binds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Operator {
    /// `%`, with `*`, `/` and `//`.
    Percent,
    /// `*`, with `%`.
    Times,
    /// `~`: more tightly than `+` and `-`, less than `*`.
    Concat,
    /// Binary `+`, with `-`.
    Plus,
    /// Binary `-`, with `+`.
    Minus,
}

impl Operator {
    /// How tightly it binds: higher binds more tightly.
    fn level(self) -> u8 {
        match self {
            Operator::Percent | Operator::Times => 3,
            Operator::Concat => 2,
            Operator::Plus | Operator::Minus => 1,
        }
    }

    fn symbol(self) -> char {
        match self {
            Operator::Percent => '%',
            Operator::Times => '*',
            Operator::Concat => '~',
            Operator::Plus => '+',
            Operator::Minus => '-',
        }
    }

    /// Whether the token at `i` is this operator (`+` and `-` binary only).
    fn is_at(self, tokens: &[(Token<'_>, Span)], i: usize) -> bool {
        let binary = || i > 0 && ends_operand(&tokens[i - 1].0);
        match (self, &tokens[i].0) {
            (Operator::Percent, Token::Mod)
            | (Operator::Times, Token::Mul)
            | (Operator::Concat, Token::Tilde) => true,
            (Operator::Plus, Token::Plus) | (Operator::Minus, Token::Minus) => binary(),
            _ => false,
        }
    }

    fn filter(self) -> &'static str {
        match self {
            Operator::Percent => PERCENT,
            Operator::Times => crate::growing::TIMES,
            Operator::Concat => crate::growing::CONCAT,
            Operator::Plus => crate::growing::PLUS,
            Operator::Minus => MINUS,
        }
    }
}

/// `source` with its `%` (and, where datetimes can appear, binary `-`)
/// operators turned into filters; borrowed when there is nothing to
/// rewrite (or when the source does not tokenize: minijinja then reports
/// the error on what the author wrote).
pub fn rewrite(source: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(source);
    for op in [
        Operator::Percent,
        Operator::Times,
        Operator::Concat,
        Operator::Plus,
    ] {
        if source.contains(op.symbol()) {
            text = rewrite_each(text, op);
        }
    }
    if source.contains('-') && (source.contains("to_datetime") || source.contains("now(")) {
        text = rewrite_each(text, Operator::Minus);
    }
    text
}

/// Rewrites the first `op` left, until none is.
fn rewrite_each(mut text: Cow<'_, str>, op: Operator) -> Cow<'_, str> {
    // A template has only so many of them; each pass removes one.
    for _ in 0..text.matches(op.symbol()).count() {
        let Some(tokens) = tokens(&text) else {
            return text;
        };
        let found = (0..tokens.len()).position(|i| op.is_at(&tokens, i));
        let Some(at) = found else {
            return text;
        };
        let (Some(first), Some(last)) = (
            left_operand(&tokens, at, op),
            right_operand(&tokens, at, op),
        ) else {
            return text;
        };
        let start = tokens[first].1.start_offset as usize;
        let operator = tokens[at].1;
        let end = tokens[last].1.end_offset as usize;
        let filter = match op {
            Operator::Percent if is_tuple(&tokens, at + 1, last) => PERCENT_TUPLE,
            op => op.filter(),
        };
        let left = &text[start..operator.start_offset as usize];
        let right = &text[operator.end_offset as usize..end];
        let left_text = left.trim_end();
        let right_text = right.trim_start();
        let newlines = |space: &str| "\n".repeat(space.matches('\n').count());
        let rewritten = format!(
            "{}({left_text}){} | {filter}({}{right_text}){}",
            &text[..start],
            newlines(&left[left_text.len()..]),
            newlines(&right[..right.len() - right_text.len()]),
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

/// Operators that bind more tightly than `op` (or, for `same_level`, as
/// tightly), which an operand of `op` may contain.
fn binds_within(token: &Token<'_>, op: Operator, same_level: bool) -> bool {
    let level = match token {
        Token::Pow | Token::Dot | Token::Pipe => return true,
        Token::Mul | Token::Div | Token::FloorDiv | Token::Mod => 3,
        Token::Tilde => 2,
        _ => return false,
    };
    level > op.level() || (same_level && level == op.level())
}

/// The index of the first token of the left operand of the operator at
/// `at`.
fn left_operand(tokens: &[(Token<'_>, Span)], at: usize, op: Operator) -> Option<usize> {
    let mut first = None;
    // What the token after `i` was: a name or literal is never directly
    // preceded by another (`include 'a' + b`: `include` is the
    // statement's), a bracket group may be (a call or a subscript).
    let mut after = After::Operator;
    let mut i = at;
    while i > 0 {
        i -= 1;
        let token = &tokens[i].0;
        match token {
            Token::ParenClose | Token::BracketClose | Token::BraceClose
                if after != After::Operand =>
            {
                i = matching_open(tokens, i)?;
                first = Some(i);
                after = After::Group;
                continue;
            }
            // A test is part of its operand: `x is defined`, `x is not none`.
            Token::Ident("is") => {}
            Token::Ident("not") if i > 0 && matches!(tokens[i - 1].0, Token::Ident("is")) => {}
            token if is_keyword(token) => break,
            token if ends_operand(token) => {
                let statement = i > 0 && matches!(tokens[i - 1].0, Token::BlockStart);
                if statement || (after == After::Operand && !is_test_name(tokens, i)) {
                    break;
                }
                first = Some(i);
                after = After::Operand;
                continue;
            }
            token if binds_within(token, op, true) => {}
            // A sign after an operator is unary and binds tighter; after an
            // operand it is binary `+`/`-`: the same level as `-` (left
            // associative, so part of its left operand), looser than `%`.
            Token::Plus | Token::Minus => {
                let binary = i > 0 && ends_operand(&tokens[i - 1].0);
                if binary && op.level() > 1 {
                    break;
                }
                if !binary {
                    first = Some(i);
                }
            }
            _ => break,
        }
        after = After::Operator;
    }
    first
}

/// Whether the name at `i` is a test's (`is divisibleby 3`, `is not
/// sameas x`), which its argument may follow without parentheses.
fn is_test_name(tokens: &[(Token<'_>, Span)], i: usize) -> bool {
    let before = |n: usize| i.checked_sub(n).map(|j| &tokens[j].0);
    matches!(tokens[i].0, Token::Ident(_))
        && match before(1) {
            Some(Token::Ident("is")) => true,
            Some(Token::Ident("not")) => matches!(before(2), Some(Token::Ident("is"))),
            _ => false,
        }
}

/// What [`left_operand`] saw last, walking back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    Operator,
    Operand,
    Group,
}

/// The index of the last token of the right operand of the operator at
/// `at`.
fn right_operand(tokens: &[(Token<'_>, Span)], at: usize, op: Operator) -> Option<usize> {
    let mut i = at + 1;
    loop {
        let mut last = unary(tokens, i)?;
        match tokens.get(last + 1).map(|(t, _)| t) {
            Some(token) if binds_within(token, op, false) => {
                i = last + 2;
                continue;
            }
            _ => {}
        }
        last = filters_and_tests(tokens, last)?;
        match tokens.get(last + 1).map(|(t, _)| t) {
            Some(token) if binds_within(token, op, false) => i = last + 2,
            _ => return Some(last),
        }
    }
}

/// The last token of the unary operand (signs, a primary and its
/// postfixes) that starts at `i`.
fn unary(tokens: &[(Token<'_>, Span)], mut i: usize) -> Option<usize> {
    while matches!(tokens.get(i)?.0, Token::Plus | Token::Minus) {
        i += 1;
    }
    let mut last = match &tokens.get(i)?.0 {
        Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => matching_close(tokens, i)?,
        token if ends_operand(token) => i,
        _ => return None,
    };
    loop {
        match tokens.get(last + 1).map(|(t, _)| t) {
            Some(Token::Dot) => last += 2,
            Some(Token::BracketOpen | Token::ParenOpen) => {
                last = matching_close(tokens, last + 1)?;
            }
            _ => return tokens.get(last).map(|_| last),
        }
    }
}

/// The last token of the filters (`| name(args)`) and tests (`is [not]
/// name args`) that follow the operand ending at `last`.
fn filters_and_tests(tokens: &[(Token<'_>, Span)], mut last: usize) -> Option<usize> {
    loop {
        match tokens.get(last + 1).map(|(t, _)| t) {
            Some(Token::Pipe) => {
                last = dotted_name(tokens, last + 2)?;
                if matches!(tokens.get(last + 1).map(|(t, _)| t), Some(Token::ParenOpen)) {
                    last = matching_close(tokens, last + 1)?;
                }
            }
            Some(Token::Ident("is")) => {
                let mut name = last + 2;
                if matches!(tokens.get(name).map(|(t, _)| t), Some(Token::Ident("not"))) {
                    name += 1;
                }
                last = dotted_name(tokens, name)?;
                match tokens.get(last + 1).map(|(t, _)| t) {
                    Some(Token::ParenOpen) => last = matching_close(tokens, last + 1)?,
                    Some(Token::Ident("and" | "or" | "else" | "is")) => {}
                    Some(
                        Token::Ident(_)
                        | Token::Str(_)
                        | Token::String(_)
                        | Token::Int(_)
                        | Token::Int128(_)
                        | Token::Float(_)
                        | Token::Plus
                        | Token::Minus
                        | Token::BracketOpen
                        | Token::BraceOpen,
                    ) => last = unary(tokens, last + 1)?,
                    _ => {}
                }
            }
            _ => return Some(last),
        }
    }
}

/// The last token of the (possibly dotted) name starting at `i`.
fn dotted_name(tokens: &[(Token<'_>, Span)], mut i: usize) -> Option<usize> {
    if !matches!(tokens.get(i)?.0, Token::Ident(_)) {
        return None;
    }
    while matches!(tokens.get(i + 1).map(|(t, _)| t), Some(Token::Dot))
        && matches!(tokens.get(i + 2).map(|(t, _)| t), Some(Token::Ident(_)))
    {
        i += 2;
    }
    Some(i)
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

/// The opening bracket of the closing one at `close`.
pub(crate) fn matching_open(tokens: &[(Token<'_>, Span)], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    for i in (0..=close).rev() {
        match tokens[i].0 {
            Token::ParenClose | Token::BracketClose | Token::BraceClose => depth += 1,
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => {
                depth = depth.checked_sub(1)?;
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
/// Python's `lhs % rhs` with one right operand: Jinja's `odd`, `even` and
/// `divisibleby` tests are made of it.
pub(crate) fn python_remainder(
    state: &mut State,
    lhs: &Value,
    rhs: &Value,
) -> Result<Value, Error> {
    percent(state, lhs, rhs, false)
}

fn percent(state: &mut State, lhs: &Value, rhs: &Value, tuple: bool) -> Result<Value, Error> {
    if let Some(format) = lhs.as_str() {
        // Python takes a right operand that is no tuple but indexable (a
        // list) as a mapping: a format without conversions uses nothing.
        if !tuple && rhs.kind() == ValueKind::Seq && conversions(format) == 0 {
            return python_format(state, lhs, Rest(Vec::new())).map(|r| keep_unsafe(lhs, r));
        }
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
        return python_format(state, lhs, Rest(args)).map(|r| keep_unsafe(lhs, r));
    }
    remainder(lhs, rhs)
}

/// A number as Python's arithmetic sees it: a bool is the int 0 or 1.
fn numeric(value: &Value) -> Option<Value> {
    match value.kind() {
        ValueKind::Number => Some(value.clone()),
        ValueKind::Bool => Some(Value::from(i64::from(value.is_true()))),
        _ => None,
    }
}

/// `lhs - rhs` as Python computes it: datetimes and timedeltas, else
/// numbers.
fn minus(lhs: &Value, rhs: &Value) -> Result<Value, Error> {
    if let Some(result) = pytime::subtract(lhs, rhs) {
        return result;
    }
    let unsupported = || {
        invalid(format!(
            "unsupported operand type(s) for -: '{}' and '{}'",
            pyrepr::type_name(lhs),
            pyrepr::type_name(rhs)
        ))
    };
    let (Some(lhs), Some(rhs)) = (numeric(lhs), numeric(rhs)) else {
        return Err(unsupported());
    };
    if lhs.is_integer() && rhs.is_integer() {
        let a = i128::try_from(lhs.clone()).map_err(|_| unsupported())?;
        let b = i128::try_from(rhs.clone()).map_err(|_| unsupported())?;
        return a
            .checked_sub(b)
            .map(Value::from)
            .ok_or_else(|| invalid("integer overflow in subtraction"));
    }
    let a = f64::try_from(lhs).map_err(|_| unsupported())?;
    let b = f64::try_from(rhs).map_err(|_| unsupported())?;
    Ok(Value::from(a - b))
}

/// How many values a printf-style format takes (`%%` none, each `*` one
/// more).
pub(crate) fn conversions(format: &str) -> usize {
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
    let (Some(lhs), Some(rhs)) = (numeric(lhs), numeric(rhs)) else {
        return Err(unsupported());
    };
    let (lhs, rhs) = (&lhs, &rhs);
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
    Ok(Value::from(if r == 0.0 {
        // A zero takes the divisor's sign, as in Python.
        0.0_f64.copysign(b)
    } else if (r < 0.0) != (b < 0.0) {
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
            (
                "{{ x + y % 2 }}",
                "{{ (x) | __enka_plus((y) | __enka_percent(2)) }}",
            ),
            (
                "{{ a * b % c.d[0] | int }}",
                "{{ ((a) | __enka_times(b)) | __enka_percent(c.d[0] | int) }}",
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
                "{{ a ~ b % c ~ d }}",
                "{{ ((a) | __enka_concat((b) | __enka_percent(c))) | __enka_concat(d) }}",
            ),
            ("{{ x is odd % 2 }}", "{{ (x is odd) | __enka_percent(2) }}"),
            (
                "{{ 4 % x is divisibleby 2 and y }}",
                "{{ (4) | __enka_percent(x is divisibleby 2) and y }}",
            ),
            (
                "{% include 'parts/' + name + '.j2' %}",
                "{% include (('parts/') | __enka_plus(name)) | __enka_plus('.j2') %}",
            ),
            (
                "{% if a %}{% elif b ~ c %}{% endif %}",
                "{% if a %}{% elif (b) | __enka_concat(c) %}{% endif %}",
            ),
            ("{{ f(x)[0] * 2 }}", "{{ (f(x)[0]) | __enka_times(2) }}"),
            (
                "{% if n % 2 %}odd{% endif %}",
                "{% if (n) | __enka_percent(2) %}odd{% endif %}",
            ),
            (
                "{{ '%d' % n % 7 }}",
                "{{ (('%d') | __enka_percent(n)) | __enka_percent(7) }}",
            ),
            ("{{ '%' }} 100%", "{{ '%' }} 100%"),
            (
                "ünï {{ 'é%sü' % 'ö' }} ß",
                "ünï {{ ('é%sü') | __enka_percent('ö') }} ß",
            ),
            ("{% set x = 1 %}", "{% set x = 1 %}"),
            // Line breaks stay, so errors name the line the author sees.
            (
                "{{ 'a' ~\n  b }}\n{{ c }}",
                "{{ ('a') | __enka_concat(\nb) }}\n{{ c }}",
            ),
        ] {
            assert_eq!(rewrite(source), want, "{source}");
        }
    }

    #[test]
    fn rewrites_minus_only_where_datetimes_can_appear() {
        assert_eq!(rewrite("{{ a - b }}"), "{{ a - b }}");
        for (source, want) in [
            (
                "{{ (e | to_datetime) - (s | to_datetime) }}",
                "{{ ((e | to_datetime)) | __enka_minus((s | to_datetime)) }}",
            ),
            (
                "{{ (a|to_datetime - b|to_datetime).total_seconds() | int }}",
                "{{ ((a|to_datetime) | __enka_minus(b|to_datetime)).total_seconds() | int }}",
            ),
            (
                "{{ now() - x | to_datetime > y }}",
                "{{ (now()) | __enka_minus(x | to_datetime) > y }}",
            ),
            (
                "{{ a + b - c * d ~ e - -f }}",
                "{{ (((a) | __enka_plus(b)) | __enka_minus(((c) | __enka_times(d)) | __enka_concat(e))) | __enka_minus(-f) }} now()",
            ),
        ] {
            let source = if want.ends_with("now()") {
                format!("{source} now()")
            } else {
                source.to_owned()
            };
            assert_eq!(rewrite(&source), want, "{source}");
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

    /// Random expressions over numbers: wherever minijinja renders the
    /// original, the rewritten template renders the same (so the operands
    /// were found with minijinja's precedence), and never fails to compile.
    #[test]
    fn rewriting_keeps_minijinja_precedence_on_numbers() {
        let mut env = Environment::new();
        register(&mut env);
        crate::growing::register(&mut env);
        let mut seed: u64 = 0x5eed;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        fn expr(next: &mut dyn FnMut(u64) -> u64, depth: u32) -> String {
            if depth == 0 || next(3) == 0 {
                return [
                    "x",
                    "y",
                    "z",
                    "2",
                    "7",
                    "2.5",
                    "(x)",
                    "[x, y][1]",
                    "d.k",
                    "'ab'",
                    "[z]",
                ][next(11) as usize]
                    .to_owned();
            }
            let a = expr(next, depth - 1);
            let b = expr(next, depth - 1);
            match next(16) {
                0 => format!("-{a}"),
                1 => format!("({a})"),
                2 => format!("{a} | abs"),
                3 => format!("{a} is odd"),
                4 => format!("not {a}"),
                5 => format!("{a} | default({b})"),
                6 => format!("{a} is divisibleby 3"),
                7 => format!("{a} is not even"),
                8 => format!("{a} if {b} else 1"),
                9 => format!("[{a}, {b}] | first"),
                _ => {
                    let op = [
                        "%", "-", "+", "*", "//", "**", "==", "<", "and", "or", "~", "%", "-",
                    ][next(13) as usize];
                    format!("{a} {op} {b}")
                }
            }
        }
        let ctx =
            minijinja::context! { x => 7, y => -3, z => 4, d => minijinja::context! { k => 5 } };
        let mut compared = 0;
        for _ in 0..10000 {
            let source = format!("{{{{ {} }}}}{{# to_datetime #}}", expr(&mut next, 5));
            let Ok(original) = env.render_str(&source, &ctx) else {
                continue;
            };
            let rewritten = rewrite(&source);
            let got = env
                .render_str(&rewritten, &ctx)
                .unwrap_or_else(|e| panic!("{source} rewritten as {rewritten}: {e}"));
            assert_eq!(got, original, "{source} rewritten as {rewritten}");
            compared += 1;
        }
        assert!(compared > 3000, "only {compared} expressions rendered");
    }
}
