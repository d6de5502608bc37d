//! The inventory as `add_host`, `group_by` and `refresh_inventory` change it during a run.

use std::sync::Arc;

use enka_template::Var;
use minijinja::Value;

use super::Runner;
use super::play::live_inventory;
use super::task_result::TaskResult;

impl Runner {
    /// `meta: refresh_inventory`: the inventory read again from its
    /// sources, with what `add_host` and `group_by` did so far kept. Only a
    /// playbook run has sources to read.
    pub(super) async fn refresh_inventory(&mut self) -> Result<(), String> {
        let (Some(shared), Some(worker)) = (self.inventory.clone(), self.project.ansible.clone())
        else {
            return Ok(());
        };
        if worker.config().inventory.is_empty() {
            return Ok(());
        }
        let fresh = enka_project::role::reload_inventory(&worker, &self.project.base_dir).await?;
        if let Ok(mut inventory) = shared.lock() {
            *inventory = Arc::new(inventory.refreshed(fresh));
        }
        Ok(())
    }

    /// What `add_host` and `group_by` results ask of the inventory (each
    /// loop item's too), as the strategy applies them.
    /// A group the inventory refuses (an empty name) is an error the
    /// strategy raises, which ends the run.
    pub(super) fn change_inventory(&mut self, result: &mut TaskResult) -> Result<(), String> {
        let added = result.get("add_host").cloned();
        let group = result
            .get("add_group")
            .and_then(|v| v.as_str().map(str::to_owned));
        if added.is_none() && group.is_none() {
            return Ok(());
        }
        if group.as_deref() == Some("") {
            return Err("Invalid empty/false group name provided: ".to_owned());
        }
        // A role run has no inventory of its own: its hosts are the
        // project's (or localhost), for this run.
        let runner = self.runner_inventory();
        let shared = self
            .inventory
            .get_or_insert_with(|| live_inventory(&self.project, runner))
            .clone();
        let strings = |value: Option<Value>| -> Vec<String> {
            value
                .and_then(|v| v.try_iter().ok().map(|i| i.collect::<Vec<_>>()))
                .unwrap_or_default()
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        let field = |item: &Value, key: &str| item.get_attr(key).ok().filter(|v| !v.is_undefined());
        let Ok(mut inventory) = shared.lock() else {
            return Ok(());
        };
        // The strategy decides whether the task changed something (before
        // changed_when is judged): whether the inventory changed
        // (InventoryManager.add_dynamic_host, add_dynamic_group).
        let mut changed = None;
        if let Some(added) = added {
            let name = field(&added, "host_name").and_then(|v| v.as_str().map(str::to_owned));
            if let Some(name) = name {
                let groups = strings(field(&added, "groups"));
                let vars: Vec<(Arc<str>, Var)> = match field(&added, "host_vars") {
                    Some(map) => map
                        .try_iter()
                        .into_iter()
                        .flatten()
                        .filter_map(|k| {
                            let value = map.get_item(&k).ok()?;
                            Some((Arc::from(k.as_str()?), Var::unsafe_data(&value)))
                        })
                        .collect(),
                    None => Vec::new(),
                };
                changed = Some(Arc::make_mut(&mut inventory).add_host(&name, &groups, &vars));
            }
        }
        if let Some(group) = group {
            let parents = strings(result.get("parent_groups").cloned());
            changed = Some(Arc::make_mut(&mut inventory).add_group(&self.host, &group, &parents));
        }
        drop(inventory);
        if let Some(changed) = changed {
            result.set("changed", Value::from(changed));
        }
        Ok(())
    }
}
