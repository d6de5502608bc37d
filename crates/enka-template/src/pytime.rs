//! Python's `datetime` and `timedelta` as template values: what `now()`
//! and `to_datetime` give, and the arithmetic roles do with them
//! (`(end | to_datetime) - (start | to_datetime)` is a timedelta with
//! `total_seconds()`; two datetimes compare).
//!
//! As in Ansible, a datetime is naive (local wall time, no offset) unless
//! `to_datetime` parsed one with `%z`.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use minijinja::value::{DynObject, Object, ObjectRepr};
use minijinja::{Error, ErrorKind, State, Value};

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// `datetime` or `timedelta` for the values of this module, as Python
/// names their types.
pub(crate) fn type_name(value: &Value) -> Option<&'static str> {
    if value.downcast_object_ref::<PyDateTime>().is_some() {
        Some("datetime")
    } else if value.downcast_object_ref::<PyTimeDelta>().is_some() {
        Some("timedelta")
    } else {
        None
    }
}

/// A Python `datetime`: prints as `str(datetime)`, with its fields as
/// attributes and `strftime`/`isoformat`/`timestamp` methods.
#[derive(Debug)]
pub(crate) struct PyDateTime {
    /// The wall time; for a naive datetime, in the local time zone (which
    /// is what Python's `timestamp()` assumes of it).
    zoned: jiff::Zoned,
    /// Whether it carries an offset (`%z`), as Python's aware datetimes do.
    aware: bool,
}

impl PyDateTime {
    pub(crate) fn naive(civil: jiff::civil::DateTime) -> Self {
        let zoned = jiff::tz::TimeZone::system()
            .to_ambiguous_zoned(civil)
            .compatible()
            .unwrap_or_else(|_| jiff::Zoned::now());
        PyDateTime {
            zoned,
            aware: false,
        }
    }

    pub(crate) fn aware(zoned: jiff::Zoned) -> Self {
        PyDateTime { zoned, aware: true }
    }

    fn civil(&self) -> jiff::civil::DateTime {
        self.zoned.datetime()
    }

    /// Python's `strftime`: `%f` is six digits of microseconds.
    pub(crate) fn strftime(&self, fmt: &str) -> Result<String, Error> {
        let mut translated = String::with_capacity(fmt.len());
        let mut chars = fmt.chars();
        while let Some(c) = chars.next() {
            translated.push(c);
            if c == '%' {
                match chars.next() {
                    Some('f') => translated.push_str("6f"),
                    Some(other) => translated.push(other),
                    None => {}
                }
            }
        }
        jiff::fmt::strtime::format(translated.as_str(), &self.zoned)
            .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("strftime: {e}")))
    }

    fn microsecond(&self) -> i32 {
        self.zoned.subsec_nanosecond() / 1000
    }

    /// `self - other`: a timedelta; Python refuses to mix naive and aware.
    fn since(&self, other: &PyDateTime) -> Result<PyTimeDelta, Error> {
        let duration = match (self.aware, other.aware) {
            (false, false) => self.civil().duration_since(other.civil()),
            (true, true) => self
                .zoned
                .timestamp()
                .duration_since(other.zoned.timestamp()),
            _ => {
                return Err(invalid(
                    "can't subtract offset-naive and offset-aware datetimes",
                ));
            }
        };
        Ok(PyTimeDelta::from_duration(duration))
    }

    fn minus(&self, delta: &PyTimeDelta) -> Result<PyDateTime, Error> {
        let duration = jiff::SignedDuration::from_micros(delta.micros);
        let overflow = || invalid("date value out of range");
        if self.aware {
            let zoned = self.zoned.checked_sub(duration).map_err(|_| overflow())?;
            Ok(PyDateTime::aware(zoned))
        } else {
            let civil = self.civil().checked_sub(duration).map_err(|_| overflow())?;
            Ok(PyDateTime::naive(civil))
        }
    }
}

impl fmt::Display for PyDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.civil();
        write!(
            f,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            d.year(),
            d.month(),
            d.day(),
            d.hour(),
            d.minute(),
            d.second()
        )?;
        if self.microsecond() != 0 {
            write!(f, ".{:06}", self.microsecond())?;
        }
        if self.aware {
            let seconds = self.zoned.offset().seconds();
            let sign = if seconds < 0 { '-' } else { '+' };
            let seconds = seconds.abs();
            write!(f, "{sign}{:02}:{:02}", seconds / 3600, seconds % 3600 / 60)?;
        }
        Ok(())
    }
}

impl Object for PyDateTime {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let d = self.civil();
        Some(Value::from(match key.as_str()? {
            "year" => i64::from(d.year()),
            "month" => i64::from(d.month()),
            "day" => i64::from(d.day()),
            "hour" => i64::from(d.hour()),
            "minute" => i64::from(d.minute()),
            "second" => i64::from(d.second()),
            "microsecond" => i64::from(self.microsecond()),
            _ => return None,
        }))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "strftime" => {
                let fmt = args.first().and_then(Value::as_str).unwrap_or_default();
                self.strftime(fmt).map(Value::from)
            }
            "isoformat" => {
                let text = self.to_string().replacen(' ', "T", 1);
                Ok(Value::from(text))
            }
            "timestamp" => Ok(Value::from(
                self.zoned.timestamp().as_microsecond() as f64 / 1_000_000.0,
            )),
            "weekday" => Ok(Value::from(self.civil().weekday().to_monday_zero_offset())),
            "date" => Ok(Value::from(self.civil().date().to_string())),
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<PyDateTime>()?;
        match (self.aware, other.aware) {
            (false, false) => Some(self.civil().cmp(&other.civil())),
            (true, true) => Some(self.zoned.timestamp().cmp(&other.zoned.timestamp())),
            _ => None,
        }
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// A Python `timedelta`: what subtracting two datetimes gives.
#[derive(Debug, Clone, Copy)]
struct PyTimeDelta {
    micros: i64,
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

impl PyTimeDelta {
    fn from_duration(duration: jiff::SignedDuration) -> Self {
        PyTimeDelta {
            micros: duration
                .as_micros()
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        }
    }

    /// `(days, seconds, microseconds)` normalised as Python keeps them:
    /// only `days` may be negative.
    fn parts(self) -> (i64, i64, i64) {
        let days = self.micros.div_euclid(MICROS_PER_DAY);
        let rest = self.micros.rem_euclid(MICROS_PER_DAY);
        (days, rest / 1_000_000, rest % 1_000_000)
    }
}

impl fmt::Display for PyTimeDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (days, seconds, micros) = self.parts();
        if days != 0 {
            let plural = if days.abs() != 1 { "s" } else { "" };
            write!(f, "{days} day{plural}, ")?;
        }
        write!(
            f,
            "{}:{:02}:{:02}",
            seconds / 3600,
            seconds % 3600 / 60,
            seconds % 60
        )?;
        if micros != 0 {
            write!(f, ".{micros:06}")?;
        }
        Ok(())
    }
}

impl Object for PyTimeDelta {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let (days, seconds, micros) = self.parts();
        Some(Value::from(match key.as_str()? {
            "days" => days,
            "seconds" => seconds,
            "microseconds" => micros,
            _ => return None,
        }))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        _args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "total_seconds" => Ok(Value::from(self.micros as f64 / 1_000_000.0)),
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<PyTimeDelta>()?;
        Some(self.micros.cmp(&other.micros))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// A datetime or timedelta as Ansible's JSON encoder writes it: a
/// datetime in ISO 8601; a timedelta it cannot write.
pub(crate) fn to_json(value: &Value) -> Option<Result<serde_json::Value, Error>> {
    if let Some(time) = value.downcast_object_ref::<PyDateTime>() {
        return Some(Ok(serde_json::Value::String(
            time.to_string().replacen(' ', "T", 1),
        )));
    }
    value.downcast_object_ref::<PyTimeDelta>()?;
    Some(Err(invalid(
        "Object of type timedelta is not JSON serializable",
    )))
}

/// `lhs - rhs` when either side is a datetime or a timedelta; `None` for
/// everything else, which subtracts as numbers.
pub(crate) fn subtract(lhs: &Value, rhs: &Value) -> Option<Result<Value, Error>> {
    fn datetime(v: &Value) -> Option<&PyDateTime> {
        v.downcast_object_ref::<PyDateTime>()
    }
    let delta = |v: &Value| v.downcast_object_ref::<PyTimeDelta>().copied();
    if datetime(lhs).is_none() && delta(lhs).is_none() {
        return None;
    }
    Some(
        match (datetime(lhs), datetime(rhs), delta(lhs), delta(rhs)) {
            (Some(a), Some(b), _, _) => a.since(b).map(Value::from_object),
            (Some(a), None, _, Some(d)) => a.minus(&d).map(Value::from_object),
            (None, None, Some(a), Some(b)) => Ok(Value::from_object(PyTimeDelta {
                micros: a.micros.saturating_sub(b.micros),
            })),
            _ => Err(invalid(format!(
                "unsupported operand type(s) for -: '{}' and '{}'",
                type_name(lhs).unwrap_or("object"),
                type_name(rhs).unwrap_or("object")
            ))),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(micros: i64) -> String {
        PyTimeDelta { micros }.to_string()
    }

    #[test]
    fn timedelta_prints_as_python() {
        assert_eq!(delta(0), "0:00:00");
        assert_eq!(delta(3_000_000), "0:00:03");
        assert_eq!(delta(-1_000_000), "-1 day, 23:59:59");
        assert_eq!(
            delta(MICROS_PER_DAY * 2 + 1_500_000),
            "2 days, 0:00:01.500000"
        );
        assert_eq!(delta(MICROS_PER_DAY + 3_723_000_000), "1 day, 1:02:03");
    }
}
