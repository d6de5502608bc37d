//! `ansible._protomatter`, the collection ansible-core 2.19 ships to look
//! at a value's tags: its tests for the one tag enka models,
//! `TrustedAsTemplate` (a string from a trusted source, which may be
//! templated). The others (`Origin`, `VaultedValue`, …) enka does not
//! track: asking for them is an error, never a guess.

use minijinja::value::ValueKind;
use minijinja::{Error, State, Value};

use super::Semantics;
use super::filters::invalid;

/// The tags enka knows of a value.
fn known_tags(value: &Value) -> Vec<&'static str> {
    // enka marks untrusted strings with minijinja's escaping flag.
    if value.kind() == ValueKind::String && !value.is_safe() {
        vec!["TrustedAsTemplate"]
    } else {
        Vec::new()
    }
}

/// The collection exists from 2.19 on.
fn require_219(state: &State, name: &str) -> Result<(), Error> {
    if super::filters::semantics(state) == Semantics::Ansible218 {
        return Err(invalid(format!(
            "No test named 'ansible._protomatter.{name}'."
        )));
    }
    Ok(())
}

/// `x is ansible._protomatter.tagged_with('TrustedAsTemplate')`.
pub(crate) fn tagged_with(state: &State, value: &Value, tag: &str) -> Result<bool, Error> {
    require_219(state, "tagged_with")?;
    if tag != "TrustedAsTemplate" {
        return Err(invalid(format!(
            "enka does not track the '{tag}' tag (only TrustedAsTemplate)"
        )));
    }
    Ok(known_tags(value).contains(&tag))
}
