//! Paths and URLs: `basename`, `dirname`, `splitext`, `path_join`,
//! `urlsplit`, `urlencode`, `urldecode`, as Python's `os.path` and
//! `urllib.parse` compute them.

use minijinja::{Environment, Error, Value};

use super::{add, defined, invalid};
use crate::template::pyrepr;

pub fn register(env: &mut Environment<'static>) {
    add!(env, "basename", basename);
    add!(env, "dirname", dirname);
    add!(env, "splitext", splitext);
    add!(env, "path_join", path_join);
    add!(env, "urlsplit", urlsplit);
    add!(env, "urlencode", urlencode);
    add!(env, "urldecode", urldecode);
}

/// What Python's `urllib.parse.quote` leaves alone besides `safe`.
const QUOTED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// [`QUOTED`] with `/` safe, as `quote` has it by default.
const QUOTED_PATH: &percent_encoding::AsciiSet = &QUOTED.remove(b'/');

/// Jinja's `url_quote`: `/` is safe except in a query string, where a
/// space is `+`.
fn url_quote(value: &Value, for_query: bool) -> String {
    let text = pyrepr::to_text(value);
    if for_query {
        percent_encoding::utf8_percent_encode(&text, QUOTED)
            .to_string()
            .replace("%20", "+")
    } else {
        percent_encoding::utf8_percent_encode(&text, QUOTED_PATH).to_string()
    }
}

/// Jinja's `urlencode`: a string quoted; a dict, or an iterable of pairs,
/// as a query string.
fn urlencode(value: &Value) -> Result<Value, Error> {
    use minijinja::value::ValueKind;
    defined(value, "urlencode")?;
    let pairs: Vec<(Value, Value)> = match value.kind() {
        ValueKind::Map => value
            .try_iter()?
            .map(|k| {
                let v = value.get_item(&k).unwrap_or_default();
                (k, v)
            })
            .collect(),
        ValueKind::Seq | ValueKind::Iterable => value
            .try_iter()?
            .map(|item| {
                let mut two = item.try_iter().map_err(|_| {
                    invalid(format!(
                        "cannot unpack non-iterable {} object",
                        pyrepr::type_name(&item)
                    ))
                })?;
                match (two.next(), two.next(), two.next()) {
                    (Some(k), Some(v), None) => Ok((k, v)),
                    _ => Err(invalid("urlencode: each item must be a (key, value) pair")),
                }
            })
            .collect::<Result<_, Error>>()?,
        _ => return Ok(Value::from(url_quote(value, false))),
    };
    Ok(Value::from(
        pairs
            .iter()
            .map(|(k, v)| format!("{}={}", url_quote(k, true), url_quote(v, true)))
            .collect::<Vec<_>>()
            .join("&"),
    ))
}

/// Ansible's `urldecode`: Python's `unquote_plus`.
fn urldecode(value: &Value) -> Result<Value, Error> {
    let text = text(value, "urldecode")?.replace('+', " ");
    Ok(Value::from(
        percent_encoding::percent_decode_str(&text)
            .decode_utf8_lossy()
            .into_owned(),
    ))
}

fn text(value: &Value, what: &str) -> Result<String, Error> {
    defined(value, what)?;
    Ok(pyrepr::to_text(value))
}

/// `os.path.basename`: everything after the last `/`.
fn basename(value: &Value) -> Result<Value, Error> {
    let path = text(value, "basename")?;
    Ok(Value::from(path.rsplit('/').next().unwrap_or_default()))
}

/// `os.path.dirname`: everything before the last `/`, with trailing
/// slashes stripped unless the result is all slashes.
fn dirname(value: &Value) -> Result<Value, Error> {
    let path = text(value, "dirname")?;
    let head = match path.rfind('/') {
        Some(i) => &path[..=i],
        None => "",
    };
    let trimmed = head.trim_end_matches('/');
    Ok(Value::from(if trimmed.is_empty() { head } else { trimmed }))
}

fn splitext(value: &Value) -> Result<Value, Error> {
    let path = text(value, "splitext")?;
    let base_start = path.rfind('/').map_or(0, |i| i + 1);
    let base = &path[base_start..];
    let leading_dots = base.len() - base.trim_start_matches('.').len();
    let split = base[leading_dots..]
        .rfind('.')
        .map(|i| base_start + leading_dots + i);
    Ok(match split {
        Some(i) => super::tuple(vec![Value::from(&path[..i]), Value::from(&path[i..])]),
        None => super::tuple(vec![Value::from(path.as_str()), Value::from("")]),
    })
}

fn path_join(value: &Value) -> Result<Value, Error> {
    defined(value, "path_join")?;
    let parts: Vec<String> = match (value.as_str(), value.kind()) {
        (Some(s), _) => vec![s.to_owned()],
        (None, minijinja::value::ValueKind::Seq | minijinja::value::ValueKind::Iterable) => {
            value.try_iter()?.map(|v| pyrepr::to_text(&v)).collect()
        }
        _ => {
            return Err(super::invalid(format!(
                "|path_join expects string or sequence, got <class '{}'> instead.",
                pyrepr::type_name(value)
            )));
        }
    };
    let mut out = String::new();
    for part in parts {
        if part.starts_with('/') {
            out = part;
        } else if out.is_empty() || out.ends_with('/') {
            out.push_str(&part);
        } else {
            out.push('/');
            out.push_str(&part);
        }
    }
    Ok(Value::from(out))
}

/// `urllib.parse.urlsplit`, as Ansible's `urlsplit(query='')` returns it.
fn urlsplit(value: &Value, query: Option<String>) -> Result<Value, Error> {
    let url = text(value, "urlsplit")?;
    let (scheme, rest) = match url.find(':') {
        Some(i)
            if i > 0
                && url[..i]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic())
                && url[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            (url[..i].to_lowercase(), &url[i + 1..])
        }
        _ => (String::new(), url.as_str()),
    };
    let (netloc, rest) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (&after[..end], &after[end..])
        }
        None => ("", rest),
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (path, query_part) = rest.split_once('?').unwrap_or((rest, ""));
    let userinfo_end = netloc.rfind('@');
    let (userinfo, hostport) = match userinfo_end {
        Some(i) => (Some(&netloc[..i]), &netloc[i + 1..]),
        None => (None, netloc),
    };
    let (username, password) = match userinfo {
        Some(info) => match info.split_once(':') {
            Some((u, p)) => (Value::from(u), Value::from(p)),
            None => (Value::from(info), Value::from(())),
        },
        None => (Value::from(()), Value::from(())),
    };
    let (hostname, port) = if let Some(stripped) = hostport.strip_prefix('[') {
        let end = stripped.find(']').unwrap_or(stripped.len());
        let port = stripped[end..]
            .strip_prefix("]:")
            .and_then(|p| p.parse::<u16>().ok());
        (stripped[..end].to_lowercase(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_lowercase(), p.parse::<u16>().ok()),
            None => (hostport.to_lowercase(), None),
        }
    };
    let fields = [
        ("fragment", Value::from(fragment)),
        (
            "hostname",
            if hostname.is_empty() {
                Value::from(())
            } else {
                Value::from(hostname)
            },
        ),
        ("netloc", Value::from(netloc)),
        ("password", password),
        ("path", Value::from(path)),
        ("port", port.map(Value::from).unwrap_or(Value::from(()))),
        ("query", Value::from(query_part)),
        ("scheme", Value::from(scheme)),
        ("username", username),
    ];
    match query.as_deref() {
        None | Some("") => Ok(Value::from_pairs(
            fields.into_iter().map(|(k, v)| (Value::from(k), v)),
        )),
        Some(q) => fields
            .into_iter()
            .find(|(k, _)| *k == q)
            .map(|(_, v)| v)
            .ok_or_else(|| invalid(format!("urlsplit: unknown URL component: {q}"))),
    }
}
