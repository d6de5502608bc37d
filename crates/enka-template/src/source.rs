//! What a template's source says before it renders: whether it is one
//! variable (Ansible's fast path) or one text-keeping filter, its filter
//! chains bounded, and its backslashes as Python's string literals read
//! them.

use std::sync::Arc;

use minijinja::machinery::{Token, tokenize};
use minijinja::syntax::SyntaxConfig;

use crate::{Error, ErrorKind, STRING_TYPE_FILTERS};

/// The most filters one expression may chain. minijinja compiles a chain
/// by recursion, one frame per filter, and about 2 000 overflow a 2 MiB
/// thread stack; no real role comes near this.
pub(crate) const MAX_FILTER_CHAIN: usize = 500;

/// Refuses, before minijinja compiles it, what Jinja would not compile and
/// minijinja does: see [`check_filter_chains`] and [`check_variable_ends`].
pub(crate) fn check_source(source: &str) -> Result<(), Error> {
    check_filter_chains(source)?;
    check_variable_ends(source)?;
    check_statements(source)
}

/// Refuses the statements minijinja has and Ansible's Jinja does not load:
/// `{% do %}` needs the `jinja2.ext.do` extension, which Ansible leaves out.
fn check_statements(source: &str) -> Result<(), Error> {
    if !source.contains("do") || !source.contains("{%") {
        return Ok(());
    }
    let mut after_block_start = false;
    for token in tokenize(source, false, SyntaxConfig::default()) {
        let Ok((token, _)) = token else {
            return Ok(());
        };
        if after_block_start && matches!(token, Token::Ident("do")) {
            return Err(Error::new(
                ErrorKind::Syntax,
                "template syntax error: Encountered unknown tag 'do'.",
            )
            .in_template(source));
        }
        after_block_start = matches!(token, Token::BlockStart);
    }
    Ok(())
}

/// Refuses `+}}`: minijinja reads the `+` as whitespace control, as Jinja
/// does only before `%}` and `#}`; Jinja, so Ansible, reads a `+` with no
/// operand after it.
fn check_variable_ends(source: &str) -> Result<(), Error> {
    if !source.contains("+}}") {
        return Ok(());
    }
    for token in tokenize(source, false, SyntaxConfig::default()) {
        // A source that does not tokenize fails in minijinja, in its words.
        let Ok((token, span)) = token else {
            return Ok(());
        };
        let written = source.get(span.start_offset as usize..).unwrap_or_default();
        if matches!(token, Token::VariableEnd) && written.starts_with('+') {
            return Err(Error::new(
                ErrorKind::Syntax,
                "template syntax error: unexpected 'end of print statement'",
            )
            .in_template(source));
        }
    }
    Ok(())
}

/// Refuses, before minijinja compiles it, a template with an expression
/// chaining more than [`MAX_FILTER_CHAIN`] filters (a stack overflow aborts
/// the process; an error fails one task), or a call that repeats a keyword
/// argument, which Python refuses when Jinja compiles the template and
/// minijinja would let the last one win.
fn check_filter_chains(source: &str) -> Result<(), Error> {
    let bytes = source.as_bytes();
    let mut i = 0;
    let (mut inside, mut quote, mut pipes) = (false, None::<u8>, 0usize);
    // Per open bracket: the keyword arguments seen, for a call's `(`.
    let mut frames: Vec<Option<Vec<&str>>> = Vec::new();
    while i < bytes.len() {
        let pair = bytes.get(i..i + 2);
        match (inside, quote) {
            (false, _) => {
                if matches!(pair, Some(b"{{" | b"{%")) {
                    inside = true;
                    pipes = 0;
                    frames.clear();
                    i += 1;
                }
            }
            (true, Some(q)) => {
                if bytes[i] == b'\\' {
                    i += 1;
                } else if bytes[i] == q {
                    quote = None;
                }
            }
            (true, None) => match bytes[i] {
                b'\'' | b'"' => quote = Some(bytes[i]),
                b'|' => {
                    pipes += 1;
                    if pipes > MAX_FILTER_CHAIN {
                        return Err(Error::new(
                            ErrorKind::Limit,
                            format!("an expression chains more than {MAX_FILTER_CHAIN} filters"),
                        )
                        .in_template(source));
                    }
                }
                b'(' => frames.push(Some(Vec::new())),
                b'[' | b'{' if !matches!(pair, Some(b"{{" | b"{%")) => frames.push(None),
                b')' | b']' | b'}' if !matches!(pair, Some(b"}}")) => {
                    frames.pop();
                }
                b'=' if !matches!(pair, Some(b"=="))
                    && i > 0
                    && !b"=!<>".contains(&bytes[i - 1]) =>
                {
                    if let Some(Some(seen)) = frames.last_mut()
                        && let Some(name) = keyword_before(source, i)
                    {
                        if seen.contains(&name) {
                            return Err(Error::new(
                                ErrorKind::Syntax,
                                format!("template syntax error: keyword argument repeated: {name}"),
                            )
                            .in_template(source));
                        }
                        seen.push(name);
                    }
                }
                _ if matches!(pair, Some(b"}}" | b"%}")) => {
                    inside = false;
                    i += 1;
                }
                _ => {}
            },
        }
        i += 1;
    }
    Ok(())
}

/// The argument name before the `=` at `at` when it follows `(` or `,`:
/// `default` of `f(1, default=2)`.
pub(crate) fn keyword_before(source: &str, at: usize) -> Option<&str> {
    let head = source.get(..at)?.trim_end();
    let start = head
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let name = &head[start..];
    let before = head[..start].trim_end();
    (!name.is_empty() && (before.ends_with('(') || before.ends_with(','))).then_some(name)
}

/// Ansible's `SINGLE_VAR`: `^{{\s*(\w*)\s*}}$`.
pub(crate) fn single_var(source: &str) -> Option<&str> {
    let inner = source.strip_prefix("{{")?.strip_suffix("}}")?.trim();
    (!inner.is_empty() && inner.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(inner)
}

/// When a template's value is the text a filter Ansible marks as text
/// returns (`_wrap_native_text`: a `NativeJinjaText`, which
/// `ansible_eval_concat` hands back without parsing it into data).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KeepsText {
    Never,
    Always,
    /// An inline `if` whose branches differ: the branch the test takes
    /// decides (`'True' if x else 'False' | string` is `True` the boolean
    /// or `'False'` the text).
    Branch {
        test: Arc<str>,
        then: Box<KeepsText>,
        otherwise: Box<KeepsText>,
    },
}

impl KeepsText {
    /// Whether the render kept text, `test` answering an inline `if`'s
    /// test as the render did.
    pub(crate) fn decide(&self, test: &mut impl FnMut(&str) -> bool) -> bool {
        match self {
            KeepsText::Never => false,
            KeepsText::Always => true,
            KeepsText::Branch {
                test: source,
                then,
                otherwise,
            } => {
                if test(source) {
                    then.decide(test)
                } else {
                    otherwise.decide(test)
                }
            }
        }
    }
}

/// Whether the template is one expression whose value is a text filter's
/// ([`KeepsText`]). That is so only when the filter applies to the whole
/// expression, or to a whole branch of an inline `if`: `x | string` keeps
/// text, `x | string == '1'` is a comparison whose `True` becomes a
/// boolean, `[x | string]` a list. Read from minijinja's parse, so brackets
/// and literals inside (`{'k': {'k': 1}} | string`) are the parser's
/// business.
pub(crate) fn keeps_text(source: &str) -> KeepsText {
    use minijinja::machinery::ast::Stmt;
    let Ok(tree) = minijinja::machinery::parse(source, "<template>", SyntaxConfig::default())
    else {
        return KeepsText::Never;
    };
    let Stmt::Template(template) = &tree else {
        return KeepsText::Never;
    };
    // One expression, and at most the line break after it.
    let expression = match template.children.as_slice() {
        [Stmt::EmitExpr(e)] => e,
        [Stmt::EmitExpr(e), Stmt::EmitRaw(raw)] if raw.raw.trim_matches('\n').is_empty() => e,
        _ => return KeepsText::Never,
    };
    text_rule(&expression.expr, source)
}

fn text_rule(expr: &minijinja::machinery::ast::Expr<'_>, source: &str) -> KeepsText {
    use minijinja::machinery::ast::Expr;
    match expr {
        Expr::Filter(filter)
            if STRING_TYPE_FILTERS.contains(
                &filter
                    .name
                    .strip_prefix("ansible.builtin.")
                    .unwrap_or(filter.name),
            ) =>
        {
            KeepsText::Always
        }
        Expr::IfExpr(branch) => {
            let then = text_rule(&branch.true_expr, source);
            let otherwise = branch
                .false_expr
                .as_ref()
                .map_or(KeepsText::Never, |e| text_rule(e, source));
            if then == otherwise {
                return then;
            }
            let span = branch.test_expr.span();
            match source.get(span.start_offset as usize..span.end_offset as usize) {
                Some(test) => KeepsText::Branch {
                    test: Arc::from(test),
                    then: Box::new(then),
                    otherwise: Box::new(otherwise),
                },
                None => KeepsText::Never,
            }
        }
        _ => KeepsText::Never,
    }
}

/// Whether the template is one expression that hands back a value it
/// looked up (`{{ x }}`, `{{ x.y[0] }}`): 2.19 keeps that value's trust,
/// where anything a template computes (a literal, a filter's result, text
/// around it) is new data, never trusted as a template or expression.
pub(crate) fn passes_through(source: &str) -> bool {
    use minijinja::machinery::ast::{Expr, Stmt};
    fn lookup(expr: &Expr<'_>) -> bool {
        match expr {
            Expr::Var(_) => true,
            Expr::GetAttr(attr) => lookup(&attr.expr),
            Expr::GetItem(item) => lookup(&item.expr),
            _ => false,
        }
    }
    let Ok(tree) = minijinja::machinery::parse(source, "<template>", SyntaxConfig::default())
    else {
        return false;
    };
    let Stmt::Template(template) = &tree else {
        return false;
    };
    matches!(template.children.as_slice(), [Stmt::EmitExpr(e)] if lookup(&e.expr))
}

/// Ansible doubles every backslash inside the string literals of `{{ … }}`
/// blocks (`_escape_backslashes`), so a YAML `'\\.'` reaches Jinja as a
/// literal backslash and dot. String extents follow Jinja's lexer, where a
/// backslash skips the next character.
pub(crate) fn escape_backslashes(source: &str) -> String {
    if !source.contains('\\') || !source.contains("{{") {
        return source.to_owned();
    }
    let mut out = String::with_capacity(source.len() + 8);
    let mut in_var = false;
    let mut i = 0;
    while i < source.len() {
        let rest = &source[i..];
        if !in_var && rest.starts_with("{{") {
            in_var = true;
            out.push_str("{{");
            i += 2;
            continue;
        }
        if in_var && rest.starts_with("}}") {
            in_var = false;
            out.push_str("}}");
            i += 2;
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        if in_var && (c == '\'' || c == '"') {
            let bytes = rest.as_bytes();
            let mut j = 1;
            while j < bytes.len() && bytes[j] != c as u8 {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            if j >= bytes.len() {
                out.push_str(rest);
                break;
            }
            out.push_str(&rest[..=j].replace('\\', "\\\\"));
            i += j + 1;
            continue;
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Unicode whitespace inside `{{ … }}` and `{% … %}` (outside string
/// literals) as ASCII spaces, byte for byte: Jinja's lexer skips what
/// Python's `\s` matches (a no-break space an editor slipped into an
/// expression renders in Ansible); minijinja's skips ASCII only.
pub(crate) fn unicode_spaces(source: &str) -> std::borrow::Cow<'_, str> {
    if source.is_ascii() || !source.chars().any(is_unicode_space) {
        return std::borrow::Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len());
    let mut close = None;
    let mut quote = None;
    let mut chars = source.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let rest = &source[i..];
        match (close, quote) {
            (None, _) => {
                if rest.starts_with("{{") || rest.starts_with("{%") {
                    close = Some(if rest.starts_with("{{") { "}}" } else { "%}" });
                    out.push(c);
                    if let Some((_, open)) = chars.next() {
                        out.push(open);
                    }
                    continue;
                }
            }
            (Some(_), Some(q)) => {
                if c == '\\' {
                    out.push(c);
                    if let Some((_, escaped)) = chars.next() {
                        out.push(escaped);
                    }
                    continue;
                }
                if c == q {
                    quote = None;
                }
            }
            (Some(end), None) => {
                if rest.starts_with(end) {
                    close = None;
                } else if c == '\'' || c == '"' {
                    quote = Some(c);
                } else if is_unicode_space(c) {
                    out.push_str(&" ".repeat(c.len_utf8()));
                    continue;
                }
            }
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// A character Python's `\s` matches that is not ASCII.
fn is_unicode_space(c: char) -> bool {
    !c.is_ascii() && c.is_whitespace()
}
