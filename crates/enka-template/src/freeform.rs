//! Ansible's free-form arguments: `debug: msg="hello {{ name }}"`,
//! `include_tasks: other.yml`, `set_fact: a=1 b="two words"`.

/// Ansible's `split_args`, word for word: lines split on spaces (a tab is
/// no separator), words put back together inside quotes and Jinja blocks,
/// runs of spaces kept on the word before them and each line's newline on
/// its last word, so `join_args` gives the text back (a `shell: |` script
/// keeps its indentation); a lone `\\` outside quotes continues the line.
/// Unbalanced quotes or blocks are left as they are (Ansible refuses them).
fn split_args(args: &str) -> Vec<String> {
    if args.is_empty() {
        return Vec::new();
    }
    let mut params: Vec<String> = Vec::new();
    let items: Vec<&str> = args.split('\n').collect();
    let mut quote: Option<char> = None;
    let mut inside_quotes = false;
    let (mut print_depth, mut block_depth, mut comment_depth) = (0usize, 0usize, 0usize);
    for (item_index, item) in items.iter().enumerate() {
        let mut line_continuation = false;
        for (index, token) in item.split(' ').enumerate() {
            if token.is_empty() && index != 0 {
                match params.last_mut() {
                    Some(last) => last.push(' '),
                    None => params.push(" ".to_owned()),
                }
                continue;
            }
            if token == "\\" && !inside_quotes {
                line_continuation = true;
                continue;
            }
            let was_inside_quotes = inside_quotes;
            quote = quote_state(token, quote);
            inside_quotes = quote.is_some();
            let in_block = print_depth > 0 || block_depth > 0 || comment_depth > 0;
            let mut appended = false;
            if inside_quotes && !was_inside_quotes && !in_block {
                params.push(token.to_owned());
                appended = true;
            } else if in_block || inside_quotes || was_inside_quotes {
                let spacer = if index == 0 { "" } else { " " };
                match params.last_mut() {
                    Some(last) => {
                        last.push_str(spacer);
                        last.push_str(token);
                    }
                    None => params.push(token.to_owned()),
                }
                appended = true;
            }
            for (depth, open, close) in [
                (&mut print_depth, "{{", "}}"),
                (&mut block_depth, "{%", "%}"),
                (&mut comment_depth, "{#", "#}"),
            ] {
                let before = *depth;
                *depth = count_blocks(token, before, open, close);
                if *depth != before && !appended {
                    params.push(token.to_owned());
                    appended = true;
                }
            }
            let in_block = print_depth > 0 || block_depth > 0 || comment_depth > 0;
            if !in_block && !inside_quotes && !appended && !token.is_empty() {
                params.push(token.to_owned());
            }
        }
        if items.len() > 1 && item_index != items.len() - 1 && !line_continuation {
            match params.last_mut() {
                Some(last) => last.push('\n'),
                None => params.push("\n".to_owned()),
            }
        }
    }
    params
}

/// `_get_quote_state`: the quote a word leaves open, given the one open
/// before it (a quote after a backslash does not count).
fn quote_state(token: &str, mut quote: Option<char>) -> Option<char> {
    let mut previous = None;
    for c in token.chars() {
        if matches!(c, '"' | '\'') && previous != Some('\\') {
            match quote {
                Some(open) if open == c => quote = None,
                Some(_) => {}
                None => quote = Some(c),
            }
        }
        previous = Some(c);
    }
    quote
}

/// `_count_jinja2_blocks`: the depth of one kind of Jinja block after a
/// word.
fn count_blocks(token: &str, depth: usize, open: &str, close: &str) -> usize {
    let (opened, closed) = (token.matches(open).count(), token.matches(close).count());
    if opened == closed {
        depth
    } else {
        (depth + opened).saturating_sub(closed)
    }
}

/// The first word of `action: <name> <args>` and the text after it; a
/// Jinja block in the name stays whole (`{{ prefix }}file path=x`).
pub fn first_word(text: &str) -> (&str, &str) {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' if matches!(bytes.get(i + 1), Some(b'{' | b'%')) => {
                depth += 1;
                i += 1;
            }
            b'}' | b'%' if depth > 0 && bytes.get(i + 1) == Some(&b'}') => {
                depth -= 1;
                i += 1;
            }
            c if depth == 0 && c.is_ascii_whitespace() => {
                return (&text[..i], text[i..].trim());
            }
            _ => {}
        }
        i += 1;
    }
    (text, "")
}

/// Ansible's `join_args`: words joined by a space, but none after a word
/// that ends its line.
pub fn join_args(words: &[String]) -> String {
    let mut joined = String::new();
    for word in words {
        if !joined.is_empty() && !joined.ends_with('\n') {
            joined.push(' ');
        }
        joined.push_str(word);
    }
    joined
}

/// Strips one pair of matching outer quotes.
fn unquote(s: &str) -> String {
    let bytes = s.as_bytes();
    if bytes.len() >= 2
        && (bytes[0] == b'"' || bytes[0] == b'\'')
        && bytes[bytes.len() - 1] == bytes[0]
    {
        s[1..s.len() - 1].to_owned()
    } else {
        s.to_owned()
    }
}

/// Parses `k=v` pairs; other words become `_raw_params` (joined by spaces).
pub fn parse_kv(args: &str) -> Vec<(String, String)> {
    let mut options = Vec::new();
    let mut raw = Vec::new();
    for (key, value, _) in parse_kv_tokens(args) {
        match key {
            Some(key) => options.push((key, value)),
            None => raw.push(value),
        }
    }
    if !raw.is_empty() {
        options.push(("_raw_params".to_owned(), join_args(&raw)));
    }
    options
}

/// Each word of `args`: `(Some(key), unquoted value, word)` for `k=v`, or
/// `(None, the word as a free-form word, the word)`. As in Ansible's
/// parse_kv, escapes in a word are decoded before its `=` is looked for; a
/// free-form word stays as written, unless its only `=` are escaped ones.
pub fn parse_kv_tokens(args: &str) -> Vec<(Option<String>, String, String)> {
    split_args(args)
        .into_iter()
        .map(|token| {
            let decoded = decode_escapes(&token);
            // The first `=` after the first character that is not escaped
            // splits key from value; any key, templates included
            // (`set_fact: "{{ item }}=x"` names its fact at run time).
            let eq = decoded
                .char_indices()
                .find(|&(i, c)| c == '=' && i > 0 && decoded.as_bytes()[i - 1] != b'\\')
                .map(|(i, _)| i);
            match eq {
                Some(i) if !decoded[..i].trim().is_empty() => {
                    // The value is stripped, as Ansible strips it: a word
                    // keeps the spaces after it and a line's newline.
                    (
                        Some(decoded[..i].trim().to_owned()),
                        unquote(decoded[i + 1..].trim()),
                        token,
                    )
                }
                _ if decoded.contains('=') => (None, decoded.replace("\\=", "="), token),
                _ => (None, token.clone(), token),
            }
        })
        .collect()
}

/// Ansible's `_decode_escapes`, applied to each word of free-form arguments
/// before `k=v` is looked for: `\\`, `\'`, `\"`, `\a` `\b` `\f` `\n` `\r`
/// `\t` `\v`, `\xHH`, `\uHHHH` and `\UHHHHHHHH` become the characters they
/// name (Python's unicode-escape); anything else, `\N{…}` included, stays.
fn decode_escapes(word: &str) -> std::borrow::Cow<'_, str> {
    if !word.contains('\\') {
        return std::borrow::Cow::Borrowed(word);
    }
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let hex = |digits: usize| -> Option<char> {
            let code = after.get(1..=digits)?;
            if !code.chars().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            char::from_u32(u32::from_str_radix(code, 16).ok()?)
        };
        let (decoded, used) = match after.chars().next() {
            Some('\\') => (Some('\\'), 1),
            Some('\'') => (Some('\''), 1),
            Some('"') => (Some('"'), 1),
            Some('a') => (Some('\u{7}'), 1),
            Some('b') => (Some('\u{8}'), 1),
            Some('f') => (Some('\u{c}'), 1),
            Some('n') => (Some('\n'), 1),
            Some('r') => (Some('\r'), 1),
            Some('t') => (Some('\t'), 1),
            Some('v') => (Some('\u{b}'), 1),
            Some('x') => (hex(2), 3),
            Some('u') => (hex(4), 5),
            Some('U') => (hex(8), 9),
            _ => (None, 0),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &after[used..];
            }
            None => {
                out.push('\\');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// The words Ansible still takes as options from a command line.
const COMMAND_OPTIONS: &[&str] = &[
    "creates",
    "removes",
    "chdir",
    "executable",
    "warn",
    "stdin",
    "stdin_add_newline",
    "strip_empty_ends",
];

/// `parse_kv(text, check_raw=True)`: only the command options are `k=v`.
pub fn command_kv(text: &str) -> Vec<(String, String)> {
    let mut options = Vec::new();
    let mut raw = Vec::new();
    for (k, v, word) in parse_kv_tokens(text) {
        match k {
            Some(k) if COMMAND_OPTIONS.contains(&k.as_str()) => options.push((k, v)),
            Some(_) => raw.push(word),
            None => raw.push(v),
        }
    }
    if !raw.is_empty() {
        options.push(("_raw_params".to_owned(), join_args(&raw)));
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(s: &str) -> Vec<(String, String)> {
        parse_kv(s)
    }

    /// Ansible's parse_kv takes any key before the first unescaped `=`
    /// that is not the first character, templates included.
    #[test]
    fn any_key_before_the_first_equals_sign() {
        assert_eq!(
            kv("{{ item }}=moo =x a\\=b"),
            vec![
                ("{{ item }}".into(), "moo".into()),
                // As ansible-core 2.18's parse_kv gives it: a word whose
                // only `=` is escaped loses the backslash.
                ("_raw_params".into(), "=x a=b".into())
            ]
        );
    }

    /// parse_kv decodes escapes in each word before splitting it: a
    /// regexp's `\\b` reaches the module as `\b`, `\t` as a tab.
    #[test]
    fn escapes_are_decoded_in_key_value_words() {
        assert_eq!(
            kv(r#"regexp='\\b(.+)\\b' line="a\tb" raw=\x41\u00e9 other=\q"#),
            vec![
                ("regexp".into(), r"\b(.+)\b".into()),
                ("line".into(), "a\tb".into()),
                ("raw".into(), "Aé".into()),
                ("other".into(), r"\q".into()),
            ]
        );
        assert_eq!(kv(r"regexp='\b'"), vec![("regexp".into(), "\u{8}".into())]);
        // A free-form word stays as written; one whose only `=` are escaped
        // loses their backslashes.
        assert_eq!(
            kv(r"echo \t a\=b"),
            vec![("_raw_params".into(), r"echo \t a=b".into())]
        );
    }

    #[test]
    fn an_action_name_keeps_its_template_whole() {
        assert_eq!(
            first_word("{{ prefix }}file path=/x state=absent"),
            ("{{ prefix }}file", "path=/x state=absent")
        );
        assert_eq!(first_word("{{ a ~ 'b' }}"), ("{{ a ~ 'b' }}", ""));
        assert_eq!(first_word("debug  msg=hi"), ("debug", "msg=hi"));
    }

    #[test]
    fn pairs_and_quotes() {
        assert_eq!(
            kv(r#"msg="hello {{ name }}" verbosity=2"#),
            vec![
                ("msg".into(), "hello {{ name }}".into()),
                ("verbosity".into(), "2".into())
            ]
        );
        assert_eq!(
            kv("a='x y' b=z"),
            vec![("a".into(), "x y".into()), ("b".into(), "z".into())]
        );
    }

    #[test]
    fn raw_params() {
        assert_eq!(
            kv("end_play"),
            vec![("_raw_params".into(), "end_play".into())]
        );
        assert_eq!(
            kv("tasks/{{ item }}.yml"),
            vec![("_raw_params".into(), "tasks/{{ item }}.yml".into())]
        );
        assert_eq!(
            kv("file.yml name=x"),
            vec![
                ("name".into(), "x".into()),
                ("_raw_params".into(), "file.yml".into())
            ]
        );
    }

    /// What ansible-core 2.18.19's `parse_kv(text, check_raw=True)` gives,
    /// recorded with its splitter, runs of spaces included.
    #[test]
    fn multi_line_commands_keep_their_lines_and_lose_continuations() {
        let raw = |text: &str| {
            command_kv(text)
                .into_iter()
                .find(|(k, _)| k == "_raw_params")
                .map(|(_, v)| v)
                .unwrap_or_default()
        };
        assert_eq!(
            raw(
                "openssl req -x509 -key /tmp/k \\\n  -subj \"/CN=x y\" \\\n  -days 3650 -out /tmp/c\n"
            ),
            "openssl req -x509 -key /tmp/k  -subj \"/CN=x y\"  -days 3650 -out /tmp/c\n"
        );
        // A heredoc keeps its indentation (ansible-tests command_shell).
        assert_eq!(
            raw("cat <<EOF\nOne\n  Two\n    Three\nEOF\n"),
            "cat <<EOF\nOne\n  Two\n    Three\nEOF\n"
        );
        // A tab separates nothing.
        assert_eq!(raw("printf 'a'\t'b'"), "printf 'a'\t'b'");
        assert_eq!(raw("echo a\necho b\n"), "echo a\necho b\n");
        assert_eq!(
            raw("if true; then\n  echo yes\nfi\n"),
            "if true; then\n  echo yes\nfi\n"
        );
        assert_eq!(raw("echo a \\ b"), "echo a b");
        assert_eq!(
            raw("echo {{ x }}\necho '{{ y }}\nz'\n"),
            "echo {{ x }}\necho '{{ y }}\nz'\n"
        );
        assert_eq!(
            kv("a=\"x\"   b='y' c=z  "),
            vec![
                ("a".into(), "x".into()),
                ("b".into(), "y".into()),
                ("c".into(), "z".into())
            ]
        );
        assert_eq!(
            kv("msg=a\nverbosity=2"),
            vec![("msg".into(), "a".into()), ("verbosity".into(), "2".into())]
        );
    }

    #[test]
    fn jinja_blocks_stay_whole() {
        assert_eq!(
            kv("msg={{ a | default('b c') }}"),
            vec![("msg".into(), "{{ a | default('b c') }}".into())]
        );
    }
}
