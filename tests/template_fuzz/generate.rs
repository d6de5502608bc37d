//! Templates in the shapes roles write them, made from a seed: expressions
//! over the `fuzz` group's variables (literals, operators, inline `if`,
//! attribute and item access, filters with their argument forms, tests,
//! Python methods), wrapped in the statements and text around them, and
//! now and then broken on purpose.
//!
//! A case is a tree, so that a disagreement can be made smaller by
//! replacing a node with one of its parts (`shrink.rs`), and is written out
//! as template source only at the end.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal or a name, written as it stands.
    Leaf(String),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{'k': v}`.
    Dict(Vec<(String, Expr)>),
    /// `a op b`.
    Binary(Box<Expr>, &'static str, Box<Expr>),
    /// `not a`, `-a`.
    Unary(&'static str, Box<Expr>),
    /// `a if c else b`, or without `else`.
    Cond(Box<Expr>, Box<Expr>, Option<Box<Expr>>),
    /// `a.name`.
    Attr(Box<Expr>, &'static str),
    /// `a[i]`.
    Item(Box<Expr>, Box<Expr>),
    /// `a[1:]`, `a[:-1]`, `a[::-1]`.
    Slice(Box<Expr>, &'static str),
    /// `a | name(args)`.
    Filter(Box<Expr>, &'static str, Vec<Expr>),
    /// `a is name(args)`, `a is not name`.
    Test(Box<Expr>, bool, &'static str, Vec<Expr>),
    /// `a.name(args)`.
    Method(Box<Expr>, &'static str, Vec<Expr>),
    /// Keyword arguments, written `name=value`, only inside calls.
    Keyword(&'static str, Box<Expr>),
}

/// A case: a template (or a condition) around its expressions.
#[derive(Debug, Clone, PartialEq)]
pub enum Case {
    /// `{{ e }}`: the native typing path.
    Value(Expr),
    /// `text{{ e }}text`.
    Text(&'static str, Expr, &'static str),
    /// `{{ a }}{{ b }}`.
    Two(Expr, Expr),
    /// `{{- e -}}` inside text and newlines.
    Trimmed(Expr),
    /// `{% if c %}x{% else %}y{% endif %}`.
    If(Expr),
    /// `{% for x in e %}{{ x }}{{ ',' if not loop.last }}{% endfor %}`.
    For(Expr),
    /// `{% set v = e %}{{ v }}`.
    Set(Expr),
    /// A condition, as `when:` writes one.
    Condition(Expr),
    /// Text written around literals that the classic templating turns
    /// back into values: `[{{ e }}]`, `{{ e }}.5`.
    Literal(&'static str, Expr, &'static str),
    /// A template that is broken on purpose, as written.
    Broken(String),
}

impl Case {
    /// `template` or `condition`, as the oracle asks.
    pub fn kind(&self) -> &'static str {
        match self {
            Case::Condition(_) => "condition",
            _ => "template",
        }
    }

    /// The source, as a role would write it.
    pub fn source(&self) -> String {
        match self {
            Case::Value(e) => format!("{{{{ {} }}}}", e.source()),
            Case::Text(before, e, after) => format!("{before}{{{{ {} }}}}{after}", e.source()),
            Case::Two(a, b) => format!("{{{{ {} }}}}{{{{ {} }}}}", a.source(), b.source()),
            Case::Trimmed(e) => format!("a\n  {{{{- {} -}}}}\n b", e.source()),
            Case::If(c) => format!("{{% if {} %}}yes{{% else %}}no{{% endif %}}", c.source()),
            Case::For(e) => format!(
                "{{% for x in {} %}}{{{{ x }}}}{{{{ ',' if not loop.last }}}}{{% endfor %}}",
                e.source()
            ),
            Case::Set(e) => format!("{{% set v = {} %}}{{{{ v }}}}", e.source()),
            Case::Condition(e) => e.source(),
            Case::Literal(before, e, after) => {
                format!("{before}{{{{ {} }}}}{after}", e.source())
            }
            Case::Broken(text) => text.clone(),
        }
    }

    /// The expressions in it, to shrink one at a time.
    pub fn exprs(&self) -> Vec<Expr> {
        self.clone()
            .exprs_mut()
            .into_iter()
            .map(|e| e.clone())
            .collect()
    }

    /// The same case with its `index`-th expression replaced.
    pub fn with_expr(&self, index: usize, new: Expr) -> Case {
        let mut case = self.clone();
        if let Some(slot) = case.exprs_mut().into_iter().nth(index) {
            *slot = new;
        }
        case
    }

    fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Case::Value(e)
            | Case::Text(_, e, _)
            | Case::Trimmed(e)
            | Case::If(e)
            | Case::For(e)
            | Case::Set(e)
            | Case::Condition(e)
            | Case::Literal(_, e, _) => vec![e],
            Case::Two(a, b) => vec![a, b],
            Case::Broken(_) => Vec::new(),
        }
    }
}

impl Expr {
    /// The expression as Jinja source, bracketed wherever precedence could
    /// read it otherwise.
    pub fn source(&self) -> String {
        match self {
            Expr::Leaf(text) => text.clone(),
            Expr::List(items) => format!("[{}]", join(items)),
            Expr::Dict(pairs) => {
                let pairs: Vec<String> = pairs
                    .iter()
                    .map(|(k, v)| format!("'{k}': {}", v.source()))
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            }
            Expr::Binary(a, op, b) => format!("({} {op} {})", a.source(), b.source()),
            Expr::Unary(op, a) => format!("({op} {})", a.source()),
            Expr::Cond(a, c, None) => format!("({} if {})", a.source(), c.source()),
            Expr::Cond(a, c, Some(b)) => {
                format!("({} if {} else {})", a.source(), c.source(), b.source())
            }
            Expr::Attr(a, name) => format!("{}.{name}", a.postfix_source()),
            Expr::Item(a, i) => format!("{}[{}]", a.postfix_source(), i.source()),
            Expr::Slice(a, slice) => format!("{}[{slice}]", a.postfix_source()),
            Expr::Filter(a, name, args) if args.is_empty() => {
                format!("({} | {name})", a.source())
            }
            Expr::Filter(a, name, args) => format!("({} | {name}({}))", a.source(), join(args)),
            Expr::Test(a, negated, name, args) => {
                let not = if *negated { "not " } else { "" };
                match args.as_slice() {
                    [] => format!("({} is {not}{name})", a.source()),
                    [one] if matches!(one, Expr::Leaf(_)) && name.len() > 2 => {
                        format!("({} is {not}{name} {})", a.source(), one.source())
                    }
                    args => format!("({} is {not}{name}({}))", a.source(), join(args)),
                }
            }
            Expr::Method(a, name, args) => {
                format!("{}.{name}({})", a.postfix_source(), join(args))
            }
            Expr::Keyword(name, value) => format!("{name}={}", value.source()),
        }
    }

    /// The source as the left side of `.`, `[` or a call.
    fn postfix_source(&self) -> String {
        match self {
            Expr::Leaf(text) if text.starts_with('-') => format!("({text})"),
            Expr::Leaf(_) | Expr::List(_) | Expr::Dict(_) => self.source(),
            _ => format!("({})", self.source()),
        }
    }

    /// The parts it is made of, each a smaller expression.
    pub fn parts(&self) -> Vec<Expr> {
        match self {
            Expr::Leaf(_) => Vec::new(),
            Expr::List(items) => items.clone(),
            Expr::Dict(pairs) => pairs.iter().map(|(_, v)| v.clone()).collect(),
            Expr::Binary(a, _, b) => vec![(**a).clone(), (**b).clone()],
            Expr::Unary(_, a) | Expr::Attr(a, _) | Expr::Slice(a, _) | Expr::Keyword(_, a) => {
                vec![(**a).clone()]
            }
            Expr::Cond(a, c, b) => {
                let mut parts = vec![(**a).clone(), (**c).clone()];
                parts.extend(b.iter().map(|b| (**b).clone()));
                parts
            }
            Expr::Item(a, i) => vec![(**a).clone(), (**i).clone()],
            Expr::Filter(a, _, args) | Expr::Test(a, _, _, args) | Expr::Method(a, _, args) => {
                let mut parts = vec![(**a).clone()];
                parts.extend(args.iter().map(|arg| match arg {
                    Expr::Keyword(_, value) => (**value).clone(),
                    other => other.clone(),
                }));
                parts
            }
        }
    }

    /// How many nodes it has.
    pub fn size(&self) -> usize {
        1 + self.parts().iter().map(Expr::size).sum::<usize>()
    }
}

fn join(items: &[Expr]) -> String {
    items
        .iter()
        .map(Expr::source)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names the `fuzz` group of `cases.yaml` defines.
const VARS: &[&str] = &[
    "n", "neg", "f", "z", "s", "e", "num", "fs", "hexs", "t", "yes_word", "l", "ls", "d", "nd",
    "b", "none", "u", "sp", "nl", "mixed", "dl",
];

/// Literals of the kinds roles write.
const LITERALS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "10",
    "0.5",
    "-1.25",
    "2.0",
    "1e3",
    "True",
    "False",
    "None",
    "''",
    "'a'",
    "'abc'",
    "'a,b'",
    "' x '",
    "'yes'",
    "'True'",
    "'0x1F'",
    "'0o17'",
    "'17'",
    "'017'",
    "'3.5'",
    "'[1, 2]'",
    "\"{'k': 1}\"",
    "'ü'",
    "'A b'",
    "'k'",
    "'a\\nb'",
    "'%s'",
    "'-'",
    "'1.0'",
    "'null'",
];

/// How a filter's, test's or method's arguments are made.
type Args = fn(&mut Gen<'_>, usize) -> Vec<Expr>;

/// A filter and how its arguments are made.
struct FilterSpec {
    name: &'static str,
    args: Args,
}

fn none(_: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    Vec::new()
}
fn one(g: &mut Gen<'_>, depth: usize) -> Vec<Expr> {
    vec![g.expr(depth)]
}
fn two(g: &mut Gen<'_>, depth: usize) -> Vec<Expr> {
    vec![g.expr(depth), g.expr(depth)]
}
fn text_arg(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    vec![g.pick_leaf(&[
        "','", "'b'", "'-'", "' '", "''", "'x'", "'^a'", "'(b)'", "'[a-z]+'",
    ])]
}
fn two_text(g: &mut Gen<'_>, depth: usize) -> Vec<Expr> {
    let mut args = text_arg(g, depth);
    args.extend(text_arg(g, depth));
    args
}
fn int_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    match g.rng.random_range(0..4) {
        0 => Vec::new(),
        1 => vec![g.pick_leaf(&["0", "7", "'d'"])],
        2 => vec![
            g.pick_leaf(&["0"]),
            g.pick_leaf(&["0", "2", "8", "16", "36", "1", "37"]),
        ],
        _ => vec![Expr::Keyword(
            "base",
            Box::new(g.pick_leaf(&["0", "16", "2"])),
        )],
    }
}
fn default_args(g: &mut Gen<'_>, depth: usize) -> Vec<Expr> {
    let mut args = vec![g.expr(depth)];
    if g.rng.random_bool(0.3) {
        args.push(g.pick_leaf(&["True", "true", "False"]));
    }
    args
}
fn group_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    let mut args = vec![g.pick_leaf(&["'(b)'", "'(?P<x>b)'", "'a(b)?c'", "'z'", "'(a)(b)'"])];
    for _ in 0..g.rng.random_range(0..3) {
        args.push(g.pick_leaf(&["'\\\\1'", "'\\\\2'", "'\\\\g<x>'", "'\\\\0'", "'1'"]));
    }
    args
}
fn map_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    match g.rng.random_range(0..3) {
        0 => vec![g.pick_leaf(&["'upper'", "'int'", "'string'", "'length'", "'lower'"])],
        1 => vec![Expr::Keyword(
            "attribute",
            Box::new(g.pick_leaf(&["'a'", "'k'", "'x'"])),
        )],
        _ => vec![g.pick_leaf(&["'default'"]), g.pick_leaf(&["0", "'d'"])],
    }
}
fn select_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    match g.rng.random_range(0..3) {
        0 => Vec::new(),
        1 => vec![g.pick_leaf(&["'defined'", "'string'", "'number'", "'odd'", "'none'"])],
        _ => vec![
            g.pick_leaf(&["'equalto'", "'gt'", "'in'"]),
            g.pick_leaf(&["1", "'a'"]),
        ],
    }
}
fn attr_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    let mut args = vec![g.pick_leaf(&["'a'", "'k'", "'b'"])];
    if g.rng.random_bool(0.5) {
        args.push(g.pick_leaf(&["'defined'", "'equalto'", "'truthy'"]));
        if g.rng.random_bool(0.5) {
            args.push(g.pick_leaf(&["1", "'x'"]));
        }
    }
    args
}
fn yaml_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    match g.rng.random_range(0..3) {
        0 => Vec::new(),
        1 => vec![Expr::Keyword(
            "indent",
            Box::new(g.pick_leaf(&["2", "4", "8"])),
        )],
        _ => vec![Expr::Keyword(
            "width",
            Box::new(g.pick_leaf(&["20", "80", "1000"])),
        )],
    }
}
fn round_args(g: &mut Gen<'_>, _: usize) -> Vec<Expr> {
    match g.rng.random_range(0..3) {
        0 => Vec::new(),
        1 => vec![g.pick_leaf(&["0", "1", "2"])],
        _ => vec![
            g.pick_leaf(&["1"]),
            g.pick_leaf(&["'floor'", "'ceil'", "'common'"]),
        ],
    }
}

/// The filters made, with their argument forms.
const FILTERS: &[FilterSpec] = &[
    FilterSpec {
        name: "default",
        args: default_args,
    },
    FilterSpec {
        name: "d",
        args: one,
    },
    FilterSpec {
        name: "int",
        args: int_args,
    },
    FilterSpec {
        name: "float",
        args: none,
    },
    FilterSpec {
        name: "string",
        args: none,
    },
    FilterSpec {
        name: "bool",
        args: none,
    },
    FilterSpec {
        name: "length",
        args: none,
    },
    FilterSpec {
        name: "first",
        args: none,
    },
    FilterSpec {
        name: "last",
        args: none,
    },
    FilterSpec {
        name: "list",
        args: none,
    },
    FilterSpec {
        name: "unique",
        args: none,
    },
    FilterSpec {
        name: "sort",
        args: none,
    },
    FilterSpec {
        name: "reverse",
        args: none,
    },
    FilterSpec {
        name: "join",
        args: text_arg,
    },
    FilterSpec {
        name: "upper",
        args: none,
    },
    FilterSpec {
        name: "lower",
        args: none,
    },
    FilterSpec {
        name: "capitalize",
        args: none,
    },
    FilterSpec {
        name: "title",
        args: none,
    },
    FilterSpec {
        name: "trim",
        args: none,
    },
    FilterSpec {
        name: "replace",
        args: two_text,
    },
    FilterSpec {
        name: "split",
        args: text_arg,
    },
    FilterSpec {
        name: "regex_replace",
        args: two_text,
    },
    FilterSpec {
        name: "regex_search",
        args: group_args,
    },
    FilterSpec {
        name: "regex_findall",
        args: text_arg,
    },
    FilterSpec {
        name: "regex_escape",
        args: none,
    },
    FilterSpec {
        name: "b64encode",
        args: none,
    },
    FilterSpec {
        name: "b64decode",
        args: none,
    },
    FilterSpec {
        name: "to_json",
        args: none,
    },
    FilterSpec {
        name: "to_nice_json",
        args: none,
    },
    FilterSpec {
        name: "from_json",
        args: none,
    },
    FilterSpec {
        name: "to_yaml",
        args: yaml_args,
    },
    FilterSpec {
        name: "to_nice_yaml",
        args: yaml_args,
    },
    FilterSpec {
        name: "from_yaml",
        args: none,
    },
    FilterSpec {
        name: "min",
        args: none,
    },
    FilterSpec {
        name: "max",
        args: none,
    },
    FilterSpec {
        name: "sum",
        args: none,
    },
    FilterSpec {
        name: "abs",
        args: none,
    },
    FilterSpec {
        name: "round",
        args: round_args,
    },
    FilterSpec {
        name: "flatten",
        args: none,
    },
    FilterSpec {
        name: "dict2items",
        args: none,
    },
    FilterSpec {
        name: "items2dict",
        args: none,
    },
    FilterSpec {
        name: "combine",
        args: one,
    },
    FilterSpec {
        name: "ternary",
        args: two,
    },
    FilterSpec {
        name: "type_debug",
        args: none,
    },
    FilterSpec {
        name: "mandatory",
        args: none,
    },
    FilterSpec {
        name: "quote",
        args: none,
    },
    FilterSpec {
        name: "basename",
        args: none,
    },
    FilterSpec {
        name: "dirname",
        args: none,
    },
    FilterSpec {
        name: "hash",
        args: none,
    },
    FilterSpec {
        name: "md5",
        args: none,
    },
    FilterSpec {
        name: "center",
        args: none,
    },
    FilterSpec {
        name: "indent",
        args: none,
    },
    FilterSpec {
        name: "truncate",
        args: none,
    },
    FilterSpec {
        name: "wordcount",
        args: none,
    },
    FilterSpec {
        name: "map",
        args: map_args,
    },
    FilterSpec {
        name: "select",
        args: select_args,
    },
    FilterSpec {
        name: "reject",
        args: select_args,
    },
    FilterSpec {
        name: "selectattr",
        args: attr_args,
    },
    FilterSpec {
        name: "rejectattr",
        args: attr_args,
    },
    FilterSpec {
        name: "union",
        args: one,
    },
    FilterSpec {
        name: "difference",
        args: one,
    },
    FilterSpec {
        name: "intersect",
        args: one,
    },
    FilterSpec {
        name: "zip",
        args: one,
    },
    FilterSpec {
        name: "batch",
        args: none,
    },
    FilterSpec {
        name: "to_datetime",
        args: none,
    },
    FilterSpec {
        name: "human_readable",
        args: none,
    },
    FilterSpec {
        name: "human_to_bytes",
        args: none,
    },
    FilterSpec {
        name: "items",
        args: none,
    },
    FilterSpec {
        name: "dictsort",
        args: none,
    },
    FilterSpec {
        name: "format",
        args: one,
    },
    FilterSpec {
        name: "urlencode",
        args: none,
    },
    FilterSpec {
        name: "splitext",
        args: none,
    },
    FilterSpec {
        name: "comment",
        args: none,
    },
    FilterSpec {
        name: "unknown_filter_x",
        args: none,
    },
];

/// The tests made, with their argument forms.
const TESTS: &[(&str, Args)] = &[
    ("defined", none),
    ("undefined", none),
    ("none", none),
    ("string", none),
    ("number", none),
    ("integer", none),
    ("float", none),
    ("boolean", none),
    ("mapping", none),
    ("iterable", none),
    ("sequence", none),
    ("truthy", none),
    ("falsy", none),
    ("match", text_arg),
    ("search", text_arg),
    ("regex", text_arg),
    ("version", two_text),
    ("subset", one),
    ("superset", one),
    ("contains", one),
    ("eq", one),
    ("equalto", one),
    ("lt", one),
    ("gt", one),
    ("in", one),
    ("odd", none),
    ("even", none),
    ("divisibleby", one),
    ("lower", none),
    ("upper", none),
    ("failed", none),
    ("succeeded", none),
];

/// The Python methods made, with their argument forms.
const METHODS: &[(&str, Args)] = &[
    ("upper", none),
    ("lower", none),
    ("strip", none),
    ("split", text_arg),
    ("startswith", text_arg),
    ("endswith", text_arg),
    ("replace", two_text),
    ("format", one),
    ("join", one),
    ("count", one),
    ("find", text_arg),
    ("zfill", one),
    ("isdigit", none),
    ("title", none),
    ("capitalize", none),
    ("index", one),
    ("get", one),
    ("get", two),
    ("keys", none),
    ("values", none),
    ("items", none),
];

const BINARY: &[&str] = &[
    "+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and",
    "or",
];

/// A generator over one random stream.
pub struct Gen<'a> {
    pub rng: &'a mut StdRng,
}

impl Gen<'_> {
    fn pick_leaf(&mut self, from: &[&str]) -> Expr {
        Expr::Leaf(from.choose(self.rng).copied().unwrap_or("0").to_owned())
    }

    /// A leaf: a variable, a literal, now and then an undefined name.
    fn leaf(&mut self) -> Expr {
        match self.rng.random_range(0..20) {
            0 => self.pick_leaf(&["nope", "d.missing", "l[7]"]),
            1..=9 => self.pick_leaf(VARS),
            _ => self.pick_leaf(LITERALS),
        }
    }

    /// An expression at most `depth` deep.
    pub fn expr(&mut self, depth: usize) -> Expr {
        if depth == 0 || self.rng.random_bool(0.3) {
            return self.leaf();
        }
        let d = depth - 1;
        match self.rng.random_range(0..24) {
            0 => Expr::List(
                (0..self.rng.random_range(0..3))
                    .map(|_| self.expr(d))
                    .collect(),
            ),
            1 => Expr::Dict(vec![("k".to_owned(), self.expr(d))]),
            2..=5 => {
                let op = BINARY.choose(self.rng).copied().unwrap_or("+");
                // `*` and `**` only between small leaves: Python's integers
                // and strings grow without bound.
                let (a, b) = if op == "*" {
                    (self.leaf(), self.pick_leaf(&["0", "2", "3", "-1"]))
                } else {
                    (self.expr(d), self.expr(d))
                };
                Expr::Binary(Box::new(a), op, Box::new(b))
            }
            6 => Expr::Binary(
                Box::new(self.pick_leaf(&["2", "3", "-2", "0", "2.5", "n", "f"])),
                "**",
                Box::new(self.pick_leaf(&["0", "2", "-1", "3", "0.5"])),
            ),
            7 => Expr::Unary(
                if self.rng.random_bool(0.5) {
                    "not"
                } else {
                    "-"
                },
                Box::new(self.expr(d)),
            ),
            8 | 9 => {
                let otherwise = self.rng.random_bool(0.6).then(|| Box::new(self.expr(d)));
                Expr::Cond(Box::new(self.expr(d)), Box::new(self.expr(d)), otherwise)
            }
            10 => Expr::Attr(
                Box::new(self.expr(d)),
                ["a", "b", "k", "x", "missing"]
                    .choose(self.rng)
                    .copied()
                    .unwrap_or("a"),
            ),
            11 => Expr::Item(
                Box::new(self.expr(d)),
                Box::new(self.pick_leaf(&["0", "1", "-1", "'a'", "'k'", "5"])),
            ),
            12 => Expr::Slice(
                Box::new(self.expr(d)),
                ["1:", ":-1", "::-1", "1:2"]
                    .choose(self.rng)
                    .copied()
                    .unwrap_or("1:"),
            ),
            13..=18 => {
                let spec = FILTERS.choose(self.rng).unwrap_or(&FILTERS[0]);
                let args = (spec.args)(self, d);
                Expr::Filter(Box::new(self.expr(d)), spec.name, args)
            }
            19 | 20 => {
                let (name, args) = TESTS.choose(self.rng).copied().unwrap_or(TESTS[0]);
                let args = args(self, d);
                Expr::Test(
                    Box::new(self.expr(d)),
                    self.rng.random_bool(0.2),
                    name,
                    args,
                )
            }
            _ => {
                let (name, args) = METHODS.choose(self.rng).copied().unwrap_or(METHODS[0]);
                let args = args(self, d);
                Expr::Method(Box::new(self.expr(d)), name, args)
            }
        }
    }

    /// A case around an expression at most `depth` deep.
    pub fn case(&mut self, depth: usize) -> Case {
        let e = self.expr(depth);
        match self.rng.random_range(0..40) {
            0..=17 => Case::Value(e),
            18..=20 => Case::Text(
                ["a", " ", "x-"].choose(self.rng).copied().unwrap_or("a"),
                e,
                ["b", "", " "].choose(self.rng).copied().unwrap_or(""),
            ),
            21 | 22 => Case::Two(e, self.expr(depth)),
            23 => Case::Trimmed(e),
            24 | 25 => Case::If(e),
            26 | 27 => Case::For(e),
            28 => Case::Set(e),
            29..=34 => Case::Condition(e),
            35 | 36 => {
                let (before, after) = *[
                    ("[", "]"),
                    ("", ".5"),
                    ("{'a': ", "}"),
                    ("(", ",)"),
                    ("-", ""),
                ]
                .choose(self.rng)
                .unwrap_or(&("[", "]"));
                Case::Literal(before, e, after)
            }
            _ => Case::Broken(self.broken(&Case::Value(e).source())),
        }
    }

    /// `source` broken as a hand could break it.
    fn broken(&mut self, source: &str) -> String {
        let chars: Vec<char> = source.chars().collect();
        let at = self.rng.random_range(0..chars.len().max(1));
        let cut: String = chars[..at].iter().collect();
        let rest: String = chars[at..].iter().collect();
        match self.rng.random_range(0..6) {
            0 => cut,
            1 => format!("{cut}{}", rest.replacen('}', "", 1)),
            2 => format!("{cut} + {rest}"),
            3 => format!("{cut}|{rest}"),
            4 => format!("{{% if {source} %}}"),
            _ => format!("{cut}{{{{{rest}"),
        }
    }
}
