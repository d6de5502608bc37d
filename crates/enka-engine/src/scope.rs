//! Variable precedence, as Ansible resolves it for one host.
//!
//! From lowest to highest: role defaults < inventory vars < host facts
//! (from modules) < play vars < role vars < block and
//! task vars < `include_vars` < facts (`set_fact`, `register`) < role and
//! include parameters < extra vars (the custom resource) < loop variables.
//! Layers are shared `Arc`s, so entering a block or a task costs a pointer
//! copy, not a copy of the variables.

use std::sync::Arc;

use minijinja::Value;

use enka_project::role::{Inventory, VarList};
use enka_template::{Var, VarSource};

/// What a host of the run has set (facts, registered results, included
/// vars), kept between plays and read by other hosts through `hostvars`.
#[derive(Debug, Clone, Default)]
pub struct HostState {
    /// `set_fact` and `register`.
    pub facts: Facts,
    /// Facts modules returned.
    pub host_facts: Facts,
    /// `include_vars`.
    pub included: Facts,
}

/// Facts another host's task set on a host (`delegate_facts`).
#[derive(Debug, Clone, Default)]
pub struct Delivered {
    /// `set_fact`'s.
    pub facts: Vec<(Arc<str>, Var)>,
    /// A module's (`setup`).
    pub module_facts: Vec<(Arc<str>, Value)>,
}

impl Delivered {
    /// Adds these facts to what a host has set.
    pub fn apply(&self, state: &mut HostState) {
        if !self.facts.is_empty() {
            Arc::make_mut(&mut state.facts).extend(self.facts.iter().cloned());
        }
        if !self.module_facts.is_empty() {
            add_module_facts(&mut state.host_facts, &self.module_facts);
        }
    }
}

/// Every host's [`HostState`], by host name, and the facts delivered to a
/// host its runner has not taken yet.
#[derive(Debug, Default)]
pub struct Peers {
    states: std::sync::Mutex<std::collections::HashMap<String, HostState>>,
    mail: std::sync::Mutex<std::collections::HashMap<String, Vec<Delivered>>>,
}

impl Peers {
    /// What `host` has set so far (nothing for a host that has not run).
    pub fn get(&self, host: &str) -> HostState {
        self.states
            .lock()
            .ok()
            .and_then(|peers| peers.get(host).cloned())
            .unwrap_or_default()
    }

    /// Records what `host` has set, with what was delivered to it and its
    /// runner has not taken yet.
    pub fn set(&self, host: &str, mut state: HostState) {
        if let Ok(mail) = self.mail.lock() {
            for delivered in mail.get(host).into_iter().flatten() {
                delivered.apply(&mut state);
            }
        }
        if let Ok(mut peers) = self.states.lock() {
            peers.insert(host.to_owned(), state);
        }
    }

    /// Gives `host` facts another host's task set on it: seen at once
    /// through `hostvars`, taken by its runner before its next task.
    pub fn deliver(&self, host: &str, delivered: Delivered) {
        if let Ok(mut peers) = self.states.lock() {
            delivered.apply(peers.entry(host.to_owned()).or_default());
        }
        if let Ok(mut mail) = self.mail.lock() {
            mail.entry(host.to_owned()).or_default().push(delivered);
        }
    }

    /// The facts delivered to `host` since it last took them.
    pub fn take_mail(&self, host: &str) -> Vec<Delivered> {
        self.mail
            .lock()
            .ok()
            .and_then(|mut mail| mail.remove(host))
            .unwrap_or_default()
    }
}

/// Facts a module returned (`setup`, `gather_facts`, `*_facts`), as
/// Ansible keeps them: the host's facts (below play vars), each a
/// variable of its own (facts injected as vars), and under
/// `ansible_facts` without the `ansible_` prefix.
pub fn add_module_facts(host_facts: &mut Facts, returned: &[(Arc<str>, Value)]) {
    let namespace = host_facts
        .get("ansible_facts")
        .map(|var| var.value.clone())
        .unwrap_or_default();
    let mut merged = enka_template::convert::entries(&namespace);
    let facts = Arc::make_mut(host_facts);
    for (name, value) in returned {
        facts.insert(name.clone(), Var::unsafe_data(value));
        let short = match name.strip_prefix("ansible_") {
            Some(short) if &**name != "ansible_local" => short,
            _ => name,
        };
        merged.retain(|(k, _)| k.as_str() != Some(short));
        merged.push((Value::from(short), value.clone()));
    }
    facts.insert(
        Arc::from("ansible_facts"),
        Var::unsafe_data(&Value::from_pairs(merged)),
    );
}

/// A chain of variable lists, innermost first.
#[derive(Debug)]
pub struct Frame {
    vars: VarList,
    parent: Option<Arc<Frame>>,
}

/// Pushes `vars` on top of `parent`.
pub fn push(parent: &Option<Arc<Frame>>, vars: &VarList) -> Option<Arc<Frame>> {
    if vars.is_empty() {
        return parent.clone();
    }
    Some(Arc::new(Frame {
        vars: vars.clone(),
        parent: parent.clone(),
    }))
}

fn frame_get(frame: &Option<Arc<Frame>>, name: &str) -> Option<Var> {
    let mut current = frame.as_deref();
    while let Some(frame) = current {
        if let Some((_, var)) = frame.vars.iter().rev().find(|(k, _)| &**k == name) {
            return Some(var.clone());
        }
        current = frame.parent.as_deref();
    }
    None
}

/// Facts and registered results of the host, in the order they were set,
/// replaced copy-on-write.
pub type Facts = Arc<indexmap::IndexMap<Arc<str>, Var>>;

/// Everything visible to one task.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Loop variables and `ansible_failed_*`: above everything.
    pub magic: Vec<(Arc<str>, Var)>,
    /// Extra vars: the custom resource's variables.
    pub extra: VarList,
    /// Role and include parameters.
    pub params: Option<Arc<Frame>>,
    /// `set_fact` and `register`.
    pub facts: Facts,
    /// `include_vars`.
    pub included: Facts,
    /// Block and task `vars`.
    pub locals: Option<Arc<Frame>>,
    /// Role `vars/`.
    pub role_vars: Option<Arc<Frame>>,
    /// Play `vars`.
    pub play_vars: Option<Arc<Frame>>,
    /// Facts modules returned (`gather_facts`, `setup`, `*_facts`): the
    /// host's facts, below play vars, as Ansible ranks them.
    pub host_facts: Facts,
    /// The host's inventory variables (its groups' and its own).
    pub inventory_vars: Option<Arc<Frame>>,
    /// Role `defaults/`.
    pub defaults: Option<Arc<Frame>>,
    /// Fixed variables of the run (`role_path`, `ansible_check_mode`, …).
    pub builtins: VarList,
    /// The inventory the play runs over, for `groups`, `group_names` and
    /// `hostvars` of other hosts.
    pub inventory: Option<Arc<Inventory>>,
    /// The other hosts' facts, for `hostvars`.
    pub peers: Option<Arc<Peers>>,
}

impl Default for Frame {
    fn default() -> Self {
        Frame {
            vars: Arc::from(Vec::new()),
            parent: None,
        }
    }
}

impl Scope {
    /// Sets a magic variable (loop variable, `ansible_failed_task`, …).
    pub fn set_magic(&mut self, name: &str, value: Value) {
        self.magic.retain(|(k, _)| &**k != name);
        self.magic.push((Arc::from(name), Var::plain(value)));
    }
}

/// `hash_behaviour = merge` (`ANSIBLE_HASH_BEHAVIOUR=merge`): a mapping
/// defined at several precedence levels is their recursive merge, not the
/// highest one alone. Read once, as Ansible reads its configuration.
fn hash_merge() -> bool {
    static MERGE: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::env::var("ANSIBLE_HASH_BEHAVIOUR")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("merge"))
    });
    *MERGE
}

fn frame_get_all(frame: &Option<Arc<Frame>>, name: &str, out: &mut Vec<Var>) {
    let mut current = frame.as_deref();
    while let Some(frame) = current {
        out.extend(
            frame
                .vars
                .iter()
                .rev()
                .filter(|(k, _)| &**k == name)
                .map(|(_, v)| v.clone()),
        );
        current = frame.parent.as_deref();
    }
}

impl Scope {
    /// Every definition of `name` below the magic variables, highest
    /// precedence first.
    fn definitions(&self, name: &str) -> Vec<Var> {
        let mut out = Vec::new();
        let named = |list: &VarList| -> Vec<Var> {
            list.iter()
                .rev()
                .filter(|(k, _)| &**k == name)
                .map(|(_, v)| v.clone())
                .collect()
        };
        out.extend(named(&self.extra));
        frame_get_all(&self.params, name, &mut out);
        out.extend(self.facts.get(name).cloned());
        out.extend(self.included.get(name).cloned());
        frame_get_all(&self.locals, name, &mut out);
        frame_get_all(&self.role_vars, name, &mut out);
        frame_get_all(&self.play_vars, name, &mut out);
        out.extend(self.host_facts.get(name).cloned());
        frame_get_all(&self.inventory_vars, name, &mut out);
        frame_get_all(&self.defaults, name, &mut out);
        out
    }

    /// `name` under `hash_behaviour = merge`: from the lowest definition up,
    /// a mapping over a mapping merges into it, anything else replaces.
    fn merged(&self, name: &str) -> Option<Var> {
        let mut definitions = self.definitions(name).into_iter().rev();
        let mut merged = definitions.next()?;
        for higher in definitions {
            let both_maps = merged.value.kind() == minijinja::value::ValueKind::Map
                && higher.value.kind() == minijinja::value::ValueKind::Map;
            merged = if both_maps {
                Var {
                    value: enka_template::merge_hash(&merged.value, &higher.value),
                    lazy: merged.lazy || higher.lazy,
                    is_unsafe: merged.is_unsafe || higher.is_unsafe,
                }
            } else {
                higher
            };
        }
        Some(merged)
    }
}

impl VarSource for Scope {
    fn get(&self, name: &str) -> Option<Var> {
        if let Some((_, var)) = self.magic.iter().rev().find(|(k, _)| &**k == name) {
            return Some(var.clone());
        }
        if hash_merge()
            && let Some(var) = self.merged(name)
        {
            return Some(var);
        }
        if let Some((_, var)) = self.extra.iter().rev().find(|(k, _)| &**k == name) {
            return Some(var.clone());
        }
        frame_get(&self.params, name)
            .or_else(|| self.facts.get(name).cloned())
            .or_else(|| self.included.get(name).cloned())
            .or_else(|| frame_get(&self.locals, name))
            .or_else(|| frame_get(&self.role_vars, name))
            .or_else(|| frame_get(&self.play_vars, name))
            .or_else(|| self.host_facts.get(name).cloned())
            .or_else(|| frame_get(&self.inventory_vars, name))
            .or_else(|| frame_get(&self.defaults, name))
            .or_else(|| self.inventory_magic(name))
            .or_else(|| {
                self.builtins
                    .iter()
                    .rev()
                    .find(|(k, _)| &**k == name)
                    .map(|(_, v)| v.clone())
            })
    }

    /// Every variable name, in the order Ansible's flattened variables
    /// dict has them: lowest precedence first, each name where it first
    /// appears, magic and fixed variables last.
    fn names(&self) -> Vec<Arc<str>> {
        fn frame_names(frame: &Option<Arc<Frame>>, out: &mut Vec<Arc<str>>) {
            // Frames chain innermost first; Ansible combines outermost first.
            let mut frames = Vec::new();
            let mut current = frame.as_deref();
            while let Some(f) = current {
                frames.push(f);
                current = f.parent.as_deref();
            }
            for f in frames.into_iter().rev() {
                out.extend(f.vars.iter().map(|(k, _)| k.clone()));
            }
        }
        let mut out: Vec<Arc<str>> = Vec::new();
        frame_names(&self.defaults, &mut out);
        frame_names(&self.inventory_vars, &mut out);
        out.extend(self.host_facts.keys().cloned());
        frame_names(&self.play_vars, &mut out);
        frame_names(&self.role_vars, &mut out);
        frame_names(&self.locals, &mut out);
        out.extend(self.included.keys().cloned());
        out.extend(self.facts.keys().cloned());
        frame_names(&self.params, &mut out);
        out.extend(self.extra.iter().map(|(k, _)| k.clone()));
        out.extend(self.magic.iter().map(|(k, _)| k.clone()));
        out.extend(self.builtins.iter().map(|(k, _)| k.clone()));
        let mut seen = std::collections::HashSet::new();
        out.retain(|k| seen.insert(k.clone()));
        out
    }

    /// A host's variables as `hostvars` has them: for the current host
    /// what belongs to the host (inventory vars, facts, registered and
    /// included vars, extra vars, magic vars), not the play's, role's,
    /// block's or task's (Ansible's `get_vars(host=...)` without a play);
    /// for another host its inventory variables and magic variables
    /// (`inventory_hostname`, `group_names`, `groups`). Facts of other
    /// hosts are not known: a run is on one host.
    fn host(&self, name: &str) -> Option<Arc<dyn VarSource>> {
        let current = self
            .builtins
            .iter()
            .rev()
            .find(|(k, _)| &**k == "inventory_hostname")
            .and_then(|(_, v)| v.value.as_str().map(str::to_owned));
        if current.as_deref() == Some(name) {
            return Some(Arc::new(Scope {
                magic: Vec::new(),
                extra: self.extra.clone(),
                params: None,
                facts: self.facts.clone(),
                included: self.included.clone(),
                locals: None,
                role_vars: None,
                play_vars: None,
                host_facts: self.host_facts.clone(),
                inventory_vars: self.inventory_vars.clone(),
                defaults: None,
                builtins: self.builtins.clone(),
                inventory: self.inventory.clone(),
                peers: self.peers.clone(),
            }));
        }
        let inventory = self.inventory.as_ref()?;
        let vars = inventory.host_vars(name)?;
        let state = self.peers.as_ref().map(|p| p.get(name)).unwrap_or_default();
        let mut builtins: Vec<(Arc<str>, Var)> = host_magic(name);
        builtins.push((
            Arc::from("group_names"),
            Var::plain(group_names_value(inventory, name)),
        ));
        builtins.push((
            Arc::from("groups"),
            Var::plain(inventory.groups_value().clone()),
        ));
        Some(Arc::new(Scope {
            facts: state.facts,
            host_facts: state.host_facts,
            included: state.included,
            inventory_vars: push(&None, vars),
            builtins: builtins.into(),
            extra: self.extra.clone(),
            ..Scope::default()
        }))
    }

    fn host_names(&self) -> Vec<Arc<str>> {
        let Some(inventory) = &self.inventory else {
            return Vec::new();
        };
        let mut names: Vec<Arc<str>> = inventory.host_names().map(Arc::from).collect();
        names.sort();
        names
    }
}

impl Scope {
    /// `groups` and `group_names` from the inventory as it is now
    /// (`add_host` and `group_by` change them during a play).
    fn inventory_magic(&self, name: &str) -> Option<Var> {
        let inventory = self.inventory.as_ref()?;
        match name {
            "groups" => Some(Var::plain(inventory.groups_value().clone())),
            "group_names" => {
                let host = self
                    .builtins
                    .iter()
                    .rev()
                    .find(|(k, _)| &**k == "inventory_hostname")?
                    .1
                    .value
                    .as_str()?
                    .to_owned();
                Some(Var::plain(group_names_value(inventory, &host)))
            }
            _ => None,
        }
    }
}

fn group_names_value(inventory: &Inventory, host: &str) -> Value {
    Value::from(
        inventory
            .group_names(host)
            .into_iter()
            .map(Value::from)
            .collect::<Vec<_>>(),
    )
}

/// The magic variables that name a host.
pub fn host_magic(host: &str) -> Vec<(Arc<str>, Var)> {
    let short = host.split('.').next().unwrap_or(host);
    vec![
        (
            Arc::from("inventory_hostname"),
            Var::plain(Value::from(host)),
        ),
        (
            Arc::from("inventory_hostname_short"),
            Var::plain(Value::from(short)),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, i64)]) -> VarList {
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Var::plain(Value::from(*v))))
            .collect::<Vec<_>>()
            .into()
    }

    #[test]
    fn precedence_follows_ansible() {
        let mut scope = Scope {
            defaults: push(
                &None,
                &list(&[("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1)]),
            ),
            role_vars: push(&None, &list(&[("b", 2), ("c", 2), ("d", 2), ("e", 2)])),
            locals: push(&None, &list(&[("c", 3), ("d", 3), ("e", 3)])),
            extra: list(&[("e", 5)]),
            ..Scope::default()
        };
        Arc::make_mut(&mut scope.facts).insert(Arc::from("d"), Var::plain(Value::from(4)));
        Arc::make_mut(&mut scope.facts).insert(Arc::from("e"), Var::plain(Value::from(4)));
        let get = |n: &str| i64::try_from(scope.get(n).unwrap().value).unwrap();
        assert_eq!(
            [get("a"), get("b"), get("c"), get("d"), get("e")],
            [1, 2, 3, 4, 5]
        );
    }

    #[test]
    fn merged_definitions_combine_mappings_from_the_lowest_up() {
        let map = |pairs: &[(&str, i64)]| {
            Var::plain(Value::from_pairs(
                pairs
                    .iter()
                    .map(|(k, v)| (Value::from(*k), Value::from(*v))),
            ))
        };
        let one = |name: &str, var: Var| -> VarList { vec![(Arc::from(name), var)].into() };
        let mut scope = Scope {
            defaults: push(&None, &one("h", map(&[("a", 1), ("b", 1)]))),
            play_vars: push(
                &push(&None, &one("h", map(&[("b", 2)]))),
                &one("h", map(&[("c", 2)])),
            ),
            extra: one("h", map(&[("d", 5)])),
            ..Scope::default()
        };
        let merged = scope.merged("h").unwrap().value;
        for (key, want) in [("a", 1), ("b", 2), ("c", 2), ("d", 5)] {
            assert_eq!(merged.get_attr(key).unwrap(), Value::from(want), "{key}");
        }
        // A value that is not a mapping replaces what is below it.
        scope.role_vars = push(&None, &one("h", Var::plain(Value::from("flat"))));
        let merged = scope.merged("h").unwrap().value;
        assert_eq!(
            merged.get_attr("a").ok().filter(|v| !v.is_undefined()),
            None
        );
        assert_eq!(merged.get_attr("d").unwrap(), Value::from(5));
    }

    #[test]
    fn inner_blocks_shadow_outer_ones() {
        let outer = push(&None, &list(&[("x", 1), ("y", 1)]));
        let inner = push(&outer, &list(&[("x", 2)]));
        let scope = Scope {
            locals: inner,
            ..Scope::default()
        };
        assert_eq!(scope.get("x").unwrap().value, Value::from(2));
        assert_eq!(scope.get("y").unwrap().value, Value::from(1));
        assert!(scope.get("z").is_none());
    }
}
