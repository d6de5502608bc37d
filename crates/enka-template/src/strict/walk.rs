//! Finds, in minijinja's parse of a template, each expression whose value
//! is used and each comparison Python would refuse between types.

use minijinja::machinery::Span;
use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};

/// How deep the walk goes: minijinja parses deeper templates (growing its
/// stack), and no template a role writes comes near.
const MAX_DEPTH: usize = 256;

/// Filters that take an undefined input as it is (the rest fail on one, as
/// Python's code under them does: `str()`, `len()`, iteration).
const LENIENT_FILTERS: &[&str] = &[
    "default",
    "d",
    "ansible.builtin.default",
    "mandatory",
    "ansible.builtin.mandatory",
    "type_debug",
    "ansible.builtin.type_debug",
    "items",
    // A value that is no string passes as it is, an undefined one too.
    "from_yaml",
    "ansible.builtin.from_yaml",
    "from_yaml_all",
    "ansible.builtin.from_yaml_all",
];

/// Tests that look at an undefined value without using it: Jinja's type
/// tests (`isinstance`) and those that catch what using it raises.
pub(crate) const LENIENT_TESTS: &[&str] = &[
    "defined",
    "undefined",
    "none",
    "boolean",
    "false",
    "true",
    "integer",
    "float",
    "number",
    "string",
    "mapping",
    "sequence",
    "callable",
    "sameas",
    "escaped",
    // Ansible's result tests take any value and refuse what is not a
    // mapping with their own error ("The 'changed' test expects a
    // dictionary"), an undefined one included.
    "changed",
    "change",
    "failed",
    "failure",
    "succeeded",
    "success",
    "successful",
    "skipped",
    "skip",
    "finished",
    "started",
    "reachable",
    "unreachable",
    "timedout",
];

/// Where an expression's text is, by byte offsets. minijinja's spans end
/// where the expression ends, but a compound one's may start at the token
/// before it; the start is taken from its leftmost part instead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extent {
    pub start: usize,
    pub end: usize,
}

/// What a used value is checked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Check {
    /// Defined (or Jinja's plain undefined).
    Defined,
    /// Defined and iterable as Python iterates it: a string by its
    /// characters, `None` and numbers not at all.
    Iterable,
    /// Defined and not `None`, which Python cannot slice.
    Sliceable,
    /// Defined, on the lines that fail a plugin's undefined argument
    /// (2.18); from 2.19 the undefined value reaches the filter or method,
    /// which hands it back (`nope | flatten | default([])` is `[]`).
    PluginArg,
    /// A slice's step, given the sliced value (at this extent): a
    /// negative step over an empty value becomes 1, as both give nothing
    /// and minijinja 3.0.5 panics on the first.
    StepOf(Extent),
}

/// A comparison to rewrite: the whole of it, where its left operand ends
/// (its operator follows), and the operator as Python writes it.
#[derive(Debug, Clone, Copy)]
pub struct Comparison {
    pub extent: Extent,
    pub left_end: usize,
    pub op: &'static str,
}

/// What the walk found.
#[derive(Default)]
pub struct Uses {
    pub values: Vec<(Extent, Check)>,
    pub comparisons: Vec<Comparison>,
    depth: usize,
    too_deep: bool,
}

impl Uses {
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.comparisons.is_empty()
    }
}

/// The uses in `tree`, whose text is `source`; `None` for a template that
/// nests deeper than [`MAX_DEPTH`], which is left as it is.
pub fn uses(tree: &Stmt<'_>, source: &str) -> Option<Uses> {
    let mut walk = Walk {
        source,
        uses: Uses::default(),
    };
    walk.stmt(tree);
    (!walk.uses.too_deep).then_some(walk.uses)
}

struct Walk<'s> {
    source: &'s str,
    uses: Uses,
}

impl Walk<'_> {
    /// One level deeper, unless that is too deep.
    fn descend(&mut self) -> bool {
        if self.uses.depth >= MAX_DEPTH {
            self.uses.too_deep = true;
            return false;
        }
        self.uses.depth += 1;
        true
    }

    fn stmts(&mut self, list: &[Stmt<'_>]) {
        for s in list {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt<'_>) {
        if self.descend() {
            self.stmt_inner(s);
            self.uses.depth -= 1;
        }
    }

    fn stmt_inner(&mut self, s: &Stmt<'_>) {
        match s {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::EmitRaw(_) => {}
            Stmt::ForLoop(l) => {
                let extent = self.extent(&l.iter);
                self.uses.values.push((extent, Check::Iterable));
                self.expr(&l.iter);
                if let Some(filter) = &l.filter_expr {
                    self.used(filter);
                }
                self.stmts(&l.body);
                self.stmts(&l.else_body);
            }
            Stmt::IfCond(c) => {
                self.used(&c.expr);
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            Stmt::WithBlock(w) => {
                for (_, value) in &w.assignments {
                    self.expr(value);
                }
                self.stmts(&w.body);
            }
            Stmt::Set(set) => self.expr(&set.expr),
            Stmt::SetBlock(set) => self.stmts(&set.body),
            Stmt::AutoEscape(a) => self.stmts(&a.body),
            Stmt::FilterBlock(f) => self.stmts(&f.body),
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Macro(m) => self.stmts(&m.body),
            Stmt::CallBlock(c) => self.stmts(&c.macro_decl.body),
            Stmt::Do(d) => self.call_args(&d.call.args),
            Stmt::Import(_) | Stmt::FromImport(_) | Stmt::Extends(_) | Stmt::Include(_) => {}
        }
    }

    /// An expression whose value is used: wrapped if it can be undefined,
    /// and looked into.
    fn used(&mut self, e: &Expr<'_>) {
        self.used_as(e, Check::Defined);
    }

    /// [`Self::used`], checked for `check`.
    fn used_as(&mut self, e: &Expr<'_>, check: Check) {
        let can_be_undefined = match e {
            // Literals, tests, comparisons and arithmetic give a value or fail.
            Expr::Const(_)
            | Expr::Test(_)
            | Expr::List(_)
            | Expr::Map(_)
            | Expr::Tuple(_)
            | Expr::Compare(_)
            | Expr::UnaryOp(_) => false,
            Expr::BinOp(b) => matches!(b.op, BinOpKind::ScAnd | BinOpKind::ScOr),
            _ => true,
        };
        if can_be_undefined {
            let extent = self.extent(e);
            self.uses.values.push((extent, check));
        }
        self.expr(e);
    }

    fn call_args(&mut self, args: &[CallArg<'_>]) {
        for arg in args {
            match arg {
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    /// Looks into an expression for the places that use a value.
    fn expr(&mut self, e: &Expr<'_>) {
        if self.descend() {
            self.expr_inner(e);
            self.uses.depth -= 1;
        }
    }

    fn expr_inner(&mut self, e: &Expr<'_>) {
        match e {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(s) => {
                if !matches!(s.expr, Expr::List(_) | Expr::Map(_) | Expr::Tuple(_)) {
                    let extent = self.extent(&s.expr);
                    self.uses.values.push((extent, Check::Sliceable));
                }
                self.expr(&s.expr);
                if let Some(step) = &s.step {
                    let sliced = self.extent(&s.expr);
                    let extent = self.extent(step);
                    self.uses.values.push((extent, Check::StepOf(sliced)));
                }
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part);
                }
            }
            Expr::UnaryOp(u) => self.unary(e, matches!(u.op, UnaryOpKind::Not), &u.expr),
            Expr::BinOp(b) => {
                self.used(&b.left);
                match b.op {
                    // The right side of `and`/`or` is their value, not used.
                    BinOpKind::ScAnd | BinOpKind::ScOr => self.expr(&b.right),
                    _ => self.used(&b.right),
                }
                if let Some(op) = ordering(b.op) {
                    self.comparison(e, &b.left, op);
                }
            }
            Expr::Compare(c) => {
                // Chained comparisons (`a < b < c`) keep minijinja's.
                self.used(&c.expr);
                for op in &c.ops {
                    self.used(&op.expr);
                }
            }
            Expr::IfExpr(i) => {
                self.used(&i.test_expr);
                self.expr(&i.true_expr);
                if let Some(otherwise) = &i.false_expr {
                    self.expr(otherwise);
                }
            }
            Expr::Filter(f) => {
                match &f.expr {
                    Some(inner) if LENIENT_FILTERS.contains(&f.name) => self.expr(inner),
                    // `a ~ b` rewritten: an operator, not a plugin.
                    Some(inner) if crate::growing::is_operator(f.name) => self.used(inner),
                    Some(inner) => self.used_as(inner, Check::PluginArg),
                    None => {}
                }
                if crate::growing::is_operator(f.name) {
                    // `a ~ b` rewritten (operators.rs): `b` is an operand,
                    // used as minijinja's own operator uses it.
                    for arg in &f.args {
                        if let CallArg::Pos(e) = arg {
                            self.used(e);
                        }
                    }
                } else {
                    self.call_args(&f.args);
                }
            }
            // A test's arguments are compared or matched against (`x is
            // equalto(y)`, `x is version(v, '>')`): used.
            Expr::Test(t) => {
                if LENIENT_TESTS.contains(&t.name) {
                    self.expr(&t.expr);
                } else {
                    self.used(&t.expr);
                }
                for arg in &t.args {
                    match arg {
                        CallArg::Pos(e) | CallArg::Kwarg(_, e) => self.used(e),
                        CallArg::PosSplat(e) | CallArg::KwargSplat(e) => self.expr(e),
                    }
                }
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => self.call(&c.expr, &c.args),
            Expr::List(l) => l.items.iter().for_each(|item| self.expr(item)),
            Expr::Tuple(t) => t.items.iter().for_each(|item| self.expr(item)),
            Expr::Map(m) => m
                .keys
                .iter()
                .chain(&m.values)
                .for_each(|item| self.expr(item)),
        }
    }

    /// `not x`, `-x`, and `a not in b` (minijinja's `not (a in b)`).
    fn unary(&mut self, whole: &Expr<'_>, not: bool, inner: &Expr<'_>) {
        if let Expr::BinOp(b) = inner
            && not
            && matches!(b.op, BinOpKind::In)
            && self.is_infix_not(whole)
        {
            self.used(&b.left);
            self.used(&b.right);
            self.comparison(whole, &b.left, "not in");
            return;
        }
        self.used(inner);
    }

    /// A method's receiver is used (`x.upper()`), and so are its
    /// arguments (`''.join(x)`) but for the methods that may leave one
    /// alone (`'{}'.format(x)` uses what its format names, `d.get(k, x)`
    /// its default only when `k` is missing); a function's arguments are
    /// only passed on (`dict(a=x)`).
    fn call(&mut self, callee: &Expr<'_>, args: &[CallArg<'_>]) {
        let Expr::GetAttr(method) = callee else {
            self.expr(callee);
            self.call_args(args);
            return;
        };
        self.used_as(&method.expr, Check::PluginArg);
        // How many leading arguments the method uses: all but for those
        // named above (a mapping's key is hashed, its default is not).
        let uses = match method.name {
            "format" | "format_map" => 0,
            "get" | "pop" | "setdefault" => 1,
            _ => args.len(),
        };
        for (index, arg) in args.iter().enumerate() {
            match arg {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) if index < uses => {
                    self.used_as(e, Check::PluginArg)
                }
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn comparison(&mut self, whole: &Expr<'_>, left: &Expr<'_>, op: &'static str) {
        let extent = self.extent(whole);
        self.uses.comparisons.push(Comparison {
            extent,
            left_end: span(left).end_offset as usize,
            op,
        });
    }

    /// Whether a `not` over `in` is written `a not in b`, not `not (a in b)`
    /// (which minijinja parses alike): the text at its start is no `not`.
    fn is_infix_not(&self, whole: &Expr<'_>) -> bool {
        let start = span(whole).start_offset as usize;
        let word = |text: &str, word: &str| {
            text.strip_prefix(word)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        };
        let text = self.source.get(start..).unwrap_or_default();
        !word(text, "not") || word(text[3..].trim_start(), "in")
    }

    fn extent(&self, e: &Expr<'_>) -> Extent {
        Extent {
            start: self.leftmost(e),
            end: span(e).end_offset as usize,
        }
    }

    /// Where an expression's text starts.
    fn leftmost(&self, e: &Expr<'_>) -> usize {
        match e {
            Expr::BinOp(b) => self.leftmost(&b.left),
            Expr::Compare(c) => self.leftmost(&c.expr),
            Expr::IfExpr(i) => self.leftmost(&i.true_expr),
            Expr::Filter(f) => f
                .expr
                .as_ref()
                .map_or(span(e).start_offset as usize, |inner| self.leftmost(inner)),
            Expr::Test(t) => self.leftmost(&t.expr),
            Expr::GetAttr(g) => self.leftmost(&g.expr),
            Expr::GetItem(g) => self.leftmost(&g.expr),
            Expr::Slice(s) => self.leftmost(&s.expr),
            Expr::Call(c) => self.leftmost(&c.expr),
            // `a not in b` parses as `not (a in b)`; a prefix `-` or `not`
            // starts where it is written.
            Expr::UnaryOp(u) if matches!(u.op, UnaryOpKind::Not) && self.is_infix_not(e) => {
                match &u.expr {
                    Expr::BinOp(b) => self.leftmost(&b.left),
                    inner => self.leftmost(inner),
                }
            }
            _ => span(e).start_offset as usize,
        }
    }
}

/// The comparisons whose operands Python may refuse, as Python writes them.
fn ordering(op: BinOpKind) -> Option<&'static str> {
    Some(match op {
        BinOpKind::Lt => "<",
        BinOpKind::Lte => "<=",
        BinOpKind::Gt => ">",
        BinOpKind::Gte => ">=",
        BinOpKind::In => "in",
        _ => return None,
    })
}

fn span(e: &Expr<'_>) -> Span {
    match e {
        Expr::Var(s) => s.span(),
        Expr::Const(s) => s.span(),
        Expr::Slice(s) => s.span(),
        Expr::UnaryOp(s) => s.span(),
        Expr::BinOp(s) => s.span(),
        Expr::Compare(s) => s.span(),
        Expr::IfExpr(s) => s.span(),
        Expr::Filter(s) => s.span(),
        Expr::Test(s) => s.span(),
        Expr::GetAttr(s) => s.span(),
        Expr::GetItem(s) => s.span(),
        Expr::Call(s) => s.span(),
        Expr::List(s) => s.span(),
        Expr::Tuple(s) => s.span(),
        Expr::Map(s) => s.span(),
    }
}
