//! Which filters, tests and lookups a template names, found without running
//! it, so that loading can tell which of them enka lacks (and hand those to
//! Ansible) and report a name that exists nowhere before any reconcile.

/// What a template names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// `x | name`.
    Filter,
    /// `x is name`.
    Test,
    /// `lookup('name', …)`, `query('name', …)`, `q('name', …)`.
    Lookup,
}

impl PluginKind {
    /// The word Ansible uses for it.
    pub fn word(self) -> &'static str {
        match self {
            PluginKind::Filter => "filter",
            PluginKind::Test => "test",
            PluginKind::Lookup => "lookup",
        }
    }
}

/// One name and the byte offset where it stands in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginUse {
    pub kind: PluginKind,
    pub name: String,
    pub offset: usize,
}

/// The plugins named in a template (`expression: false`) or in a bare
/// expression such as a `when` (`expression: true`).
pub fn plugin_uses(source: &str, expression: bool) -> Vec<PluginUse> {
    let mut out = Vec::new();
    if expression {
        scan_code(source, 0, &mut out);
        return out;
    }
    let mut rest = 0;
    while let Some(start) = find_open(&source[rest..]) {
        let open = rest + start;
        let close_marker = if source[open..].starts_with("{{") {
            "}}"
        } else {
            "%}"
        };
        let body_start = open + 2;
        let body_end = match find_close(&source[body_start..], close_marker) {
            Some(end) => body_start + end,
            None => source.len(),
        };
        scan_code(&source[body_start..body_end], body_start, &mut out);
        rest = (body_end + 2).min(source.len());
    }
    out
}

fn find_open(text: &str) -> Option<usize> {
    let a = text.find("{{");
    let b = text.find("{%");
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The end of a block, skipping string literals inside it.
fn find_close(text: &str, marker: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => i = skip_string(bytes, i, q),
            // Bytes, not `text[i..]`: `i` may be inside a multi-byte
            // character (found by the role fuzz target).
            _ if bytes[i..].starts_with(marker.as_bytes()) => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the string literal opening at `start`.
fn skip_string(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != quote {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    (i + 1).min(bytes.len())
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A dotted name (`community.general.json_query`) at `i`, or None.
fn dotted_name(bytes: &[u8], mut i: usize) -> Option<(usize, usize)> {
    let start = i;
    if i >= bytes.len() || !is_ident_start(bytes[i]) {
        return None;
    }
    loop {
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        if i + 1 < bytes.len() && bytes[i] == b'.' && is_ident_start(bytes[i + 1]) {
            i += 1;
            continue;
        }
        return Some((start, i));
    }
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn scan_code(code: &str, base: usize, out: &mut Vec<PluginUse>) {
    let bytes = code.as_bytes();
    let mut push = |kind, start: usize, end: usize| {
        out.push(PluginUse {
            kind,
            name: code[start..end].to_owned(),
            offset: base + start,
        });
    };
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\'' || b == b'"' {
            i = skip_string(bytes, i, b);
            continue;
        }
        if b == b'|' {
            let at = skip_space(bytes, i + 1);
            if let Some((start, end)) = dotted_name(bytes, at) {
                push(PluginKind::Filter, start, end);
                i = end;
                continue;
            }
            i += 1;
            continue;
        }
        if is_ident_start(b) && (i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == b'.')) {
            let Some((start, end)) = dotted_name(bytes, i) else {
                i += 1;
                continue;
            };
            let word = &code[start..end];
            match word {
                "is" => {
                    let mut at = skip_space(bytes, end);
                    if code[at..].starts_with("not")
                        && bytes.get(at + 3).is_some_and(|c| c.is_ascii_whitespace())
                    {
                        at = skip_space(bytes, at + 3);
                    }
                    if let Some((s, e)) = dotted_name(bytes, at) {
                        push(PluginKind::Test, s, e);
                        i = e;
                        continue;
                    }
                }
                "lookup" | "query" | "q" => {
                    let paren = skip_space(bytes, end);
                    if bytes.get(paren) == Some(&b'(') {
                        let at = skip_space(bytes, paren + 1);
                        if let Some(&q @ (b'\'' | b'"')) = bytes.get(at) {
                            let close = skip_string(bytes, at, q);
                            if close > at + 1 && bytes.get(close - 1) == Some(&q) {
                                push(PluginKind::Lookup, at + 1, close - 1);
                            }
                        }
                    }
                }
                _ => {}
            }
            i = end;
            continue;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(source: &str, expression: bool) -> Vec<(PluginKind, String)> {
        plugin_uses(source, expression)
            .into_iter()
            .map(|u| (u.kind, u.name))
            .collect()
    }

    #[test]
    fn finds_filters_tests_and_lookups() {
        use PluginKind::*;
        assert_eq!(
            names(
                "a {{ x | default('|b') | community.general.json_query('y') }} {% if z is not defined %}{{ lookup('env', 'HOME') }}{% endif %}",
                false
            ),
            vec![
                (Filter, "default".into()),
                (Filter, "community.general.json_query".into()),
                (Test, "defined".into()),
                (Lookup, "env".into()),
            ]
        );
        assert_eq!(
            names(
                "x is version('1.2', '>=') and q(\"k8s\", kind='Pod') | length > 0",
                true
            ),
            vec![
                (Test, "version".into()),
                (Lookup, "k8s".into()),
                (Filter, "length".into())
            ]
        );
    }

    #[test]
    fn multi_byte_text_inside_a_block() {
        assert_eq!(
            names("{{ 'é' ~ x | upper }} ü {{ y | lower }}", false),
            vec![
                (PluginKind::Filter, "upper".into()),
                (PluginKind::Filter, "lower".into())
            ]
        );
        // The fuzz target's crash: an unclosed string before a multi-byte
        // character; whatever it names, it must not panic.
        let _ = plugin_uses("{{ lookup(\u{659}nv', 'HOME' }} é {{ x | ü }}", false);
    }

    #[test]
    fn ignores_text_outside_blocks_and_inside_strings() {
        assert!(names("a | b is c lookup('x')", false).is_empty());
        assert!(names("{{ 'x | y is z' }}", false).is_empty());
        assert!(names("{{ this_is_x }}", false).is_empty());
        assert_eq!(
            plugin_uses("ab {{ x | cpu }}", false)[0].offset,
            "ab {{ x | ".len()
        );
    }
}
