//! Ansible's Display wraps warnings and deprecations with Python's
//! `textwrap.wrap` at the terminal's width (79 columns off a terminal);
//! scripts compare that output line by line (ansible-core's `assert`
//! target), so `enka playbook` wraps the same way.

/// The width Ansible's Display wraps at: the terminal's width less one,
/// and never under 79 (off a terminal, 79).
pub fn display_columns() -> usize {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|_| terminal)
        .unwrap_or(0);
    columns.saturating_sub(1).max(79)
}

/// `textwrap.wrap(text, width)` with Python's defaults: whitespace runs
/// and words (split after a hyphen between letters) are laid out
/// greedily, whitespace dropped at line ends, and a word longer than a
/// line broken (at its last hyphen that fits, else at the width).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let text: String = text
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let mut chunks: Vec<Vec<char>> = chunks(&text);
    chunks.reverse();
    let mut lines: Vec<String> = Vec::new();
    while !chunks.is_empty() {
        let mut line: Vec<Vec<char>> = Vec::new();
        let mut len = 0;
        if !lines.is_empty() && chunks.last().is_some_and(|c| is_space(c)) {
            chunks.pop();
        }
        while let Some(chunk) = chunks.last() {
            if len + chunk.len() > width {
                break;
            }
            len += chunk.len();
            line.extend(chunks.pop());
        }
        if let Some(chunk) = chunks.last_mut()
            && chunk.len() > width
        {
            let space_left = width.saturating_sub(len).max(1);
            let mut end = space_left;
            if chunk.len() > space_left
                && let Some(hyphen) = chunk[..space_left].iter().rposition(|&c| c == '-')
                && hyphen > 0
                && chunk[..hyphen].iter().any(|&c| c != '-')
            {
                end = hyphen + 1;
            }
            let rest = chunk.split_off(end);
            line.push(std::mem::replace(chunk, rest));
        }
        if line.last().is_some_and(|c| is_space(c)) {
            line.pop();
        }
        if !line.is_empty() {
            lines.push(line.concat().into_iter().collect());
        }
    }
    lines
}

fn is_space(chunk: &[char]) -> bool {
    chunk.iter().all(|&c| c == ' ')
}

/// TextWrapper.wordsep_re's chunks: runs of spaces, and words, a word
/// split after each hyphen that follows two letters (or letter, hyphen,
/// letter) and precedes a letter (after an optional hyphen) and a letter.
fn chunks(text: &str) -> Vec<Vec<char>> {
    let chars: Vec<char> = text.chars().collect();
    let letter = |i: usize| chars.get(i).is_some_and(|&c| c == '_' || c.is_alphabetic());
    let mut out: Vec<Vec<char>> = Vec::new();
    let mut current: Vec<char> = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        let space = c == ' ';
        if !current.is_empty() && (current[0] == ' ') != space {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
        if c == '-' && !space {
            let before = (i >= 2 && letter(i - 1) && letter(i - 2))
                || (i >= 3 && letter(i - 1) && chars[i - 2] == '-' && letter(i - 3));
            let after = letter(i + 1)
                && (letter(i + 2) || (chars.get(i + 2) == Some(&'-') && letter(i + 3)));
            if before && after {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    /// Expected lines are Python 3.11's `textwrap.wrap(text, 79)`.
    #[test]
    fn wraps_as_pythons_textwrap() {
        assert_eq!(
            wrap(
                "[WARNING]: conditional statements should not include jinja2 templating delimiters such as {{ }} or {% %}. Found: \"{{ foo }}\" == \"bar\"",
                79
            ),
            [
                "[WARNING]: conditional statements should not include jinja2 templating",
                "delimiters such as {{ }} or {% %}. Found: \"{{ foo }}\" == \"bar\""
            ]
        );
        assert_eq!(
            wrap(
                "[DEPRECATION WARNING]: Conditional result at location /root/.cache/enka/ansible-core-sdist/2.18.19/ansible_core-2.18.19/test/integration/targets/conditionals/broken_conditional_with_location.yml 6:13 was of type 'int'. Conditional results should only be True or False.",
                79
            ),
            [
                "[DEPRECATION WARNING]: Conditional result at location",
                "/root/.cache/enka/ansible-core-sdist/2.18.19/ansible_core-",
                "2.18.19/test/integration/targets/conditionals/broken_conditional_with_location.",
                "yml 6:13 was of type 'int'. Conditional results should only be True or False."
            ]
        );
        assert_eq!(
            wrap(
                "[WARNING]: a well-known long-standing issue with x-ray and self-contained word-splitting e-mail",
                79
            ),
            [
                "[WARNING]: a well-known long-standing issue with x-ray and self-contained word-",
                "splitting e-mail"
            ]
        );
        let long = format!("{} b", "a".repeat(100));
        assert_eq!(
            wrap(&long, 79),
            ["a".repeat(79), format!("{} b", "a".repeat(21))]
        );
    }
}
