//! Which modules exist, under which names, and which arguments they take.
//!
//! This table is what the role loader validates tasks against, so that an
//! unknown module or a misspelt argument is an error when the role loads,
//! never a surprise in the middle of a reconcile.

use minijinja::Value;

/// Every module enka runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModuleId {
    SetFact,
    Debug,
    Fail,
    Assert,
    Meta,
    Pause,
    IncludeVars,
    GroupBy,
    K8s,
    K8sInfo,
    K8sStatus,
    K8sEvent,
    K8sScale,
    K8sLog,
    K8sExec,
    RequeueAfter,
    OsdkMetric,
}

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

/// One module's name, aliases and arguments.
#[derive(Debug)]
pub struct ModuleSpec {
    pub id: ModuleId,
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
}

const BUILTIN: &[&str] = &["ansible.builtin", "ansible.legacy"];
const KUBERNETES: &[&str] = &[
    "kubernetes.core",
    "community.kubernetes",
    "community.okd",
    "redhat.openshift",
];
const OPERATOR_SDK: &[&str] = &[
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

macro_rules! params {
    ($($p:literal),* $(; $extra:expr)?) => {{
        const LIST: &[&str] = &[$($p),*];
        LIST
    }};
}

/// The table of modules.
pub const MODULES: &[ModuleSpec] = &[
    ModuleSpec {
        id: ModuleId::SetFact,
        name: "set_fact",
        aliases: &[],
        collections: BUILTIN,
        params: &[],
        any_args: true,
        free_form: FreeForm::KeyValue,
    },
    ModuleSpec {
        id: ModuleId::Debug,
        name: "debug",
        aliases: &[],
        collections: BUILTIN,
        params: params!["msg", "var", "verbosity"],
        any_args: false,
        free_form: FreeForm::KeyValue,
    },
    ModuleSpec {
        id: ModuleId::Fail,
        name: "fail",
        aliases: &[],
        collections: BUILTIN,
        params: params!["msg"],
        any_args: false,
        free_form: FreeForm::KeyValue,
    },
    ModuleSpec {
        id: ModuleId::Assert,
        name: "assert",
        aliases: &[],
        collections: BUILTIN,
        params: params!["that", "fail_msg", "msg", "success_msg", "quiet"],
        any_args: false,
        free_form: FreeForm::KeyValue,
    },
    ModuleSpec {
        id: ModuleId::Meta,
        name: "meta",
        aliases: &[],
        collections: BUILTIN,
        params: params!["_raw_params"],
        any_args: false,
        free_form: FreeForm::Raw,
    },
    ModuleSpec {
        id: ModuleId::GroupBy,
        name: "group_by",
        aliases: &[],
        collections: BUILTIN,
        params: params!["key", "parents"],
        any_args: false,
        free_form: FreeForm::KeyValue,
    },
    ModuleSpec {
        id: ModuleId::Pause,
        name: "pause",
        aliases: &[],
        collections: BUILTIN,
        params: params!["seconds", "minutes", "prompt", "echo"],
        any_args: false,
        free_form: FreeForm::KeyValue,
    },
    ModuleSpec {
        id: ModuleId::IncludeVars,
        name: "include_vars",
        aliases: &[],
        collections: BUILTIN,
        params: params![
            "_raw_params",
            "file",
            "dir",
            "name",
            "depth",
            "files_matching",
            "ignore_files",
            "extensions",
            "ignore_unknown_extensions",
            "hash_behaviour"
        ],
        any_args: false,
        free_form: FreeForm::Raw,
    },
    ModuleSpec {
        id: ModuleId::K8s,
        name: "k8s",
        aliases: &[],
        collections: KUBERNETES,
        params: params![
            "state",
            "definition",
            "resource_definition",
            "src",
            "template",
            "kind",
            "api_version",
            "version",
            "name",
            "namespace",
            "label_selectors",
            "apply",
            "server_side_apply",
            "merge_type",
            "force",
            "wait",
            "wait_condition",
            "wait_timeout",
            "wait_sleep",
            "validate",
            "append_hash",
            "continue_on_error",
            "delete_options",
            "generate_name",
            "delete_all",
            "hidden_fields"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::K8sInfo,
        name: "k8s_info",
        aliases: &["k8s_facts"],
        collections: KUBERNETES,
        params: params![
            "kind",
            "api_version",
            "version",
            "name",
            "namespace",
            "label_selectors",
            "field_selectors",
            "wait",
            "wait_condition",
            "wait_timeout",
            "wait_sleep",
            "hidden_fields"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::K8sStatus,
        name: "k8s_status",
        aliases: &[],
        collections: OPERATOR_SDK,
        params: params![
            "api_version",
            "kind",
            "name",
            "namespace",
            "status",
            "conditions",
            "replace_lists",
            "force"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::K8sEvent,
        name: "k8s_event",
        aliases: &[],
        collections: OPERATOR_SDK,
        params: params![
            "state",
            "name",
            "namespace",
            "message",
            "reason",
            "type",
            "source",
            "involvedObject",
            "involved_object",
            "reportingComponent",
            "reportingInstance",
            "appendTimestamp"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::K8sScale,
        name: "k8s_scale",
        aliases: &[],
        collections: KUBERNETES,
        params: params![
            "api_version",
            "kind",
            "name",
            "namespace",
            "label_selectors",
            "replicas",
            "current_replicas",
            "resource_version",
            "resource_definition",
            "src",
            "wait",
            "wait_timeout",
            "wait_sleep"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::K8sLog,
        name: "k8s_log",
        aliases: &[],
        collections: KUBERNETES,
        params: params![
            "api_version",
            "kind",
            "name",
            "namespace",
            "label_selectors",
            "container",
            "since_seconds",
            "tail_lines",
            "previous",
            "all_containers"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::K8sExec,
        name: "k8s_exec",
        aliases: &[],
        collections: KUBERNETES,
        params: params!["namespace", "pod", "container", "command"],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::RequeueAfter,
        name: "requeue_after",
        aliases: &[],
        collections: OPERATOR_SDK,
        params: params!["time"],
        any_args: false,
        free_form: FreeForm::No,
    },
    ModuleSpec {
        id: ModuleId::OsdkMetric,
        name: "osdk_metric",
        aliases: &[],
        collections: OPERATOR_SDK,
        params: params![
            "name",
            "description",
            "counter",
            "gauge",
            "histogram",
            "summary"
        ],
        any_args: false,
        free_form: FreeForm::No,
    },
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
    MODULES.iter().find(|spec| {
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
/// must be present, and arguments that exclude each other. Arguments whose
/// value is a template are only checked when the task runs.
pub fn validate_args(spec: &ModuleSpec, args: &[(Value, Value)]) -> Result<(), String> {
    let has = |name: &str| args.iter().any(|(k, _)| k.as_str() == Some(name));
    let require_one = |names: &[&str]| -> Result<(), String> {
        if names.iter().any(|n| has(n)) {
            Ok(())
        } else {
            Err(format!(
                "{} requires one of: {}",
                spec.name,
                names.join(", ")
            ))
        }
    };
    match spec.id {
        ModuleId::Debug if has("msg") && has("var") => {
            Err("debug: parameters are mutually exclusive: msg|var".to_owned())
        }
        ModuleId::Assert => require_one(&["that"]),
        ModuleId::Meta => require_one(&["_raw_params"]),
        ModuleId::RequeueAfter => require_one(&["time"]),
        ModuleId::K8sStatus => {
            for name in ["api_version", "kind", "name"] {
                if !has(name) {
                    return Err(format!("k8s_status requires {name}"));
                }
            }
            Ok(())
        }
        ModuleId::K8sInfo => require_one(&["kind"]),
        ModuleId::K8sExec => require_one(&["pod"]).and(require_one(&["command"])),
        ModuleId::IncludeVars => require_one(&["_raw_params", "file", "dir"]),
        _ => Ok(()),
    }
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
        for (name, id) in [
            ("k8s", ModuleId::K8s),
            ("kubernetes.core.k8s", ModuleId::K8s),
            ("community.kubernetes.k8s", ModuleId::K8s),
            ("k8s_facts", ModuleId::K8sInfo),
            ("community.kubernetes.k8s_info", ModuleId::K8sInfo),
            ("operator_sdk.util.k8s_status", ModuleId::K8sStatus),
            ("k8s_status", ModuleId::K8sStatus),
            ("operator_sdk.util.requeue_after", ModuleId::RequeueAfter),
            ("ansible.builtin.set_fact", ModuleId::SetFact),
            ("ansible.legacy.debug", ModuleId::Debug),
        ] {
            assert_eq!(lookup(name).map(|s| s.id), Some(id), "{name}");
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
