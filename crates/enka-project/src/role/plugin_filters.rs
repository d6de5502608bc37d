//! Ansible's plugin filters (`plugin_filters_cfg`): modules an
//! administrator rejects. Ansible owns the setting (its configuration file,
//! environment, and default path), so the worker is asked for the reject
//! list, and only when some configuration could name one: a project without
//! one starts no worker for it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::loader::Loader;

/// Where Ansible looks for the filter file when no setting names one.
const DEFAULT_FILTERS: &str = "/etc/ansible/plugin_filters.yml";

/// Whether any configuration Ansible reads could set a reject list: the
/// setting's environment variable, a configuration file that names it, or
/// the default file.
fn may_apply(base_dir: &Path) -> bool {
    if std::env::var_os("ANSIBLE_PLUGIN_FILTERS_CFG").is_some()
        || Path::new(DEFAULT_FILTERS).exists()
    {
        return true;
    }
    crate::ansible_config::text(base_dir).is_some_and(|text| text.contains("plugin_filters_cfg"))
}

impl Loader {
    /// Whether Ansible's plugin filter rejects the module `name` (its
    /// short name, as the reject list holds them): such a task is left to
    /// Ansible, which refuses it in its own words.
    pub(crate) fn module_rejected(&mut self, name: &str) -> bool {
        let short = name.rsplit('.').next().unwrap_or(name);
        self.rejected_modules().contains(short)
    }

    fn rejected_modules(&mut self) -> Arc<HashSet<String>> {
        if let Some(rejected) = &self.rejected_modules {
            return rejected.clone();
        }
        let base_dir = self.worker_config.as_ref().map(|c| c.base_dir.clone());
        let rejected = match base_dir {
            Some(dir) if may_apply(&dir) => self.ask_rejected(),
            _ => HashSet::new(),
        };
        let rejected = Arc::new(rejected);
        self.rejected_modules = Some(rejected.clone());
        rejected
    }

    fn ask_rejected(&mut self) -> HashSet<String> {
        let answer = self.loading_worker().and_then(|worker| {
            worker
                .call(
                    json!({"op": "plugin_filters"}),
                    Some(super::ansible::RESOLVE_TIMEOUT),
                )
                .map_err(|err| err.to_string())
        });
        match answer {
            Ok(answer) => answer["modules"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|name| name.as_str().map(str::to_owned))
                .collect(),
            Err(message) => {
                // Ansible refuses to start at all (a reject list naming
                // `stat`): nothing of the project can run.
                let at = super::Location::file(
                    &self
                        .worker_config
                        .as_ref()
                        .map(|c| c.base_dir.clone())
                        .unwrap_or_default(),
                );
                self.error(at, message);
                HashSet::new()
            }
        }
    }
}
