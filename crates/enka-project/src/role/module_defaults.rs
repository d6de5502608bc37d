//! `module_defaults`: arguments a play, block or task gives every action it
//! names (or every action of a named group) unless the task gives them
//! itself.
//!
//! Ansible resolves the keys when the play loads (`Base._load_module_defaults`):
//! an action's name to what it resolves to (`ping` → `ansible.builtin.ping`),
//! a `group/name` to its fully qualified group, whose members come from the
//! collections' `meta/runtime.yml` `action_groups`. enka resolves the names
//! of its native modules itself and asks Ansible's own code (the worker)
//! for the rest; the table below is what the engine applies per task
//! (`get_action_args_with_defaults`).

use std::collections::HashMap;

use minijinja::Value;
use minijinja::value::ValueKind;

use enka_modules::catalogue::modules as registry;

/// What `module_defaults` keys resolved to, for one project.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModuleDefaults {
    /// Each key as written → the keys Ansible keeps for it (an
    /// `ansible.legacy` name may stand for its `ansible.builtin` twin too).
    pub keys: HashMap<String, Vec<String>>,
    /// Each action (fully qualified) → the groups it belongs to.
    pub action_groups: HashMap<String, Vec<String>>,
}

/// The group kubernetes.core's `meta/runtime.yml` calls `k8s`, as far as
/// enka runs its modules natively; `group/k8s` is ansible.builtin's name
/// for the same group (it extends kubernetes.core's).
const KUBERNETES_GROUP: &[&str] = &["k8s", "k8s_exec", "k8s_info", "k8s_log", "k8s_scale"];
const KUBERNETES_GROUP_NAMES: &[&str] = &["kubernetes.core.k8s", "ansible.builtin.k8s"];

impl ModuleDefaults {
    /// Resolves `key` without Ansible when enka knows what it names: one
    /// of its native modules, or the Kubernetes group. `false` when only
    /// Ansible can say.
    pub fn resolve_natively(&mut self, key: &str) -> bool {
        if let Some(group) = key.strip_prefix("group/") {
            let fq = match group {
                "k8s" => "ansible.builtin.k8s",
                "kubernetes.core.k8s" => "kubernetes.core.k8s",
                _ => return false,
            };
            for module in KUBERNETES_GROUP {
                let groups = self
                    .action_groups
                    .entry(format!("kubernetes.core.{module}"))
                    .or_default();
                for name in KUBERNETES_GROUP_NAMES {
                    if !groups.iter().any(|g| g == name) {
                        groups.push((*name).to_owned());
                    }
                }
            }
            self.keys
                .insert(key.to_owned(), vec![format!("group/{fq}")]);
            return true;
        }
        match registry::lookup(key) {
            Some(spec) => {
                self.keys.insert(key.to_owned(), vec![spec.fqcn()]);
                true
            }
            None => false,
        }
    }

    /// The argument mappings `entries` (the play's, its blocks' and the
    /// task's `module_defaults`, outermost first, each a mapping or a list
    /// of mappings) give `action`, in the order they apply: its groups'
    /// then its own, the later of each overriding the earlier.
    pub fn for_action(&self, action: &str, entries: &[Value]) -> Vec<Value> {
        // Later entries update earlier ones key by key, as dict.update.
        let mut merged: Vec<(String, Value)> = Vec::new();
        for entry in entries {
            for mapping in mappings(entry) {
                for key in mapping.try_iter().into_iter().flatten() {
                    let Some(written) = key.as_str() else {
                        continue;
                    };
                    let value = mapping.get_item(&key).unwrap_or_default();
                    let resolved = self
                        .keys
                        .get(written)
                        .cloned()
                        .unwrap_or_else(|| vec![written.to_owned()]);
                    for name in resolved {
                        match merged.iter_mut().find(|(k, _)| *k == name) {
                            Some((_, kept)) => *kept = value.clone(),
                            None => merged.push((name, value.clone())),
                        }
                    }
                }
            }
        }
        let groups = self.action_groups.get(action);
        let mut out: Vec<Value> = merged
            .iter()
            .filter(|(key, _)| {
                key.strip_prefix("group/")
                    .is_some_and(|g| groups.is_some_and(|gs| gs.iter().any(|n| n == g)))
            })
            .map(|(_, v)| v.clone())
            .collect();
        out.extend(
            merged
                .iter()
                .filter(|(key, _)| key == action)
                .map(|(_, v)| v.clone()),
        );
        out.retain(|v| !v.is_none() && !v.is_undefined());
        out
    }
}

/// The mappings of a `module_defaults` value: itself, or each of a list.
fn mappings(entry: &Value) -> Vec<Value> {
    match entry.kind() {
        ValueKind::Map => vec![entry.clone()],
        ValueKind::Seq => entry
            .try_iter()
            .into_iter()
            .flatten()
            .filter(|v| v.kind() == ValueKind::Map)
            .collect(),
        _ => Vec::new(),
    }
}

/// The keys of a `module_defaults` value as written, or Ansible's error
/// for a value that is not a mapping or a list of mappings.
pub fn written_keys(entry: &Value) -> Result<Vec<String>, String> {
    let items: Vec<Value> = match entry.kind() {
        ValueKind::Map => vec![entry.clone()],
        ValueKind::Seq => entry.try_iter().into_iter().flatten().collect(),
        ValueKind::None | ValueKind::Undefined => return Ok(Vec::new()),
        _ => vec![entry.clone()],
    };
    let mut keys = Vec::new();
    for item in items {
        if item.kind() != ValueKind::Map {
            return Err("The field 'module_defaults' is supposed to be a dictionary or list of dictionaries, the keys of which must be static action, module, or group names. Only the values may contain templates. For example: {'ping': \"{{ ping_defaults }}\"}".to_owned());
        }
        for key in item.try_iter().into_iter().flatten() {
            keys.push(enka_template::pyrepr::to_text(&key));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, Value)]) -> Value {
        Value::from_pairs(pairs.iter().map(|(k, v)| (Value::from(*k), v.clone())))
    }

    /// Resolved keys and the merge order of get_action_args_with_defaults:
    /// groups first, then the action's own, later entries winning.
    #[test]
    fn defaults_apply_groups_then_the_action_later_entries_winning() {
        let mut table = ModuleDefaults::default();
        assert!(table.resolve_natively("k8s"));
        assert!(table.resolve_natively("group/k8s"));
        assert!(!table.resolve_natively("ping"));
        assert_eq!(table.keys["k8s"], ["kubernetes.core.k8s"]);
        let play = map(&[
            ("group/k8s", map(&[("wait", Value::from(true))])),
            ("k8s", map(&[("state", Value::from("present"))])),
        ]);
        let task = Value::from(vec![map(&[(
            "k8s",
            map(&[("state", Value::from("absent"))]),
        )])]);
        let applied = table.for_action("kubernetes.core.k8s", &[play.clone(), task]);
        assert_eq!(applied.len(), 2);
        assert_eq!(applied[0].get_attr("wait").unwrap(), Value::from(true));
        assert_eq!(applied[1].get_attr("state").unwrap(), Value::from("absent"));
        let info = table.for_action("kubernetes.core.k8s_info", std::slice::from_ref(&play));
        assert_eq!(info.len(), 1, "k8s_info is in the group, not the k8s key");
        assert!(
            table
                .for_action("ansible.builtin.debug", &[play])
                .is_empty()
        );
    }

    #[test]
    fn a_value_that_is_not_a_mapping_is_refused() {
        assert!(written_keys(&Value::from("ping")).is_err());
        assert!(written_keys(&Value::from(vec![Value::from(1)])).is_err());
        assert_eq!(written_keys(&map(&[("ping", map(&[]))])).unwrap(), ["ping"]);
    }
}
