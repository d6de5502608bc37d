//! How a filter is registered for the line a templar follows. From 2.19 a
//! filter handed an undefined value (Ansible's marker) as its input, an
//! argument or a keyword argument is not called: the first such value is
//! its result (`nope | flatten | default([])` is `[]`, the undefined value
//! reaching `default`). Only the filters Ansible marks as accepting
//! markers (`default`, `mandatory`, `ternary`, `type_debug`) see them. 2.18 calls every
//! filter, which fails on what it cannot use.

use minijinja::functions::Function;
use minijinja::value::{FunctionArgs, FunctionResult, Rest, ValueOrKwargs};
use minijinja::{Environment, Error, State, Value};

/// Filters that take an undefined argument as it is on every line
/// (`accept_args_markers` in ansible-core).
const ACCEPT_MARKERS: &[&str] = &[
    "default",
    "d",
    "ansible.builtin.default",
    "mandatory",
    "ansible.builtin.mandatory",
    "ternary",
    "ansible.builtin.ternary",
    // Names the marker's class (`UndefinedMarker`).
    "type_debug",
    "ansible.builtin.type_debug",
];

/// Registers filters on an environment, passing markers on when the line
/// does.
pub(crate) struct Registrar<'e> {
    env: &'e mut Environment<'static>,
    passes_markers: bool,
}

impl<'e> Registrar<'e> {
    pub(crate) fn new(env: &'e mut Environment<'static>, passes_markers: bool) -> Self {
        Registrar {
            env,
            passes_markers,
        }
    }

    /// Registers `f` as filter `name`.
    pub(crate) fn add<F, Rv, Args>(&mut self, name: &'static str, f: F)
    where
        F: Function<Rv, Args>,
        Rv: FunctionResult,
        Args: for<'a> FunctionArgs<'a>,
    {
        if !self.passes_markers || ACCEPT_MARKERS.contains(&name) {
            self.env.add_filter(name, f);
            return;
        }
        let filter = Value::from_function(f);
        self.env.add_filter(
            name,
            move |state: &mut State, args: Rest<ValueOrKwargs>| -> Result<Value, Error> {
                let args = args.into_values();
                match first_marker(&args) {
                    Some(marker) => Ok(marker),
                    None => filter.call(state, &args),
                }
            },
        );
    }

    /// Jinja's own filters that enka does not define again: registered
    /// over minijinja's only when markers pass (minijinja's are there
    /// already otherwise).
    pub(crate) fn jinja_builtins(&mut self) {
        if !self.passes_markers {
            return;
        }
        use minijinja::filters as jinja;
        self.add("safe", jinja::safe);
        self.add("lower", jinja::lower);
        self.add("upper", jinja::upper);
        self.add("title", jinja::title);
        self.add("dictsort", jinja::dictsort);
        self.add("reverse", jinja::reverse);
        self.add("trim", jinja::trim);
        self.add("lines", jinja::lines);
        self.add("first", jinja::first);
        self.add("last", jinja::last);
        self.add("list", jinja::list);
        self.add("batch", jinja::batch);
        self.add("slice", jinja::slice);
        self.add("select", jinja::select);
        self.add("reject", jinja::reject);
        self.add("groupby", jinja::groupby);
        self.add("chain", jinja::chain);
        self.add("pprint", jinja::pprint);
    }
}

/// The first undefined value among a call's arguments and keyword
/// arguments (Ansible's `get_first_marker_arg`: the top level only).
pub(crate) fn first_marker(args: &[Value]) -> Option<Value> {
    args.iter().find_map(|arg| {
        if crate::is_strict_undefined(arg) {
            return Some(arg.clone());
        }
        if !arg.is_kwargs() {
            return None;
        }
        arg.try_iter().ok()?.find_map(|key| {
            let value = arg.get_item(&key).ok()?;
            crate::is_strict_undefined(&value).then_some(value)
        })
    })
}
