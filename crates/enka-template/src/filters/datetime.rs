//! Time in templates: `now()` and the `strftime` and `to_datetime` filters,
//! which make the Python datetimes of `template/pytime.rs`.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use super::{defined, invalid};
use crate::pyrepr;
use crate::pytime::PyDateTime;

/// Ansible's `strftime(second=None, utc=False)`: the time `second` seconds
/// after the epoch (now when none), in local time or UTC, formatted by the
/// piped format as `time.strftime` formats it.
pub(super) fn strftime(
    format: &Value,
    second: Option<Value>,
    utc: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let format = defined(format, "strftime")?;
    let second = match second {
        Some(second) => Some(second),
        None => kwargs.get::<Option<Value>>("second")?,
    };
    let utc = match utc {
        Some(utc) => Some(utc),
        None => kwargs.get::<Option<Value>>("utc")?,
    };
    kwargs.assert_all_used()?;
    let timestamp = match second.filter(|s| !s.is_none()) {
        None => jiff::Timestamp::now(),
        Some(second) => {
            let text = pyrepr::to_text(&second);
            let seconds: f64 = match second.kind() {
                ValueKind::Number => f64::try_from(second.clone()).ok(),
                ValueKind::Bool => Some(if second.is_true() { 1.0 } else { 0.0 }),
                _ => text.trim().parse().ok(),
            }
            .filter(|s: &f64| s.is_finite())
            .ok_or_else(|| invalid(format!("Invalid value for epoch value ({text})")))?;
            // time.localtime and gmtime take the whole seconds below.
            jiff::Timestamp::from_second(seconds.floor() as i64)
                .map_err(|e| invalid(format!("Invalid value for epoch value ({text}): {e}")))?
        }
    };
    let zone = if utc.is_some_and(|u| u.is_true()) {
        jiff::tz::TimeZone::UTC
    } else {
        jiff::tz::TimeZone::system()
    };
    let time = PyDateTime::aware(timestamp.to_zoned(zone));
    time.strftime(&pyrepr::to_text(format)).map(Value::from)
}

/// Ansible's `to_datetime(string, format='%Y-%m-%d %H:%M:%S')`:
/// `datetime.strptime`, with its defaults of 1900-01-01 00:00:00 for what
/// the format leaves out.
pub(super) fn to_datetime(value: &Value, format: Option<String>) -> Result<Value, Error> {
    let text = pyrepr::to_text(defined(value, "to_datetime")?);
    let format = format.unwrap_or_else(|| "%Y-%m-%d %H:%M:%S".to_owned());
    let mismatch = || {
        invalid(format!(
            "time data '{text}' does not match format '{format}'"
        ))
    };
    let mut parsed = jiff::fmt::strtime::parse(&format, &text).map_err(|_| mismatch())?;
    let by_day_of_year = parsed.day_of_year().is_some();
    if parsed.year().is_none() {
        parsed.set_year(Some(1900)).map_err(|_| mismatch())?;
    }
    if parsed.month().is_none() && !by_day_of_year {
        parsed.set_month(Some(1)).map_err(|_| mismatch())?;
    }
    if parsed.day().is_none() && !by_day_of_year {
        parsed.set_day(Some(1)).map_err(|_| mismatch())?;
    }
    if parsed.hour().is_none() {
        parsed.set_hour(Some(0)).map_err(|_| mismatch())?;
    }
    let civil = parsed.to_datetime().map_err(|_| mismatch())?;
    let time = match parsed.offset() {
        Some(offset) => PyDateTime::aware(
            civil
                .to_zoned(jiff::tz::TimeZone::fixed(offset))
                .map_err(|_| mismatch())?,
        ),
        None => PyDateTime::naive(civil),
    };
    Ok(Value::from_object(time))
}

/// Ansible's `now(utc=False, fmt=None)`: the local (or UTC) wall time as a
/// naive Python datetime, or formatted with `fmt` as `strftime` formats it.
pub(crate) fn now(utc: Option<bool>, fmt: Option<String>, kwargs: Kwargs) -> Result<Value, Error> {
    let utc = match utc {
        Some(utc) => utc,
        None => kwargs.get::<Option<bool>>("utc")?.unwrap_or(false),
    };
    let fmt = match fmt {
        Some(fmt) => Some(fmt),
        None => kwargs.get::<Option<String>>("fmt")?,
    };
    kwargs.assert_all_used()?;
    let time = if utc {
        PyDateTime::naive(
            jiff::Timestamp::now()
                .to_zoned(jiff::tz::TimeZone::UTC)
                .datetime(),
        )
    } else {
        PyDateTime::naive(jiff::Zoned::now().datetime())
    };
    match fmt {
        Some(fmt) => time.strftime(&fmt).map(Value::from),
        None => Ok(Value::from_object(time)),
    }
}

/// `zoned`'s local wall time as a naive Python datetime
/// (`datetime.fromtimestamp`).
pub(crate) fn py_datetime(zoned: jiff::Zoned) -> Value {
    Value::from_object(PyDateTime::naive(zoned.datetime()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_strptime() {
        let parsed = to_datetime(&Value::from("2024-01-02 03:04:05"), None).unwrap();
        assert_eq!(parsed.to_string(), "2024-01-02 03:04:05");
        let time_only = to_datetime(&Value::from("10:30"), Some("%H:%M".into())).unwrap();
        assert_eq!(time_only.to_string(), "1900-01-01 10:30:00");
        assert!(to_datetime(&Value::from("2024-01-02"), None).is_err());
    }
}
