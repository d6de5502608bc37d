//! Makes a disagreement small: replaces a node by one of its parts, or by a
//! plain leaf, for as long as the same disagreement remains; then writes
//! what is left into the `fuzz` group of the conformance corpus.

use std::path::Path;

use crate::generate::{Case, Expr};

/// The most cases one shrink may try: each costs one oracle round trip.
const ATTEMPTS: usize = 400;

/// `case` made as small as it stays the disagreement `kind`.
pub fn shrink(case: &Case, kind: &str, mut judge: impl FnMut(&Case) -> Option<String>) -> Case {
    let mut best = case.clone();
    let mut attempts = 0;
    'smaller: loop {
        for (index, expr) in best.exprs().into_iter().enumerate() {
            let mut candidates = smaller(&expr);
            candidates.sort_by_key(Expr::size);
            for candidate in candidates {
                if attempts >= ATTEMPTS {
                    return best;
                }
                attempts += 1;
                let tried = best.with_expr(index, candidate);
                if judge(&tried).as_deref() == Some(kind) {
                    best = tried;
                    continue 'smaller;
                }
            }
        }
        return best;
    }
}

/// Every expression one step smaller than `expr`: a part of it in its
/// place, a leaf in its place, or the same with one part made smaller.
fn smaller(expr: &Expr) -> Vec<Expr> {
    let mut out: Vec<Expr> = expr.parts();
    if !matches!(expr, Expr::Leaf(_)) {
        out.extend(["0", "'a'", "l", "s"].map(|leaf| Expr::Leaf(leaf.to_owned())));
    }
    for (index, part) in expr.parts().iter().enumerate() {
        for candidate in smaller(part) {
            out.push(with_part(expr, index, candidate));
        }
    }
    out.retain(|candidate| {
        candidate.size() < expr.size() || candidate != expr && candidate.size() == 1
    });
    out
}

/// `expr` with its `index`-th part (as [`Expr::parts`] counts them)
/// replaced by `new`.
fn with_part(expr: &Expr, index: usize, new: Expr) -> Expr {
    let mut expr = expr.clone();
    let boxed = |slot: &mut Box<Expr>| **slot = new.clone();
    match &mut expr {
        Expr::Leaf(_) => {}
        Expr::List(items) => items[index] = new,
        Expr::Dict(pairs) => pairs[index].1 = new,
        Expr::Binary(a, _, b) | Expr::Item(a, b) => boxed(if index == 0 { a } else { b }),
        Expr::Unary(_, a) | Expr::Attr(a, _) | Expr::Slice(a, _) | Expr::Keyword(_, a) => boxed(a),
        Expr::Cond(a, c, b) => match (index, b) {
            (0, _) => boxed(a),
            (1, _) => boxed(c),
            (_, Some(b)) => boxed(b),
            (_, None) => {}
        },
        Expr::Filter(a, _, args) | Expr::Test(a, _, _, args) | Expr::Method(a, _, args) => {
            if index == 0 {
                boxed(a);
            } else {
                match &mut args[index - 1] {
                    Expr::Keyword(_, value) => **value = new,
                    other => *other = new,
                }
            }
        }
    }
    expr
}

/// Adds `cases` to the `fuzz` group (the last group of `cases.yaml`, its
/// templates before its conditions) and records ansible-core's answers
/// with `generate.py --groups fuzz`.
pub fn record<'a>(conformance: &Path, cases: impl Iterator<Item = &'a Case>) {
    let path = conformance.join("cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = text
        .find("\n- group: fuzz\n")
        .unwrap_or_else(|| panic!("{} has no `fuzz` group", path.display()));
    let (before, group) = text.split_at(start);
    let conditions_at = group
        .find("\n  conditions:\n")
        .unwrap_or_else(|| panic!("the `fuzz` group has no `conditions:` list"));
    let (templates, conditions) = group.split_at(conditions_at + 1);
    let (mut templates, mut conditions) = (
        templates.to_owned(),
        conditions.trim_end().to_owned() + "\n",
    );
    for case in cases {
        let line = format!("    - {}\n", serde_json::Value::from(case.source()));
        match case.kind() {
            "condition" => conditions.push_str(&line),
            _ => templates.push_str(&line),
        }
    }
    std::fs::write(&path, format!("{before}{templates}{conditions}"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let status = std::process::Command::new("python3")
        .arg(conformance.join("generate.py"))
        .args(["--groups", "fuzz"])
        .status()
        .unwrap_or_else(|e| panic!("running generate.py: {e}"));
    assert!(status.success(), "generate.py --groups fuzz failed");
    println!(
        "template_fuzz: recorded in {} and expected.json",
        path.display()
    );
}
