//! Variable names Ansible reserves: the keywords of plays, roles, blocks
//! and tasks, and the templating globals (`lookup`, `query`, `lipsum`, …).
//! A variable with one of these names works but is easily confused with
//! the keyword or shadows the global, so Ansible warns once per name
//! (`warn_if_reserved`); so does enka.

/// `ansible.vars.reserved.get_reserved_names()` of ansible-core 2.18,
/// sorted (`gather_subset` is left out there too).
const RESERVED: &[&str] = &[
    "action",
    "always",
    "any_errors_fatal",
    "args",
    "async",
    "async_val",
    "become",
    "become_exe",
    "become_flags",
    "become_method",
    "become_user",
    "block",
    "changed_when",
    "check_mode",
    "collections",
    "connection",
    "cycler",
    "debugger",
    "delay",
    "delegate_facts",
    "delegate_to",
    "dict",
    "diff",
    "environment",
    "fact_path",
    "failed_when",
    "force_handlers",
    "gather_facts",
    "gather_timeout",
    "handlers",
    "hosts",
    "ignore_errors",
    "ignore_unreachable",
    "joiner",
    "lipsum",
    "local_action",
    "lookup",
    "loop",
    "loop_control",
    "loop_with",
    "max_fail_percentage",
    "module_defaults",
    "name",
    "namespace",
    "no_log",
    "notify",
    "now",
    "order",
    "poll",
    "port",
    "post_tasks",
    "pre_tasks",
    "q",
    "query",
    "range",
    "register",
    "remote_user",
    "rescue",
    "retries",
    "roles",
    "run_once",
    "serial",
    "strategy",
    "tags",
    "tasks",
    "throttle",
    "timeout",
    "undef",
    "until",
    "vars",
    "vars_files",
    "vars_prompt",
    "when",
    "with_",
];

/// Whether defining a variable `name` draws Ansible's warning (`vars`
/// itself is Ansible's own and does not).
pub(crate) fn is_reserved(name: &str) -> bool {
    name != "vars" && RESERVED.binary_search(&name).is_ok()
}

/// The warning for a variable named `name`.
pub(crate) fn warning(name: &str) -> String {
    format!("Found variable using reserved name: {name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_sorted_for_binary_search() {
        assert!(RESERVED.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn keywords_and_template_globals_are_reserved_but_vars_is_not() {
        assert!(is_reserved("lipsum"));
        assert!(is_reserved("port"));
        assert!(!is_reserved("vars"));
        assert!(!is_reserved("replicas"));
    }
}
