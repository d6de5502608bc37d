//! Small playbooks from a seed, in the shapes operator roles are made of:
//! play and task variables, `set_fact`, `debug`, `assert`, `fail`,
//! `command`, blocks with `rescue` and `always`, loops with their
//! controls, `include_tasks` and `import_tasks` of generated files,
//! handlers and `notify`, `register` and conditions on what was
//! registered, and the failure keywords (`ignore_errors`, `failed_when`,
//! `changed_when`, `until`). Expressions reach for undefined names and
//! missing keys now and then, so error paths are played too. A play runs
//! on one to three hosts (all on the local connection, one at a time so
//! the output's order is fixed), with the keywords that decide how hosts
//! go on together: `serial`, `max_fail_percentage`, `any_errors_fatal`,
//! `force_handlers`, `run_once` and `delegate_to`.

use rand::Rng;
use rand::rngs::StdRng;

/// One task of a play, a block or a task file.
#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    /// A module call: its name, its arguments (YAML text after the module
    /// key, indented by the writer) and the task's keywords.
    Action {
        name: String,
        module: String,
        args: Args,
        keywords: Vec<(String, String)>,
    },
    Block {
        name: String,
        block: Vec<Task>,
        rescue: Vec<Task>,
        always: Vec<Task>,
        keywords: Vec<(String, String)>,
    },
    /// `include_tasks` or `import_tasks` of a generated file.
    Include {
        name: String,
        how: &'static str,
        file: String,
        tasks: Vec<Task>,
        keywords: Vec<(String, String)>,
    },
}

/// A module's arguments: a mapping of YAML scalars, or free-form text.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    Map(Vec<(String, String)>),
    Text(String),
}

/// A generated playbook: its hosts, play keywords and variables, tasks
/// and handlers.
#[derive(Debug, Clone, PartialEq)]
pub struct Playbook {
    /// The inventory's hosts (`localhost` alone, or `h1`…).
    pub hosts: Vec<String>,
    /// Play keywords beside `hosts` and `gather_facts`, as YAML text.
    pub keywords: Vec<(String, String)>,
    pub vars: Vec<(String, String)>,
    pub tasks: Vec<Task>,
    pub handlers: Vec<Task>,
}

/// The options both commands run a generated playbook with: one host at a
/// time, so hosts' lines come in the inventory's order.
pub const ARGS: &[&str] = &["--forks", "1"];

impl Task {
    pub fn children(&self) -> Vec<&Vec<Task>> {
        match self {
            Task::Action { .. } => Vec::new(),
            Task::Block {
                block,
                rescue,
                always,
                ..
            } => vec![block, rescue, always],
            Task::Include { tasks, .. } => vec![tasks],
        }
    }

    pub fn children_mut(&mut self) -> Vec<&mut Vec<Task>> {
        match self {
            Task::Action { .. } => Vec::new(),
            Task::Block {
                block,
                rescue,
                always,
                ..
            } => vec![block, rescue, always],
            Task::Include { tasks, .. } => vec![tasks],
        }
    }

    pub fn keywords_mut(&mut self) -> &mut Vec<(String, String)> {
        match self {
            Task::Action { keywords, .. }
            | Task::Block { keywords, .. }
            | Task::Include { keywords, .. } => keywords,
        }
    }
}

/// The play's variables: every type a role's defaults hold, and a bare
/// `yes` that YAML 1.1 reads as a boolean.
const PLAY_VARS: &[(&str, &str)] = &[
    ("n", "3"),
    ("s", "\"abc\""),
    ("l", "[1, 2, 3]"),
    ("d", "{k: v, n: 2}"),
    ("flag", "yes"),
    ("word", "\"yes\""),
    ("empty", "[]"),
    ("items_list", "[{name: a, on: true}, {name: b, on: false}]"),
];

/// Expressions a task prints or sets, some failing (undefined names,
/// missing keys).
const VALUES: &[&str] = &[
    "{{ n }}",
    "{{ n + 1 }}",
    "{{ s | upper }}",
    "{{ l | sum }}",
    "{{ l | length }}",
    "{{ d }}",
    "{{ d.k }}",
    "{{ d.missing }}",
    "{{ flag }}",
    "{{ word }}",
    "{{ nope }}",
    "{{ nope | default('dflt') }}",
    "{{ fact_x | default('unset') }}",
    "{{ reg.msg | default('none') }}",
    "{{ reg is defined }}",
    "{{ items_list | selectattr('on') | map(attribute='name') | list }}",
    "{{ l | map('string') | join(',') }}",
    "{{ (l | first) if l else 'none' }}",
    "plain text",
    "{{ n }}-{{ s }}",
];

/// Conditions for `when`, `failed_when`, `changed_when`, `until` and
/// `assert`.
const CONDITIONS: &[&str] = &[
    "n == 3",
    "n > 5",
    "inventory_hostname == 'h1'",
    "inventory_hostname != 'h2'",
    "s == 'abc'",
    "flag",
    "word",
    "word | bool",
    "l | length > 2",
    "d.k == 'v'",
    "d.missing == 1",
    "nope is defined",
    "nope",
    "fact_x is defined",
    "reg is defined",
    "reg is failed",
    "reg is skipped",
    "reg is changed",
    "empty",
    "true",
    "false",
];

/// Conditions that read the loop's item.
const ITEM_CONDITIONS: &[&str] = &["item > 1", "item == 2", "item.on | default(false)", "item"];

/// Loop lists.
const LOOPS: &[&str] = &[
    "{{ l }}",
    "{{ empty }}",
    "{{ items_list }}",
    "[1, 2]",
    "{{ nope }}",
    "{{ s }}",
];

/// Values `set_fact` gives `fact_x`, as YAML text: a bare `yes` is YAML 1.1's boolean.
const FACTS: &[&str] = &[
    "\"{{ n * 2 }}\"",
    "\"{{ l + [4] }}\"",
    "yes",
    "\"{{ s }}\"",
    "\"{{ nope }}\"",
];

/// The generator's state: its random stream and the names it has given.
pub struct Gen<'a> {
    pub rng: &'a mut StdRng,
    pub tasks_made: usize,
    pub files_made: usize,
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

impl Gen<'_> {
    fn pick<'t>(&mut self, from: &[&'t str]) -> &'t str {
        from[self.rng.random_range(0..from.len())]
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    fn name(&mut self) -> String {
        self.tasks_made += 1;
        format!("t{}", self.tasks_made)
    }

    pub fn playbook(&mut self) -> Playbook {
        let count = self.rng.random_range(2..7);
        let tasks = (0..count).map(|_| self.task(2)).collect();
        let handlers = if self.chance(40) {
            vec![
                self.action_with(
                    "h1",
                    "debug",
                    Args::Map(vec![("msg".into(), quoted("handled"))]),
                ),
                self.action_with(
                    "h2",
                    "debug",
                    Args::Map(vec![("msg".into(), quoted("{{ n }}"))]),
                ),
            ]
        } else {
            Vec::new()
        };
        let vars = PLAY_VARS
            .iter()
            .filter(|_| self.chance(90))
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let hosts = match self.rng.random_range(0..100) {
            0..60 => vec!["localhost".to_owned()],
            60..80 => vec!["h1".to_owned(), "h2".to_owned()],
            _ => vec!["h1".to_owned(), "h2".to_owned(), "h3".to_owned()],
        };
        let mut keywords = Vec::new();
        for (keyword, values, percent) in [
            ("serial", &["1", "2", "\"50%\"", "[1, 2]"][..], 15),
            ("max_fail_percentage", &["0", "34", "\"50%\""][..], 10),
            ("any_errors_fatal", &["true"][..], 8),
            ("force_handlers", &["true"][..], 8),
        ] {
            if self.chance(percent) {
                keywords.push((keyword.to_owned(), self.pick(values).to_owned()));
            }
        }
        Playbook {
            hosts,
            keywords,
            vars,
            tasks,
            handlers,
        }
    }

    fn action_with(&mut self, name: &str, module: &str, args: Args) -> Task {
        Task::Action {
            name: name.to_owned(),
            module: module.to_owned(),
            args,
            keywords: Vec::new(),
        }
    }

    /// One task, a block or an include while `depth` allows.
    fn task(&mut self, depth: u32) -> Task {
        let mut task = match self.rng.random_range(0..100) {
            0..12 if depth > 0 => self.block(depth),
            12..18 if depth > 0 => self.include(depth),
            _ => self.action(),
        };
        self.keywords(&mut task);
        task
    }

    fn action(&mut self) -> Task {
        let name = self.name();
        let (module, args) = match self.rng.random_range(0..100) {
            0..30 => (
                "debug",
                Args::Map(vec![("msg".into(), quoted(self.pick(VALUES)))]),
            ),
            30..36 => (
                "debug",
                Args::Map(vec![(
                    "var".into(),
                    self.pick(&["n", "d", "fact_x", "reg", "nope", "item"])
                        .to_owned(),
                )]),
            ),
            36..52 => (
                "set_fact",
                Args::Map(vec![("fact_x".into(), self.pick(FACTS).to_owned())]),
            ),
            52..64 => (
                "assert",
                Args::Map(vec![(
                    "that".into(),
                    format!("[{}]", quoted(self.pick(CONDITIONS))),
                )]),
            ),
            64..70 => (
                "fail",
                Args::Map(vec![("msg".into(), quoted("failed on purpose"))]),
            ),
            70..78 => (
                "command",
                Args::Text(quoted(self.pick(&["echo hi", "false", "true"]))),
            ),
            78..84 => (
                "meta",
                Args::Text(
                    self.pick(&["flush_handlers", "noop", "end_play", "clear_facts"])
                        .to_owned(),
                ),
            ),
            _ => (
                "set_fact",
                Args::Map(vec![(
                    self.pick(&["n", "s", "reg"]).to_owned(),
                    self.pick(FACTS).to_owned(),
                )]),
            ),
        };
        Task::Action {
            name,
            module: module.to_owned(),
            args,
            keywords: Vec::new(),
        }
    }

    fn tasks(&mut self, depth: u32, least: usize, most: usize) -> Vec<Task> {
        let count = self.rng.random_range(least..=most);
        (0..count).map(|_| self.task(depth)).collect()
    }

    fn block(&mut self, depth: u32) -> Task {
        let name = self.name();
        let block = self.tasks(depth - 1, 1, 3);
        let rescue = if self.chance(60) {
            self.tasks(depth - 1, 1, 2)
        } else {
            Vec::new()
        };
        let always = if self.chance(40) {
            self.tasks(depth - 1, 1, 2)
        } else {
            Vec::new()
        };
        Task::Block {
            name,
            block,
            rescue,
            always,
            keywords: Vec::new(),
        }
    }

    fn include(&mut self, depth: u32) -> Task {
        let name = self.name();
        self.files_made += 1;
        let file = format!("tasks_{}.yml", self.files_made);
        let how = if self.chance(60) {
            "include_tasks"
        } else {
            "import_tasks"
        };
        let tasks = self.tasks(depth - 1, 1, 3);
        Task::Include {
            name,
            how,
            file,
            tasks,
            keywords: Vec::new(),
        }
    }

    /// The keywords a task carries, each now and then.
    fn keywords(&mut self, task: &mut Task) {
        let is_action = matches!(task, Task::Action { .. });
        let module = match task {
            Task::Action { module, .. } => module.clone(),
            _ => String::new(),
        };
        let mut keywords = Vec::new();
        let looped = self.chance(18) && module != "meta";
        if looped {
            keywords.push(("loop".to_owned(), quoted(self.pick(LOOPS))));
            if self.chance(30) {
                keywords.push((
                    "loop_control".to_owned(),
                    "{label: \"{{ item }}\"}".to_owned(),
                ));
            }
        }
        if self.chance(25) {
            let condition = if looped && self.chance(60) {
                self.pick(ITEM_CONDITIONS)
            } else {
                self.pick(CONDITIONS)
            };
            keywords.push(("when".to_owned(), quoted(condition)));
        }
        if is_action && module != "meta" && self.chance(30) {
            keywords.push(("register".to_owned(), "reg".to_owned()));
        }
        if self.chance(12) {
            keywords.push(("ignore_errors".to_owned(), "true".to_owned()));
        }
        if is_action && module != "meta" && self.chance(10) {
            keywords.push(("failed_when".to_owned(), quoted(self.pick(CONDITIONS))));
        }
        if is_action && module != "meta" && self.chance(10) {
            keywords.push(("changed_when".to_owned(), quoted(self.pick(CONDITIONS))));
        }
        if is_action && module != "meta" && !looped && self.chance(5) {
            keywords.push(("until".to_owned(), quoted(self.pick(CONDITIONS))));
            keywords.push(("retries".to_owned(), "2".to_owned()));
            keywords.push(("delay".to_owned(), "0".to_owned()));
        }
        if is_action && module != "meta" && self.chance(15) {
            keywords.push((
                "notify".to_owned(),
                self.pick(&["h1", "h2", "[h1, h2]"]).to_owned(),
            ));
        }
        if self.chance(10) {
            keywords.push(("vars".to_owned(), "{n: 10, local_v: here}".to_owned()));
        }
        if is_action && self.chance(6) {
            keywords.push(("run_once".to_owned(), "true".to_owned()));
        }
        if is_action && module != "meta" && self.chance(6) {
            let to = self.pick(&["localhost", "h2", "\"{{ inventory_hostname }}\""]);
            keywords.push(("delegate_to".to_owned(), to.to_owned()));
        }
        *task.keywords_mut() = keywords;
    }
}

/// The playbook's files: `play.yml`, each included task file, and the
/// inventory when the play has hosts of its own.
pub fn files(playbook: &Playbook) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut text = format!(
        "- hosts: {}\n  gather_facts: false\n",
        playbook.hosts.join(",")
    );
    for (key, value) in &playbook.keywords {
        text.push_str(&format!("  {key}: {value}\n"));
    }
    if !playbook.vars.is_empty() {
        text.push_str("  vars:\n");
        for (key, value) in &playbook.vars {
            text.push_str(&format!("    {key}: {value}\n"));
        }
    }
    text.push_str("  tasks:\n");
    write_tasks(&mut text, &playbook.tasks, 4, &mut out);
    if !playbook.handlers.is_empty() {
        text.push_str("  handlers:\n");
        write_tasks(&mut text, &playbook.handlers, 4, &mut out);
    }
    out.insert(0, ("play.yml".to_owned(), text));
    if playbook.hosts.iter().any(|h| h != "localhost") {
        let inventory: String = playbook.hosts.iter().map(|h| format!("{h}\n")).collect();
        out.push(("inventory".to_owned(), inventory));
    }
    out
}

fn write_tasks(
    text: &mut String,
    tasks: &[Task],
    indent: usize,
    files: &mut Vec<(String, String)>,
) {
    if tasks.is_empty() {
        text.push_str(&format!("{}[]\n", " ".repeat(indent)));
    }
    for task in tasks {
        write_task(text, task, indent, files);
    }
}

fn write_task(text: &mut String, task: &Task, indent: usize, files: &mut Vec<(String, String)>) {
    let pad = " ".repeat(indent);
    let (name, keywords) = match task {
        Task::Action { name, keywords, .. }
        | Task::Block { name, keywords, .. }
        | Task::Include { name, keywords, .. } => (name, keywords),
    };
    text.push_str(&format!("{pad}- name: {name}\n"));
    let inner = " ".repeat(indent + 2);
    match task {
        Task::Action { module, args, .. } => match args {
            Args::Text(line) => text.push_str(&format!("{inner}{module}: {line}\n")),
            Args::Map(pairs) => {
                text.push_str(&format!("{inner}{module}:\n"));
                for (key, value) in pairs {
                    text.push_str(&format!("{inner}  {key}: {value}\n"));
                }
            }
        },
        Task::Block {
            block,
            rescue,
            always,
            ..
        } => {
            for (key, tasks) in [("block", block), ("rescue", rescue), ("always", always)] {
                if key != "block" && tasks.is_empty() {
                    continue;
                }
                text.push_str(&format!("{inner}{key}:\n"));
                write_tasks(text, tasks, indent + 4, files);
            }
        }
        Task::Include {
            how, file, tasks, ..
        } => {
            text.push_str(&format!("{inner}{how}: {file}\n"));
            let mut body = String::new();
            write_tasks(&mut body, tasks, 0, files);
            files.push((file.clone(), body));
        }
    }
    for (key, value) in keywords {
        text.push_str(&format!("{inner}{key}: {value}\n"));
    }
}
