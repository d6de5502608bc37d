//! The inventory a playbook runs over: its hosts in inventory order, its
//! groups, and Ansible's host patterns (`all`, `web:&prod:!db1`, `~regex`,
//! globs, `group[0:2]`), evaluated as `InventoryManager.get_hosts` does.
//!
//! Ansible loads the inventory once, in the worker (every inventory plugin
//! and `group_vars/` applies); `add_host` and `group_by` then change this
//! copy while the run goes on, as the strategy changes Ansible's.

mod data;
mod host_list;
mod ini;
pub mod reader;
mod vars_dirs;
mod yaml;

use std::sync::Arc;

use indexmap::IndexMap;
use minijinja::Value;

use enka_template::Var;

/// The inventory variables of a host (its groups' and its own).
pub type HostVars = Arc<[(Arc<str>, Var)]>;

/// Hosts and groups.
#[derive(Debug, Clone)]
pub struct Inventory {
    hosts: IndexMap<String, Host>,
    groups: IndexMap<String, Group>,
    /// `groups`, as the magic variable has it; rebuilt on each change.
    groups_value: Value,
    /// Each group's variables (its own, and `group_vars/`), and those of
    /// `host_vars/` files naming hosts the inventory lacks: what a host
    /// `add_host` makes gets.
    dynamic_vars: DynamicVars,
    /// What `add_host` and `group_by` did, in order: `meta:
    /// refresh_inventory` does it again to the inventory it reloads
    /// (InventoryManager keeps its dynamic hosts and groupings).
    changes: Vec<Change>,
    /// `ansible_inventory_sources`: the sources Ansible loaded it from
    /// (files as absolute paths, host lists as written), when it did.
    sources: Option<Value>,
    /// What reading it warned of, as Ansible words it.
    warnings: Vec<String>,
}

/// One change a playbook made to its inventory.
#[derive(Debug, Clone)]
enum Change {
    Host {
        name: String,
        groups: Vec<String>,
        vars: Vec<(Arc<str>, Var)>,
    },
    Group {
        host: String,
        group: String,
        parents: Vec<String>,
    },
}

/// What a host's variables are made of when its groups change while a
/// playbook runs (`add_host`, `group_by`): Ansible recomputes them from
/// its groups' on every task.
#[derive(Debug, Clone, Default)]
pub struct DynamicVars {
    /// Each group's variables: the inventory's, and its vars plugins'
    /// (`group_vars/`), which rank above every group's inventory vars.
    pub groups: IndexMap<String, (HostVars, HostVars)>,
    /// Each group's depth and priority, which order a host's groups.
    pub sort: std::collections::HashMap<String, (i64, i64)>,
    /// `host_vars/` of hosts not in the inventory.
    pub hosts: IndexMap<String, HostVars>,
}

#[derive(Debug, Clone, Default)]
struct Host {
    vars: HostVars,
    /// Its own variables (not its groups'), when known: what its
    /// variables are rebuilt from when its groups change.
    own: Option<HostVars>,
    /// Not in the inventory: `localhost` made up when a pattern names it
    /// (not a member of `all`).
    implicit: bool,
}

#[derive(Debug, Clone, Default)]
struct Group {
    /// Its hosts and its descendants', in Ansible's order.
    members: Vec<String>,
    /// Groups it is a child of.
    parents: Vec<String>,
}

/// One host of the inventory's answer from the worker.
pub struct LoadedHost {
    /// Its name.
    pub name: String,
    /// Its inventory variables.
    pub vars: HostVars,
    /// Its own variables, without its groups'.
    pub own: Option<HostVars>,
    /// Whether Ansible made it up (implicit localhost).
    pub implicit: bool,
}

impl Default for Inventory {
    /// No inventory: `localhost`, as ansible-operator's runner writes it.
    fn default() -> Self {
        Inventory::localhost(Arc::from(Vec::new()))
    }
}

impl Inventory {
    /// `localhost` alone, in `all` and `ungrouped`, with the variables an
    /// inventory line gives it (ansible-operator's runner writes
    /// `localhost ansible_connection=local ansible_python_interpreter=…`).
    pub fn localhost(vars: HostVars) -> Self {
        let mut inventory = Inventory {
            hosts: IndexMap::new(),
            groups: IndexMap::new(),
            groups_value: Value::UNDEFINED,
            dynamic_vars: DynamicVars::default(),
            changes: Vec::new(),
            sources: None,
            warnings: Vec::new(),
        };
        inventory.hosts.insert(
            "localhost".to_owned(),
            Host {
                vars,
                ..Host::default()
            },
        );
        for group in ["all", "ungrouped"] {
            inventory.groups.insert(
                group.to_owned(),
                Group {
                    members: vec!["localhost".to_owned()],
                    parents: Vec::new(),
                },
            );
        }
        inventory.rebuild();
        inventory
    }

    /// An inventory as Ansible loaded it: hosts in inventory order, and
    /// each group's hosts (descendants' included) and parents.
    pub fn new(
        hosts: Vec<LoadedHost>,
        groups: Vec<(String, Vec<String>, Vec<String>)>,
        dynamic_vars: DynamicVars,
    ) -> Self {
        let mut inventory = Inventory {
            hosts: hosts
                .into_iter()
                .map(|h| {
                    (
                        h.name,
                        Host {
                            vars: h.vars,
                            own: h.own,
                            implicit: h.implicit,
                        },
                    )
                })
                .collect(),
            groups: groups
                .into_iter()
                .map(|(name, members, parents)| (name, Group { members, parents }))
                .collect(),
            groups_value: Value::UNDEFINED,
            dynamic_vars,
            changes: Vec::new(),
            sources: None,
            warnings: Vec::new(),
        };
        for name in ["all", "ungrouped"] {
            inventory.groups.entry(name.to_owned()).or_default();
        }
        inventory.rebuild();
        inventory
    }

    /// `fresh`, the inventory reloaded from its sources, with this one's
    /// `add_host` and `group_by` changes made again
    /// (InventoryManager.refresh_inventory).
    pub fn refreshed(&self, mut fresh: Inventory) -> Inventory {
        for change in &self.changes {
            match change {
                Change::Host { name, groups, vars } => {
                    fresh.add_host(name, groups, vars);
                }
                // A host the sources no longer have is not grouped again
                // (add_dynamic_group on a refresh).
                Change::Group {
                    host,
                    group,
                    parents,
                } if fresh.hosts.contains_key(host) || is_localhost(host) => {
                    fresh.add_group(host, group, parents);
                }
                Change::Group { .. } => {}
            }
        }
        fresh
    }

    /// This inventory, loaded from `sources` (`ansible_inventory_sources`).
    pub fn with_sources(mut self, sources: Value) -> Self {
        self.sources = Some(sources);
        self
    }

    /// This inventory, with what reading it warned of.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }

    /// What reading it warned of.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// `ansible_inventory_sources`, when Ansible loaded this inventory.
    pub fn sources(&self) -> Option<&Value> {
        self.sources.as_ref()
    }

    /// The `groups` magic variable: each group's hosts.
    pub fn groups_value(&self) -> &Value {
        &self.groups_value
    }

    /// A host's inventory variables; `None` for a host the inventory does
    /// not have.
    pub fn host_vars(&self, name: &str) -> Option<&HostVars> {
        self.hosts.get(name).map(|h| &h.vars)
    }

    /// Every host's name, in inventory order (implicit ones last).
    pub fn host_names(&self) -> impl Iterator<Item = &str> {
        self.hosts.keys().map(String::as_str)
    }

    /// `group_names` of a host: its groups but `all` (`ungrouped` too),
    /// sorted.
    pub fn group_names(&self, host: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .iter()
            .filter(|(name, group)| *name != "all" && group.members.iter().any(|m| m == host))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// The hosts a play's `hosts` (one pattern or several) selects, in
    /// `order` (`inventory`, `reverse_inventory`, `sorted`,
    /// `reverse_sorted`, `shuffle`).
    pub fn select(&self, patterns: &[String], order: &str) -> Result<Vec<String>, String> {
        let terms: Vec<String> = patterns.iter().flat_map(|p| split_pattern(p)).collect();
        let mut hosts: Vec<String> = Vec::new();
        for term in order_terms(terms) {
            if self.hosts.get(&term).is_some_and(|h| !h.implicit) {
                if !hosts.contains(&term) {
                    hosts.push(term);
                }
                continue;
            }
            let matched = self.match_one(&term)?;
            if let Some(_excluded) = term.strip_prefix('!') {
                hosts.retain(|h| !matched.contains(h));
            } else if term.starts_with('&') {
                hosts.retain(|h| matched.contains(h));
            } else {
                for host in matched {
                    if !hosts.contains(&host) {
                        hosts.push(host);
                    }
                }
            }
        }
        match order {
            "inventory" | "" => {}
            "reverse_inventory" => hosts.reverse(),
            "sorted" => hosts.sort(),
            "reverse_sorted" => {
                hosts.sort();
                hosts.reverse();
            }
            "shuffle" => {
                use rand::seq::SliceRandom;
                hosts.shuffle(&mut rand::rng());
            }
            other => {
                return Err(format!(
                    "Invalid 'order' specified for inventory hosts: {other}"
                ));
            }
        }
        Ok(hosts)
    }

    /// The terms of `patterns` that match no group and no host, each as
    /// Ansible warns of it ("Could not match supplied host pattern"):
    /// without its `!` or `&`, never `all`.
    pub fn unmatched(&self, patterns: &[String]) -> Vec<String> {
        patterns
            .iter()
            .flat_map(|p| split_pattern(p))
            .map(|term| term.trim_start_matches(['!', '&']).to_owned())
            .filter(|term| term != "all")
            .filter(|term| {
                let (expr, _) = split_subscript(term);
                let names_a_group = Matcher::new(expr)
                    .is_ok_and(|m| self.groups.keys().any(|name| m.matches(name)));
                !names_a_group && self.enumerate(expr).is_ok_and(|hosts| hosts.is_empty())
            })
            .collect()
    }

    /// [`Inventory::select`] narrowed to the hosts `limit` selects, as
    /// InventoryManager.get_hosts applies `--limit` before the order.
    pub fn select_limited(
        &self,
        patterns: &[String],
        order: &str,
        limit: Option<&HostLimit>,
    ) -> Result<Vec<String>, String> {
        let Some(limit) = limit else {
            return self.select(patterns, order);
        };
        let allowed = self.select(&limit.patterns, "inventory")?;
        let mut hosts = self.select(patterns, order)?;
        hosts.retain(|h| allowed.contains(h));
        Ok(hosts)
    }

    /// One term without its `!`/`&`: its matches with the subscript applied.
    fn match_one(&self, term: &str) -> Result<Vec<String>, String> {
        let pattern = term.trim_start_matches(['!', '&']);
        let (expr, subscript) = split_subscript(pattern);
        let hosts = self.enumerate(expr)?;
        match subscript {
            None => Ok(hosts),
            Some(_) if hosts.is_empty() => Ok(hosts),
            Some((start, end)) => {
                let index = |i: i64| -> Option<usize> {
                    let len = hosts.len() as i64;
                    let i = if i < 0 { len + i } else { i };
                    (0..len).contains(&i).then_some(i as usize)
                };
                let missing = || format!("No hosts matched the subscripted pattern '{pattern}'");
                match end {
                    None => {
                        let at = index(start).ok_or_else(missing)?;
                        Ok(vec![hosts[at].clone()])
                    }
                    Some(end) => {
                        let end = if end == -1 {
                            hosts.len() as i64 - 1
                        } else {
                            end
                        };
                        let from = start.clamp(0, hosts.len() as i64) as usize;
                        let to = (end + 1).clamp(0, hosts.len() as i64) as usize;
                        Ok(hosts.get(from..to.max(from)).unwrap_or_default().to_vec())
                    }
                }
            }
        }
    }

    /// Hosts of the groups `expr` names, then hosts it names itself
    /// (InventoryManager._enumerate_matches).
    fn enumerate(&self, expr: &str) -> Result<Vec<String>, String> {
        let matcher = Matcher::new(expr)?;
        let mut out: Vec<String> = Vec::new();
        let mut push = |host: &String| {
            if !out.contains(host) {
                out.push(host.clone());
            }
        };
        let groups: Vec<&Group> = self
            .groups
            .iter()
            .filter(|(name, _)| matcher.matches(name))
            .map(|(_, g)| g)
            .collect();
        for group in &groups {
            group.members.iter().for_each(&mut push);
        }
        let special = expr.starts_with('~') || expr.contains(['.', '?', '*', '[']);
        if groups.is_empty() || special {
            for (name, host) in &self.hosts {
                if !host.implicit && matcher.matches(name) {
                    push(name);
                }
            }
        }
        if out.is_empty() && is_localhost(expr) {
            out.push(expr.to_owned());
        }
        Ok(out)
    }

    /// Adds a host (`add_host`) with `vars` to `groups`, each made if new;
    /// whether the inventory changed (InventoryManager.add_dynamic_host).
    pub fn add_host(&mut self, name: &str, groups: &[String], vars: &[(Arc<str>, Var)]) -> bool {
        self.changes.push(Change::Host {
            name: name.to_owned(),
            groups: groups.to_vec(),
            vars: vars.to_vec(),
        });
        let mut changed = false;
        let is_new = self.hosts.get(name).is_none_or(|h| h.implicit);
        if is_new {
            self.hosts.insert(name.to_owned(), Host::default());
            self.add_member("all", name);
            changed = true;
        }
        for group in groups {
            changed |= self.ensure_group(group);
            changed |= self.add_member(group, name);
        }
        let regroup = changed;
        let own = match self.hosts.get(name).and_then(|h| h.own.clone()) {
            Some(own) if !is_new => own,
            _ if !is_new => self
                .hosts
                .get(name)
                .map(|h| h.vars.clone())
                .unwrap_or_default(),
            // host_vars/ rank above what add_host gives (plugins above
            // the inventory's host vars).
            _ => self
                .dynamic_vars
                .hosts
                .get(name)
                .cloned()
                .unwrap_or_default(),
        };
        let own = if is_new {
            layered(&[Arc::from(vars.to_vec()), own])
        } else {
            layered(&[own, Arc::from(vars.to_vec())])
        };
        if let Some(host) = self.hosts.get_mut(name) {
            host.own = Some(own);
        }
        changed |= self.recompute_vars(name, regroup || !vars.is_empty());
        if changed {
            self.reconcile(name);
            self.rebuild();
        }
        changed
    }

    /// Puts `host` in `group` (`group_by`), the group made if new and a
    /// child of `parents`; whether the inventory changed
    /// (StrategyBase._add_group).
    pub fn add_group(&mut self, host: &str, group: &str, parents: &[String]) -> bool {
        self.changes.push(Change::Group {
            host: host.to_owned(),
            group: group.to_owned(),
            parents: parents.to_vec(),
        });
        let mut changed = false;
        self.ensure_group(group);
        for parent in parents {
            changed |= self.ensure_group(parent);
            let entry = self.groups.entry(group.to_owned()).or_default();
            if !entry.parents.contains(parent) {
                entry.parents.push(parent.clone());
                changed = true;
                let members = entry.members.clone();
                for member in members {
                    self.add_member(parent, &member);
                }
            }
        }
        changed |= self.add_member(group, host);
        if changed {
            self.reconcile(host);
            self.recompute_vars(host, true);
            self.rebuild();
        }
        changed
    }

    /// Rebuilds a host's variables from its groups' and its own, as
    /// VariableManager.get_vars layers them (every group's inventory vars
    /// by depth, priority and name, `all` first; then their vars plugins';
    /// then the host's own); whether they changed. Without `needed` or
    /// what the host's own are, it keeps what Ansible loaded.
    fn recompute_vars(&mut self, name: &str, needed: bool) -> bool {
        let Some(own) = self.hosts.get(name).and_then(|h| h.own.clone()) else {
            return false;
        };
        if !needed {
            return false;
        }
        let mut groups: Vec<String> = self
            .groups
            .iter()
            .filter(|(g, group)| *g != "all" && group.members.iter().any(|m| m == name))
            .map(|(g, _)| g.clone())
            .collect();
        let sort = &self.dynamic_vars.sort;
        groups.sort_by(|a, b| {
            let key = |g: &String| sort.get(g).copied().unwrap_or((1, 1));
            key(a).cmp(&key(b)).then_with(|| a.cmp(b))
        });
        let group_layer = |g: &str, plugins: bool| -> HostVars {
            self.dynamic_vars
                .groups
                .get(g)
                .map(|(inventory, plugin)| {
                    if plugins {
                        plugin.clone()
                    } else {
                        inventory.clone()
                    }
                })
                .unwrap_or_default()
        };
        let mut layers: Vec<HostVars> = vec![group_layer("all", false)];
        layers.extend(groups.iter().map(|g| group_layer(g, false)));
        layers.push(group_layer("all", true));
        layers.extend(groups.iter().map(|g| group_layer(g, true)));
        layers.push(own);
        let vars = layered(&layers);
        let Some(host) = self.hosts.get_mut(name) else {
            return false;
        };
        let same = vars.len() == host.vars.len()
            && vars.iter().all(|(key, var)| {
                host.vars
                    .iter()
                    .any(|(k, v)| k == key && v.value == var.value)
            });
        host.vars = vars;
        !same
    }

    /// Makes `group` (a child of `all`) unless it exists; whether it was new.
    fn ensure_group(&mut self, group: &str) -> bool {
        if self.groups.contains_key(group) {
            return false;
        }
        self.groups.insert(
            group.to_owned(),
            Group {
                members: Vec::new(),
                parents: vec!["all".to_owned()],
            },
        );
        true
    }

    /// Adds `host` to `group` and to the groups above it; whether the
    /// group did not have it.
    fn add_member(&mut self, group: &str, host: &str) -> bool {
        let mut added = false;
        let mut pending = vec![group.to_owned()];
        let mut seen: Vec<String> = Vec::new();
        while let Some(name) = pending.pop() {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name.clone());
            let Some(entry) = self.groups.get_mut(&name) else {
                continue;
            };
            if !entry.members.iter().any(|m| m == host) {
                entry.members.push(host.to_owned());
                added |= name == group;
            }
            pending.extend(entry.parents.iter().cloned());
        }
        added
    }

    /// `ungrouped` holds the hosts in no group but `all`
    /// (InventoryData.reconcile_inventory).
    fn reconcile(&mut self, host: &str) {
        let grouped = self.groups.iter().any(|(name, group)| {
            !matches!(name.as_str(), "all" | "ungrouped") && group.members.iter().any(|m| m == host)
        });
        if let Some(ungrouped) = self.groups.get_mut("ungrouped") {
            let present = ungrouped.members.iter().any(|m| m == host);
            if grouped && present {
                ungrouped.members.retain(|m| m != host);
            } else if !grouped && !present {
                ungrouped.members.push(host.to_owned());
            }
        }
    }

    fn rebuild(&mut self) {
        self.groups_value = Value::from_pairs(self.groups.iter().map(|(name, group)| {
            (
                Value::from(name.as_str()),
                Value::from(
                    group
                        .members
                        .iter()
                        .map(|h| Value::from(h.as_str()))
                        .collect::<Vec<_>>(),
                ),
            )
        }));
    }
}

/// Variable lists combined, later ones winning.
fn layered(layers: &[HostVars]) -> HostVars {
    let mut merged: Vec<(Arc<str>, Var)> = Vec::new();
    for layer in layers {
        for (key, value) in layer.iter() {
            merged.retain(|(k, _)| k != key);
            merged.push((key.clone(), value.clone()));
        }
    }
    merged.into()
}

/// Names Ansible treats as the local machine (`C.LOCALHOST`).
fn is_localhost(name: &str) -> bool {
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

/// A group or host name pattern: `~regex` (matched at the start, as
/// Python's `re.match`), else a shell glob matching the whole name.
enum Matcher {
    Regex(fancy_regex::Regex),
    Glob(glob::Pattern),
    Exact(String),
}

impl Matcher {
    fn new(expr: &str) -> Result<Self, String> {
        let invalid = || format!("Invalid host list pattern: {expr}");
        if let Some(regex) = expr.strip_prefix('~') {
            return fancy_regex::Regex::new(&format!("^(?:{regex})"))
                .map(Matcher::Regex)
                .map_err(|_| invalid());
        }
        if expr.contains(['*', '?', '[']) {
            return glob::Pattern::new(expr)
                .map(Matcher::Glob)
                .map_err(|_| invalid());
        }
        Ok(Matcher::Exact(expr.to_owned()))
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Regex(regex) => regex.is_match(name).unwrap_or(false),
            Matcher::Glob(glob) => glob.matches(name),
            Matcher::Exact(exact) => exact == name,
        }
    }
}

/// Splits a pattern into terms at commas, or else at colons outside
/// brackets (split_host_pattern); a lone address with a colon (IPv6)
/// stays whole.
/// ansible-playbook's `--limit`: host patterns, `@file` entries read as one
/// host (or pattern) per line (InventoryManager.subset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLimit {
    /// The option as given, for `ansible_limit`.
    pub text: String,
    /// The patterns it selects with.
    pub patterns: Vec<String>,
}

impl HostLimit {
    /// Reads `--limit`'s value; an `@file` that is missing or a directory
    /// is an error, as in Ansible.
    pub fn parse(text: &str) -> Result<HostLimit, String> {
        let mut patterns = Vec::new();
        for term in split_pattern(text) {
            match term.strip_prefix('@') {
                Some(file) => {
                    let path = std::path::Path::new(file);
                    if path.is_dir() {
                        return Err(format!(
                            "Limit starting with \"@\" must be a file, not a directory: {file}"
                        ));
                    }
                    let content = std::fs::read_to_string(path)
                        .map_err(|_| format!("Unable to find limit file {file}"))?;
                    patterns.extend(content.split('\n').map(|l| l.trim().to_owned()));
                }
                None if term.is_empty() => {}
                None => patterns.push(term),
            }
        }
        patterns.retain(|p| !p.is_empty());
        Ok(HostLimit {
            text: text.to_owned(),
            patterns,
        })
    }
}

pub fn split_pattern(pattern: &str) -> Vec<String> {
    let terms: Vec<String> = if pattern.contains(',') {
        pattern.split(',').map(str::to_owned).collect()
    } else if pattern.parse::<std::net::Ipv6Addr>().is_ok() {
        vec![pattern.to_owned()]
    } else {
        let mut terms = Vec::new();
        let mut current = String::new();
        let mut depth = 0usize;
        for c in pattern.chars() {
            match c {
                '[' => {
                    depth += 1;
                    current.push(c);
                }
                ']' => {
                    depth = depth.saturating_sub(1);
                    current.push(c);
                }
                ':' if depth == 0 => terms.push(std::mem::take(&mut current)),
                c if c.is_whitespace() && depth == 0 => terms.push(std::mem::take(&mut current)),
                c => current.push(c),
            }
        }
        terms.push(current);
        terms
    };
    terms
        .into_iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Plain terms first, then intersections, then exclusions; `all` when
/// there is no plain term (order_patterns).
fn order_terms(terms: Vec<String>) -> Vec<String> {
    let (mut plain, mut intersect, mut exclude) = (Vec::new(), Vec::new(), Vec::new());
    for term in terms {
        if term.starts_with('!') {
            exclude.push(term);
        } else if term.starts_with('&') {
            intersect.push(term);
        } else {
            plain.push(term);
        }
    }
    if plain.is_empty() {
        plain.push("all".to_owned());
    }
    plain.into_iter().chain(intersect).chain(exclude).collect()
}

/// `name[3]` → (`name`, (3, None)); `name[1:]` → (`name`, (1, Some(-1)));
/// a regex has no subscript.
fn split_subscript(pattern: &str) -> (&str, Option<(i64, Option<i64>)>) {
    if pattern.starts_with('~') || !pattern.ends_with(']') {
        return (pattern, None);
    }
    let Some(open) = pattern.rfind('[') else {
        return (pattern, None);
    };
    let inner = &pattern[open + 1..pattern.len() - 1];
    let (base, subscript) = (&pattern[..open], inner);
    let number = |s: &str| s.trim().parse::<i64>().ok();
    if let Some(index) = number(subscript) {
        return (base, Some((index, None)));
    }
    for sep in [':', '-'] {
        if let Some((start, end)) = subscript.split_once(sep) {
            let start = if start.is_empty() {
                Some(0)
            } else {
                number(start)
            };
            let end = if end.is_empty() {
                Some(-1)
            } else {
                number(end)
            };
            if let (Some(start), Some(end)) = (start, end)
                && !start.is_negative()
            {
                return (base, Some((start, Some(end))));
            }
        }
    }
    (pattern, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// web1 web2 in `web`, db1 in `db` (a child of `servers` with `web`),
    /// lone ungrouped.
    fn sample() -> Inventory {
        let host = |name: &str| LoadedHost {
            name: name.to_owned(),
            vars: Arc::from(Vec::new()),
            own: Some(Arc::from(Vec::new())),
            implicit: false,
        };
        let list = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        Inventory::new(
            vec![host("web1"), host("web2"), host("db1"), host("lone")],
            vec![
                ("all".into(), list(&["web1", "web2", "db1", "lone"]), vec![]),
                ("ungrouped".into(), list(&["lone"]), list(&["all"])),
                (
                    "web".into(),
                    list(&["web1", "web2"]),
                    list(&["all", "servers"]),
                ),
                ("db".into(), list(&["db1"]), list(&["all", "servers"])),
                (
                    "servers".into(),
                    list(&["web1", "web2", "db1"]),
                    list(&["all"]),
                ),
            ],
            DynamicVars::default(),
        )
    }

    fn select(inventory: &Inventory, pattern: &str) -> Vec<String> {
        inventory
            .select(&[pattern.to_owned()], "inventory")
            .unwrap()
    }

    #[test]
    fn limit_narrows_every_selection() {
        let inv = sample();
        let limit = HostLimit::parse("servers:!db").unwrap();
        let limited = |pattern: &str| {
            inv.select_limited(&[pattern.to_owned()], "reverse_inventory", Some(&limit))
                .unwrap()
        };
        assert_eq!(limited("all"), ["web2", "web1"]);
        assert!(limited("db").is_empty());
        let dir = std::env::temp_dir().join(format!("enka-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hosts");
        std::fs::write(&file, "lone\n\n web1 \n").unwrap();
        let from_file = HostLimit::parse(&format!("@{}", file.display())).unwrap();
        assert_eq!(from_file.patterns, ["lone", "web1"]);
        let missing = HostLimit::parse("@/nonexistent/limit").unwrap_err();
        assert_eq!(missing, "Unable to find limit file /nonexistent/limit");
        assert!(HostLimit::parse(&format!("@{}", dir.display())).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn patterns_select_as_ansible_does() {
        let inv = sample();
        assert_eq!(select(&inv, "all"), ["web1", "web2", "db1", "lone"]);
        assert_eq!(select(&inv, "servers:!web2"), ["web1", "db1"]);
        assert_eq!(select(&inv, "servers:&web"), ["web1", "web2"]);
        assert_eq!(select(&inv, "!web"), ["db1", "lone"]);
        assert_eq!(select(&inv, "web[1]"), ["web2"]);
        assert_eq!(select(&inv, "servers[0:1]"), ["web1", "web2"]);
        assert_eq!(select(&inv, "servers[-1]"), ["db1"]);
        assert_eq!(select(&inv, "w*"), ["web1", "web2"]);
        assert_eq!(select(&inv, "~(web|db)1"), ["web1", "db1"]);
        assert_eq!(select(&inv, "db1,lone"), ["db1", "lone"]);
        assert_eq!(select(&inv, "localhost"), ["localhost"]);
        assert!(select(&inv, "nowhere").is_empty());
        assert!(inv.select(&["web[9]".into()], "inventory").is_err());
        assert_eq!(
            inv.select(&["all".into()], "reverse_sorted").unwrap(),
            ["web2", "web1", "lone", "db1"]
        );
    }

    #[test]
    fn add_host_and_group_by_change_groups() {
        let mut inv = sample();
        assert_eq!(
            inv.groups_value().get_attr("web").unwrap().to_string(),
            "['web1', 'web2']"
        );
        assert!(inv.add_host("new", &["fresh".into()], &[]));
        assert!(!inv.add_host("new", &["fresh".into()], &[]));
        let var = |v: i64| vec![(Arc::from("x"), Var::plain(Value::from(v)))];
        assert!(inv.add_host("new", &[], &var(1)));
        assert!(!inv.add_host("new", &[], &var(1)));
        assert!(inv.add_host("new", &[], &var(2)));
        assert_eq!(select(&inv, "fresh"), ["new"]);
        assert!(select(&inv, "all").contains(&"new".to_owned()));
        assert!(inv.add_group("lone", "web", &[]));
        assert_eq!(inv.group_names("lone"), ["servers", "web"]);
        assert!(!select(&inv, "ungrouped").contains(&"lone".to_owned()));
        assert!(inv.add_group("db1", "kind", &["servers".into()]));
        assert_eq!(inv.group_names("db1"), ["db", "kind", "servers"]);
    }

    #[test]
    fn a_refresh_keeps_added_hosts_and_groupings_of_hosts_still_there() {
        let mut live = sample();
        live.add_host("yolo", &[], &[]);
        live.add_group("web1", "odd", &[]);
        live.add_group("db1", "even", &[]);
        // The sources now lack db1.
        let mut fresh = sample();
        fresh.hosts.shift_remove("db1");
        for group in fresh.groups.values_mut() {
            group.members.retain(|m| m != "db1");
        }
        let refreshed = live.refreshed(fresh);
        let all = refreshed.select(&["all".to_owned()], "inventory").unwrap();
        assert!(all.contains(&"yolo".to_owned()), "{all:?}");
        assert!(!all.contains(&"db1".to_owned()), "{all:?}");
        assert!(refreshed.group_names("web1").contains(&"odd".to_owned()));
        assert!(
            refreshed
                .select(&["even".to_owned()], "inventory")
                .unwrap_or_default()
                .is_empty()
        );
    }
}
