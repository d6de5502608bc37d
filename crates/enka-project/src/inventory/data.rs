//! Ansible's `InventoryData` as the inventory plugins fill it: groups with
//! their hosts, children, parents, depth, priority and variables; hosts
//! with their own variables; the same operations (`add_group`, `add_host`,
//! `add_child`, `set_variable`, `reconcile_inventory`) with the same
//! effects, so the plugins enka reads itself build what Ansible builds.

use std::collections::HashMap;

use indexmap::{IndexMap, IndexSet};
use serde_json::{Map, Value as Json, json};

/// Ansible's `C.LOCALHOST`: names that are the controller.
pub(super) const LOCALHOST: [&str; 3] = ["127.0.0.1", "localhost", "::1"];

/// Why an inventory cannot be read as Ansible reads it: the caller then
/// leaves it to Ansible, which says why in its own words.
#[derive(Debug)]
pub(super) struct Declined;

#[derive(Debug, Default)]
pub(super) struct Group {
    /// Hosts added to this group itself, in order.
    pub hosts: IndexSet<String>,
    pub children: Vec<String>,
    pub parents: Vec<String>,
    pub priority: i64,
    pub vars: Map<String, Json>,
}

#[derive(Debug, Default)]
pub(super) struct Host {
    pub vars: Map<String, Json>,
}

/// The inventory being built.
#[derive(Debug)]
pub(super) struct Data {
    pub groups: IndexMap<String, Group>,
    pub hosts: IndexMap<String, Host>,
    /// The source being read: a new host's `inventory_file`.
    pub current_source: Option<String>,
    /// Each group's depth, once reconciled.
    depths: HashMap<String, i64>,
    /// Each host's groups, once reconciled.
    groups_of: HashMap<String, Vec<String>>,
    /// What Ansible warns of while it reads, each once (as its display
    /// says a warning once).
    pub warnings: Vec<String>,
}

impl Data {
    pub fn new() -> Self {
        let mut data = Data {
            groups: IndexMap::new(),
            hosts: IndexMap::new(),
            current_source: None,
            depths: HashMap::new(),
            groups_of: HashMap::new(),
            warnings: Vec::new(),
        };
        data.add_group("all");
        data.add_group("ungrouped");
        // InventoryData starts with `ungrouped` under `all`.
        let _ = data.add_child("all", "ungrouped");
        data
    }

    pub fn add_group(&mut self, name: &str) {
        if !is_safe_group_name(name) {
            // TRANSFORM_INVALID_GROUP_CHARS is `never` (others decline).
            self.warn("Invalid characters were found in group names but not replaced, use -vvvv to see details".to_owned());
        }
        if !self.groups.contains_key(name) {
            self.groups.insert(
                name.to_owned(),
                Group {
                    priority: 1,
                    ..Group::default()
                },
            );
        }
    }

    /// A host (with the port its address named) in `group`.
    pub fn add_host(&mut self, name: &str, group: Option<&str>, port: Option<u64>) {
        if name.is_empty() {
            return;
        }
        if !self.hosts.contains_key(name) {
            if LOCALHOST.contains(&name)
                && let Some(first) = self.hosts.keys().find(|h| LOCALHOST.contains(&h.as_str()))
            {
                let message = format!(
                    "A duplicate localhost-like entry was found ({name}). First found localhost was {first}"
                );
                self.warn(message);
            }
            let mut host = Host::default();
            // `Host(name, port)` sets the port when it is not 0.
            if let Some(port) = port.filter(|p| *p != 0) {
                host.vars.insert("ansible_port".into(), json!(port));
            }
            let (file, dir) = match &self.current_source {
                Some(source) => (json!(source), json!(source_dir(source))),
                None => (Json::Null, Json::Null),
            };
            host.vars.insert("inventory_file".into(), file);
            host.vars.insert("inventory_dir".into(), dir);
            self.hosts.insert(name.to_owned(), host);
        }
        if let Some(group) = group.and_then(|g| self.groups.get_mut(g))
            && !group.hosts.contains(name)
        {
            group.hosts.insert(name.to_owned());
        }
    }

    /// `child` (a group, else a host) under `group`.
    pub fn add_child(&mut self, group: &str, child: &str) -> Result<(), Declined> {
        if !self.groups.contains_key(group) {
            return Err(Declined);
        }
        if self.groups.contains_key(child) {
            if group == child || self.ancestors(group).iter().any(|a| a == child) {
                return Err(Declined);
            }
            let parent = self.groups.get_mut(group).ok_or(Declined)?;
            if !parent.children.iter().any(|c| c == child) {
                parent.children.push(child.to_owned());
                let child = self.groups.get_mut(child).ok_or(Declined)?;
                if !child.parents.iter().any(|p| p == group) {
                    child.parents.push(group.to_owned());
                }
            }
            Ok(())
        } else if self.hosts.contains_key(child) {
            self.add_host(child, Some(group), None);
            Ok(())
        } else {
            Err(Declined)
        }
    }

    /// `Group.set_variable` / `Host.set_variable`: a mapping merges into a
    /// mapping already there; `ansible_group_priority` is the group's
    /// priority.
    pub fn set_group_variable(
        &mut self,
        group: &str,
        key: &str,
        value: Json,
    ) -> Result<(), Declined> {
        let group = self.groups.get_mut(group).ok_or(Declined)?;
        if key == "ansible_group_priority" {
            group.priority = python_int(&value).ok_or(Declined)?;
            return Ok(());
        }
        set_variable(&mut group.vars, key, value);
        Ok(())
    }

    pub fn set_host_variable(
        &mut self,
        host: &str,
        key: &str,
        value: Json,
    ) -> Result<(), Declined> {
        let host = self.hosts.get_mut(host).ok_or(Declined)?;
        set_variable(&mut host.vars, key, value);
        Ok(())
    }

    /// Every group above `group`, nearest first.
    pub fn ancestors(&self, group: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut queue: Vec<&str> = vec![group];
        while let Some(next) = queue.pop() {
            for parent in self
                .groups
                .get(next)
                .map(|g| g.parents.as_slice())
                .unwrap_or_default()
            {
                if !out.contains(parent) {
                    out.push(parent.clone());
                    queue.push(parent);
                }
            }
        }
        out
    }

    /// `reconcile_inventory`: groups without a parent go under `all`; a
    /// host in no group but `all` goes in `ungrouped`, and one in another
    /// group leaves it.
    pub fn reconcile(&mut self) -> Result<(), Declined> {
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            if name != "all" && self.ancestors(&name).is_empty() {
                self.add_child("all", &name)?;
            }
        }
        let hosts: Vec<String> = self.hosts.keys().cloned().collect();
        let mut leave_ungrouped: std::collections::HashSet<String> = Default::default();
        let groups_of = self.groups_of_hosts();
        for host in hosts {
            let groups = groups_of.get(&host).cloned().unwrap_or_default();
            let others = groups.iter().any(|g| g != "all" && g != "ungrouped");
            let in_ungrouped = groups.iter().any(|g| g == "ungrouped");
            if in_ungrouped && others {
                leave_ungrouped.insert(host);
            } else if !in_ungrouped && !others {
                self.add_host(&host, Some("ungrouped"), None);
            }
        }
        if let Some(ungrouped) = self.groups.get_mut("ungrouped") {
            ungrouped.hosts.retain(|h| !leave_ungrouped.contains(h));
        }
        let both: Vec<String> = self
            .groups
            .keys()
            .filter(|g| self.hosts.contains_key(*g))
            .cloned()
            .collect();
        for name in both {
            self.warn(format!("Found both group and host with same name: {name}"));
        }
        self.compute_depths();
        self.groups_of = self.groups_of_hosts();
        Ok(())
    }

    /// The groups `host` is in: those it was added to and their ancestors
    /// (known once the inventory is reconciled).
    pub fn host_groups(&self, host: &str) -> Vec<String> {
        self.groups_of.get(host).cloned().unwrap_or_default()
    }

    /// Every host's groups, each group's ancestors walked once: one pass
    /// over the memberships, however many hosts and groups.
    fn groups_of_hosts(&self) -> HashMap<String, Vec<String>> {
        let ancestors: HashMap<&str, Vec<String>> = self
            .groups
            .keys()
            .map(|name| (name.as_str(), self.ancestors(name)))
            .collect();
        let mut groups_of: HashMap<String, IndexSet<String>> = HashMap::new();
        for (name, group) in &self.groups {
            for host in &group.hosts {
                let of = groups_of.entry(host.clone()).or_default();
                of.insert(name.clone());
                of.extend(ancestors.get(name.as_str()).into_iter().flatten().cloned());
            }
        }
        groups_of
            .into_iter()
            .map(|(host, groups)| (host, groups.into_iter().collect()))
            .collect()
    }

    /// A group's depth: its longest path down from a group with no parent
    /// (known once the inventory is reconciled).
    pub fn depth(&self, group: &str) -> i64 {
        self.depths.get(group).copied().unwrap_or(0)
    }

    /// Every group's depth, each computed once, down from the groups
    /// without parents (Kahn's order: a lattice of diamonds or a chain of
    /// thousands costs one visit per edge, and no recursion).
    fn compute_depths(&mut self) {
        let mut waiting: HashMap<&str, usize> = HashMap::new();
        let mut depths: HashMap<String, i64> = HashMap::new();
        let mut ready: Vec<&str> = Vec::new();
        for (name, group) in &self.groups {
            waiting.insert(name, group.parents.len());
            if group.parents.is_empty() {
                ready.push(name);
                depths.insert(name.clone(), 0);
            }
        }
        while let Some(name) = ready.pop() {
            let depth = depths.get(name).copied().unwrap_or(0);
            for child in self
                .groups
                .get(name)
                .map(|g| g.children.as_slice())
                .unwrap_or_default()
            {
                let known = depths.entry(child.clone()).or_insert(0);
                *known = (*known).max(depth + 1);
                if let Some(left) = waiting.get_mut(child.as_str()) {
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        ready.push(child);
                    }
                }
            }
        }
        self.depths = depths;
    }

    /// `Group.get_hosts`: its own hosts, then its children's level by
    /// level, each once (`all` leaves out the implicit localhost, which
    /// is never in a group here).
    pub fn group_hosts(&self, group: &str) -> Vec<String> {
        let mut hosts: IndexSet<String> = IndexSet::new();
        let mut seen_groups: std::collections::HashSet<&str> = [group].into();
        let mut level: Vec<&str> = vec![group];
        while !level.is_empty() {
            let mut next: Vec<&str> = Vec::new();
            for name in &level {
                let Some(g) = self.groups.get(*name) else {
                    continue;
                };
                hosts.extend(g.hosts.iter().cloned());
                for child in &g.children {
                    if seen_groups.insert(child) {
                        next.push(child);
                    }
                }
            }
            level = next;
        }
        hosts.into_iter().collect()
    }

    /// `sort_groups`: by depth, priority, then name.
    pub fn sorted_groups(&self, mut names: Vec<String>) -> Vec<String> {
        names.sort_by_cached_key(|name| {
            let priority = self.groups.get(name).map_or(1, |g| g.priority);
            (self.depth(name), priority, name.clone())
        });
        names
    }

    fn warn(&mut self, message: String) {
        if !self.warnings.contains(&message) {
            self.warnings.push(message);
        }
    }

    /// Whether a host already read is the controller (the first such is
    /// Ansible's localhost, so no implicit one is made).
    pub fn has_localhost(&self) -> bool {
        self.hosts
            .keys()
            .any(|name| LOCALHOST.contains(&name.as_str()))
    }
}

/// Whether `name` is a group name Ansible takes as it is: no leading
/// digit, word characters only (`INVALID_VARIABLE_NAMES`).
fn is_safe_group_name(name: &str) -> bool {
    !name.starts_with(|c: char| c.is_numeric())
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// `basedir()` of a source: the directory of a file, a directory itself,
/// Python's `None` (as text) for a source that is neither.
fn source_dir(source: &str) -> String {
    let path = std::path::Path::new(source);
    if path.is_dir() {
        source.to_owned()
    } else if path.is_file() {
        path.parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        "None".to_owned()
    }
}

/// `set_variable`: `combine_vars` of `{key: value}`, which (with the
/// default `hash_behaviour`) replaces the key's value whole.
fn set_variable(vars: &mut Map<String, Json>, key: &str, value: Json) {
    vars.insert(key.to_owned(), value);
}

/// Python's `int()` of a value.
fn python_int(value: &Json) -> Option<i64> {
    match value {
        Json::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Json::Bool(b) => Some(i64::from(*b)),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
