//! Loading a playbook: its plays, their keywords and shape, `vars_files`,
//! `vars_prompt` and the roles they list.

use std::path::Path;
use std::sync::Arc;

use enka_template::{self as template};
use enka_yaml::{self as yaml, Node};

use super::{Loader, fact_gathering_task, read_yaml};
use crate::role::keywords::{self, Places, Setting, Settings};
use crate::role::task::{TaskFile, compile_in, keyword_vars, parse_tasks, parse_vars, tag_list};
use crate::role::{Location, Play, Playbook, RoleRef, Task, VarList, VarsFile, VarsPrompt};

impl Loader {
    /// A play's `vars_files` in order: each entry a file, or a list whose
    /// first existing file is used (Ansible's fallback form). Paths are
    /// relative to the playbook, its `vars/` first. A name with a template
    /// is left for the play's start, with the host's variables; a file that
    /// is nowhere is skipped, as VariableManager skips it.
    pub(super) fn play_vars_files(
        &mut self,
        at: &TaskFile<'_>,
        base_dir: &Path,
        files: &Node,
    ) -> Vec<VarsFile> {
        let entries: Vec<&Node> = match &files.value {
            yaml::Value::Seq(items) => items.iter().collect(),
            _ => vec![files],
        };
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let candidates: Vec<&Node> = match &entry.value {
                yaml::Value::Seq(items) => items.iter().collect(),
                _ => vec![entry],
            };
            let mut found = false;
            for (index, candidate) in candidates.iter().enumerate() {
                let name = candidate.key_string();
                if enka_template::is_possibly_template(&name) {
                    for later in &candidates[index..] {
                        compile_in(self, at, later, "vars_files");
                    }
                    out.push(VarsFile::Templated {
                        candidates: candidates[index..]
                            .iter()
                            .map(|c| template::convert::from_yaml(c))
                            .collect(),
                        location: at.loc(candidate.pos),
                    });
                    found = true;
                    break;
                }
                let searched = [base_dir.to_path_buf()];
                if let Some(path) = enka_template::find_needle(&searched, "vars", &name) {
                    out.push(VarsFile::Loaded(self.play_vars_file(&path)));
                    found = true;
                    break;
                }
            }
            if !found {
                let names: Vec<String> = candidates.iter().map(|c| c.key_string()).collect();
                self.warning(
                    at.loc(entry.pos),
                    format!(
                        "vars_files: could not find {} (relative to {}); the play runs without it, as in Ansible",
                        names.join(" or "),
                        base_dir.display()
                    ),
                );
            }
        }
        out
    }

    /// One file of a play's `vars_files`, as `preprocess_vars` takes it: a
    /// mapping, or a list of mappings merged in order (later ones win).
    pub(super) fn play_vars_file(&mut self, path: &Path) -> VarList {
        let Some(node) = read_yaml(self, path) else {
            return Arc::from(Vec::new());
        };
        let file: Arc<Path> = Arc::from(path);
        let at = TaskFile {
            file: &file,
            role: None,
        };
        let (mappings, bad) = match &node.value {
            yaml::Value::Seq(items) => (
                items.iter().collect::<Vec<_>>(),
                items.iter().find(|item| item.as_map().is_none()),
            ),
            yaml::Value::Map(_) | yaml::Value::Null => (vec![&node], None),
            _ => (vec![&node], Some(&node)),
        };
        if let Some(bad) = bad {
            self.error(
                at.loc(bad.pos),
                format!(
                    "Invalid vars_file '{}'.. variable files must contain either a dictionary of variables, or a list of dictionaries. Got: a {}",
                    path.display(),
                    node.type_name()
                ),
            );
            return Arc::from(Vec::new());
        }
        let mut vars = Vec::new();
        for mapping in mappings {
            vars.extend(parse_vars(self, &at, mapping, "vars_files").iter().cloned());
        }
        Arc::from(vars)
    }

    /// What Play.load refuses in a play's shape, in its words: an empty
    /// host list, task sections and `roles` that are not lists, old-style
    /// role strings, `vars_prompt` entries without a name.
    pub(super) fn check_play_shape(&mut self, file: &Arc<Path>, play: &Node) {
        if let Some(hosts) = play.get("hosts") {
            let empty = match &hosts.value {
                yaml::Value::Seq(items) => items.is_empty(),
                yaml::Value::Null => true,
                yaml::Value::Str(s) => s.trim().is_empty(),
                _ => false,
            };
            if empty {
                self.error(
                    Location::new(file, hosts.pos),
                    "Hosts list cannot be empty. Please check your playbook".to_owned(),
                );
            }
        }
        for key in ["pre_tasks", "tasks", "post_tasks", "handlers"] {
            if let Some(section) = play.get(key)
                && !matches!(section.value, yaml::Value::Seq(_) | yaml::Value::Null)
            {
                self.error(
                    Location::new(file, section.pos),
                    format!(
                        "A malformed block was encountered while loading {key}: {} should be a list or None",
                        section.key_string()
                    ),
                );
            }
        }
        if let Some(roles) = play.get("roles") {
            match &roles.value {
                yaml::Value::Seq(entries) => {
                    for entry in entries {
                        if let yaml::Value::Str(name) = &entry.value
                            && name.contains(',')
                        {
                            self.error(
                                Location::new(file, entry.pos),
                                format!("Invalid old style role requirement: {name}"),
                            );
                        }
                    }
                }
                yaml::Value::Null => {}
                _ => self.error(
                    Location::new(file, roles.pos),
                    "A malformed role declaration was encountered.".to_owned(),
                ),
            }
        }
    }

    /// A play's `vars_prompt`, checked as Play._load_vars_prompt checks it:
    /// a mapping or a list of mappings, each with a `name` and only the keys
    /// ansible-playbook knows.
    pub(super) fn vars_prompt(&mut self, at: &TaskFile<'_>, play: &Node) -> Arc<[VarsPrompt]> {
        const KEYS: &[&str] = &[
            "name",
            "prompt",
            "default",
            "private",
            "confirm",
            "encrypt",
            "salt_size",
            "salt",
            "unsafe",
        ];
        let Some(node) = play.get("vars_prompt") else {
            return Arc::from(Vec::new());
        };
        let entries: Vec<&Node> = match &node.value {
            yaml::Value::Seq(items) => items.iter().collect(),
            yaml::Value::Null => Vec::new(),
            _ => vec![node],
        };
        let mut out = Vec::new();
        for entry in entries {
            let Some(pairs) = entry.as_map() else {
                self.error(
                    at.loc(entry.pos),
                    "variable files must contain either a dictionary of variables, or a list of dictionaries (vars_prompt)".to_owned(),
                );
                continue;
            };
            // Ansible's order (Play._load_vars_prompt): the name, then the keys.
            let Some(name) = entry.get("name") else {
                self.error(
                    at.loc(entry.pos),
                    "Invalid vars_prompt data structure, missing 'name' key".to_owned(),
                );
                continue;
            };
            if let Some((key, _)) = pairs
                .iter()
                .find(|(k, _)| !KEYS.contains(&k.key_string().as_str()))
            {
                self.error(
                    at.loc(key.pos),
                    format!(
                        "Invalid vars_prompt data structure, found unsupported key '{}'",
                        key.key_string()
                    ),
                );
                continue;
            }
            let default = entry.get("default").map(|d| {
                compile_in(self, at, d, "vars_prompt default");
                template::convert::from_yaml(d)
            });
            let unsafe_answer = entry
                .get("unsafe")
                .and_then(|u| template::strict_boolean(&template::convert::from_yaml(u)))
                .unwrap_or(false);
            out.push(VarsPrompt {
                name: Arc::from(name.key_string().as_str()),
                default,
                unsafe_answer,
            });
        }
        out.into()
    }

    pub(super) fn playbook(&mut self, path: &Path) -> Option<Arc<Playbook>> {
        if let Some(playbook) = self.playbooks.get(path) {
            return Some(playbook.clone());
        }
        if let Some(dir) = path.parent() {
            self.project_dir(dir);
        }
        let node = read_yaml(self, path)?;
        let file: Arc<Path> = Arc::from(path);
        let at = TaskFile {
            file: &file,
            role: None,
        };
        let Some(plays) = node.as_seq() else {
            self.error(
                Location::new(&file, node.pos),
                "a playbook must be a list of plays".to_owned(),
            );
            return None;
        };
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        if plays.is_empty() {
            self.error(
                Location::new(&file, node.pos),
                "A playbook must contain at least one play".to_owned(),
            );
        }
        let mut out = Vec::new();
        for play in plays {
            if play.as_map().is_none() {
                self.error(
                    Location::new(&file, play.pos),
                    "a play must be a mapping".to_owned(),
                );
                continue;
            }
            if let Some(import) = play
                .get("import_playbook")
                .or_else(|| play.get("ansible.builtin.import_playbook"))
            {
                out.extend(self.import_playbook(&at, &base_dir, play, import));
                continue;
            }
            self.check_play(&file, play);
            out.push(self.play(&at, &base_dir, play));
        }
        let playbook = Arc::new(Playbook {
            path: path.to_path_buf(),
            plays: out,
        });
        self.playbooks.insert(path.to_path_buf(), playbook.clone());
        Some(playbook)
    }

    /// The plays `import_playbook` brings in, the import's `vars` winning
    /// over each imported play's.
    fn import_playbook(
        &mut self,
        at: &TaskFile<'_>,
        base_dir: &Path,
        play: &Node,
        import: &Node,
    ) -> Vec<Play> {
        let file = at.file;
        let mut out = Vec::new();
        match import.as_str() {
            Some(name) => {
                // The import's `vars` win over each imported play's.
                let import_vars = play
                    .get("vars")
                    .map(|n| keyword_vars(self, at, n, "Play"))
                    .unwrap_or_else(|| Arc::from(Vec::new()));
                if let Some(imported) = self.playbook(&base_dir.join(name)) {
                    out.extend(imported.plays.iter().map(|p| {
                        let mut play = clone_play(p);
                        let mut vars = play.vars.to_vec();
                        for (k, v) in import_vars.iter() {
                            vars.retain(|(name, _)| name != k);
                            vars.push((k.clone(), v.clone()));
                        }
                        play.vars = vars.into();
                        play
                    }));
                }
            }
            None => self.error(
                Location::new(file, import.pos),
                "import_playbook needs a file name".to_owned(),
            ),
        }
        out
    }

    /// A play's keys, shape, `user` and hosts checked as Ansible's Play
    /// loads them; host patterns are kept for the inventory's check.
    fn check_play(&mut self, file: &Arc<Path>, play: &Node) {
        for (k, _) in play.as_map().unwrap_or_default() {
            let key = k.key_string();
            if !keywords::of_play(&key) {
                self.error(
                    Location::new(file, k.pos),
                    format!("'{key}' is not a valid attribute for a Play"),
                );
            }
        }
        self.check_play_shape(file, play);
        // `user` is the older name of `remote_user` (Play.preprocess_data).
        if let (Some(user), Some(_)) = (play.get("user"), play.get("remote_user")) {
            self.error(
                Location::new(file, user.pos),
                "both 'user' and 'remote_user' are set for this play. The use of 'user' is deprecated, and should be removed".to_owned(),
            );
        }
        if let Some(hosts) = play.get("hosts") {
            let patterns = match &hosts.value {
                yaml::Value::Seq(items) => items.iter().map(Node::key_string).collect(),
                _ => vec![hosts.key_string()],
            };
            for pattern in patterns {
                if !matches!(pattern.as_str(), "localhost" | "all" | "127.0.0.1") {
                    self.host_patterns
                        .push((Location::new(file, hosts.pos), pattern));
                }
            }
        }
    }

    /// One play of a playbook, its keywords, variables, tasks and roles.
    fn play(&mut self, at: &TaskFile<'_>, base_dir: &Path, play: &Node) -> Play {
        let mut vars: Vec<(Arc<str>, enka_template::Var)> = play
            .get("vars")
            .map(|n| keyword_vars(self, at, n, "Play"))
            .unwrap_or_else(|| Arc::from(Vec::new()))
            .to_vec();
        // `vars_files` rank above the play's `vars`; later files win.
        let mut vars_files = play
            .get("vars_files")
            .map(|files| self.play_vars_files(at, base_dir, files))
            .unwrap_or_default();
        if vars_files
            .iter()
            .all(|entry| matches!(entry, VarsFile::Loaded(_)))
        {
            for entry in std::mem::take(&mut vars_files) {
                if let VarsFile::Loaded(list) = entry {
                    // Kept beside the play's own definition (the
                    // later one wins a lookup) for hash_behaviour=merge.
                    vars.extend(list.iter().cloned());
                }
            }
        }
        let vars: VarList = vars.into();
        let settings = Settings::read(Places::PLAY, |name| {
            play.get(name).map(template::convert::from_yaml)
        });
        if let (Some(value), Some(n)) = (
            settings.get(Setting::ModuleDefaults),
            play.get("module_defaults"),
        ) {
            self.note_module_defaults(at.loc(n.pos), value);
        }
        let [pre_tasks, tasks, post_tasks, handlers] = self.play_sections(at, play);
        let mut roles = Vec::new();
        if let Some(list) = play.get("roles") {
            for entry in list.as_seq().unwrap_or_default() {
                if let Some(role_ref) = self.role_ref(at, entry) {
                    roles.push(role_ref);
                }
            }
        }
        Play {
            name: play.get("name").map(Node::key_string),
            hosts: play
                .get("hosts")
                .map(template::convert::from_yaml)
                .unwrap_or_else(|| minijinja::Value::from("localhost")),
            order: play.get("order").map(template::convert::from_yaml),
            serial: play.get("serial").map(template::convert::from_yaml),
            strategy: play.get("strategy").map(template::convert::from_yaml),
            max_fail_percentage: play
                .get("max_fail_percentage")
                .map(template::convert::from_yaml),
            tags: play.get("tags").map(tag_list).unwrap_or_default(),
            settings,
            vars,
            vars_files: vars_files.into(),
            vars_prompt: self.vars_prompt(at, play),
            pre_tasks,
            roles,
            tasks,
            post_tasks,
            handlers,
        }
    }

    /// A play's task sections, parsed with its `collections` in force;
    /// its fact gathering first, as a task of its own.
    fn play_sections(&mut self, at: &TaskFile<'_>, play: &Node) -> [Arc<[Task]>; 4] {
        let play_collections: Arc<[String]> = play
            .get("collections")
            .and_then(Node::as_seq)
            .map(|items| {
                items
                    .iter()
                    .map(Node::key_string)
                    .collect::<Vec<_>>()
                    .into()
            })
            .unwrap_or_else(|| Arc::from(Vec::new()));
        let outer = std::mem::replace(&mut self.collections, play_collections);
        let section = |loader: &mut Loader, key: &str| -> Arc<[Task]> {
            play.get(key)
                .filter(|n| matches!(n.value, yaml::Value::Seq(_) | yaml::Value::Null))
                .map(|n| parse_tasks(loader, at, n))
                .unwrap_or_default()
                .into()
        };
        let pre_tasks = if gathers_facts(play) {
            // Ansible runs the play's fact gathering first, as a task of
            // its own (`gather_facts`, through the worker).
            let mut nodes = vec![fact_gathering_task(play.pos)];
            if let Some(written) = play.get("pre_tasks").and_then(Node::as_seq) {
                nodes.extend(written.iter().cloned());
            }
            let list = Node {
                value: yaml::Value::Seq(nodes),
                pos: play.pos,
                tag: None,
            };
            parse_tasks(self, at, &list).into()
        } else {
            section(self, "pre_tasks")
        };
        let tasks = section(self, "tasks");
        let post_tasks = section(self, "post_tasks");
        let handlers = section(self, "handlers");
        self.collections = outer;
        [pre_tasks, tasks, post_tasks, handlers]
    }

    pub(super) fn role_ref(&mut self, at: &TaskFile<'_>, entry: &Node) -> Option<RoleRef> {
        let location = Location::new(at.file, entry.pos);
        let (name, params_node) = match &entry.value {
            yaml::Value::Str(name) => (name.clone(), None),
            yaml::Value::Map(_) => {
                let name = entry
                    .get("role")
                    .or_else(|| entry.get("name"))
                    .and_then(Node::as_str);
                match name {
                    Some(name) => (name.to_owned(), Some(entry)),
                    None => {
                        self.error(location, "a role entry needs 'role' or 'name'".to_owned());
                        return None;
                    }
                }
            }
            _ => {
                self.error(
                    location,
                    "a role entry must be a name or a mapping".to_owned(),
                );
                return None;
            }
        };
        let role = self.role_by_name(&name, location)?;
        let mut params: Vec<(Arc<str>, template::Var)> = Vec::new();
        let mut when: Arc<[minijinja::Value]> = Arc::from(Vec::new());
        if let Some(node) = params_node {
            for (k, v) in node.as_map().unwrap_or_default() {
                let key = k.key_string();
                match key.as_str() {
                    "role" | "name" | "tags" => {}
                    "when" => {
                        let mut conditions = Vec::new();
                        for item in v
                            .as_seq()
                            .map(<[Node]>::to_vec)
                            .unwrap_or_else(|| vec![v.clone()])
                        {
                            let value = template::convert::from_yaml(&item);
                            if let Some(expr) = value.as_str()
                                && let Err(err) = self.builder.add_condition(expr)
                            {
                                self.when_run(
                                    Location::new(at.file, item.pos),
                                    format!("when: {err}"),
                                );
                            }
                            conditions.push(value);
                        }
                        when = Arc::from(conditions);
                    }
                    "vars" => {
                        params.extend(keyword_vars(self, at, v, "RoleInclude").iter().cloned());
                    }
                    _ => {
                        let single = Node {
                            value: yaml::Value::Map(vec![(k.clone(), v.clone())]),
                            pos: k.pos,
                            tag: None,
                        };
                        params.extend(
                            parse_vars(self, at, &single, "role parameter")
                                .iter()
                                .cloned(),
                        );
                    }
                }
            }
        }
        let tags = params_node
            .and_then(|node| node.get("tags"))
            .map(tag_list)
            .unwrap_or_default();
        Some(RoleRef {
            role,
            params: Arc::from(params),
            when,
            tags,
        })
    }
}

pub(super) fn clone_play(play: &Play) -> Play {
    Play {
        name: play.name.clone(),
        hosts: play.hosts.clone(),
        order: play.order.clone(),
        serial: play.serial.clone(),
        strategy: play.strategy.clone(),
        max_fail_percentage: play.max_fail_percentage.clone(),
        tags: play.tags.clone(),
        settings: play.settings.clone(),
        vars: play.vars.clone(),
        vars_files: play.vars_files.clone(),
        vars_prompt: play.vars_prompt.clone(),
        pre_tasks: play.pre_tasks.clone(),
        roles: play.roles.clone(),
        tasks: play.tasks.clone(),
        post_tasks: play.post_tasks.clone(),
        handlers: play.handlers.clone(),
    }
}

/// Whether a play gathers facts: its `gather_facts`, else Ansible's
/// `ANSIBLE_GATHERING` (`implicit`, the default, gathers; `explicit` does
/// not; `smart` gathers once, and a run is one play's first time).
pub(super) fn gathers_facts(play: &Node) -> bool {
    match play.get("gather_facts").map(|n| &n.value) {
        Some(yaml::Value::Bool(b)) => *b,
        Some(yaml::Value::Str(text)) => !matches!(
            text.trim().to_ascii_lowercase().as_str(),
            "false" | "no" | "off" | "n" | "0"
        ),
        Some(yaml::Value::Int(n)) => *n != 0,
        Some(_) => true,
        None => !std::env::var("ANSIBLE_GATHERING").is_ok_and(|g| g.trim() == "explicit"),
    }
}
