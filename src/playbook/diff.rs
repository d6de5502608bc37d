//! `--diff`: a changed result's `diff` as the default callback shows it
//! (CallbackBase._get_diff): each before and after as a unified diff made
//! by Python's difflib, whose matching (SequenceMatcher, with its "popular
//! line" heuristic) decides which lines a hunk shows, so it is followed
//! here step by step rather than replaced by a minimal-edit diff.

use std::collections::HashMap;

use minijinja::Value;
use minijinja::value::ValueKind;

/// The text the default callback prints for a result's `diff` (one diff
/// or a list of them); empty when there is nothing to show.
pub(super) fn shown(diff: &Value) -> String {
    let diffs: Vec<Value> = match diff.kind() {
        ValueKind::Seq => diff.try_iter().into_iter().flatten().collect(),
        _ => vec![diff.clone()],
    };
    let context = std::env::var("ANSIBLE_DIFF_CONTEXT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(3);
    let mut out = String::new();
    for diff in diffs {
        one(&diff, context, &mut out);
    }
    out
}

fn field(diff: &Value, key: &str) -> Option<Value> {
    diff.get_attr(key).ok().filter(|v| !v.is_undefined())
}

fn one(diff: &Value, context: usize, out: &mut String) {
    let text = |v: &Value| crate::template::pyrepr::to_text(v);
    if field(diff, "dst_binary").is_some() {
        out.push_str("diff skipped: destination file appears to be binary\n");
    }
    if field(diff, "src_binary").is_some() {
        out.push_str("diff skipped: source file appears to be binary\n");
    }
    for (key, which) in [("dst_larger", "destination"), ("src_larger", "source")] {
        if let Some(size) = field(diff, key) {
            out.push_str(&format!(
                "diff skipped: {which} file size is greater than {}\n",
                text(&size)
            ));
        }
    }
    if let (Some(before), Some(after)) = (field(diff, "before"), field(diff, "after")) {
        let header = |key: &str, word: &str| match field(diff, key) {
            Some(h) => format!("{word}: {}", text(&h)),
            None => word.to_owned(),
        };
        let before_lines = file_lines(&side_text(&before));
        let after_lines = file_lines(&side_text(&after));
        let lines = unified_diff(
            &before_lines,
            &after_lines,
            &header("before_header", "before"),
            &header("after_header", "after"),
            context,
        );
        if !lines.is_empty() {
            lines.iter().for_each(|line| out.push_str(line));
            out.push('\n');
        }
    }
    if let Some(prepared) = field(diff, "prepared") {
        out.push_str(&text(&prepared));
    }
}

/// One side of a diff as text: a mapping as indented, sorted JSON
/// (`_serialize_diff`), nothing for `None`.
fn side_text(side: &Value) -> String {
    match side.kind() {
        ValueKind::Map => crate::template::python_json_ascii(side, Some(4))
            .map(|json| json + "\n")
            .unwrap_or_else(|_| side.to_string()),
        ValueKind::None => String::new(),
        _ => crate::template::pyrepr::to_text(side),
    }
}

/// `text.splitlines(True)`, with a last line that lacks its newline
/// marked as diff marks it.
fn file_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|(_, next)| *next == '\n') => {
                chars.next();
                at + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => at + c.len_utf8(),
            _ => continue,
        };
        lines.push(text[start..end].to_owned());
        start = end;
    }
    if start < text.len() {
        lines.push(text[start..].to_owned());
    }
    if let Some(last) = lines.last_mut()
        && !last.ends_with('\n')
    {
        last.push_str("\n\\ No newline at end of file\n");
    }
    lines
}

/// difflib.unified_diff with empty file dates: the lines to print, each
/// with its own line end.
fn unified_diff(a: &[String], b: &[String], from: &str, to: &str, context: usize) -> Vec<String> {
    let groups = grouped_opcodes(&opcodes(a, b), context);
    let mut out = Vec::new();
    if groups.is_empty() {
        return out;
    }
    out.push(format!("--- {from}\n"));
    out.push(format!("+++ {to}\n"));
    for group in groups {
        let (first, last) = (group[0], group[group.len() - 1]);
        out.push(format!(
            "@@ -{} +{} @@\n",
            unified_range(first.a.0, last.a.1),
            unified_range(first.b.0, last.b.1)
        ));
        for code in group {
            let (removed, added) = (&a[code.a.0..code.a.1], &b[code.b.0..code.b.1]);
            match code.tag {
                Tag::Equal => out.extend(removed.iter().map(|l| format!(" {l}"))),
                _ => {
                    out.extend(removed.iter().map(|l| format!("-{l}")));
                    out.extend(added.iter().map(|l| format!("+{l}")));
                }
            }
        }
    }
    out
}

/// `_format_range_unified`.
fn unified_range(start: usize, stop: usize) -> String {
    match stop - start {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        length => format!("{},{length}", start + 1),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tag {
    Equal,
    Replace,
    Delete,
    Insert,
}

/// One opcode: what to do with `a[a.0..a.1]` to get `b[b.0..b.1]`.
#[derive(Debug, Clone, Copy)]
struct Opcode {
    tag: Tag,
    a: (usize, usize),
    b: (usize, usize),
}

/// SequenceMatcher(None, a, b) with autojunk: where each line of `b` is,
/// without lines so common (over 1% of 200 or more) that they are noise.
fn line_index(b: &[String]) -> HashMap<&str, Vec<usize>> {
    let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
    for (at, line) in b.iter().enumerate() {
        index.entry(line.as_str()).or_default().push(at);
    }
    if b.len() >= 200 {
        let most = b.len() / 100 + 1;
        index.retain(|_, places| places.len() <= most);
    }
    index
}

/// find_longest_match: the longest run of equal lines within the ranges,
/// earliest in `a`, then in `b`; extended over the popular lines the
/// index left out.
fn longest_match(
    a: &[String],
    b: &[String],
    index: &HashMap<&str, Vec<usize>>,
    (a_low, a_high): (usize, usize),
    (b_low, b_high): (usize, usize),
) -> (usize, usize, usize) {
    let (mut best_a, mut best_b, mut best) = (a_low, b_low, 0);
    let mut run_ending: HashMap<usize, usize> = HashMap::new();
    for (i, line) in a.iter().enumerate().take(a_high).skip(a_low) {
        let mut next: HashMap<usize, usize> = HashMap::new();
        for &j in index.get(line.as_str()).map_or(&[][..], Vec::as_slice) {
            if j < b_low {
                continue;
            }
            if j >= b_high {
                break;
            }
            let length = j
                .checked_sub(1)
                .and_then(|before| run_ending.get(&before))
                .copied()
                .unwrap_or(0)
                + 1;
            next.insert(j, length);
            if length > best {
                (best_a, best_b, best) = (i + 1 - length, j + 1 - length, length);
            }
        }
        run_ending = next;
    }
    while best_a > a_low && best_b > b_low && a[best_a - 1] == b[best_b - 1] {
        (best_a, best_b, best) = (best_a - 1, best_b - 1, best + 1);
    }
    while best_a + best < a_high && best_b + best < b_high && a[best_a + best] == b[best_b + best] {
        best += 1;
    }
    (best_a, best_b, best)
}

/// get_matching_blocks: the runs of equal lines, in order, adjacent ones
/// joined, ending with the empty run at both ends.
fn matching_blocks(a: &[String], b: &[String]) -> Vec<(usize, usize, usize)> {
    let index = line_index(b);
    let mut queue = vec![(0, a.len(), 0, b.len())];
    let mut blocks = Vec::new();
    while let Some((a_low, a_high, b_low, b_high)) = queue.pop() {
        let (i, j, k) = longest_match(a, b, &index, (a_low, a_high), (b_low, b_high));
        if k == 0 {
            continue;
        }
        blocks.push((i, j, k));
        if a_low < i && b_low < j {
            queue.push((a_low, i, b_low, j));
        }
        if i + k < a_high && j + k < b_high {
            queue.push((i + k, a_high, j + k, b_high));
        }
    }
    blocks.sort_unstable();
    let mut joined: Vec<(usize, usize, usize)> = Vec::new();
    for (i, j, k) in blocks {
        match joined.last_mut() {
            Some(last) if last.0 + last.2 == i && last.1 + last.2 == j => last.2 += k,
            _ => joined.push((i, j, k)),
        }
    }
    joined.push((a.len(), b.len(), 0));
    joined
}

/// get_opcodes.
fn opcodes(a: &[String], b: &[String]) -> Vec<Opcode> {
    let (mut i, mut j) = (0, 0);
    let mut codes = Vec::new();
    for (a_at, b_at, size) in matching_blocks(a, b) {
        let tag = match (i < a_at, j < b_at) {
            (true, true) => Some(Tag::Replace),
            (true, false) => Some(Tag::Delete),
            (false, true) => Some(Tag::Insert),
            (false, false) => None,
        };
        if let Some(tag) = tag {
            codes.push(Opcode {
                tag,
                a: (i, a_at),
                b: (j, b_at),
            });
        }
        (i, j) = (a_at + size, b_at + size);
        if size > 0 {
            codes.push(Opcode {
                tag: Tag::Equal,
                a: (a_at, i),
                b: (b_at, j),
            });
        }
    }
    codes
}

/// get_grouped_opcodes: the changes with `context` equal lines around
/// them, split where more than twice that many equal lines lie between.
fn grouped_opcodes(codes: &[Opcode], context: usize) -> Vec<Vec<Opcode>> {
    let mut codes = codes.to_vec();
    if codes.is_empty() {
        codes.push(Opcode {
            tag: Tag::Equal,
            a: (0, 1),
            b: (0, 1),
        });
    }
    if let Some(first) = codes.first_mut().filter(|c| c.tag == Tag::Equal) {
        first.a.0 = first.a.0.max(first.a.1.saturating_sub(context));
        first.b.0 = first.b.0.max(first.b.1.saturating_sub(context));
    }
    if let Some(last) = codes.last_mut().filter(|c| c.tag == Tag::Equal) {
        last.a.1 = last.a.1.min(last.a.0 + context);
        last.b.1 = last.b.1.min(last.b.0 + context);
    }
    let mut groups = Vec::new();
    let mut group: Vec<Opcode> = Vec::new();
    for mut code in codes {
        if code.tag == Tag::Equal && code.a.1 - code.a.0 > 2 * context {
            group.push(Opcode {
                tag: Tag::Equal,
                a: (code.a.0, code.a.1.min(code.a.0 + context)),
                b: (code.b.0, code.b.1.min(code.b.0 + context)),
            });
            groups.push(std::mem::take(&mut group));
            code.a.0 = code.a.0.max(code.a.1.saturating_sub(context));
            code.b.0 = code.b.0.max(code.b.1.saturating_sub(context));
        }
        group.push(code);
    }
    // A group of nothing but equal lines is no hunk.
    let only_equal = group.iter().all(|code| code.tag == Tag::Equal);
    if !only_equal {
        groups.push(group);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        file_lines(text)
    }

    #[test]
    fn a_changed_line_with_its_context() {
        let a = lines("1\n2\n3\n4\n5\n6\n7\n8\n9\n");
        let b = lines("1\n2\n3\n4\nfive\n6\n7\n8\n9\n");
        assert_eq!(
            unified_diff(&a, &b, "before: f", "after: f", 3).concat(),
            "--- before: f\n+++ after: f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn a_new_file_and_a_missing_newline() {
        let diff = unified_diff(&lines(""), &lines("x"), "before", "after", 3).concat();
        assert_eq!(
            diff,
            "--- before\n+++ after\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn distant_changes_are_separate_hunks() {
        let a: Vec<String> = (0..20).map(|i| format!("{i}\n")).collect();
        let mut b = a.clone();
        b[1] = "one\n".into();
        b[18] = "eighteen\n".into();
        let diff = unified_diff(&a, &b, "before", "after", 3);
        let hunks: Vec<&String> = diff.iter().filter(|l| l.starts_with("@@")).collect();
        assert_eq!(hunks, ["@@ -1,5 +1,5 @@\n", "@@ -16,5 +16,5 @@\n"]);
    }

    #[test]
    fn equal_sides_show_nothing() {
        let a = lines("same\n");
        assert!(unified_diff(&a, &a, "before", "after", 3).is_empty());
    }
}
