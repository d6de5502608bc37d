//! Python's `shlex.split` in POSIX mode: words split at spaces, tabs and
//! line ends; quotes and backslashes taken away as a POSIX shell takes
//! them (inside double quotes a backslash escapes only `"` and itself);
//! with `comments`, a `#` outside quotes ends the line.

/// Why Python's `shlex.split` raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShlexError {
    #[error("No closing quotation")]
    NoClosingQuotation,
    #[error("No escaped character")]
    NoEscapedCharacter,
}

/// `shlex.split(text, comments=comments)`.
pub fn split(text: &str, comments: bool) -> Result<Vec<String>, ShlexError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '#' if comments => {
                // The rest of the line is a comment; the next line goes on.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                word.push(chars.next().ok_or(ShlexError::NoEscapedCharacter)?);
                in_word = true;
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next().ok_or(ShlexError::NoClosingQuotation)? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next().ok_or(ShlexError::NoClosingQuotation)? {
                        '"' => break,
                        '\\' => match chars.next().ok_or(ShlexError::NoEscapedCharacter)? {
                            c @ ('"' | '\\') => word.push(c),
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c => word.push(c),
                    }
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_python_shlex_splits_them() {
        let split = |line: &str, comments| split(line, comments).map(|w| w.join("|"));
        assert_eq!(
            split(r#"h a="x y" b='c d'e c=\"q"#, true),
            Ok(r#"h|a=x y|b=c de|c="q"#.into())
        );
        assert_eq!(split("h a=1#comment b=2", true), Ok("h|a=1".into()));
        assert_eq!(
            split("h a=1#not-a-comment", false),
            Ok("h|a=1#not-a-comment".into())
        );
        assert_eq!(split(r#"h a="1\2\"""#, true), Ok(r#"h|a=1\2""#.into()));
        assert_eq!(split("h a=''", true), Ok("h|a=".into()));
        assert_eq!(
            split("echo 'a b' \"c d\" e\\ f", false),
            Ok("echo|a b|c d|e f".into())
        );
        assert_eq!(
            split("h a='open", true),
            Err(ShlexError::NoClosingQuotation)
        );
        assert_eq!(split("h a\\", true), Err(ShlexError::NoEscapedCharacter));
    }
}
