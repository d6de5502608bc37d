//! Jinja tests (`x is defined`, `r is failed`, …) with Ansible's semantics.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::filters::{core_to_bool, invalid};
use super::operators::python_remainder;
use super::pyrepr;

// Long: the test table, one line per test as minijinja's own.
/// Registers every test on `env`, with `ansible.builtin.` names for
/// Ansible's own.
pub fn register(env: &mut Environment<'static>) {
    env.add_test("defined", |v: &Value| !v.is_undefined());
    env.add_test("undefined", |v: &Value| v.is_undefined());
    env.add_test("none", |v: &Value| v.is_none());
    env.add_test("string", |v: &Value| v.kind() == ValueKind::String);
    // Python's Number: booleans are integers.
    env.add_test("number", |v: &Value| {
        matches!(v.kind(), ValueKind::Number | ValueKind::Bool)
    });
    // Jinja's lower/upper: `str(value).islower()`, of any value.
    env.add_test("lower", |v: &Value| {
        let text = crate::pyrepr::to_text(v);
        text.chars().any(char::is_lowercase) && !text.chars().any(char::is_uppercase)
    });
    env.add_test("upper", |v: &Value| {
        let text = crate::pyrepr::to_text(v);
        text.chars().any(char::is_uppercase) && !text.chars().any(char::is_lowercase)
    });
    env.add_test("integer", |v: &Value| v.is_integer());
    env.add_test("float", |v: &Value| {
        v.kind() == ValueKind::Number && !v.is_integer()
    });
    env.add_test("boolean", |v: &Value| v.kind() == ValueKind::Bool);
    env.add_test("mapping", |v: &Value| v.kind() == ValueKind::Map);
    env.add_test("iterable", |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::Seq
                | ValueKind::Map
                | ValueKind::String
                | ValueKind::Iterable
                | ValueKind::Bytes
        )
    });
    // A slice of a list is one (minijinja's is an iterable over it).
    env.add_test("sequence", |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::Seq
                | ValueKind::Iterable
                | ValueKind::Map
                | ValueKind::String
                | ValueKind::Bytes
        )
    });
    macro_rules! add {
        ($name:literal, $f:expr) => {{
            env.add_test($name, $f);
            env.add_test(concat!("ansible.builtin.", $name), $f);
        }};
    }
    add!("truthy", truthy);
    add!("falsy", falsy);
    add!("match", is_match);
    add!("search", is_search);
    add!("regex", is_regex);
    add!("version", version);
    add!("version_compare", version);
    add!("subset", subset);
    add!("superset", superset);
    add!("contains", contains);
    add!("skipped", skipped);
    add!("skip", skipped);
    add!("failed", failed);
    add!("failure", failed);
    add!("succeeded", succeeded);
    add!("success", succeeded);
    add!("successful", succeeded);
    add!("changed", changed);
    add!("change", changed);
    add!("finished", finished);
    add!("started", started);
    add!("any", any);
    add!("all", all);
    add!("abs", is_abs);
    add!("is_abs", is_abs);
    add!("issubset", subset);
    add!("issuperset", superset);
    add!("nan", is_nan);
    add!("isnan", is_nan);
    add!("reachable", |v: &Value| unreachable(v).map(|u| !u));
    add!("unreachable", unreachable);
    add!("timedout", timedout);
    // ansible.builtin's file tests, on the operator's own file system.
    add!("directory", |v: &Value| path_test(v, |m| m.is_dir(), true));
    add!("is_dir", |v: &Value| path_test(v, |m| m.is_dir(), true));
    add!("file", |v: &Value| path_test(v, |m| m.is_file(), true));
    add!("is_file", |v: &Value| path_test(v, |m| m.is_file(), true));
    add!("link", |v: &Value| path_test(v, |m| m.is_symlink(), false));
    add!("is_link", |v: &Value| path_test(
        v,
        |m| m.is_symlink(),
        false
    ));
    add!("exists", |v: &Value| path_test(v, |_| true, true));
    add!("link_exists", |v: &Value| path_test(v, |_| true, false));
    add!("uri", |v: &Value,
                 schemes: Option<Value>,
                 kwargs: Kwargs| {
        Ok::<_, Error>(is_uri(v, schemes_argument(schemes, kwargs)?))
    });
    add!("url", |v: &Value,
                 schemes: Option<Value>,
                 kwargs: Kwargs| {
        Ok::<_, Error>(is_url(v, schemes_argument(schemes, kwargs)?))
    });
    add!("urn", |v: &Value| is_uri(v, Some(Value::from(vec!["urn"]))));
    add!("same_file", same_file);
    add!("is_same_file", same_file);
    add!("mount", is_mount);
    add!("is_mount", is_mount);
    // 2.19's own collection for looking at tags (protomatter.rs).
    env.add_test(
        "ansible._protomatter.tagged_with",
        super::protomatter::tagged_with,
    );
    // Jinja's arithmetic tests: Python's `%`, its TypeError included.
    env.add_test("odd", |state: &mut State, v: &Value| {
        python_remainder(state, v, &Value::from(2)).map(|r| r == Value::from(1))
    });
    env.add_test("even", |state: &mut State, v: &Value| {
        python_remainder(state, v, &Value::from(2)).map(|r| r == Value::from(0))
    });
    env.add_test(
        "divisibleby",
        |state: &mut State, v: &Value, num: &Value| {
            python_remainder(state, v, num).map(|r| r == Value::from(0))
        },
    );
    // Jinja's comparison tests, with Python's TypeError between types.
    for (name, op) in [
        ("lt", "<"),
        ("lessthan", "<"),
        ("<", "<"),
        ("le", "<="),
        ("<=", "<="),
        ("gt", ">"),
        ("greaterthan", ">"),
        (">", ">"),
        ("ge", ">="),
        (">=", ">="),
        ("in", "in"),
    ] {
        env.add_test(name, move |v: &Value, other: &Value| {
            crate::pycompare::compare(v, op, other)
        });
    }
}

fn is_abs(value: &Value) -> bool {
    value.as_str().is_some_and(|s| s.starts_with('/'))
}

/// Ansible's `nan` test: `math.isnan`, false for what is not a number.
fn is_nan(value: &Value) -> bool {
    value.kind() == ValueKind::Number && f64::try_from(value.clone()).is_ok_and(f64::is_nan)
}

fn unreachable(value: &Value) -> Result<bool, Error> {
    if value.kind() != ValueKind::Map {
        return Err(invalid("The 'unreachable' test expects a dictionary"));
    }
    Ok(value
        .get_attr("unreachable")
        .is_ok_and(|u| !u.is_undefined() && u.is_true()))
}

/// `timedout`: the result's `timedout.period`, when it timed out.
fn timedout(value: &Value) -> Result<bool, Error> {
    if value.kind() != ValueKind::Map {
        return Err(invalid("The 'timedout' test expects a dictionary"));
    }
    let timed = value.get_attr("timedout").unwrap_or_default();
    if timed.is_undefined() || !timed.is_true() {
        return Ok(false);
    }
    Ok(timed
        .get_attr("period")
        .is_ok_and(|p| !p.is_undefined() && p.is_true()))
}

/// A file test: `follow` reads through symlinks (os.path.isdir/isfile/
/// exists), otherwise the link itself (islink, lexists).
fn path_test(value: &Value, test: impl Fn(&std::fs::Metadata) -> bool, follow: bool) -> bool {
    let Some(path) = value.as_str() else {
        return false;
    };
    let metadata = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    metadata.is_ok_and(|m| test(&m))
}

/// `os.path.samefile`, which fails on a path that is not there.
fn same_file(a: &Value, b: &Value) -> Result<bool, Error> {
    use std::os::unix::fs::MetadataExt;
    let (Some(a), Some(b)) = (a.as_str(), b.as_str()) else {
        return Ok(false);
    };
    let stat = |path: &str| {
        std::fs::metadata(path).map_err(|e| {
            let code = e.raw_os_error().unwrap_or(0);
            let reason = std::io::Error::from_raw_os_error(code)
                .to_string()
                .split(" (os error")
                .next()
                .unwrap_or_default()
                .to_owned();
            Error::new(
                ErrorKind::InvalidOperation,
                format!("[Errno {code}] {reason}: '{path}'"),
            )
        })
    };
    let (a, b) = (stat(a)?, stat(b)?);
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// The `schemes` of `uri` and `url`, given by position or by name.
fn schemes_argument(schemes: Option<Value>, kwargs: Kwargs) -> Result<Option<Value>, Error> {
    let schemes = match schemes {
        Some(schemes) => Some(schemes),
        None => kwargs.get::<Option<Value>>("schemes")?,
    };
    kwargs.assert_all_used()?;
    Ok(schemes)
}

/// ansible.builtin's `uri`: text `urlparse` reads, with a scheme among
/// `schemes` when given.
fn is_uri(value: &Value, schemes: Option<Value>) -> bool {
    let Some(text) = value.as_str() else {
        return false;
    };
    let (scheme, _, _) = super::filters::split_url(text);
    match schemes {
        Some(allowed) if allowed.is_true() => allowed
            .try_iter()
            .is_ok_and(|mut names| names.any(|n| n.as_str() == Some(scheme.as_str()))),
        _ => true,
    }
}

/// ansible.builtin's `url`: a `uri` with a network location, or a `file:`
/// one.
fn is_url(value: &Value, schemes: Option<Value>) -> bool {
    if !is_uri(value, schemes) {
        return false;
    }
    let (scheme, netloc, _) = super::filters::split_url(value.as_str().unwrap_or_default());
    !netloc.is_empty() || scheme == "file"
}

/// `os.path.ismount`: a directory on another device than its parent (or
/// the same inode as its parent, for `/`).
fn is_mount(value: &Value) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(path) = value.as_str() else {
        return false;
    };
    let path = std::path::Path::new(path);
    let Ok(own) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if own.is_symlink() || !own.is_dir() {
        return false;
    }
    let Ok(parent) = std::fs::metadata(path.join("..")) else {
        return false;
    };
    own.dev() != parent.dev() || own.ino() == parent.ino()
}

fn truthy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    let convert_bool = kwargs.get::<Option<bool>>("convert_bool")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    // Jinja's plain undefined (`x if c` without else) is false; Ansible's
    // fails.
    if crate::is_silent_undefined(value) {
        return Ok(false);
    }
    super::filters::defined(value, "truthy")?;
    // ansible's boolean(strict=True): a value that is not a boolean word
    // raises, and truthy keeps the value as it was.
    if convert_bool && let Some(converted) = strict_boolean(value) {
        return Ok(converted);
    }
    Ok(value.is_true())
}

/// `ansible.module_utils.parsing.convert_bool.boolean(value, strict=True)`:
/// `None` where it raises.
pub fn strict_boolean(value: &Value) -> Option<bool> {
    match value.kind() {
        ValueKind::Bool => Some(value.is_true()),
        ValueKind::String => match value.as_str()?.trim().to_lowercase().as_str() {
            "y" | "yes" | "on" | "1" | "true" | "t" => Some(true),
            "n" | "no" | "off" | "0" | "false" | "f" => Some(false),
            _ => None,
        },
        ValueKind::Number => {
            let n = f64::try_from(value.clone()).ok()?;
            (n == 1.0 || n == 0.0).then_some(n == 1.0)
        }
        _ => None,
    }
}

fn falsy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    truthy(value, kwargs).map(|t| !t)
}

enum MatchType {
    Match,
    Search,
    FullMatch,
}

fn regex_test(
    value: &Value,
    pattern: &str,
    kwargs: &Kwargs,
    default: MatchType,
) -> Result<bool, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    let match_type = match kwargs.get::<Option<String>>("match_type")?.as_deref() {
        None => default,
        Some("match") => MatchType::Match,
        Some("search") => MatchType::Search,
        Some("fullmatch") => MatchType::FullMatch,
        Some(other) => return Err(invalid(format!("unknown match_type {other:?}"))),
    };
    // Jinja's plain undefined is the empty text; Ansible's fails.
    let text = if crate::is_silent_undefined(value) {
        String::new()
    } else {
        pyrepr::to_text(super::filters::defined(value, "regex test")?)
    };
    let anchored = match match_type {
        MatchType::Match => format!("\\A(?:{pattern})"),
        MatchType::Search => pattern.to_owned(),
        MatchType::FullMatch => format!("\\A(?:{pattern})\\z"),
    };
    let re = fancy_regex::RegexBuilder::new(&anchored)
        .case_insensitive(ignorecase)
        .multi_line(multiline)
        .build()
        .map_err(|e| invalid(format!("invalid regular expression {pattern:?}: {e}")))?;
    re.is_match(text.as_str())
        .map_err(|e| invalid(format!("regex: {e}")))
}

fn is_match(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let r = regex_test(value, &pattern, &kwargs, MatchType::Match);
    kwargs.assert_all_used()?;
    r
}

fn is_search(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let r = regex_test(value, &pattern, &kwargs, MatchType::Search);
    kwargs.assert_all_used()?;
    r
}

fn is_regex(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let r = regex_test(value, &pattern, &kwargs, MatchType::Search);
    kwargs.assert_all_used()?;
    r
}

/// One component of a loose version: a number or a run of letters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Num(u64),
    Text(String),
}

/// Ansible's `LooseVersion` split: runs of digits and runs of letters, with
/// dots and other separators dropped.
fn loose_parts(v: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut digits = false;
    let flush = |current: &mut String, digits: bool, parts: &mut Vec<Part>| {
        if current.is_empty() {
            return;
        }
        parts.push(if digits {
            Part::Num(current.parse().unwrap_or(u64::MAX))
        } else {
            Part::Text(std::mem::take(current))
        });
        current.clear();
    };
    for c in v.chars() {
        if c.is_ascii_digit() {
            if !digits {
                flush(&mut current, digits, &mut parts);
                digits = true;
            }
            current.push(c);
        } else if c == '.' {
            flush(&mut current, digits, &mut parts);
        } else {
            if digits {
                flush(&mut current, digits, &mut parts);
                digits = false;
            }
            current.push(c);
        }
    }
    flush(&mut current, digits, &mut parts);
    parts
}

fn compare_loose(a: &str, b: &str) -> Result<std::cmp::Ordering, Error> {
    let (pa, pb) = (loose_parts(a), loose_parts(b));
    for (x, y) in pa.iter().zip(pb.iter()) {
        match (x, y) {
            (Part::Num(_), Part::Text(_)) | (Part::Text(_), Part::Num(_)) => {
                return Err(invalid(format!(
                    "Version comparison failed: '<' not supported between instances of 'str' and 'int' ({a} vs {b})"
                )));
            }
            _ => {
                let ord = x.cmp(y);
                if ord != std::cmp::Ordering::Equal {
                    return Ok(ord);
                }
            }
        }
    }
    Ok(pa.len().cmp(&pb.len()))
}

/// A PEP 440 version as `packaging.version.Version` orders it: epoch,
/// release (trailing zeros do not count), pre-release, post-release,
/// development release, local label.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pep440 {
    epoch: u64,
    release: Vec<u64>,
    /// `(0, _)` a dev release of the final version, `(1, kind, n)` a
    /// pre-release (a < b < rc), `(2, ..)` none.
    pre: (u8, u8, u64),
    /// `None` sorts first.
    post: Option<u64>,
    /// `None` (not a dev release) sorts last.
    dev: (bool, u64),
    local: Vec<(u64, String)>,
}

fn parse_pep440(text: &str) -> Option<Pep440> {
    let lower = text.trim().to_ascii_lowercase();
    let (public, local) = match lower.split_once('+') {
        Some((public, local)) => (public, Some(local)),
        None => (lower.as_str(), None),
    };
    let public = public.strip_prefix('v').unwrap_or(public);
    let (epoch, rest) = match public.split_once('!') {
        Some((epoch, rest)) => (epoch.parse().ok()?, rest),
        None => (0, public),
    };
    let release_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let release_text = rest[..release_end].trim_end_matches('.');
    let mut tail = &rest[release_text.len()..];
    let mut release: Vec<u64> = release_text
        .split('.')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    while release.len() > 1 && release.last() == Some(&0) {
        release.pop();
    }
    let mut pre = None;
    for (kind, spellings) in [
        (0u8, &["alpha", "a"][..]),
        (1, &["beta", "b"][..]),
        (2, &["rc", "c", "preview", "pre"][..]),
    ] {
        if let Some(n) = pep440_part(&mut tail, spellings) {
            pre = Some((kind, n));
            break;
        }
    }
    let post = pep440_part(&mut tail, &["post", "rev", "r"]).or_else(|| {
        // `1.0-1` is a post-release too.
        let n = tail.strip_prefix('-')?.parse().ok()?;
        tail = "";
        Some(n)
    });
    let dev = pep440_part(&mut tail, &["dev"]);
    if !tail.is_empty() {
        return None;
    }
    let local = local
        .map(|l| {
            l.split(['.', '-', '_'])
                .map(|seg| match seg.parse::<u64>() {
                    Ok(n) => (n + 1, String::new()),
                    Err(_) => (0, seg.to_owned()),
                })
                .collect()
        })
        .unwrap_or_default();
    let pre = match (pre, post, dev) {
        (None, None, Some(_)) => (0, 0, 0),
        (None, _, _) => (2, 0, 0),
        (Some((kind, n)), _, _) => (1, kind, n),
    };
    Some(Pep440 {
        epoch,
        release,
        pre,
        post,
        dev: match dev {
            Some(n) => (false, n),
            None => (true, 0),
        },
        local,
    })
}

/// One optional part of a PEP 440 version at the start of `tail`: a
/// separator, one of its `spellings`, an optional number (0 when absent).
fn pep440_part(tail: &mut &str, spellings: &[&str]) -> Option<u64> {
    let trimmed = tail.trim_start_matches(['.', '-', '_']);
    let spelling = spellings.iter().find(|s| trimmed.starts_with(**s))?;
    let after = trimmed[spelling.len()..].trim_start_matches(['.', '-', '_']);
    let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let number = after[..digits].parse().unwrap_or(0);
    *tail = &after[digits..];
    Some(number)
}

fn compare_pep440(a: &str, b: &str) -> Result<std::cmp::Ordering, Error> {
    let parse = |v: &str| {
        parse_pep440(v)
            .ok_or_else(|| invalid(format!("Version comparison failed: Invalid version: '{v}'")))
    };
    Ok(parse(a)?.cmp(&parse(b)?))
}

fn compare_semver(a: &str, b: &str) -> Result<std::cmp::Ordering, Error> {
    let parse = |v: &str| -> Result<(Vec<u64>, Option<String>), Error> {
        let v = v.trim_start_matches('v');
        let v = v.split('+').next().unwrap_or(v);
        let (core, pre) = match v.split_once('-') {
            Some((c, p)) => (c, Some(p.to_owned())),
            None => (v, None),
        };
        let nums: Result<Vec<u64>, _> = core.split('.').map(str::parse).collect();
        let nums = nums.map_err(|_| {
            invalid(format!(
                "Version comparison failed: invalid semantic version '{v}'"
            ))
        })?;
        if nums.len() != 3 {
            return Err(invalid(format!(
                "Version comparison failed: invalid semantic version '{v}'"
            )));
        }
        Ok((nums, pre))
    };
    let (na, pa) = parse(a)?;
    let (nb, pb) = parse(b)?;
    Ok(na.cmp(&nb).then_with(|| match (&pa, &pb) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) => {
            let xs: Vec<&str> = x.split('.').collect();
            let ys: Vec<&str> = y.split('.').collect();
            for (p, q) in xs.iter().zip(ys.iter()) {
                let ord = match (p.parse::<u64>(), q.parse::<u64>()) {
                    (Ok(i), Ok(j)) => i.cmp(&j),
                    (Ok(_), Err(_)) => std::cmp::Ordering::Less,
                    (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
                    _ => p.cmp(q),
                };
                if ord != std::cmp::Ordering::Equal {
                    return ord;
                }
            }
            xs.len().cmp(&ys.len())
        }
    }))
}

/// Ansible's `version(version, operator='eq', strict=False, version_type=None)`.
/// `version(value, version, operator='eq', strict=None, version_type=None)`,
/// each argument by position or by name.
fn version(
    value: &Value,
    other: &Value,
    positional: minijinja::value::Rest<Value>,
    kwargs: Kwargs,
) -> Result<bool, Error> {
    if positional.len() > 3 {
        return Err(Error::from(minijinja::ErrorKind::TooManyArguments));
    }
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| pyrepr::to_text(v))
    };
    let operator = positional.first().map(text);
    let strict = positional.get(1).cloned();
    let version_type = positional.get(2).map(text);
    let operator = match operator {
        Some(op) => op,
        None => kwargs
            .get::<Option<String>>("operator")?
            .unwrap_or_else(|| "eq".into()),
    };
    let strict = match strict {
        Some(strict) => Some(strict),
        None => kwargs.get::<Option<Value>>("strict")?,
    }
    .filter(|v| !v.is_none() && !v.is_undefined());
    let version_type = match version_type {
        Some(version_type) => Some(version_type),
        None => kwargs.get::<Option<String>>("version_type")?,
    };
    kwargs.assert_all_used()?;
    if strict.is_some() && version_type.is_some() {
        return Err(invalid("Cannot specify both 'strict' and 'version_type'"));
    }
    let strict = strict.is_some_and(|v| v.is_true());
    let a = pyrepr::to_text(super::filters::defined(value, "version")?);
    let b = pyrepr::to_text(other);
    if a.is_empty() {
        return Err(invalid("Input version value cannot be empty"));
    }
    if b.is_empty() {
        return Err(invalid(
            "Version parameter to compare against cannot be empty",
        ));
    }
    let ord = match (version_type.as_deref(), strict) {
        (Some("semver" | "semantic"), _) => compare_semver(&a, &b)?,
        (Some("pep440"), _) => compare_pep440(&a, &b)?,
        (Some("strict"), _) | (None, true) => {
            let valid = |v: &str| {
                let parts: Vec<&str> = v.split('.').collect();
                (2..=3).contains(&parts.len())
                    && parts
                        .iter()
                        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            };
            if !valid(&a) || !valid(&b) {
                return Err(invalid(format!(
                    "Version comparison failed: invalid version number '{a}'"
                )));
            }
            compare_loose(&a, &b)?
        }
        (Some("loose") | None, _) => compare_loose(&a, &b)?,
        (Some(other), _) => return Err(invalid(format!("Invalid version type ({other})"))),
    };
    use std::cmp::Ordering::*;
    Ok(match operator.as_str() {
        "==" | "=" | "eq" => ord == Equal,
        "!=" | "<>" | "ne" => ord != Equal,
        "<" | "lt" => ord == Less,
        "<=" | "le" => ord != Greater,
        ">" | "gt" => ord == Greater,
        ">=" | "ge" => ord != Less,
        other => return Err(invalid(format!("Invalid operator type ({other})"))),
    })
}

fn members(v: &Value) -> Result<Vec<Value>, Error> {
    Ok(super::filters::defined(v, "set test")?
        .try_iter()?
        .collect())
}

fn subset(a: &Value, b: &Value) -> Result<bool, Error> {
    let b = members(b)?;
    Ok(members(a)?.iter().all(|x| b.contains(x)))
}

fn superset(a: &Value, b: &Value) -> Result<bool, Error> {
    subset(b, a)
}

/// Python's `item in seq`: a substring for text, a member otherwise.
fn contains(seq: &Value, item: &Value) -> Result<bool, Error> {
    crate::pycompare::compare(item, "in", seq)
}

fn result_field(value: &Value, test: &str) -> Result<(bool, bool, bool), Error> {
    if value.kind() != ValueKind::Map {
        return Err(invalid(format!("The '{test}' test expects a dictionary")));
    }
    let flag = |name: &str| {
        value
            .get_attr(name)
            .map(|v| core_to_bool(&v))
            .unwrap_or(false)
    };
    Ok((flag("failed"), flag("skipped"), flag("changed")))
}

fn skipped(value: &Value) -> Result<bool, Error> {
    result_field(value, "skipped").map(|(_, s, _)| s)
}

fn failed(value: &Value) -> Result<bool, Error> {
    result_field(value, "failed").map(|(f, _, _)| f)
}

fn succeeded(value: &Value) -> Result<bool, Error> {
    result_field(value, "succeeded").map(|(f, _, _)| !f)
}

/// ansible-core's `changed`: the result's `changed`, or, for a result
/// without one whose `results` is a list of results (a loop's, or a
/// module's own list), whether any of them changed.
fn changed(value: &Value) -> Result<bool, Error> {
    let (_, _, changed) = result_field(value, "changed")?;
    let has_changed = value.get_attr("changed").is_ok_and(|v| !v.is_undefined());
    if has_changed {
        return Ok(changed);
    }
    let results = match value.get_attr("results") {
        Ok(results) if results.kind() == ValueKind::Seq => results,
        _ => return Ok(false),
    };
    // Python indexes results[0] before looking at the rest.
    let first = results
        .get_item(&Value::from(0))
        .ok()
        .filter(|v| !v.is_undefined())
        .ok_or_else(|| invalid("list index out of range".to_owned()))?;
    if first.kind() != ValueKind::Map {
        return Ok(false);
    }
    Ok(results.try_iter().into_iter().flatten().any(|item| {
        item.get_attr("changed")
            .map(|v| core_to_bool(&v))
            .unwrap_or(false)
    }))
}

fn finished(value: &Value) -> Result<bool, Error> {
    result_field(value, "finished")?;
    Ok(value
        .get_attr("finished")
        .map(|v| v.is_undefined() || core_to_bool(&v))
        .unwrap_or(true))
}

fn started(value: &Value) -> Result<bool, Error> {
    result_field(value, "started")?;
    Ok(value
        .get_attr("started")
        .map(|v| v.is_undefined() || core_to_bool(&v))
        .unwrap_or(true))
}

/// Python's `any`: stops at the first true item; an undefined one it
/// reaches fails, as Ansible's undefined does when asked for its truth.
fn any(value: &Value) -> Result<bool, Error> {
    for item in members(value)? {
        if super::filters::defined(&item, "any")?.is_true() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Python's `all`: stops at the first false item, as [`any`] does.
fn all(value: &Value) -> Result<bool, Error> {
    for item in members(value)? {
        if !super::filters::defined(&item, "all")?.is_true() {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep440_versions() {
        use std::cmp::Ordering::*;
        // Orders from packaging.version.Version.
        let order = [
            "1.0.dev1",
            "1.0a1",
            "1.0a2.dev1",
            "1.0a2",
            "1.0b1",
            "1.0rc1",
            "1.0",
            "1.0+local",
            "1.0.post1.dev1",
            "1.0.post1",
            "1.1",
            "2.14.0rc1",
            "2.14.0",
            "1!0.1",
        ];
        for pair in order.windows(2) {
            assert_eq!(compare_pep440(pair[0], pair[1]).unwrap(), Less, "{pair:?}");
        }
        assert_eq!(compare_pep440("1.0", "1.0.0").unwrap(), Equal);
        assert_eq!(compare_pep440("1.0-1", "1.0.post1").unwrap(), Equal);
        assert_eq!(compare_pep440("1.0RC1", "1.0rc1").unwrap(), Equal);
        assert!(compare_pep440("nope", "1.0").is_err());
    }

    #[test]
    fn loose_versions() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_loose("1.10", "1.9").unwrap(), Greater);
        assert_eq!(compare_loose("1.0", "1.0.0").unwrap(), Less);
        assert_eq!(compare_loose("2.18.3", "2.18.3").unwrap(), Equal);
        assert_eq!(compare_loose("1.0a", "1.0b").unwrap(), Less);
        assert!(compare_loose("1.a", "1.1").is_err());
    }

    #[test]
    fn semantic_versions() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_semver("1.0.0-alpha", "1.0.0").unwrap(), Less);
        assert_eq!(
            compare_semver("1.0.0-alpha.1", "1.0.0-alpha.beta").unwrap(),
            Less
        );
        assert_eq!(compare_semver("2.0.0", "1.9.9").unwrap(), Greater);
        assert!(compare_semver("1.0", "1.0.0").is_err());
    }
}
