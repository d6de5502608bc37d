//! Which modules exist, under which names, and which arguments they take.
//!
//! This table is what the role loader validates tasks against, so that an
//! unknown module or a misspelt argument is an error when the role loads,
//! never a surprise in the middle of a reconcile.

use minijinja::Value;

/// How a module takes a bare string (`debug: msg=hi`, `meta: end_play`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreeForm {
    /// Only `key: value` mappings.
    No,
    /// `k=v` pairs in a string.
    KeyValue,
    /// `k=v` pairs, and the rest of the string as `_raw_params`.
    Raw,
}

/// One module: its names and arguments, what the loader checks, how it
/// runs. Each module's file defines its own (`MODULE`); [`MODULES`] lists
/// them.
#[derive(Debug)]
pub struct ModuleSpec {
    /// The short name.
    pub name: &'static str,
    /// Other short names (old aliases such as `k8s_facts`).
    pub aliases: &'static [&'static str],
    /// Collections whose FQCN resolves to this module.
    pub collections: &'static [&'static str],
    /// Accepted arguments, including aliases; empty with `any_args`.
    pub params: &'static [&'static str],
    /// Whether any argument name is accepted (`set_fact`).
    pub any_args: bool,
    pub free_form: FreeForm,
    /// What the loader checks of the arguments as written.
    pub requires: &'static [Requirement],
    /// Arguments written as bare expressions, not templates (`assert`'s
    /// `that`, `debug`'s `var`).
    pub expressions: &'static [&'static str],
    /// Whether it talks to the API server: it never reaches the task's
    /// host, and every other module runs on the controller alone.
    pub uses_cluster: bool,
    /// The collection module that runs through Ansible in its place in
    /// check mode (a write enka has no dry run of its own for).
    pub check_mode_through: Option<&'static str>,
    /// Its code.
    pub run: Run,
}

/// A rule on a module's arguments as written, checked when the role loads
/// (arguments whose value is a template are only checked when it runs).
#[derive(Debug)]
pub enum Requirement {
    /// At least one of these.
    OneOf(&'static [&'static str]),
    /// Each of these.
    Each(&'static [&'static str]),
    /// At most one of these.
    Exclusive(&'static [&'static str]),
}

/// A module's result, or why it failed.
pub type Answer = Result<crate::Output, crate::ModuleError>;

/// A module's answer, awaited.
pub type BoxAnswer<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send + 'a>>;

/// A module's code that is awaited.
pub type AwaitedRun =
    for<'a, 'b> fn(&'a crate::Args<'a>, &'a mut crate::ModuleContext<'b>) -> BoxAnswer<'a>;

/// A module's code: run at once, or awaited (it waits on the API server,
/// a timer or a file).
#[derive(Clone, Copy)]
pub enum Run {
    Now(
        fn(
            &crate::Args<'_>,
            &crate::ModuleContext<'_>,
        ) -> Result<crate::Output, crate::ModuleError>,
    ),
    Later(AwaitedRun),
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Run::Now(_) => "Run::Now",
            Run::Later(_) => "Run::Later",
        })
    }
}

pub(crate) const BUILTIN: &[&str] = &["ansible.builtin", "ansible.legacy"];
pub(crate) const KUBERNETES: &[&str] = &[
    "kubernetes.core",
    "community.kubernetes",
    "community.okd",
    "redhat.openshift",
];
pub(crate) const OPERATOR_SDK: &[&str] = &[
    "operator_sdk.util",
    "kubernetes.core",
    "community.kubernetes",
];

/// Connection arguments every `kubernetes.core` module accepts; enka
/// always uses its own client, so they are accepted and ignored.
const K8S_AUTH: &[&str] = &[
    "kubeconfig",
    "context",
    "host",
    "api_key",
    "username",
    "password",
    "validate_certs",
    "verify_ssl",
    "ca_cert",
    "ssl_ca_cert",
    "client_cert",
    "cert_file",
    "client_key",
    "key_file",
    "proxy",
    "no_proxy",
    "proxy_headers",
    "persist_config",
    "impersonate_user",
    "impersonate_groups",
];

/// The table of modules: each defined in its own file.
pub const MODULES: &[&ModuleSpec] = &[
    &crate::set_fact::MODULE,
    &crate::debug::MODULE,
    &crate::fail::MODULE,
    &crate::assert::MODULE,
    &crate::meta::MODULE,
    &crate::group_by::MODULE,
    &crate::pause::MODULE,
    &crate::include_vars::MODULE,
    &crate::k8s::MODULE,
    &crate::k8s_info::MODULE,
    &crate::k8s_status::MODULE,
    &crate::k8s_event::MODULE,
    &crate::k8s_scale::MODULE,
    &crate::k8s_log::MODULE,
    &crate::k8s_exec::MODULE,
    &crate::requeue_after::MODULE,
    &crate::osdk_metric::MODULE,
];

/// Modules Ansible has but an in-process runtime cannot run, with why.
pub const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "command",
        "it runs a process on the operator's host; enka runs no commands",
    ),
    (
        "shell",
        "it runs a shell on the operator's host; enka runs no commands",
    ),
    ("raw", "it runs a command over a connection; enka has none"),
    ("script", "it runs a local script; enka runs no commands"),
    (
        "uri",
        "it makes arbitrary HTTP calls; use a Kubernetes resource or k8s_info instead",
    ),
    (
        "stat",
        "it inspects the operator's file system, which enka does not expose",
    ),
    (
        "file",
        "it changes the operator's file system, which enka does not expose",
    ),
    (
        "copy",
        "it writes files on the operator's host; put the data in a ConfigMap or Secret instead",
    ),
    (
        "template",
        "it writes files on the operator's host; use lookup('template', ...) in a k8s definition instead",
    ),
    (
        "tempfile",
        "it creates files on the operator's host, which enka does not expose",
    ),
    (
        "k8s_cp",
        "it copies files through pod exec, which needs a kubelet and local files",
    ),
    ("helm", "it shells out to the helm binary"),
];

/// Resolves a module name as written in a task (short, FQCN or alias).
pub fn lookup(name: &str) -> Option<&'static ModuleSpec> {
    let (collection, short) = match name.rsplit_once('.') {
        Some((collection, short)) => (Some(collection), short),
        None => (None, name),
    };
    MODULES.iter().copied().find(|spec| {
        (spec.name == short || spec.aliases.contains(&short))
            && collection.is_none_or(|c| spec.collections.contains(&c))
    })
}

/// If `name` is a module enka knowingly does not run, why not.
pub fn unsupported(name: &str) -> Option<&'static str> {
    let short = name.rsplit('.').next().unwrap_or(name);
    UNSUPPORTED
        .iter()
        .find(|(n, _)| *n == short)
        .map(|(_, why)| *why)
}

impl ModuleSpec {
    /// The fully qualified name Ansible resolves the module to
    /// (`kubernetes.core.k8s`, `ansible.builtin.set_fact`).
    pub fn fqcn(&self) -> String {
        let collection = self
            .collections
            .first()
            .copied()
            .unwrap_or("ansible.builtin");
        format!("{collection}.{}", self.name)
    }

    /// Whether `arg` is an accepted argument name.
    pub fn accepts(&self, arg: &str) -> bool {
        self.any_args
            || self.params.contains(&arg)
            || (KUBERNETES
                .iter()
                .chain(OPERATOR_SDK)
                .any(|c| self.collections.contains(c))
                && K8S_AUTH.contains(&arg))
    }
}

/// Checks at load time what can be checked without running: arguments that
/// must be present. Arguments whose value is a template, and arguments that
/// exclude each other, are only checked when the task runs.
pub fn validate_args(spec: &ModuleSpec, args: &[(Value, Value)]) -> Result<(), String> {
    let has = |name: &str| args.iter().any(|(k, _)| k.as_str() == Some(name));
    for requirement in spec.requires {
        match requirement {
            Requirement::OneOf(names) if !names.iter().any(|n| has(n)) => {
                return Err(format!(
                    "{} requires one of: {}",
                    spec.name,
                    names.join(", ")
                ));
            }
            Requirement::Each(names) => {
                if let Some(missing) = names.iter().find(|n| !has(n)) {
                    return Err(format!("{} requires {missing}", spec.name));
                }
            }
            // Arguments that exclude each other fail the task when it runs,
            // as Ansible's argument spec does (a task never reached runs
            // fine): `check_requirements`.
            _ => {}
        }
    }
    Ok(())
}

/// Checks the arguments a task runs with against what its module requires,
/// worded as Ansible's argument spec validation words it: what the load
/// could not see (a templated `args:` or free-form text that renders to the
/// arguments, an omitted value) is caught here.
pub fn check_requirements(spec: &ModuleSpec, args: &Value) -> Result<(), String> {
    let has = |name: &str| args.get_attr(name).is_ok_and(|value| !value.is_undefined());
    for requirement in spec.requires {
        match requirement {
            Requirement::OneOf([name]) | Requirement::Each([name]) if !has(name) => {
                return Err(format!("missing required arguments: {name}"));
            }
            Requirement::OneOf(names) if !names.iter().any(|n| has(n)) => {
                return Err(format!(
                    "one of the following is required: {}",
                    names.join(", ")
                ));
            }
            Requirement::Each(names) => {
                let missing: Vec<&str> = names.iter().copied().filter(|n| !has(n)).collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "missing required arguments: {}",
                        missing.join(", ")
                    ));
                }
            }
            Requirement::Exclusive(names) if names.iter().filter(|n| has(n)).count() > 1 => {
                return Err(format!(
                    "parameters are mutually exclusive: {}",
                    names.join("|")
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_and_aliases_are_unique() {
        let mut seen = HashSet::new();
        for spec in MODULES {
            for name in std::iter::once(&spec.name).chain(spec.aliases) {
                assert!(seen.insert(*name), "duplicate module name {name}");
            }
        }
    }

    #[test]
    fn every_spelling_resolves() {
        for (name, module) in [
            ("k8s", "k8s"),
            ("kubernetes.core.k8s", "k8s"),
            ("community.kubernetes.k8s", "k8s"),
            ("k8s_facts", "k8s_info"),
            ("community.kubernetes.k8s_info", "k8s_info"),
            ("operator_sdk.util.k8s_status", "k8s_status"),
            ("k8s_status", "k8s_status"),
            ("operator_sdk.util.requeue_after", "requeue_after"),
            ("ansible.builtin.set_fact", "set_fact"),
            ("ansible.legacy.debug", "debug"),
        ] {
            assert_eq!(lookup(name).map(|s| s.name), Some(module), "{name}");
        }
        assert!(lookup("ansible.builtin.k8s").is_none());
        assert!(lookup("nope").is_none());
        assert!(unsupported("ansible.builtin.command").is_some());
    }

    #[test]
    fn kubernetes_modules_accept_connection_arguments() {
        let k8s = lookup("k8s").unwrap();
        assert!(k8s.accepts("kubeconfig"));
        assert!(k8s.accepts("definition"));
        assert!(!k8s.accepts("defintion"));
        assert!(!lookup("debug").unwrap().accepts("kubeconfig"));
        assert!(lookup("set_fact").unwrap().accepts("anything"));
    }
}
