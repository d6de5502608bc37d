//! Ansible's filters, registered over minijinja's built-ins.
//!
//! [`register`] is the one table of them; each family's code lives in its
//! own file. Ansible's own filter plugins are also
//! registered under their `ansible.builtin.` names, since roles use both;
//! Jinja's built-ins (`lower`, `join`, …) have no such name in Ansible either.

mod collections;
mod core;
mod datetime;
pub(crate) mod encoding;
mod math;
mod paths;
mod pyset;
mod registrar;
pub(crate) use registrar::first_marker;
mod sets;
mod text;

pub use collections::{dict_global, merge_hash};
pub use core::ansible_boolean;
pub use core::to_bool as core_to_bool;
pub(crate) use datetime::{now, py_datetime};
pub use encoding::{json_string, python_json, python_json_ascii};
pub(crate) use paths::glob_files;
pub use text::python_regex_message;
pub(crate) use text::{python_format, python_regex_error, python_split};

pub(crate) use paths::split_url;

use minijinja::value::{Kwargs, Rest};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use crate::context::keep_unsafe;
use crate::{Context, Semantics};

/// The context of the render `state` belongs to.
pub(super) fn context(state: &State) -> Option<Context> {
    state
        .lookup(crate::context::CONTEXT_VAR)
        .and_then(|v| v.downcast_object_ref::<Context>().cloned())
}

/// Which ansible-core's semantics the render follows (2.18's when the
/// render has no context, as a bare environment's has not).
pub(super) fn semantics(state: &State) -> Semantics {
    context(state).map_or(Semantics::default(), |ctx| {
        ctx.templar().options().semantics
    })
}

/// Whether the worker's Python, as the render's options know it, is
/// `version` or later.
pub(super) fn python_at_least(state: &State, version: (u32, u32)) -> bool {
    context(state).is_some_and(|ctx| ctx.templar().options().python_at_least(version))
}

// Long: the filter table, one line per filter as minijinja's own.
/// Registers every filter on `env`: the one table of them, family by family
/// (each family's code is in its file). `add!` also registers Ansible's
/// `ansible.builtin.` name.
pub fn register(env: &mut Environment<'static>, semantics: Semantics) {
    let mut reg = registrar::Registrar::new(env, semantics.passes_markers());
    let env = &mut reg;
    // core
    env.add("default", core::default);
    env.add("d", core::default);
    add!(env, "mandatory", core::mandatory);
    add!(env, "bool", core::to_bool_filter);
    env.add("int", core::int);
    env.add("float", core::float);
    env.add("string", core::string);
    add!(env, "ternary", core::ternary);
    add!(env, "type_debug", core::type_debug);
    env.add("length", core::length);
    env.add("count", core::length);
    env.add("attr", core::attr);
    // datetime
    add!(env, "strftime", datetime::strftime);
    add!(env, "to_datetime", datetime::to_datetime);
    // collections
    add!(env, "combine", collections::combine);
    add!(env, "dict2items", collections::dict2items);
    add!(env, "items2dict", collections::items2dict);
    env.add("dict", collections::to_dict);
    add!(env, "unique", sets::unique);
    add!(env, "union", sets::union);
    add!(env, "difference", sets::difference);
    add!(env, "intersect", sets::intersect);
    add!(env, "symmetric_difference", sets::symmetric_difference);
    add!(env, "flatten", collections::flatten);
    add!(env, "min", collections::min);
    add!(env, "max", collections::max);
    add!(env, "zip", collections::zip);
    add!(env, "zip_longest", collections::zip_longest);
    add!(env, "subelements", collections::subelements);
    add!(env, "random", collections::random);
    add!(env, "shuffle", collections::shuffle);
    add!(env, "extract", collections::extract);
    add!(env, "rekey_on_member", collections::rekey_on_member);
    env.add("map", collections::map);
    env.add("items", collections::items_filter);
    env.add("sort", collections::sort);
    env.add("join", collections::join);
    env.add("json_query", collections::json_query);
    env.add("community.general.json_query", collections::json_query);
    env.add("sum", collections::sum);
    env.add(
        "selectattr",
        |state: &mut State, value: &Value, attr: String, args: Rest<Value>| {
            collections::select_by_attr(state, value, &attr, &args, true)
        },
    );
    env.add(
        "rejectattr",
        |state: &mut State, value: &Value, attr: String, args: Rest<Value>| {
            collections::select_by_attr(state, value, &attr, &args, false)
        },
    );
    // encoding
    add!(env, "b64encode", encoding::b64encode);
    add!(env, "b64decode", encoding::b64decode);
    env.add("tojson", encoding::tojson);
    add!(env, "to_json", encoding::to_json);
    add!(env, "to_nice_json", encoding::to_nice_json);
    add!(env, "from_json", encoding::from_json);
    add!(env, "to_yaml", encoding::to_yaml);
    add!(env, "to_nice_yaml", encoding::to_nice_yaml);
    add!(env, "from_yaml", encoding::from_yaml);
    add!(env, "from_yaml_all", encoding::from_yaml_all);
    add!(env, "hash", encoding::hash);
    add!(env, "sha1", encoding::sha1);
    add!(env, "md5", encoding::md5);
    add!(env, "checksum", encoding::sha1);
    add!(env, "to_uuid", encoding::to_uuid);
    // math
    env.add("abs", math::abs);
    env.add("round", math::round);
    add!(env, "log", math::log);
    add!(env, "pow", math::pow);
    add!(env, "root", math::root);
    add!(env, "human_readable", math::human_readable);
    add!(env, "human_to_bytes", math::human_to_bytes);
    add!(env, "product", math::product);
    add!(env, "permutations", math::permutations);
    add!(env, "combinations", math::combinations);
    // paths
    add!(env, "basename", paths::basename);
    add!(env, "dirname", paths::dirname);
    add!(env, "splitext", paths::splitext);
    add!(env, "path_join", paths::path_join);
    add!(env, "urlsplit", paths::urlsplit);
    add!(env, "urlencode", paths::urlencode);
    add!(env, "urldecode", paths::urldecode);
    add!(env, "expanduser", paths::expanduser);
    add!(env, "expandvars", paths::expandvars);
    add!(env, "realpath", paths::realpath);
    add!(env, "relpath", paths::relpath);
    add!(env, "fileglob", paths::fileglob);
    add!(env, "win_basename", paths::win_basename);
    add!(env, "win_dirname", paths::win_dirname);
    add!(env, "win_splitdrive", paths::win_splitdrive);
    // text
    add!(env, "split", text::split);
    add!(env, "regex_replace", text::regex_replace);
    add!(env, "regex_search", text::regex_search);
    add!(env, "regex_findall", text::regex_findall);
    add!(env, "regex_escape", text::regex_escape);
    // These return unsafe text for unsafe text, as AnsibleUnsafeText's str
    // methods (which they call) do.
    add!(env, "quote", |v: &Value| text::quote(v)
        .map(|r| keep_unsafe(v, r)));
    env.add(
        "indent",
        |v: &Value, width: Option<Value>, first: Option<bool>, blank: Option<bool>, kw: Kwargs| {
            text::indent(v, width, first, blank, kw).map(|r| keep_unsafe(v, r))
        },
    );
    env.add("truncate", |v: &Value, args: Rest<Value>, kw: Kwargs| {
        text::truncate(v, args, kw).map(|r| keep_unsafe(v, r))
    });
    env.add("capitalize", |v: &Value| {
        text::capitalize(v).map(|r| keep_unsafe(v, r))
    });
    env.add(
        "replace",
        |state: &State, v: &Value, old: String, new: String, count: Option<usize>| {
            text::replace(state, v, old, new, count).map(|r| keep_unsafe(v, r))
        },
    );
    env.add("wordcount", text::wordcount);
    env.add("center", |v: &Value, width: Option<usize>| {
        text::center(v, width).map(|r| keep_unsafe(v, r))
    });
    env.add("escape", text::escape);
    env.add("e", text::escape);
    env.add("format", text::format);
    add!(env, "comment", text::comment);
    env.jinja_builtins();
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

/// The UndefinedError of an undefined `part` (item, argument, value) that
/// filter `what` uses as Python's str() or hash() would. (From 2.19 a
/// filter given an undefined argument is not called: `registrar.rs`.)
pub(crate) fn undefined_part(part: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::UndefinedError,
        format!("{part} passed to {what} is undefined"),
    )
}

/// `value`, if Python can iterate it (a list, a mapping, a string); else
/// Python's TypeError, or the undefined error of an undefined value.
pub(crate) fn iterable<'a>(value: &'a Value, what: &str) -> Result<&'a Value, Error> {
    use minijinja::value::ValueKind;
    defined(value, what)?;
    if !matches!(
        value.kind(),
        ValueKind::Seq
            | ValueKind::Iterable
            | ValueKind::Map
            | ValueKind::String
            | ValueKind::Bytes
    ) {
        return Err(invalid(format!(
            "'{}' object is not iterable",
            crate::pyrepr::type_name(value)
        )));
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
    ($reg:expr, $name:literal, $f:expr) => {{
        $reg.add($name, $f);
        $reg.add(concat!("ansible.builtin.", $name), $f);
    }};
}
use add;
