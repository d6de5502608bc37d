//! How a value a template prints becomes its text: Ansible's finalize
//! (None prints nothing), Python's repr of lists and dicts, an undefined
//! value inside one raising, and the memory budget asked first.

use minijinja::Value;

use crate::{Context, budget, containers, is_silent_undefined, native, pyrepr};

/// Whether a list or dict (a plain one, not a lazy view of variables)
/// holds an undefined value at any depth.
fn holds_undefined(value: &Value) -> bool {
    use minijinja::value::ValueKind;
    if value
        .as_object()
        .is_some_and(|o| o.downcast_ref::<Context>().is_some())
    {
        return false;
    }
    match value.kind() {
        ValueKind::Undefined => !is_silent_undefined(value),
        ValueKind::Seq | ValueKind::Iterable => value
            .try_iter()
            .into_iter()
            .flatten()
            .any(|item| holds_undefined(&item)),
        ValueKind::Map => value.try_iter().into_iter().flatten().any(|key| {
            value
                .get_item(&key)
                .is_ok_and(|item| holds_undefined(&item))
        }),
        _ => false,
    }
}

pub(crate) fn format_output(
    out: &mut minijinja::Output<'_>,
    _state: &mut minijinja::State<'_, '_>,
    value: &Value,
) -> Result<(), minijinja::Error> {
    if is_silent_undefined(value) {
        if native::capturing() {
            return native::capture(out, value).map_err(|_| write_failure());
        }
        return Ok(());
    }
    if value.is_undefined() {
        return Err(minijinja::Error::from(minijinja::ErrorKind::UndefinedError));
    }
    if value.kind() == minijinja::value::ValueKind::Invalid {
        // A lazily templated variable failed; its error travels as an
        // invalid value and must surface, not print.
        let text = value.to_string();
        let message = text
            .strip_prefix("<invalid value: ")
            .and_then(|t| t.strip_suffix('>'))
            .unwrap_or(&text);
        return Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            message.to_owned(),
        ));
    }
    if value.is_none() {
        if native::capturing() {
            // 2.19 drops None nodes rather than printing them as nothing.
            return native::capture(out, value).map_err(|_| write_failure());
        }
        // Ansible's finalize turns None into nothing.
        return Ok(());
    }
    if holds_undefined(value) && !(containers::keeping_undefined() && native::capturing()) {
        // Python's repr of a list or dict reaches the AnsibleUndefined
        // inside it, which raises.
        return Err(minijinja::Error::from(minijinja::ErrorKind::UndefinedError));
    }
    if native::capturing() {
        return native::capture(out, value).map_err(|_| write_failure());
    }
    let mut text = String::new();
    pyrepr::write_str(&mut text, value);
    budget::check(text.len(), "the template's output")?;
    out.write_str(&text).map_err(|_| write_failure())
}

fn write_failure() -> minijinja::Error {
    minijinja::Error::new(
        minijinja::ErrorKind::WriteFailure,
        "could not write template output",
    )
}
