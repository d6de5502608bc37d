//! A template file's Jinja settings: what the `template` lookup's options
//! say, then what the file's own first line says (Ansible's `#jinja2:`
//! header, `#jinja2: variable_start_string:'<<', trim_blocks: False`),
//! which wins and is not part of the output.

use minijinja::Error;
use minijinja::syntax::SyntaxConfig;

use super::invalid;

/// The first line that sets a file's own Jinja settings.
pub(super) const HEADER: &str = "#jinja2:";

/// Jinja settings by name, as text (`'<<'`, `False`), later ones winning.
pub(super) type Settings = Vec<(String, String)>;

/// The settings `#jinja2:` may name that change how enka parses a file.
const KEYS: &[&str] = &[
    "variable_start_string",
    "variable_end_string",
    "block_start_string",
    "block_end_string",
    "comment_start_string",
    "comment_end_string",
    "trim_blocks",
    "lstrip_blocks",
];

/// The settings the header of `source` names, and the source without it;
/// no settings when it has none.
pub(super) fn split_header(source: &str) -> Result<(Settings, &str), Error> {
    let Some(rest) = source.strip_prefix(HEADER) else {
        return Ok((Vec::new(), source));
    };
    let (line, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let mut settings = Vec::new();
    for pair in line.split(',') {
        let Some((key, value)) = pair.split_once(':') else {
            return Err(invalid(format!(
                "failed to parse jinja2 override '{}'. Did you use something different from colon as key-value separator?",
                pair.trim()
            )));
        };
        settings.push((key.trim().to_owned(), python_literal(value.trim())?));
    }
    Ok((settings, body))
}

/// A header's value, as `ast.literal_eval` reads the strings and booleans
/// it may hold.
fn python_literal(text: &str) -> Result<String, Error> {
    let quoted = ['\'', '"']
        .iter()
        .find_map(|q| text.strip_prefix(*q).and_then(|t| t.strip_suffix(*q)));
    match (quoted, text) {
        (Some(inner), _) => Ok(inner.to_owned()),
        (None, "True" | "False") => Ok(text.to_owned()),
        (None, _) => Err(invalid(format!(
            "failed to parse jinja2 override value {text:?}"
        ))),
    }
}

/// The syntax `settings` describe (later ones win), or `None` when they
/// change nothing enka parses.
pub(super) fn syntax(settings: &[(String, String)]) -> Result<Option<SyntaxConfig>, Error> {
    if !settings.iter().any(|(key, _)| KEYS.contains(&key.as_str())) {
        return Ok(None);
    }
    let get = |key: &str, default: &str| -> String {
        settings
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map_or_else(|| default.to_owned(), |(_, v)| v.clone())
    };
    let flag = |key: &str, default: bool| match get(key, "").as_str() {
        "" => default,
        value => matches!(value, "True" | "true" | "yes" | "1"),
    };
    SyntaxConfig::builder()
        .variable_delimiters(
            get("variable_start_string", "{{"),
            get("variable_end_string", "}}"),
        )
        .block_delimiters(
            get("block_start_string", "{%"),
            get("block_end_string", "%}"),
        )
        .comment_delimiters(
            get("comment_start_string", "{#"),
            get("comment_end_string", "#}"),
        )
        // Ansible's templates trim blocks unless told otherwise.
        .trim_blocks(flag("trim_blocks", true))
        .lstrip_blocks(flag("lstrip_blocks", false))
        .build()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_read_and_dropped() {
        let (settings, body) =
            split_header("#jinja2: variable_start_string:'<<', trim_blocks: False\nx << y >>")
                .unwrap();
        assert_eq!(
            settings,
            vec![
                ("variable_start_string".to_owned(), "<<".to_owned()),
                ("trim_blocks".to_owned(), "False".to_owned())
            ]
        );
        assert_eq!(body, "x << y >>");
        assert!(syntax(&settings).unwrap().is_some());
    }

    #[test]
    fn no_header_changes_nothing() {
        let (settings, body) = split_header("{{ x }}\n").unwrap();
        assert!(settings.is_empty());
        assert_eq!(body, "{{ x }}\n");
        assert!(syntax(&settings).unwrap().is_none());
    }

    #[test]
    fn a_pair_without_a_colon_is_refused() {
        assert!(split_header("#jinja2: trim_blocks=False\nx").is_err());
    }
}
