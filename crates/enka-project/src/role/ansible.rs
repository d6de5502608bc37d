//! Which tasks Ansible runs, and whether Ansible has what they name.
//!
//! A task whose action enka has no native code for is parsed like any other
//! and handed to the Ansible worker at run time. When the project has such
//! tasks, loading asks a worker once which names Ansible can resolve (with
//! each task's `collections` search list), so a misspelt module is a load
//! error, as `ansible-playbook --syntax-check` would make it, and never a
//! surprise in the middle of a reconcile.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::loader::Loader;
use enka_template::scan::PluginKind;
use enka_worker::{AnsibleWorker, Config};
use enka_yaml::Node;

/// How long resolving names may take (the first worker imports Ansible).
pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_secs(120);

impl Loader {
    /// The project's Ansible worker when some task needs one, with every
    /// bridged action resolved through it.
    pub(crate) fn ansible_worker(
        &mut self,
        config: Option<&Config>,
        base_dir: &std::path::Path,
        collections_path: &[std::path::PathBuf],
        playbook_dir: Option<&std::path::Path>,
    ) -> Option<Arc<AnsibleWorker>> {
        let named_inventory = config.is_some_and(|c| !c.inventory.is_empty());
        if self.bridged.is_empty()
            && self.foreign_plugins.is_empty()
            && self.module_defaults_foreign.is_empty()
            && !self.needs_inventory(playbook_dir)
            && !named_inventory
        {
            return None;
        }
        let bridged = std::mem::take(&mut self.bridged);
        let Some(config) = config else {
            for (location, action) in &bridged {
                self.task_error(
                    location.clone(),
                    format!(
                        "{}: enka has no native code for this action, and --native-only forbids running it through Ansible",
                        action.name
                    ),
                );
            }
            for (location, pattern) in std::mem::take(&mut self.host_patterns) {
                self.error(
                    location,
                    format!(
                        "hosts: {pattern} needs the inventory, which Ansible loads, and --native-only forbids it"
                    ),
                );
            }
            for (location, key) in std::mem::take(&mut self.module_defaults_foreign) {
                self.error(
                    location,
                    format!(
                        "module_defaults: '{key}' names no module enka runs, and --native-only forbids asking Ansible what it resolves to"
                    ),
                );
            }
            for (location, kind, name) in std::mem::take(&mut self.foreign_plugins) {
                self.task_error(
                    location,
                    format!(
                        "no {} named '{name}' in enka, and --native-only forbids asking Ansible for one",
                        kind.word()
                    ),
                );
            }
            return None;
        };
        let mut config = config.clone();
        config.base_dir = base_dir.to_path_buf();
        config.plugin_dirs = self.plugin_dirs().to_vec();
        if !collections_path.is_empty() {
            let mut paths = collections_path.to_vec();
            if let Some(existing) = std::env::var_os("ANSIBLE_COLLECTIONS_PATH") {
                paths.extend(std::env::split_paths(&existing));
            }
            if let Ok(joined) = std::env::join_paths(&paths) {
                config.env.push((
                    "ANSIBLE_COLLECTIONS_PATH".to_owned(),
                    joined.to_string_lossy().into_owned(),
                ));
            }
        }
        let worker = AnsibleWorker::new(config);
        let mut groups: Vec<(Arc<[String]>, Vec<String>)> = Vec::new();
        for (_, action) in &bridged {
            // A name that is a template is resolved when the task runs.
            if enka_template::is_possibly_template(&action.name) {
                continue;
            }
            let name = action.name.to_string();
            match groups.iter_mut().find(|(c, _)| *c == action.collections) {
                Some((_, names)) if names.contains(&name) => {}
                Some((_, names)) => names.push(name),
                None => groups.push((action.collections.clone(), vec![name])),
            }
        }
        for (collections, names) in groups {
            let request = json!({"op": "resolve", "modules": names, "collections": &*collections});
            let answer = worker.call(request, Some(RESOLVE_TIMEOUT));
            for (location, action) in bridged.iter().filter(|(_, a)| {
                a.collections == collections && !enka_template::is_possibly_template(&a.name)
            }) {
                self.judge_bridged(location, action, &answer);
            }
        }
        self.resolve_plugins(&worker);
        self.resolve_shadowing(&worker);
        self.resolve_module_defaults(&worker);
        Some(worker)
    }

    /// One bridged task against what Ansible answered for its action, with
    /// ModuleArgsParser's order: free-form text an action takes no
    /// free-form text for is refused before the name is looked up, then a
    /// name Ansible refuses (unknown, removed, a redirect loop) is this
    /// task's error alone, in Ansible's words.
    fn judge_bridged(
        &mut self,
        location: &super::Location,
        action: &enka_modules::catalogue::AnsibleAction,
        answer: &Result<serde_json::Value, enka_worker::WorkerError>,
    ) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                self.task_error(
                    location.clone(),
                    format!(
                        "{}: enka has no native code for this action and runs it through Ansible, but {err}",
                        action.name
                    ),
                );
                return;
            }
        };
        // 2.18 refuses extra words when it parses the task; 2.19 when the
        // task runs ("does not support raw params", see the engine).
        let extra = self
            .extra_params
            .iter()
            .find(|(task, _)| task == location && !self.builder.options().semantics.native())
            .map(|(_, text)| text.clone());
        if let Some(text) = extra {
            self.task_error(
                text,
                format!(
                    "this task '{}' has extra params, which is only allowed in the following modules: {}",
                    action.name,
                    super::task::COMMAND_MODULES.join(", ")
                ),
            );
            return;
        }
        let found = &answer["modules"][&*action.name];
        if found["found"].as_bool() == Some(true) {
            let fqcn = found["fqcn"].as_str().unwrap_or(&action.name).to_owned();
            let _ = action.resolved.set(fqcn);
            let _ = action
                .raw_params
                .set(found["raw_params"].as_bool().unwrap_or(false));
            return;
        }
        let message = match found["error"].as_str() {
            Some(refused) => refused.to_owned(),
            None => format!(
                "couldn't resolve module/action '{}'. This often indicates a misspelling, missing collection, or incorrect module path.",
                action.name
            ),
        };
        self.task_error(location.clone(), message);
    }

    /// `module_defaults` keys enka could not resolve itself, resolved by
    /// Ansible's own code (Base._load_module_defaults), with the groups
    /// each action belongs to; a key Ansible cannot resolve is its error.
    fn resolve_module_defaults(&mut self, worker: &Arc<AnsibleWorker>) {
        let foreign = std::mem::take(&mut self.module_defaults_foreign);
        if foreign.is_empty() {
            return;
        }
        let keys: Vec<&str> = foreign.iter().map(|(_, k)| k.as_str()).collect();
        let request = json!({"op": "module_defaults", "keys": keys});
        let answer = match worker.call(request, Some(RESOLVE_TIMEOUT)) {
            Ok(answer) => answer,
            Err(err) => {
                for (location, key) in foreign {
                    self.error(location, format!("module_defaults: {key}: {err}"));
                }
                return;
            }
        };
        for (location, key) in foreign {
            if let Some(message) = answer["errors"][&key].as_str() {
                self.error(location, message.to_owned());
                continue;
            }
            let resolved: Vec<String> = answer["keys"][&key]
                .as_array()
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            self.module_defaults.keys.insert(key, resolved);
        }
        if let Some(groups) = answer["action_groups"].as_object() {
            for (action, names) in groups {
                let kept = self
                    .module_defaults
                    .action_groups
                    .entry(action.clone())
                    .or_default();
                for name in names
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str())
                {
                    if !kept.iter().any(|k| k == name) {
                        kept.push(name.to_owned());
                    }
                }
            }
        }
    }

    /// Filters and tests enka has natively that a project's own
    /// `filter_plugins/` or `test_plugins/` replace, as Ansible's plugin
    /// loader finds those first: they run through the worker instead.
    fn resolve_shadowing(&mut self, worker: &Arc<AnsibleWorker>) {
        let has_python = |dir: &std::path::Path| {
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "py"))
            })
        };
        let dirs: Vec<String> = self
            .plugin_dirs()
            .iter()
            .flat_map(|d| [d.join("filter_plugins"), d.join("test_plugins")])
            .filter(|d| has_python(d))
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if dirs.is_empty() || self.native_plugins.is_empty() {
            return;
        }
        let names = |kind: PluginKind| -> Vec<&str> {
            self.native_plugins
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, n)| n.as_str())
                .collect()
        };
        let request = json!({
            "op": "shadowed",
            "dirs": dirs,
            "filters": names(PluginKind::Filter),
            "tests": names(PluginKind::Test),
        });
        // Without an answer enka's own implementations stay.
        let Ok(answer) = worker.call(request, Some(RESOLVE_TIMEOUT)) else {
            return;
        };
        for (kind, table) in [(PluginKind::Filter, "filters"), (PluginKind::Test, "tests")] {
            for name in answer[table].as_array().into_iter().flatten() {
                if let Some(name) = name.as_str() {
                    self.builder.add_python_plugin(kind, name, worker);
                }
            }
        }
    }

    /// Filters, tests and lookups enka lacks: those Ansible has are
    /// registered to run through the worker; the rest are errors.
    fn resolve_plugins(&mut self, worker: &Arc<AnsibleWorker>) {
        let plugins = std::mem::take(&mut self.foreign_plugins);
        if plugins.is_empty() {
            return;
        }
        let names = |kind: PluginKind| -> Vec<&str> {
            plugins
                .iter()
                .filter(|(_, k, _)| *k == kind)
                .map(|(_, _, n)| n.as_str())
                .collect()
        };
        let request = json!({
            "op": "resolve",
            "filters": names(PluginKind::Filter),
            "tests": names(PluginKind::Test),
            "lookups": names(PluginKind::Lookup),
        });
        let answer = worker.call(request, Some(RESOLVE_TIMEOUT));
        for (location, kind, name) in &plugins {
            let table = match kind {
                PluginKind::Filter => "filters",
                PluginKind::Test => "tests",
                PluginKind::Lookup => "lookups",
            };
            let message = match &answer {
                Ok(answer) if answer[table][name].as_bool() == Some(true) => {
                    self.builder.add_python_plugin(*kind, name, worker);
                    continue;
                }
                Ok(answer) if answer["errors"][table][name].is_string() => {
                    // Removed from Ansible: its words, where it is used.
                    let refused = answer["errors"][table][name].as_str().unwrap_or_default();
                    self.when_run(location.clone(), refused.to_owned());
                    continue;
                }
                Ok(_) => {
                    let message = format!(
                        "no {} named '{name}': neither enka nor Ansible (its collections and the project's {}_plugins/) has one",
                        kind.word(),
                        kind.word()
                    );
                    self.when_run(location.clone(), message);
                    continue;
                }
                Err(err) => format!(
                    "the {} '{name}' is not in enka and would run through Ansible, but {err}",
                    kind.word()
                ),
            };
            self.task_error(location.clone(), message);
        }
        self.foreign_plugins = plugins;
    }
}

impl Loader {
    /// Whether plays need the inventory: one names hosts other than
    /// localhost, or the project configures one (`ANSIBLE_INVENTORY`).
    fn needs_inventory(&self, basedir: Option<&std::path::Path>) -> bool {
        !self.host_patterns.is_empty()
            || std::env::var_os("ANSIBLE_INVENTORY").is_some()
            || basedir.is_some_and(|dir| {
                dir.join("host_vars").is_dir() || dir.join("group_vars").is_dir()
            })
    }

    /// The inventory, when plays need it or `options` asks for it always:
    /// read by enka where it reads the sources as Ansible does, else loaded
    /// by Ansible. `basedir` is the first playbook's directory: its
    /// `host_vars/` and `group_vars/` apply too, as under ansible-playbook.
    pub(crate) fn inventory(
        &mut self,
        worker: Option<&Arc<AnsibleWorker>>,
        options: &super::LoadOptions,
        basedir: Option<&std::path::Path>,
    ) -> Option<super::Inventory> {
        let named = worker.is_some_and(|w| !w.config().inventory.is_empty());
        let config = match (worker, options.inventory) {
            (Some(worker), _) if named || self.needs_inventory(basedir) => worker.config().clone(),
            (_, super::InventoryLoad::Always) => Config {
                base_dir: options.role_paths.base_dir.clone(),
                plugin_dirs: self.plugin_dirs().to_vec(),
                ..options.ansible.clone().unwrap_or_else(Config::from_env)
            },
            _ => return None,
        };
        if let Some(answer) = read_natively(&config, basedir) {
            return Some(inventory_from_answer(&answer));
        }
        let worker = match worker {
            Some(worker) => worker.clone(),
            None => match self.loading_worker() {
                Ok(worker) => worker,
                Err(err) => {
                    let location = super::Location::file(std::path::Path::new("ANSIBLE_INVENTORY"));
                    self.error(
                        location,
                        format!("the inventory needs Ansible to load it: {err}"),
                    );
                    return None;
                }
            },
        };
        let answer = match worker.call(inventory_request(&worker, basedir), Some(RESOLVE_TIMEOUT)) {
            Ok(answer) => answer,
            Err(err) => {
                let location = self
                    .host_patterns
                    .first()
                    .map(|(l, _)| l.clone())
                    .unwrap_or_else(|| {
                        super::Location::file(std::path::Path::new("ANSIBLE_INVENTORY"))
                    });
                self.error(location, format!("the inventory did not load: {err}"));
                return None;
            }
        };
        Some(inventory_from_answer(&answer))
    }

    /// Decrypts Ansible Vault text with Ansible's own code, as
    /// ansible-playbook does when it loads the file: with the Vault password
    /// files and ids enka was given (`--ansible-args`) and `ansible.cfg`'s.
    /// The one worker the loader asks things of before the project's own
    /// is made.
    pub(crate) fn loading_worker(&mut self) -> Result<Arc<AnsibleWorker>, String> {
        if let Some(worker) = &self.loading_worker {
            return Ok(worker.clone());
        }
        let config = self
            .worker_config
            .clone()
            .ok_or("no Ansible worker (--native-only)")?;
        let worker = AnsibleWorker::new(Config { size: 1, ..config });
        self.loading_worker = Some(worker.clone());
        Ok(worker)
    }

    pub(crate) fn decrypt_vault(
        &mut self,
        text: &str,
        file: &std::path::Path,
    ) -> Result<String, String> {
        if self.worker_config.is_none() {
            return Err(
                "Ansible Vault data needs the Ansible worker to decrypt it, and --native-only forbids it"
                    .to_owned(),
            );
        }
        let worker = self.loading_worker()?;
        let request = json!({"op": "vault_decrypt", "text": text, "file": file.to_string_lossy()});
        let answer = worker
            .call(request, Some(RESOLVE_TIMEOUT))
            .map_err(|err| format!("Ansible Vault: {err}"))?;
        answer["value"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "Ansible Vault: the worker returned no text".to_owned())
    }

    /// `node` with every `!vault` string decrypted (a string that cannot be
    /// is reported and becomes null).
    pub(crate) fn unvault(&mut self, file: &std::sync::Arc<std::path::Path>, node: &Node) -> Node {
        node.replace_tagged(
            "vault",
            &mut |text, pos| match self.decrypt_vault(text, file) {
                Ok(plain) => Some(plain),
                Err(message) => {
                    self.error(super::Location::new(file, pos), message);
                    None
                }
            },
        )
    }
}

/// Whether `node` holds a `!vault` string anywhere.
pub(crate) fn has_vault(node: &Node) -> bool {
    !node.tagged_strings("vault").is_empty()
}

/// The worker's request for the inventory of its `-i` sources, with
/// `basedir`'s `host_vars/` and `group_vars/`.
fn inventory_request(
    worker: &AnsibleWorker,
    basedir: Option<&std::path::Path>,
) -> serde_json::Value {
    let sources: Vec<String> = worker
        .config()
        .inventory
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    json!({"op": "inventory", "sources": sources,
           "basedir": basedir.map(|d| d.display().to_string())})
}

/// The inventory of the worker's sources when enka reads them as Ansible
/// does (host lists, INI and YAML files), without asking the worker.
fn read_natively(config: &Config, basedir: Option<&std::path::Path>) -> Option<serde_json::Value> {
    let sources: Vec<String> = config
        .inventory
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    crate::inventory::reader::read(&crate::inventory::reader::Sources {
        sources: &sources,
        basedir,
        project_dir: &config.base_dir,
        plugin_dirs: &config.plugin_dirs,
        python: &config.python.to_string_lossy(),
    })
}

/// The inventory loaded again from its sources (`meta:
/// refresh_inventory`), as at load: by enka when it reads them, else
/// through the worker.
pub async fn reload_inventory(
    worker: &Arc<AnsibleWorker>,
    basedir: &std::path::Path,
) -> Result<super::Inventory, String> {
    if let Some(answer) = read_natively(worker.config(), Some(basedir)) {
        return Ok(inventory_from_answer(&answer));
    }
    let answer = worker
        .call_async(
            inventory_request(worker, Some(basedir)),
            Some(RESOLVE_TIMEOUT),
        )
        .await
        .map_err(|err| format!("the inventory did not load again: {err}"))?;
    Ok(inventory_from_answer(&answer))
}

/// The inventory in the worker's answer: hosts in inventory order, groups
/// with their members and parents, and what `add_host` needs to compute a
/// new host's variables.
fn inventory_from_answer(answer: &serde_json::Value) -> super::Inventory {
    let vars_of = |value: &serde_json::Value| -> crate::inventory::HostVars {
        value
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                (
                    Arc::from(k.as_str()),
                    enka_template::Var::templated(enka_template::convert::from_json(v)),
                )
            })
            .collect::<Vec<_>>()
            .into()
    };
    let mut hosts = Vec::new();
    for (name, host) in answer["hosts"].as_object().into_iter().flatten() {
        hosts.push(crate::inventory::LoadedHost {
            name: name.clone(),
            vars: vars_of(&host["vars"]),
            own: host.get("own").map(vars_of),
            implicit: host["implicit"].as_bool().unwrap_or(false),
        });
    }
    let names = |value: &serde_json::Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str().map(str::to_owned))
            .collect()
    };
    let groups = answer["groups"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, members)| {
            (
                name.clone(),
                names(members),
                names(&answer["group_parents"][name]),
            )
        })
        .collect();
    let by_name = |value: &serde_json::Value| {
        value
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, vars)| (name.clone(), vars_of(vars)))
            .collect()
    };
    let dynamic_vars = crate::inventory::DynamicVars {
        groups: answer["group_vars"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, vars)| {
                (
                    name.clone(),
                    (vars_of(&vars["inventory"]), vars_of(&vars["plugins"])),
                )
            })
            .collect(),
        sort: answer["group_sort"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, key)| {
                let at = |i: usize| key[i].as_i64().unwrap_or(1);
                (name.clone(), (at(0), at(1)))
            })
            .collect(),
        hosts: by_name(&answer["orphan_host_vars"]),
    };
    let warnings = answer["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    let inventory = super::Inventory::new(hosts, groups, dynamic_vars).with_warnings(warnings);
    match answer.get("sources") {
        Some(sources) => inventory.with_sources(enka_template::convert::from_json(sources)),
        None => inventory,
    }
}
