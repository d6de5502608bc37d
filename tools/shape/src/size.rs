//! Files and functions of a readable length, tests aside.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest a production file may be, tests aside.
const FILE_LINES: usize = 1000;
/// The longest a function may be, signature and body.
const FN_LINES: usize = 100;
/// What an exception says above itself: why it must stay long.
const EXPLAINED: &str = "// Long: ";
/// The list of what is still to be cut, relative to the workspace.
const KNOWN: &str = "tools/shape/known.txt";

/// Something longer than allowed: `file path` or `fn path name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Long {
    what: String,
    lines: usize,
}

/// The problems found; with `report`, every long item is printed too.
pub fn check(root: &Path, report: bool) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for file in production_files(root)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let relative = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        found.extend(measure(&relative, &text).with_context(|| format!("parsing {relative}"))?);
    }
    found.sort();
    if report {
        for long in &found {
            println!("{} {}", long.lines, long.what);
        }
    }
    let known_text = std::fs::read_to_string(root.join(KNOWN)).unwrap_or_default();
    let known = known_items(&known_text);
    let mut problems = Vec::new();
    for long in &found {
        match known.get(&long.what) {
            None => problems.push(format!(
                "{} is {} lines (at most {}): cut it, or say why above it with `{}…`",
                long.what,
                long.lines,
                if long.what.starts_with("file ") {
                    FILE_LINES
                } else {
                    FN_LINES
                },
                EXPLAINED.trim_end()
            )),
            Some(&was) if long.lines > was => problems.push(format!(
                "{} grew from {was} to {} lines; it is listed in {KNOWN} to shrink",
                long.what, long.lines
            )),
            Some(&was) if long.lines < was => problems.push(format!(
                "{} shrank from {was} to {} lines: write {} in {KNOWN}, so it cannot grow back",
                long.what, long.lines, long.lines
            )),
            Some(_) => {}
        }
    }
    for what in known.keys() {
        if !found.iter().any(|l| &l.what == what) {
            problems.push(format!("{what} is no longer long: take it out of {KNOWN}"));
        }
    }
    Ok(problems)
}

/// `<lines> <what>` per line; `#` starts a comment.
fn known_items(text: &str) -> BTreeMap<String, usize> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let (lines, what) = l.split_once(' ')?;
            Some((what.trim().to_owned(), lines.parse().ok()?))
        })
        .collect()
}

/// Every `.rs` file of the production crates (`src/`, `crates/*/src/`),
/// test-only files (`tests.rs`, `tests/`, `*_tests.rs`) aside.
fn production_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).context("reading crates/")? {
        dirs.push(entry?.path().join("src"));
    }
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The long file and functions of one source file.
fn measure(path: &str, text: &str) -> anyhow::Result<Vec<Long>> {
    let file = syn::parse_file(text)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut visitor = Functions {
        path,
        lines: &lines,
        scope: Vec::new(),
        test_lines: 0,
        long: Vec::new(),
    };
    visitor.visit_file(&file);
    let production = lines.len().saturating_sub(visitor.test_lines);
    let explained = lines
        .iter()
        .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
        .any(|l| l.starts_with("//! Long: "));
    let mut long = visitor.long;
    if production > FILE_LINES && !explained {
        long.push(Long {
            what: format!("file {path}"),
            lines: production,
        });
    }
    Ok(long)
}

struct Functions<'a> {
    path: &'a str,
    lines: &'a [&'a str],
    /// The impl or module the visitor is in, for names such as `Runner::run`.
    scope: Vec<String>,
    /// Lines inside `#[cfg(test)]` items.
    test_lines: usize,
    long: Vec<Long>,
}

impl Functions<'_> {
    fn function(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let (start, end) = (span.start().line, span.end().line);
        let length = end + 1 - start;
        if length <= FN_LINES || self.explained_above(start) {
            return;
        }
        let mut qualified = self.scope.clone();
        qualified.push(name.to_string());
        self.long.push(Long {
            what: format!("fn {} {}", self.path, qualified.join("::")),
            lines: length,
        });
    }

    /// Whether the comment lines just above line `start` (1-based) say why.
    fn explained_above(&self, start: usize) -> bool {
        self.lines[..start.saturating_sub(1)]
            .iter()
            .rev()
            .take_while(|l| l.trim_start().starts_with("//"))
            .any(|l| l.trim_start().starts_with(EXPLAINED))
    }
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    }) || attrs.iter().any(|a| a.path().is_ident("test"))
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_test(attrs) {
            let span = item.span();
            self.test_lines += span.end().line + 1 - span.start().line;
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.function(&item.sig.ident, item.span());
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let ty = &item.self_ty;
        let name = last_type_name(ty);
        self.scope.push(name);
        syn::visit::visit_item_impl(self, item);
        self.scope.pop();
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if is_test(&item.attrs) {
            return;
        }
        self.function(&item.sig.ident, item.span());
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if item.default.is_some() {
            self.function(&item.sig.ident, item.span());
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// The last path segment of an impl's type (`Runner` for `Runner<'a>`).
fn last_type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "?".to_owned(), |s| s.ident.to_string()),
        _ => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, body_lines: usize) -> String {
        let body: String = (0..body_lines)
            .map(|i| format!("    let _x{i} = {i};\n"))
            .collect();
        format!("fn {name}() {{\n{body}}}\n")
    }

    #[test]
    fn a_function_over_the_limit_is_reported_with_its_impl() {
        let text = format!(
            "struct R;\nimpl R {{\n{}}}\n{}",
            function("long", 99),
            function("short", 98)
        );
        let long = measure("a.rs", &text).unwrap();
        assert_eq!(
            long,
            vec![Long {
                what: "fn a.rs R::long".to_owned(),
                lines: 101
            }]
        );
    }

    #[test]
    fn a_reason_above_or_a_test_module_exempts() {
        let text = format!(
            "// Long: one match over every keyword.\n{}#[cfg(test)]\nmod tests {{\n{}}}\n",
            function("explained", 200),
            function("in_tests", 200)
        );
        assert!(measure("a.rs", &text).unwrap().is_empty());
    }

    #[test]
    fn a_file_counts_its_lines_without_tests() {
        let many: String = (0..12).map(|i| function(&format!("f{i}"), 90)).collect();
        let long = measure("big.rs", &many).unwrap();
        assert_eq!(long.len(), 1);
        assert_eq!(long[0].what, "file big.rs");
        let tested = format!("#[cfg(test)]\nmod tests {{\n{many}}}\n");
        assert!(measure("big.rs", &tested).unwrap().is_empty());
    }

    #[test]
    fn the_known_list_reads_lines_and_numbers() {
        let known = known_items("# comment\n120 fn a.rs f\n\n1200 file b.rs # to cut\n");
        assert_eq!(known.get("fn a.rs f"), Some(&120));
        assert_eq!(known.get("file b.rs"), Some(&1200));
        assert_eq!(known.len(), 2);
    }
}
