//! Time as roles and the API server spell it: Ansible's seconds
//! (`delay: 5`, `pause: "0.5"`), Go's durations (`reconcilePeriod: 1m30s`)
//! and Kubernetes' RFC 3339 timestamps. The ground floor: every layer may
//! use it, it uses none.

use std::time::Duration;

use minijinja::Value;

/// A `Duration` from Ansible's seconds (int, float or numeric string),
/// at most a day; `None` for anything else.
pub fn seconds(value: &Value) -> Option<Duration> {
    let f = match value.as_str() {
        Some(s) => s.trim().parse::<f64>().ok()?,
        None => f64::try_from(value.clone()).ok()?,
    };
    (f.is_finite() && f >= 0.0).then(|| Duration::from_secs_f64(f.min(86_400.0)))
}

/// The current time as Kubernetes writes it (`2006-01-02T15:04:05Z`).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

/// The local time as Python's `str(datetime.datetime.now())` prints it
/// (`2026-12-07 15:04:05.123456`), as actions stamp `start` and `stop`.
pub fn python_now() -> String {
    let now = jiff::Zoned::now();
    let micros = now.subsec_nanosecond() / 1000;
    let whole = now.strftime("%Y-%m-%d %H:%M:%S").to_string();
    if micros == 0 {
        whole
    } else {
        format!("{whole}.{micros:06}")
    }
}

/// Seconds since the epoch, with their fraction (a gauge's
/// `set_to_current_time`).
pub fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn format_rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = if month <= 2 { y + 1 } else { y };
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

/// Parses Go-style durations (`1s`, `1m30s`, `500ms`, `2h`) and plain seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * factor;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn rfc3339() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn ansible_seconds() {
        assert_eq!(seconds(&Value::from(2)), Some(Duration::from_secs(2)));
        assert_eq!(
            seconds(&Value::from(" 0.5 ")),
            Some(Duration::from_millis(500))
        );
        assert_eq!(seconds(&Value::from(-1)), None);
        assert_eq!(seconds(&Value::from("soon")), None);
    }
}
