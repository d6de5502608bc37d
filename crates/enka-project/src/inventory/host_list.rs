//! Ansible's host addresses and the `host_list` plugin: `-i localhost,`,
//! `-i web1,db:5432`, each comma-separated entry a host with an optional
//! port; and the host patterns of inventory files (`web[01:10]:2222`),
//! as `parse_address` and `expand_hostname_range` read them.

use super::data::{Data, Declined};

/// The `host_list` plugin: each comma-separated entry is a host with an
/// optional port; one Ansible cannot parse is a host named as written.
pub(super) fn read(data: &mut Data, source: &str) {
    for entry in source.split(',') {
        let entry = entry.trim_matches(is_python_space);
        if entry.is_empty() {
            continue;
        }
        let (name, port) = parse_address(entry, false).unwrap_or((entry, None));
        data.add_host(name, Some("ungrouped"), port);
    }
}

pub(super) fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Ansible's `parse_address`: the host and its port, or `None` where
/// Ansible raises. With `allow_ranges`, a host may hold `[x:y]` ranges.
fn parse_address(address: &str, allow_ranges: bool) -> Option<(&str, Option<u64>)> {
    let mut host = address;
    let mut port = None;
    // Both patterns apply in turn, as Ansible's loop does not stop at the
    // first: `[a:1]:22` is host `a`, port 1.
    if let Some((inner, number)) = bracketed_hostport(host) {
        (host, port) = (inner, Some(number));
    }
    if let Some((inner, number)) = hostport(host) {
        (host, port) = (inner, Some(number));
    }
    let plain = without_ranges(host)?;
    let valid = is_hostname(&plain) || plain.parse::<std::net::Ipv6Addr>().is_ok();
    (valid && (allow_ranges || !host.contains('['))).then_some((host, port))
}

/// `host` with each well-formed range (`[1:3]`, `[a:c]`, `[01:10:2]`)
/// written as one character of its kind, as Ansible's patterns accept a
/// range where a character may be; `None` for a bracket that is not one.
fn without_ranges(host: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = host;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find(']')? + open;
        let bounds: Vec<&str> = rest[open + 1..close].split(':').collect();
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let letter = |s: &str| s.len() == 1 && s.bytes().all(|b| b.is_ascii_alphabetic());
        let step_ok = bounds.get(2).is_none_or(|s| digits(s));
        match bounds.as_slice() {
            [a, b] | [a, b, _] if step_ok && digits(a) && digits(b) => out.push('0'),
            [a, b] | [a, b, _] if step_ok && letter(a) && letter(b) => out.push('a'),
            _ => return None,
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// `_expand_hostpattern`: the hosts a pattern of an inventory file names
/// (its ranges expanded), and the port it gives them.
pub(super) fn expand_hostpattern(pattern: &str) -> Result<(Vec<String>, Option<u64>), Declined> {
    let (host, port) = parse_address(pattern, true).unwrap_or((pattern, None));
    let hosts = if host.contains('[') {
        expand_hostname_range(host)?
    } else {
        vec![host.to_owned()]
    };
    Ok((hosts, port))
}

/// The most hosts one pattern may name: a range past it (`h[0:99999]`)
/// is left to Ansible rather than held in memory here.
const MOST_HOSTS: usize = 10_000;

/// `expand_hostname_range`: the first `[begin:end(:step)]` expanded
/// (numbers keep a leading zero's width; letters run through
/// `a..zA..Z`), then the rest of each name in turn.
fn expand_hostname_range(line: &str) -> Result<Vec<String>, Declined> {
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let open = line.find('[').ok_or(Declined)?;
    let close = line.find(']').ok_or(Declined)?;
    if close < open || line[close + 1..].contains('|') || line.contains('|') {
        return Err(Declined);
    }
    let (head, range, tail) = (&line[..open], &line[open + 1..close], &line[close + 1..]);
    let bounds: Vec<&str> = range.split(':').collect();
    let (begin, end, step) = match bounds.as_slice() {
        [b, e] => (*b, *e, "1"),
        [b, e, s] => (*b, *e, *s),
        _ => return Err(Declined),
    };
    let begin = if begin.is_empty() { "0" } else { begin };
    if end.is_empty() {
        return Err(Declined);
    }
    let width = (begin.starts_with('0') && begin.len() > 1).then_some(begin.len());
    if width.is_some_and(|w| w != end.len()) {
        return Err(Declined);
    }
    let step: usize = step.trim().parse().map_err(|_| Declined)?;
    if step == 0 {
        return Err(Declined);
    }
    let names: Vec<String> = match (LETTERS.find(begin), LETTERS.find(end)) {
        (Some(b), Some(e)) if begin.len() == 1 && end.len() == 1 => {
            if b > e {
                return Err(Declined);
            }
            LETTERS[b..=e]
                .chars()
                .step_by(step)
                .map(String::from)
                .collect()
        }
        _ => {
            let b: i64 = begin.trim().parse().map_err(|_| Declined)?;
            let e: i64 = end.trim().parse().map_err(|_| Declined)?;
            if e.saturating_sub(b) / step as i64 > MOST_HOSTS as i64 {
                return Err(Declined);
            }
            (b..=e)
                .step_by(step)
                .map(|n| match width {
                    Some(w) => format!("{n:0w$}"),
                    None => n.to_string(),
                })
                .collect()
        }
    };
    let mut hosts = Vec::new();
    for name in names {
        let name = format!("{head}{name}{tail}");
        if name.contains('[') {
            hosts.extend(expand_hostname_range(&name)?);
        } else {
            hosts.push(name);
        }
        if hosts.len() > MOST_HOSTS {
            return Err(Declined);
        }
    }
    Ok(hosts)
}

fn port_number(text: &str) -> Option<u64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `[host]:port`.
fn bracketed_hostport(address: &str) -> Option<(&str, u64)> {
    let rest = address.strip_prefix('[')?;
    let (inner, port) = rest.rsplit_once("]:")?;
    (!inner.is_empty()).then_some(())?;
    Some((inner, port_number(port)?))
}

/// `host:port`, where the host has no `:` outside a bracketed range.
fn hostport(address: &str) -> Option<(&str, u64)> {
    let (host, port) = address.rsplit_once(':')?;
    let port = port_number(port)?;
    let mut depth_open = false;
    for c in host.chars() {
        match c {
            '[' if !depth_open => depth_open = true,
            ']' if depth_open => depth_open = false,
            ':' | '[' | ']' if !depth_open => return None,
            ']' => return None,
            _ => {}
        }
    }
    (!depth_open).then_some((host, port))
}

/// Ansible's hostname pattern (without ranges): dot-separated labels of
/// word characters and `-`, each starting with a word character and not
/// ending with `-` or `_`.
fn is_hostname(name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    name.split('.').all(|label| {
        let mut chars = label.chars();
        chars.next().is_some_and(word)
            && label.chars().all(|c| word(c) || c == '-')
            && !label.ends_with(['-', '_'])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_address_plain(address: &str) -> Option<(&str, Option<u64>)> {
        parse_address(address, false)
    }

    #[test]
    fn addresses_split_as_ansible_splits_them() {
        assert_eq!(parse_address_plain("db:5432"), Some(("db", Some(5432))));
        assert_eq!(parse_address_plain("[::1]:22"), Some(("::1", Some(22))));
        assert_eq!(parse_address_plain("::1"), Some(("::1", None)));
        assert_eq!(parse_address_plain("[a:1]:22"), Some(("a", Some(1))));
        assert_eq!(parse_address_plain("a-:22"), None);
        assert_eq!(parse_address_plain("web[1:2]"), None);
        assert_eq!(parse_address_plain(":22"), None);
    }

    #[test]
    fn ranges_expand_as_ansible_expands_them() {
        let hosts = |p: &str| {
            expand_hostpattern(p)
                .map(|(h, port)| (h.join(" "), port))
                .ok()
        };
        assert_eq!(
            hosts("web[01:03]:22"),
            Some(("web01 web02 web03".into(), Some(22)))
        );
        assert_eq!(
            hosts("db[a:c]-[1:2]"),
            Some(("dba-1 dba-2 dbb-1 dbb-2 dbc-1 dbc-2".into(), None))
        );
        assert_eq!(hosts("n[0:6:3]"), Some(("n0 n3 n6".into(), None)));
        assert!(hosts("n[01:3]").is_none());
        assert!(hosts("n[0:99999999]").is_none());
        assert!(hosts("n[0:999][0:999]").is_none());
    }
}
