//! Typed access to a module's templated arguments, with Ansible's
//! conversions and error messages.

use std::time::Duration;

use minijinja::Value;
use minijinja::value::ValueKind;

use enka_template::pyrepr;

use crate::ArgumentError;

/// A module's arguments.
pub struct Args<'a> {
    module: &'static str,
    map: &'a Value,
}

impl<'a> Args<'a> {
    /// Wraps a templated argument mapping.
    pub fn new(module: &'static str, map: &'a Value) -> Self {
        Args { module, map }
    }

    /// The whole argument mapping.
    pub fn as_map(&self) -> &Value {
        self.map
    }

    /// The module's name, for messages.
    pub fn module(&self) -> &'static str {
        self.module
    }

    /// An argument, `None` when absent or null.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.map
            .get_attr(name)
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_none())
    }

    /// An argument as given, null included.
    pub fn given(&self, name: &str) -> Option<Value> {
        self.map.get_attr(name).ok().filter(|v| !v.is_undefined())
    }

    /// Whether the argument was given (even as null).
    pub fn has(&self, name: &str) -> bool {
        self.map.get_attr(name).is_ok_and(|v| !v.is_undefined())
    }

    /// Every argument name, as the value it is (a templated key may be a
    /// number).
    pub fn keys(&self) -> Vec<Value> {
        self.map
            .try_iter()
            .map(Iterator::collect)
            .unwrap_or_default()
    }

    /// Every argument name.
    pub fn names(&self) -> Vec<String> {
        self.map
            .try_iter()
            .map(|keys| keys.map(|k| pyrepr::to_text(&k)).collect())
            .unwrap_or_default()
    }

    /// A required argument.
    pub fn required(&self, name: &str) -> Result<Value, ArgumentError> {
        self.get(name)
            .ok_or_else(|| ArgumentError(format!("missing required arguments: {name}")))
    }

    /// A string argument (numbers and bools are converted, as Ansible does).
    pub fn str(&self, name: &str) -> Result<Option<String>, ArgumentError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.kind() {
                ValueKind::String | ValueKind::Number | ValueKind::Bool => {
                    Ok(Some(pyrepr::to_text(&v)))
                }
                _ => Err(ArgumentError(format!(
                    "argument '{name}' of {} is of type {} and we were unable to convert to str",
                    self.module,
                    pyrepr::type_name(&v)
                ))),
            },
        }
    }

    /// A required string argument.
    pub fn required_str(&self, name: &str) -> Result<String, ArgumentError> {
        self.str(name)?
            .ok_or_else(|| ArgumentError(format!("missing required arguments: {name}")))
    }

    /// An argument as Ansible's `boolean(value)` reads it in an action's
    /// own code: `Some(truth)`, or `None` for a value it does not list
    /// (`boolean(strict=False)` reads that as false; strict, it raises
    /// [`not_a_boolean`]'s TypeError).
    pub fn python_bool(&self, name: &str, default: bool) -> Option<bool> {
        self.get(name).map_or(Some(default), |value| {
            enka_template::ansible_boolean(&value)
        })
    }

    /// A boolean argument, Ansible style (`yes`, `on`, `1`, `true`…).
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ArgumentError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.kind() {
                ValueKind::Bool => Ok(v.is_true()),
                ValueKind::String | ValueKind::Number => {
                    let text = pyrepr::to_text(&v).to_lowercase();
                    match text.as_str() {
                        "yes" | "on" | "1" | "true" | "y" | "t" | "1.0" => Ok(true),
                        "no" | "off" | "0" | "false" | "n" | "f" | "0.0" => Ok(false),
                        _ => Err(ArgumentError(format!(
                            "argument '{name}' of {} is of type {} and we were unable to convert to bool: The value '{text}' is not a valid boolean.",
                            self.module,
                            pyrepr::type_name(&v)
                        ))),
                    }
                }
                _ => Err(ArgumentError(format!(
                    "argument '{name}' of {} must be a boolean",
                    self.module
                ))),
            },
        }
    }

    /// An integer argument (numeric strings are converted).
    pub fn int(&self, name: &str) -> Result<Option<i64>, ArgumentError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => i64::try_from(v.clone())
                .ok()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .map(Some)
                .ok_or_else(|| {
                    ArgumentError(format!(
                        "argument '{name}' of {} must be an integer, got {}",
                        self.module,
                        pyrepr::repr(&v)
                    ))
                }),
        }
    }

    /// An `int` argument of an action plugin (whose task's YAML strings are
    /// `AnsibleUnicode` on 2.18), worded as the action's conversion fails:
    /// an integer, or text Python's `int()` reads.
    pub fn action_int(
        &self,
        name: &str,
        semantics: enka_template::Semantics,
        words: IntWords,
    ) -> Result<Option<i64>, crate::ModuleError> {
        let Some(value) = self.get(name).filter(|v| !v.is_none()) else {
            return Ok(None);
        };
        if value.is_integer()
            && let Ok(n) = i64::try_from(value.clone())
        {
            return Ok(Some(n));
        }
        if let Some(n) = value
            .as_str()
            .and_then(|text| text.trim().parse::<i64>().ok())
        {
            return Ok(Some(n));
        }
        let class = match (value.kind(), semantics) {
            (ValueKind::String, enka_template::Semantics::Ansible218) => {
                "<class 'ansible.parsing.yaml.objects.AnsibleUnicode'>".to_owned()
            }
            (_, enka_template::Semantics::Ansible218) => {
                format!("<class '{}'>", pyrepr::type_name(&value))
            }
            _ => pyrepr::type_name(&value).to_owned(),
        };
        let why = match (words, value.kind()) {
            (IntWords::IntLiteral, ValueKind::String) => format!(
                "invalid literal for int() with base 10: {}",
                pyrepr::repr(&value)
            ),
            (IntWords::IntLiteral, _) => format!("{class} cannot be converted to an int"),
            (IntWords::CheckType, _) => {
                format!("\"{}\" cannot be converted to an int", pyrepr::repr(&value))
            }
        };
        Err(ArgumentError(format!(
            "argument '{name}' is of type {class} and we were unable to convert to int: {why}"
        ))
        .into())
    }

    /// A list argument; a single string becomes a one-item list, and a
    /// comma-separated string is split, as Ansible's `type='list'` does.
    pub fn list(&self, name: &str) -> Result<Vec<Value>, ArgumentError> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(v) => match v.kind() {
                ValueKind::Seq => Ok(v.try_iter().map(Iterator::collect).unwrap_or_default()),
                ValueKind::String => Ok(v
                    .as_str()
                    .unwrap_or_default()
                    .split(',')
                    .map(|s| Value::from(s.trim()))
                    .collect()),
                ValueKind::Number | ValueKind::Bool => Ok(vec![v]),
                _ => Err(ArgumentError(format!(
                    "argument '{name}' of {} must be a list",
                    self.module
                ))),
            },
        }
    }

    /// A mapping argument.
    pub fn map(&self, name: &str) -> Result<Option<Value>, ArgumentError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.kind() == ValueKind::Map => Ok(Some(v)),
            Some(v) => Err(ArgumentError(format!(
                "argument '{name}' of {} is of type {} and we were unable to convert to dict",
                self.module,
                pyrepr::type_name(&v)
            ))),
        }
    }

    /// A duration in seconds.
    pub fn seconds(&self, name: &str) -> Result<Option<Duration>, ArgumentError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => enka_template::time::seconds(&v).map(Some).ok_or_else(|| {
                ArgumentError(format!(
                    "argument '{name}' of {} must be a number of seconds",
                    self.module
                ))
            }),
        }
    }

    /// Fails when an argument is outside `allowed`.
    pub fn one_of(&self, name: &str, allowed: &[&str]) -> Result<Option<String>, ArgumentError> {
        let value = self.str(name)?;
        match &value {
            Some(v) if !allowed.contains(&v.as_str()) => Err(ArgumentError(format!(
                "value of {name} must be one of: {}, got: {v}",
                allowed.join(", ")
            ))),
            _ => Ok(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_and_lists() {
        let map = Value::from_pairs([
            (Value::from("a"), Value::from("yes")),
            (Value::from("b"), Value::from("maybe")),
            (Value::from("l"), Value::from("x, y")),
        ]);
        let args = Args::new("test", &map);
        assert_eq!(args.bool("a", false), Ok(true));
        assert!(args.bool("b", false).is_err());
        assert_eq!(args.bool("missing", true), Ok(true));
        assert_eq!(
            args.list("l").unwrap(),
            vec![Value::from("x"), Value::from("y")]
        );
    }
}

/// The TypeError of Ansible's strict `boolean(value)`, as `line` words it
/// (2.18 puts two spaces before the list). Python prints the list from a
/// frozenset, in an order that changes from run to run; this is one of
/// them.
pub fn not_a_boolean(value: &Value, semantics: enka_template::Semantics) -> String {
    let space = match semantics {
        enka_template::Semantics::Ansible218 => "  ",
        enka_template::Semantics::Ansible219 => " ",
    };
    format!(
        "The value '{}' is not a valid boolean.{space}Valid booleans include: 'y', 'yes', 'on', '1', 'true', 't', 1, 'n', 'no', 'off', '0', 'false', 'f', 0",
        pyrepr::to_text(value)
    )
}

/// How an action's conversion of an `int` argument words its failure.
#[derive(Debug, Clone, Copy)]
pub enum IntWords {
    /// Python's own `int()` (`pause`): "invalid literal for int() …".
    IntLiteral,
    /// The argument spec's `check_type_int` (`debug`).
    CheckType,
}
