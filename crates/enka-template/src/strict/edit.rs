//! Rewrites a template's text for the uses `walk.rs` found: wraps each
//! used value and turns each comparison into a call.

use minijinja::machinery::{Token, tokenize};
use minijinja::syntax::SyntaxConfig;

use super::walk::{Check, Extent, Uses};
use super::{COMPARE, ITERABLE, PLUGIN_ARG, SLICEABLE, STEP, STRICT};

/// The template's tokens, as far as the rewrite needs them: brackets (to
/// widen an extent over the brackets around its start) and comparison
/// operators (to find one after its left operand).
pub struct Tokens {
    /// Offset, and +1 for an opening bracket or -1 for a closing one.
    brackets: Vec<(usize, i32)>,
    /// Start and end of each `<`, `<=`, `>`, `>=`, `in`, `not` token.
    operators: Vec<(usize, usize)>,
}

impl Tokens {
    pub fn of(source: &str) -> Option<Tokens> {
        let mut tokens = Tokens {
            brackets: Vec::new(),
            operators: Vec::new(),
        };
        for token in tokenize(source, false, SyntaxConfig::default()) {
            let (token, span) = token.ok()?;
            let (start, end) = (span.start_offset as usize, span.end_offset as usize);
            match token {
                Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => {
                    tokens.brackets.push((start, 1));
                }
                Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                    tokens.brackets.push((start, -1));
                }
                Token::Lt | Token::Lte | Token::Gt | Token::Gte | Token::Ident("in" | "not") => {
                    tokens.operators.push((start, end));
                }
                _ => {}
            }
        }
        Some(tokens)
    }

    /// `extent` widened back over the openers of brackets it closes: `(a)
    /// == b` starts at the `(`.
    fn balanced(&self, extent: Extent) -> Extent {
        let inside = |at: &usize| (extent.start..extent.end).contains(at);
        let mut depth = 0;
        let mut unopened = 0;
        for &(_, step) in self.brackets.iter().filter(|(at, _)| inside(at)) {
            depth += step;
            if depth < 0 {
                unopened += 1;
                depth = 0;
            }
        }
        let (mut nested, mut start) = (0, extent.start);
        for &(at, step) in self
            .brackets
            .iter()
            .rev()
            .filter(|(at, _)| *at < extent.start)
        {
            if unopened == 0 {
                break;
            }
            match step {
                s if s < 0 => nested += 1,
                _ if nested > 0 => nested -= 1,
                _ => {
                    unopened -= 1;
                    start = at;
                }
            }
        }
        Extent { start, ..extent }
    }

    /// The operator after `left_end`: from its first token to its last
    /// (`not in` is two).
    fn operator_after(&self, left_end: usize, op: &str) -> Option<(usize, usize)> {
        let at = self
            .operators
            .iter()
            .position(|(start, _)| *start >= left_end)?;
        let (start, end) = self.operators[at];
        match op {
            "not in" => self.operators.get(at + 1).map(|&(_, end)| (start, end)),
            _ => Some((start, end)),
        }
    }
}

/// One change to the text: at `at`, drop `delete` bytes and write `text`.
/// At one offset closes come first (inner before outer), then operators,
/// then opens (outer before inner).
struct Edit {
    at: usize,
    rank: (u8, isize),
    delete: usize,
    text: String,
}

/// `source` with `uses` rewritten.
pub fn apply(source: &str, tokens: &Tokens, uses: &Uses) -> String {
    let mut edits = Vec::with_capacity(uses.values.len() * 2 + uses.comparisons.len() * 3);
    for &(extent, check) in &uses.values {
        let extent = tokens.balanced(extent);
        if let Check::StepOf(sliced) = check {
            let sliced = tokens.balanced(sliced);
            let value = &source[sliced.start..sliced.end];
            bracket(
                &mut edits,
                extent,
                format!("{STEP}("),
                format!(", ({value}))"),
            );
            continue;
        }
        let text = &source[extent.start..extent.end];
        let mut close = String::from(", '");
        for c in text.chars() {
            match c {
                '\'' | '\\' => {
                    close.push('\\');
                    close.push(c);
                }
                '\n' => close.push(' '),
                c => close.push(c),
            }
        }
        close.push_str("')");
        let function = match check {
            Check::Defined => STRICT,
            Check::PluginArg => PLUGIN_ARG,
            Check::Iterable => ITERABLE,
            Check::Sliceable => SLICEABLE,
            Check::StepOf(_) => unreachable!("a step is bracketed above"),
        };
        bracket(&mut edits, extent, format!("{function}("), close);
    }
    for comparison in &uses.comparisons {
        let Some((op_start, op_end)) = tokens.operator_after(comparison.left_end, comparison.op)
        else {
            continue;
        };
        let extent = tokens.balanced(comparison.extent);
        if !(extent.start..extent.end).contains(&op_start) {
            continue;
        }
        bracket(&mut edits, extent, format!("{COMPARE}("), ")".to_owned());
        edits.push(Edit {
            at: op_start,
            rank: (1, 0),
            delete: op_end - op_start,
            text: format!(", '{}',", comparison.op),
        });
    }
    edits.sort_by_key(|edit| (edit.at, edit.rank));
    let mut out = String::with_capacity(source.len() + edits.len() * 24);
    let mut at = 0;
    for edit in edits {
        if edit.at < at {
            // Inside text an earlier edit dropped: nothing sound to do.
            return source.to_owned();
        }
        out.push_str(&source[at..edit.at]);
        out.push_str(&edit.text);
        at = edit.at + edit.delete;
    }
    out.push_str(&source[at..]);
    out
}

/// Edits that put `open` before `extent` and `close` after it.
fn bracket(edits: &mut Vec<Edit>, extent: Extent, open: String, close: String) {
    let length = (extent.end - extent.start) as isize;
    edits.push(Edit {
        at: extent.start,
        rank: (2, -length),
        delete: 0,
        text: open,
    });
    edits.push(Edit {
        at: extent.end,
        rank: (0, length),
        delete: 0,
        text: close,
    });
}
