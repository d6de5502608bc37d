//! Ansible's filters, registered over minijinja's built-ins.
//!
//! Each family lives in its own file. Ansible's own filter plugins are also
//! registered under their `ansible.builtin.` names, since roles use both;
//! Jinja's built-ins (`lower`, `join`, …) have no such name in Ansible either.

mod collections;
mod core;
mod datetime;
pub(crate) mod encoding;
mod math;
mod paths;
mod pyset;
mod text;

pub use collections::{dict_global, merge_hash};
pub use core::to_bool as core_to_bool;
pub(crate) use datetime::{now, py_datetime};
pub use encoding::{json_string, python_json};
pub(crate) use paths::glob_files;
pub(crate) use text::{python_format, python_regex_error};

use minijinja::{Environment, Error, ErrorKind, Value};

/// Registers every filter on `env`.
pub fn register(env: &mut Environment<'static>) {
    core::register(env);
    datetime::register(env);
    collections::register(env);
    encoding::register(env);
    math::register(env);
    paths::register(env);
    text::register(env);
}

/// An `InvalidOperation` error with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Fails with an undefined error if `value` is undefined: Ansible's
/// undefined values raise when a filter consumes them.
pub(crate) fn defined<'a>(value: &'a Value, what: &str) -> Result<&'a Value, Error> {
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            format!("an undefined value was passed to {what}"),
        ));
    }
    Ok(value)
}

/// A Python tuple: compares unequal to a list, renders as `(a, b)`.
pub(crate) fn tuple(values: Vec<Value>) -> Value {
    Value::from_object(minijinja::value::Tuple::new(values))
}

/// [`defined`] through every list item and dict value (Ansible's
/// `recursive_check_defined`, which `combine` applies to its terms).
pub(crate) fn defined_deep(value: &Value, what: &str) -> Result<(), Error> {
    defined(value, what)?;
    match value.kind() {
        minijinja::value::ValueKind::Seq => {
            for item in value.try_iter()? {
                defined_deep(&item, what)?;
            }
        }
        minijinja::value::ValueKind::Map => {
            for key in value.try_iter()? {
                defined_deep(&value.get_item(&key)?, what)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Adds `name` and `ansible.builtin.name` for one filter.
macro_rules! add {
    ($env:expr, $name:literal, $f:expr) => {{
        $env.add_filter($name, $f);
        $env.add_filter(concat!("ansible.builtin.", $name), $f);
    }};
}
pub(crate) use add;
