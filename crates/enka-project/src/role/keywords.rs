//! Every keyword a play, a block or a task may carry, in one table: where
//! it may appear (ansible-core 2.18's `Play`, `Block`, `Task` and `Handler`
//! attributes), how the loader reads it and whether a block's or a play's
//! value holds for the tasks inside. The loader's checks, the reading of
//! every [`Setting`] and the engine's inheritance follow from it; a new
//! setting is a row here, its [`Setting`] name and the code that uses it.

use minijinja::Value;

/// Where a keyword may appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Places(u8);

impl Places {
    pub const TASK: Places = Places(1);
    pub const BLOCK: Places = Places(2);
    pub const PLAY: Places = Places(4);
    /// Handlers only (`listen`).
    pub const HANDLER: Places = Places(8);
    /// Tasks and blocks (Ansible's Conditional, Notifiable and
    /// Delegatable mixins).
    pub const TASK_BLOCK: Places = Places(1 | 2);
    /// What a task file holds: tasks, blocks and handlers.
    pub const TASK_FILE: Places = Places(1 | 2 | 8);
    /// Plays, blocks and tasks (Ansible's Base, Become, Taggable and
    /// CollectionSearch).
    pub const EVERYWHERE: Places = Places(1 | 2 | 4);

    /// Whether a keyword of these places may appear in `place`.
    pub const fn allows(self, place: Places) -> bool {
        self.0 & place.0 != 0
    }
}

/// A keyword kept as written (possibly a template) and templated when the
/// task it applies to runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    IgnoreErrors,
    IgnoreUnreachable,
    DelegateTo,
    DelegateFacts,
    Connection,
    RunOnce,
    Throttle,
    AnyErrorsFatal,
    ForceHandlers,
    NoLog,
    CheckMode,
    Diff,
    Environment,
    ModuleDefaults,
    Timeout,
    Async,
    Poll,
    Retries,
    Delay,
}

impl Setting {
    /// How many settings there are.
    pub const COUNT: usize = Setting::Delay as usize + 1;
}

/// How the loader reads a keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// By code of its own: the action, loops, blocks, conditions, name
    /// lists, variables.
    Own,
    /// As a [`Setting`]. When `inherited`, a block's or a play's value
    /// holds for the tasks inside it.
    Setting { setting: Setting, inherited: bool },
    /// Accepted and without effect in-process (privilege escalation, the
    /// debugger, connection details of remote hosts).
    Ignored,
}

/// One keyword.
#[derive(Debug)]
pub struct Keyword {
    pub name: &'static str,
    pub places: Places,
    pub read: Read,
}

const fn kw(name: &'static str, places: Places) -> Keyword {
    Keyword {
        name,
        places,
        read: Read::Own,
    }
}

/// A setting that holds for the tasks inside the block or play it is on.
const fn inherited(name: &'static str, places: Places, setting: Setting) -> Keyword {
    Keyword {
        name,
        places,
        read: Read::Setting {
            setting,
            inherited: true,
        },
    }
}

/// A setting of the task it is written on only.
const fn own(name: &'static str, places: Places, setting: Setting) -> Keyword {
    Keyword {
        name,
        places,
        read: Read::Setting {
            setting,
            inherited: false,
        },
    }
}

const fn ignored(name: &'static str, places: Places) -> Keyword {
    Keyword {
        name,
        places,
        read: Read::Ignored,
    }
}

/// A task's, a block's or a play's settings, as written.
#[derive(Debug, Clone)]
pub struct Settings([Option<Value>; Setting::COUNT]);

impl Default for Settings {
    fn default() -> Self {
        Settings(std::array::from_fn(|_| None))
    }
}

impl Settings {
    /// Reads the settings a keyword of `place` may carry, each with
    /// `value_of` its name (`None`: not written).
    pub fn read(place: Places, mut value_of: impl FnMut(&'static str) -> Option<Value>) -> Self {
        let mut settings = Settings::default();
        for keyword in KEYWORDS {
            if let Read::Setting { setting, .. } = keyword.read
                && keyword.places.allows(place)
            {
                settings.0[setting as usize] = value_of(keyword.name);
            }
        }
        settings
    }

    /// The value written for `setting`, if any.
    pub fn get(&self, setting: Setting) -> Option<&Value> {
        self.0[setting as usize].as_ref()
    }

    /// Sets `setting`'s value.
    pub fn set(&mut self, setting: Setting, value: Option<Value>) {
        self.0[setting as usize] = value;
    }

    /// The written settings that hold for the tasks inside.
    pub fn inherited(&self) -> impl Iterator<Item = (Setting, &Value)> {
        KEYWORDS.iter().filter_map(|keyword| match keyword.read {
            Read::Setting {
                setting,
                inherited: true,
            } => self.get(setting).map(|value| (setting, value)),
            _ => None,
        })
    }
}

use Places as P;

/// The table.
pub const KEYWORDS: &[Keyword] = &[
    // Plays, blocks and tasks.
    kw("name", P::EVERYWHERE),
    kw("vars", P::EVERYWHERE),
    kw("tags", P::EVERYWHERE),
    inherited("environment", P::EVERYWHERE, Setting::Environment),
    inherited("no_log", P::EVERYWHERE, Setting::NoLog),
    inherited("ignore_errors", P::EVERYWHERE, Setting::IgnoreErrors),
    inherited(
        "ignore_unreachable",
        P::EVERYWHERE,
        Setting::IgnoreUnreachable,
    ),
    inherited("check_mode", P::EVERYWHERE, Setting::CheckMode),
    inherited("diff", P::EVERYWHERE, Setting::Diff),
    inherited("connection", P::EVERYWHERE, Setting::Connection),
    inherited("timeout", P::EVERYWHERE, Setting::Timeout),
    inherited("run_once", P::EVERYWHERE, Setting::RunOnce),
    inherited("throttle", P::EVERYWHERE, Setting::Throttle),
    inherited("any_errors_fatal", P::EVERYWHERE, Setting::AnyErrorsFatal),
    inherited("module_defaults", P::EVERYWHERE, Setting::ModuleDefaults),
    kw("collections", P::EVERYWHERE),
    ignored("become", P::EVERYWHERE),
    ignored("become_user", P::EVERYWHERE),
    ignored("become_method", P::EVERYWHERE),
    ignored("become_flags", P::EVERYWHERE),
    ignored("become_exe", P::EVERYWHERE),
    ignored("debugger", P::EVERYWHERE),
    ignored("remote_user", P::EVERYWHERE),
    ignored("port", P::EVERYWHERE),
    // Blocks and tasks.
    kw("when", P::TASK_BLOCK),
    kw("notify", P::TASK_BLOCK),
    inherited("delegate_to", P::TASK_BLOCK, Setting::DelegateTo),
    inherited("delegate_facts", P::TASK_BLOCK, Setting::DelegateFacts),
    // Blocks.
    kw("block", P::BLOCK),
    kw("rescue", P::BLOCK),
    kw("always", P::BLOCK),
    // Tasks.
    kw("register", P::TASK),
    kw("loop", P::TASK),
    kw("loop_control", P::TASK),
    kw("until", P::TASK),
    own("retries", P::TASK, Setting::Retries),
    own("delay", P::TASK, Setting::Delay),
    kw("changed_when", P::TASK),
    kw("failed_when", P::TASK),
    kw("args", P::TASK),
    kw("action", P::TASK),
    kw("local_action", P::TASK),
    own("async", P::TASK, Setting::Async),
    own("poll", P::TASK, Setting::Poll),
    kw("listen", P::HANDLER),
    // Plays.
    kw("hosts", P::PLAY),
    kw("gather_facts", P::PLAY),
    kw("gather_subset", P::PLAY),
    kw("gather_timeout", P::PLAY),
    kw("fact_path", P::PLAY),
    kw("vars_files", P::PLAY),
    kw("vars_prompt", P::PLAY),
    kw("roles", P::PLAY),
    kw("pre_tasks", P::PLAY),
    kw("tasks", P::PLAY),
    kw("post_tasks", P::PLAY),
    kw("handlers", P::PLAY),
    own("force_handlers", P::PLAY, Setting::ForceHandlers),
    kw("max_fail_percentage", P::PLAY),
    kw("serial", P::PLAY),
    kw("strategy", P::PLAY),
    kw("order", P::PLAY),
    // The older name of `remote_user` (Play.preprocess_data).
    ignored("user", P::PLAY),
];

/// The keyword named `name`, if there is one.
pub fn lookup(name: &str) -> Option<&'static Keyword> {
    KEYWORDS.iter().find(|k| k.name == name)
}

/// Whether `name` is a keyword a block may carry.
pub fn of_block(name: &str) -> bool {
    lookup(name).is_some_and(|k| k.places.allows(Places::BLOCK))
}

/// Whether `name` is a keyword of a task, a handler or a block: what the
/// loader does not take for a module's name.
pub fn of_task_or_block(name: &str) -> bool {
    lookup(name).is_some_and(|k| k.places.allows(Places::TASK_FILE))
}

/// Whether `name` is a keyword of a play.
pub fn of_play(name: &str) -> bool {
    lookup(name).is_some_and(|k| k.places.allows(Places::PLAY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_keyword_is_listed_once() {
        for (i, keyword) in KEYWORDS.iter().enumerate() {
            assert!(
                KEYWORDS[..i].iter().all(|k| k.name != keyword.name),
                "{} is listed twice",
                keyword.name
            );
        }
    }

    #[test]
    fn each_setting_is_read_from_one_keyword() {
        for index in 0..Setting::COUNT {
            let rows = KEYWORDS
                .iter()
                .filter(|k| matches!(k.read, Read::Setting { setting, .. } if setting as usize == index))
                .count();
            assert_eq!(rows, 1, "setting {index} is read from {rows} keywords");
        }
    }

    #[test]
    fn settings_are_read_where_their_keyword_may_appear() {
        let written = |name: &str| Some(Value::from(name));
        let task = Settings::read(Places::TASK_FILE, written);
        assert_eq!(task.get(Setting::Throttle), Some(&Value::from("throttle")));
        assert_eq!(task.get(Setting::Async), Some(&Value::from("async")));
        assert_eq!(task.get(Setting::ForceHandlers), None);
        let play = Settings::read(Places::PLAY, written);
        assert_eq!(
            play.get(Setting::ForceHandlers),
            Some(&Value::from("force_handlers"))
        );
        assert_eq!(play.get(Setting::Retries), None);
        // What a block passes down: `no_log` does, `retries` does not.
        let passed: Vec<Setting> = task.inherited().map(|(setting, _)| setting).collect();
        assert!(passed.contains(&Setting::NoLog));
        assert!(!passed.contains(&Setting::Retries));
    }

    #[test]
    fn places_follow_ansibles_classes() {
        assert!(of_task_or_block("when") && !of_play("when"));
        assert!(of_task_or_block("register") && !of_play("register"));
        assert!(of_task_or_block("listen"));
        assert!(of_play("hosts") && !of_task_or_block("hosts"));
        assert!(of_play("tags") && of_task_or_block("tags"));
        assert!(!of_task_or_block("debug") && !of_play("debug"));
    }
}
