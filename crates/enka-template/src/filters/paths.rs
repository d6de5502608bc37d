//! Paths and URLs: `basename`, `dirname`, `splitext`, `path_join`,
//! `urlsplit`, `urlencode`, `urldecode`, as Python's `os.path` and
//! `urllib.parse` compute them.

use minijinja::value::ValueKind;
use minijinja::{Error, State, Value};

use super::{defined, invalid};
use crate::pyrepr;

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
pub(super) fn urlencode(value: &Value) -> Result<Value, Error> {
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
    // Each key and value is written with str(), which an undefined one
    // refuses.
    if pairs
        .iter()
        .any(|(k, v)| k.is_undefined() || v.is_undefined())
    {
        return Err(super::undefined_part("a value", "urlencode"));
    }
    Ok(Value::from(
        pairs
            .iter()
            .map(|(k, v)| format!("{}={}", url_quote(k, true), url_quote(v, true)))
            .collect::<Vec<_>>()
            .join("&"),
    ))
}

/// Ansible's `urldecode`: Python's `unquote_plus`.
pub(super) fn urldecode(value: &Value) -> Result<Value, Error> {
    let text = no_attribute(value, "urldecode", "replace")?.replace('+', " ");
    Ok(Value::from(
        percent_encoding::percent_decode_str(&text)
            .decode_utf8_lossy()
            .into_owned(),
    ))
}

/// A path for `os.path`'s functions: a string, or Python's TypeError.
fn path(value: &Value, what: &str) -> Result<String, Error> {
    defined(value, what)?;
    string_or(value, || {
        format!(
            "expected str, bytes or os.PathLike object, not {}",
            pyrepr::type_name(value)
        )
    })
}

/// `value`'s text when it is a string, else the error `message` gives:
/// what the filter's Python code raises on any other type.
fn string_or(value: &Value, message: impl FnOnce() -> String) -> Result<String, Error> {
    match value.kind() {
        ValueKind::String => Ok(value.as_str().unwrap_or_default().to_owned()),
        ValueKind::Bytes => Ok(pyrepr::to_text(value)),
        _ => Err(invalid(message())),
    }
}

/// The AttributeError of calling string method `method` on a non-string.
fn no_attribute(value: &Value, what: &str, method: &str) -> Result<String, Error> {
    defined(value, what)?;
    string_or(value, || {
        format!(
            "'{}' object has no attribute '{method}'",
            pyrepr::type_name(value)
        )
    })
}

/// `os.path.basename`: everything after the last `/`.
pub(super) fn basename(value: &Value) -> Result<Value, Error> {
    let path = path(value, "basename")?;
    Ok(Value::from(path.rsplit('/').next().unwrap_or_default()))
}

/// `os.path.dirname`: everything before the last `/`, with trailing
/// slashes stripped unless the result is all slashes.
pub(super) fn dirname(value: &Value) -> Result<Value, Error> {
    let path = path(value, "dirname")?;
    let head = match path.rfind('/') {
        Some(i) => &path[..=i],
        None => "",
    };
    let trimmed = head.trim_end_matches('/');
    Ok(Value::from(if trimmed.is_empty() { head } else { trimmed }))
}

pub(super) fn splitext(value: &Value) -> Result<Value, Error> {
    let path = path(value, "splitext")?;
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

pub(super) fn path_join(value: &Value) -> Result<Value, Error> {
    defined(value, "path_join")?;
    let parts: Vec<String> = match (value.as_str(), value.kind()) {
        (Some(s), _) => vec![s.to_owned()],
        (None, minijinja::value::ValueKind::Seq | minijinja::value::ValueKind::Iterable) => {
            // os.path.join takes text only; an undefined part fails as
            // Ansible's undefined does.
            let mut parts = Vec::new();
            for part in value.try_iter()? {
                defined(&part, "path_join")?;
                let Some(text) = part.as_str() else {
                    return Err(super::invalid(format!(
                        "join() argument must be str, bytes, or os.PathLike object, not '{}'",
                        pyrepr::type_name(&part)
                    )));
                };
                parts.push(text.to_owned());
            }
            parts
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

/// `urllib.parse.urlsplit`'s first steps: the scheme (lowercased; empty
/// when the text before the first `:` is none), the network location after
/// `//`, and the rest.
pub(crate) fn split_url(url: &str) -> (String, &str, &str) {
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
        _ => (String::new(), url),
    };
    let (netloc, rest) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (&after[..end], &after[end..])
        }
        None => ("", rest),
    };
    (scheme, netloc, rest)
}

/// `urllib.parse.urlsplit`, as Ansible's `urlsplit(query='')` returns it.
pub(super) fn urlsplit(value: &Value, query: Option<String>) -> Result<Value, Error> {
    let url = no_attribute(value, "urlsplit", "decode")?;
    let (scheme, netloc, rest) = split_url(&url);
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

/// `os.path.expanduser`: a leading `~` is `$HOME` (else the passwd entry
/// of this process's user), `~name` that user's home; a user with no entry
/// leaves the path as it is.
pub(super) fn expanduser(value: &Value) -> Result<Value, Error> {
    let path = path(value, "expanduser")?;
    let Some(after) = path.strip_prefix('~') else {
        return Ok(Value::from(path));
    };
    let end = after.find('/').unwrap_or(after.len());
    let (name, rest) = after.split_at(end);
    let home = if name.is_empty() {
        std::env::var("HOME").ok().or_else(|| {
            let uid = rustix::process::getuid().as_raw();
            passwd_home(|fields| fields.get(2).and_then(|f| f.parse().ok()) == Some(uid))
        })
    } else {
        passwd_home(|fields| fields.first() == Some(&name))
    };
    let Some(home) = home else {
        return Ok(Value::from(path));
    };
    let joined = format!("{}{rest}", home.trim_end_matches('/'));
    Ok(Value::from(if joined.is_empty() {
        "/".to_owned()
    } else {
        joined
    }))
}

/// The home directory of the first `/etc/passwd` entry `matches` picks.
fn passwd_home(matches: impl Fn(&[&str]) -> bool) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 6 && matches(&fields)).then(|| fields[5].to_owned())
    })
}

/// `os.path.expandvars`: `$name` and `${name}` of variables this process
/// has (names of ASCII letters, digits and `_`); others are left as
/// written.
pub(super) fn expandvars(value: &Value) -> Result<Value, Error> {
    let path = path(value, "expandvars")?;
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(path.len());
    let mut rest = path.as_str();
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (name, written) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(close) => (&braced[..close], close + 2),
                None => ("", 0),
            }
        } else {
            let len = after.find(|c: char| !word(c)).unwrap_or(after.len());
            (&after[..len], len)
        };
        let value = (written > 0)
            .then(|| std::env::var(name).ok())
            .flatten()
            .filter(|_| !name.is_empty());
        match value {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[dollar..dollar + 1 + written]),
        }
        rest = &rest[dollar + 1 + written..];
    }
    out.push_str(rest);
    Ok(Value::from(out))
}

/// `posixpath.normpath`: `.` and `..` resolved as text, repeated slashes
/// folded (two leading ones kept, as POSIX allows).
fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let leading = if path.starts_with("//") && !path.starts_with("///") {
        2
    } else if path.starts_with('/') {
        1
    } else {
        0
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if leading == 0 && parts.last().is_none_or(|p| *p == "..") => parts.push(".."),
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    let joined = format!("{}{}", "/".repeat(leading), parts.join("/"));
    if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

/// `posixpath.abspath`: joined to the working directory, then normalised.
fn abspath(path: &str) -> String {
    if path.starts_with('/') {
        return normpath(path);
    }
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".to_owned());
    normpath(&format!("{cwd}/{path}"))
}

/// `posixpath.join` of two parts.
fn join(head: &str, tail: &str) -> String {
    if tail.starts_with('/') || head.is_empty() {
        tail.to_owned()
    } else if head.ends_with('/') {
        format!("{head}{tail}")
    } else {
        format!("{head}/{tail}")
    }
}

/// `os.path.realpath` (not strict): symbolic links resolved as far as the
/// path exists, the rest kept, then made absolute.
pub(super) fn realpath(value: &Value) -> Result<Value, Error> {
    let path = path(value, "realpath")?;
    let mut seen = std::collections::HashMap::new();
    let (resolved, _) = join_realpath(String::new(), &path, &mut seen);
    Ok(Value::from(abspath(&resolved)))
}

/// posixpath's `_joinrealpath`: `rest` resolved onto the resolved `path`;
/// false when a symbolic link loops.
fn join_realpath(
    mut path: String,
    rest: &str,
    seen: &mut std::collections::HashMap<String, Option<String>>,
) -> (String, bool) {
    let mut rest = rest.to_owned();
    if let Some(stripped) = rest.strip_prefix('/') {
        rest = stripped.to_owned();
        path = "/".to_owned();
    }
    while !rest.is_empty() {
        let (name, tail) = match rest.split_once('/') {
            Some((name, tail)) => (name.to_owned(), tail.to_owned()),
            None => (std::mem::take(&mut rest), String::new()),
        };
        rest = tail;
        if name.is_empty() || name == "." {
            continue;
        }
        if name == ".." {
            if path.is_empty() {
                path = "..".to_owned();
            } else {
                let (head, last) = split(&path);
                path = if last == ".." {
                    join(&join(&head, ".."), "..")
                } else {
                    head
                };
            }
            continue;
        }
        let newpath = join(&path, &name);
        let is_link = std::fs::symlink_metadata(&newpath).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            path = newpath;
            continue;
        }
        match seen.get(&newpath) {
            Some(Some(resolved)) => {
                path = resolved.clone();
                continue;
            }
            Some(None) => return (join(&newpath, &rest), false),
            None => {}
        }
        seen.insert(newpath.clone(), None);
        let target = std::fs::read_link(&newpath)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (resolved, ok) = join_realpath(path, &target, seen);
        if !ok {
            return (join(&resolved, &rest), false);
        }
        seen.insert(newpath, Some(resolved.clone()));
        path = resolved;
    }
    (path, true)
}

/// `posixpath.split`: the head (trailing slashes stripped unless it is all
/// slashes) and the last component.
fn split(path: &str) -> (String, String) {
    let i = path.rfind('/').map_or(0, |i| i + 1);
    let (head, tail) = path.split_at(i);
    let trimmed = head.trim_end_matches('/');
    let head = if trimmed.is_empty() { head } else { trimmed };
    (head.to_owned(), tail.to_owned())
}

/// `os.path.relpath(path, start='.')`.
pub(super) fn relpath(value: &Value, start: Option<String>) -> Result<Value, Error> {
    let path = path(value, "relpath")?;
    if path.is_empty() {
        return Err(invalid("no path specified"));
    }
    let start = abspath(start.as_deref().unwrap_or("."));
    let path = abspath(&path);
    let start: Vec<&str> = start.split('/').filter(|p| !p.is_empty()).collect();
    let path: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let common = start.iter().zip(&path).take_while(|(a, b)| a == b).count();
    let mut parts = vec![".."; start.len() - common];
    parts.extend(&path[common..]);
    Ok(Value::from(if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }))
}

/// Ansible's `fileglob`: the regular files a shell pattern matches (as
/// Python's `glob`: `*` does not match a leading dot), relative patterns
/// from the working directory, sorted.
pub(super) fn fileglob(value: &Value) -> Result<Value, Error> {
    defined(value, "fileglob")?;
    let pattern = string_or(value, || {
        format!("'{}' object is not subscriptable", pyrepr::type_name(value))
    })?;
    Ok(Value::from(glob_files(&pattern)))
}

/// The regular files `pattern` matches, sorted, as Python's `glob` finds
/// them (`*` does not match a leading dot); none for a bad pattern. The
/// `fileglob` filter and lookup share it.
pub(crate) fn glob_files(pattern: &str) -> Vec<Value> {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let Ok(paths) = glob::glob_with(pattern, options) else {
        return Vec::new();
    };
    paths
        .flatten()
        .filter(|path| path.is_file())
        .map(|path| Value::from(path.to_string_lossy().into_owned()))
        .collect()
}

/// `ntpath.splitdrive`: a drive letter (`c:`) or a UNC share
/// (`//host/share`, `\\?\UNC\host\share`), and the rest.
fn nt_splitdrive(path: &str) -> (&str, &str) {
    if path.chars().count() < 2 {
        return ("", path);
    }
    let normal = path.replace('/', "\\");
    if normal.starts_with("\\\\") {
        let start = if normal
            .get(..8)
            .is_some_and(|p| p.eq_ignore_ascii_case("\\\\?\\UNC\\"))
        {
            8
        } else {
            2
        };
        // Separators are ASCII: byte offsets in `normal` are offsets in
        // `path` too.
        let Some(index) = normal[start..].find('\\').map(|i| start + i) else {
            return (path, "");
        };
        let Some(index2) = normal[index + 1..].find('\\').map(|i| index + 1 + i) else {
            return (path, "");
        };
        return path.split_at(index2);
    }
    let mut chars = path.char_indices();
    if let (Some(_), Some((colon, ':'))) = (chars.next(), chars.next()) {
        return path.split_at(colon + 1);
    }
    ("", path)
}

/// `ntpath.split`: drive, head without trailing separators, last part.
/// Python 3.12 on (`splitroot`) keep one separator of a head that is all
/// separators after the drive (`C:\\\\` → `C:\\`); earlier ones keep them all.
fn nt_split(path: &str, one_root: bool) -> (String, String) {
    let (drive, rest) = nt_splitdrive(path);
    let i = rest.rfind(['/', '\\']).map_or(0, |i| i + 1);
    let (head, tail) = rest.split_at(i);
    let trimmed = head.trim_end_matches(['/', '\\']);
    let head = match (trimmed.is_empty(), head.chars().next()) {
        (false, _) => trimmed,
        (true, Some(first)) if one_root => &head[..first.len_utf8()],
        (true, _) => head,
    };
    (format!("{drive}{head}"), tail.to_owned())
}

pub(super) fn win_basename(value: &Value) -> Result<Value, Error> {
    let path = path(value, "win_basename")?;
    Ok(Value::from(nt_split(&path, false).1))
}

pub(super) fn win_dirname(state: &State, value: &Value) -> Result<Value, Error> {
    let path = path(value, "win_dirname")?;
    let one_root = super::python_at_least(state, (3, 12));
    Ok(Value::from(nt_split(&path, one_root).0))
}

pub(super) fn win_splitdrive(value: &Value) -> Result<Value, Error> {
    let path = path(value, "win_splitdrive")?;
    let (drive, rest) = nt_splitdrive(&path);
    Ok(super::tuple(vec![Value::from(drive), Value::from(rest)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normpath_resolves_dots_as_posixpath() {
        assert_eq!(normpath("a/./b/../c"), "a/c");
        assert_eq!(normpath("/../a"), "/a");
        assert_eq!(normpath("../a/.."), "..");
        assert_eq!(normpath("//a//b/"), "//a/b");
        assert_eq!(normpath("///a"), "/a");
        assert_eq!(normpath(""), ".");
        assert_eq!(normpath("a/.."), ".");
    }

    #[test]
    fn windows_drives_split_as_ntpath() {
        assert_eq!(nt_splitdrive("c:/dir"), ("c:", "/dir"));
        assert_eq!(nt_splitdrive("//host/share/dir"), ("//host/share", "/dir"));
        assert_eq!(nt_splitdrive("\\\\host\\share"), ("\\\\host\\share", ""));
        assert_eq!(nt_splitdrive("//host"), ("//host", ""));
        assert_eq!(nt_splitdrive("é:x"), ("é:", "x"));
        assert_eq!(nt_splitdrive("x"), ("", "x"));
    }

    #[test]
    fn windows_heads_split_as_each_pythons_ntpath() {
        for one_root in [false, true] {
            assert_eq!(
                nt_split("C:\\Users\\me\\file.txt", one_root),
                ("C:\\Users\\me".to_owned(), "file.txt".to_owned())
            );
            assert_eq!(
                nt_split("C:\\", one_root),
                ("C:\\".to_owned(), String::new())
            );
            assert_eq!(nt_split("C:\\\\a\\\\b", one_root).0, "C:\\\\a");
        }
        // Python 3.11 keeps a head of separators whole; 3.12's splitroot
        // keeps the root alone.
        assert_eq!(nt_split("C:\\\\", false).0, "C:\\\\");
        assert_eq!(nt_split("C:\\\\", true).0, "C:\\");
        assert_eq!(nt_split("\\\\h\\s\\\\", true).0, "\\\\h\\s\\");
    }
}
