//! Label selectors as the API server reads them (apimachinery's
//! `labels.Parse`), to filter a cached list the way the server would. What
//! this parser does not take is left to the API server, which answers it
//! (or refuses it) itself: a cache never guesses.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    DoesNotExist(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses `text`; `None` for anything outside the selector grammar, or
    /// a key or value the API server would refuse.
    pub fn parse(text: &str) -> Option<Self> {
        let mut requirements = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return None;
            }
            requirements.push(requirement(part)?);
        }
        Some(LabelSelector(requirements))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Exists(key) => label(key).is_some(),
            Requirement::DoesNotExist(key) => label(key).is_none(),
            Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
            Requirement::In(key, values) => {
                label(key).is_some_and(|v| values.iter().any(|w| w == v))
            }
            Requirement::NotIn(key, values) => {
                label(key).is_none_or(|v| values.iter().all(|w| w != v))
            }
            Requirement::GreaterThan(key, bound) => label(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *bound),
            Requirement::LessThan(key, bound) => label(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *bound),
        })
    }
}

/// The requirements of `text`, split at commas outside parentheses; `None`
/// when the parentheses do not balance.
fn split_top_level(text: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    (depth == 0).then(|| {
        parts.push(&text[start..]);
        parts
    })
}

fn requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        return key_of(key.trim()).map(Requirement::DoesNotExist);
    }
    for (operator, make) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(operator) {
            return Some(make(key_of(key.trim())?, value_of(value.trim())?));
        }
    }
    for (operator, make) in [
        (
            ">",
            Requirement::GreaterThan as fn(String, i64) -> Requirement,
        ),
        ("<", Requirement::LessThan),
    ] {
        if let Some((key, bound)) = part.split_once(operator) {
            return Some(make(key_of(key.trim())?, bound.trim().parse().ok()?));
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = key_of(words.next()?.trim())?;
    let Some(rest) = words.next().map(str::trim) else {
        return Some(Requirement::Exists(key));
    };
    let (negated, set) = if let Some(set) = rest.strip_prefix("notin") {
        (true, set)
    } else {
        (false, rest.strip_prefix("in")?)
    };
    let set = set.trim().strip_prefix('(')?.strip_suffix(')')?;
    let values: Option<Vec<String>> = set.split(',').map(|v| value_of(v.trim())).collect();
    let values = values?;
    Some(if negated {
        Requirement::NotIn(key, values)
    } else {
        Requirement::In(key, values)
    })
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 characters, alphanumeric at both ends.
fn key_of(text: &str) -> Option<String> {
    let name = match text.rsplit_once('/') {
        Some((prefix, name)) => {
            let prefix_ok = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                });
            if !prefix_ok {
                return None;
            }
            name
        }
        None => text,
    };
    (!name.is_empty() && name_ok(name)).then(|| text.to_owned())
}

/// A label value: empty, or a name of at most 63 characters.
fn value_of(text: &str) -> Option<String> {
    (text.is_empty() || name_ok(text)).then(|| text.to_owned())
}

fn name_ok(text: &str) -> bool {
    let bytes = text.as_bytes();
    text.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selects(selector: &str, pairs: &[(&str, &str)]) -> bool {
        let labels: BTreeMap<String, String> =
            pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect();
        let selector = LabelSelector::parse(selector).expect("parses");
        selector.matches(Some(&labels))
    }

    #[test]
    fn every_operator_of_the_grammar() {
        let song = [
            ("hikawa.zundokokiyoshi.kaitoy.github.com", "h1"),
            ("size", "3"),
        ];
        assert!(selects(
            "hikawa.zundokokiyoshi.kaitoy.github.com = h1",
            &song
        ));
        assert!(selects(
            "hikawa.zundokokiyoshi.kaitoy.github.com==h1",
            &song
        ));
        assert!(!selects(
            "hikawa.zundokokiyoshi.kaitoy.github.com!=h1",
            &song
        ));
        assert!(selects("size", &song));
        assert!(selects("!missing", &song));
        assert!(!selects("!size", &song));
        assert!(selects("size in (2, 3)", &song));
        assert!(!selects("size notin (2,3)", &song));
        assert!(selects("missing notin (2,3)", &song));
        assert!(selects("size > 2, size < 4", &song));
        assert!(!selects("size > 3", &song));
        assert!(selects("app.kubernetes.io/name!=other,size", &song));
        assert!(selects("", &song));
        assert!(!selects("empty=", &song));
        assert!(selects("empty=", &[("empty", "")]));
    }

    #[test]
    fn what_the_api_server_would_refuse_is_left_to_it() {
        for text in [
            "a=b,",
            ",a",
            "a in (b",
            "a in b",
            "a =~ b",
            "-a=b",
            "a=b c",
            "Upper/a=b",
            "a > b",
            "a b c",
        ] {
            assert_eq!(LabelSelector::parse(text), None, "{text}");
        }
    }
}
