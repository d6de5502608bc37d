//! Every keyword a play, a block or a task may carry, in one table: where
//! it may appear (ansible-core 2.18's `Play`, `Block`, `Task` and `Handler`
//! attributes) and whether enka gives it an effect. The loader's checks
//! follow from it; a new keyword is a row here plus the code that reads it.

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
    /// Plays, blocks and tasks (Ansible's Base, Become, Taggable and
    /// CollectionSearch).
    pub const EVERYWHERE: Places = Places(1 | 2 | 4);

    /// Whether a keyword of these places may appear in `place`.
    pub const fn allows(self, place: Places) -> bool {
        self.0 & place.0 != 0
    }
}

/// One keyword.
#[derive(Debug)]
pub struct Keyword {
    pub name: &'static str,
    pub places: Places,
    /// Accepted and without effect in-process (privilege escalation, the
    /// debugger, connection details of remote hosts).
    pub ignored: bool,
}

const fn kw(name: &'static str, places: Places) -> Keyword {
    Keyword {
        name,
        places,
        ignored: false,
    }
}

const fn ignored(name: &'static str, places: Places) -> Keyword {
    Keyword {
        name,
        places,
        ignored: true,
    }
}

use Places as P;

/// The table.
pub const KEYWORDS: &[Keyword] = &[
    // Plays, blocks and tasks.
    kw("name", P::EVERYWHERE),
    kw("vars", P::EVERYWHERE),
    kw("tags", P::EVERYWHERE),
    kw("environment", P::EVERYWHERE),
    kw("no_log", P::EVERYWHERE),
    kw("ignore_errors", P::EVERYWHERE),
    kw("ignore_unreachable", P::EVERYWHERE),
    kw("check_mode", P::EVERYWHERE),
    kw("diff", P::EVERYWHERE),
    kw("connection", P::EVERYWHERE),
    kw("timeout", P::EVERYWHERE),
    kw("run_once", P::EVERYWHERE),
    kw("throttle", P::EVERYWHERE),
    kw("any_errors_fatal", P::EVERYWHERE),
    kw("module_defaults", P::EVERYWHERE),
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
    kw("delegate_to", P::TASK_BLOCK),
    ignored("delegate_facts", P::TASK_BLOCK),
    // Blocks.
    kw("block", P::BLOCK),
    kw("rescue", P::BLOCK),
    kw("always", P::BLOCK),
    // Tasks.
    kw("register", P::TASK),
    kw("loop", P::TASK),
    kw("loop_control", P::TASK),
    kw("until", P::TASK),
    kw("retries", P::TASK),
    kw("delay", P::TASK),
    kw("changed_when", P::TASK),
    kw("failed_when", P::TASK),
    kw("args", P::TASK),
    kw("action", P::TASK),
    kw("local_action", P::TASK),
    kw("async", P::TASK),
    kw("poll", P::TASK),
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
    kw("force_handlers", P::PLAY),
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

/// Whether `name` is a keyword of a task, a handler or a block: what the
/// loader does not take for a module's name.
pub fn of_task_or_block(name: &str) -> bool {
    lookup(name).is_some_and(|k| {
        k.places
            .allows(Places(Places::TASK_BLOCK.0 | Places::HANDLER.0))
    })
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
    fn places_follow_ansibles_classes() {
        assert!(of_task_or_block("when") && !of_play("when"));
        assert!(of_task_or_block("register") && !of_play("register"));
        assert!(of_task_or_block("listen"));
        assert!(of_play("hosts") && !of_task_or_block("hosts"));
        assert!(of_play("tags") && of_task_or_block("tags"));
        assert!(!of_task_or_block("debug") && !of_play("debug"));
    }
}
