//! Jinja's global classes (`range`, `dict`, `namespace`, `cycler`,
//! `joiner`) as Python prints them. A role that writes `{{ namespace }}`
//! meaning a variable it never defined renders the class itself, and
//! Ansible writes its repr (`<class 'jinja2.utils.Namespace'>`) where
//! minijinja would write its own function's name.

use std::fmt;
use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr, Value};
use minijinja::{Error, State};

/// A global callable that renders as the Python class it stands for.
#[derive(Debug)]
struct PythonClass {
    repr: &'static str,
    call: Value,
}

impl Object for PythonClass {
    /// Neither a mapping nor a sequence: a filter that wants one refuses
    /// it, as Python's do a class.
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn call(self: &Arc<Self>, state: &mut State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        self.call.call(state, args)
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.repr)
    }
}

/// Whether `value` is one of Jinja's global classes (Python's `type`).
pub(crate) fn is_python_class(value: &Value) -> bool {
    value.downcast_object_ref::<PythonClass>().is_some()
}

/// Jinja's globals, each with the class Python names it by.
pub(crate) fn add(env: &mut minijinja::Environment<'static>, dict: Value) {
    let classes = [
        (
            "range",
            "<class 'range'>",
            Value::from_function(minijinja::functions::range),
        ),
        ("dict", "<class 'dict'>", dict),
        (
            "namespace",
            "<class 'jinja2.utils.Namespace'>",
            Value::from_function(minijinja::functions::namespace),
        ),
        (
            "cycler",
            "<class 'jinja2.utils.Cycler'>",
            Value::from_function(minijinja_contrib::globals::cycler),
        ),
        (
            "joiner",
            "<class 'jinja2.utils.Joiner'>",
            Value::from_function(minijinja_contrib::globals::joiner),
        ),
    ];
    for (name, repr, call) in classes {
        env.add_global(name, Value::from_object(PythonClass { repr, call }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> minijinja::Environment<'static> {
        let mut env = minijinja::Environment::new();
        add(&mut env, Value::from_function(minijinja::functions::dict));
        env
    }

    #[test]
    fn the_class_itself_renders_as_python_prints_it() {
        let rendered = env()
            .render_str("{{ namespace }}.svc {{ range }} {{ joiner }}", ())
            .unwrap();
        assert_eq!(
            rendered,
            "<class 'jinja2.utils.Namespace'>.svc <class 'range'> <class 'jinja2.utils.Joiner'>"
        );
    }

    #[test]
    fn calling_it_still_makes_what_jinja_makes() {
        let rendered = env()
            .render_str(
                "{% set ns = namespace(n=1) %}{{ ns.n }} {{ range(3) | list }} {{ dict(a=1) }}",
                (),
            )
            .unwrap();
        assert_eq!(rendered, "1 [0, 1, 2] {'a': 1}");
    }
}
