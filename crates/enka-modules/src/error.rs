//! Why a module failed, typed from the module to the engine: the engine
//! makes every kind a failed result with Ansible's `msg`, and a whole
//! result ([`ModuleError::Result`]) the failed result itself.

use enka_worker::WorkerError;
use minijinja::Value;

use crate::Output;

/// An argument a module cannot take: missing, of the wrong type, not one
/// of its choices. Its text is Ansible's argument-spec message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgumentError(pub String);

impl From<ArgumentError> for String {
    fn from(err: ArgumentError) -> String {
        err.0
    }
}

/// Why a module failed.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// An argument it cannot take.
    #[error(transparent)]
    Argument(#[from] ArgumentError),
    /// A Kubernetes module in a run without a cluster (`enka playbook`
    /// without a kubeconfig).
    #[error("this run has no connection to a Kubernetes cluster")]
    NoCluster,
    /// An action enka runs through Ansible, in a run without a worker.
    #[error("{action} runs through Ansible, and this run has no Ansible worker")]
    NoWorker {
        /// The action, as the task names it.
        action: String,
    },
    /// The Ansible worker did not answer (it could not start, timed out,
    /// died or broke the protocol) or the plugin raised.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The module refused: its `msg`.
    #[error("{0}")]
    Failed(String),
    /// A condition the action evaluates (`assert`'s `that`) could not be
    /// evaluated: the engine words it as Ansible's Conditional does, with
    /// where the `index`-th string of `argument` is written.
    #[error("{error}")]
    Conditional {
        /// The argument holding the condition.
        argument: &'static str,
        /// Which of its strings (0 for a single one).
        index: usize,
        /// Why it could not be evaluated.
        error: enka_template::Error,
    },
    /// The action raised an error (an `AnsibleError` out of its plugin)
    /// rather than returning a failed result: the task's result says only
    /// that it failed and why (2.19 adds `Task failed: ` and `exception`).
    #[error("{0}")]
    Raised(String),
    /// The action's Python code raised an exception of its own (a
    /// TypeError, a regex error): 2.18's TaskExecutor reports "Unexpected
    /// failure during module execution: …" with an empty `stdout`, 2.19
    /// "Task failed: …".
    #[error("{0}")]
    Unexpected(String),
    /// A whole failed result, as the module's collection returns it
    /// (kubernetes.core's refusals carry the answer's `reason`,
    /// operator_sdk.util's an `error` with the body, a timed-out wait the
    /// object as last read).
    #[error("{}", failed_msg(.0))]
    Result(Box<Output>),
}

impl ModuleError {
    /// A failed result: `msg` and the other `fields`, `changed` false.
    pub fn result(msg: String, fields: Vec<(&str, Value)>) -> Self {
        let mut output = Output::changed(false).with("msg", msg);
        for (key, value) in fields {
            output = output.with(key, value);
        }
        ModuleError::Result(Box::new(output))
    }
}

/// A failed result's `msg`, as text.
fn failed_msg(output: &Output) -> String {
    output
        .fields
        .iter()
        .find(|(key, _)| key == "msg")
        .map(|(_, msg)| enka_template::pyrepr::to_text(msg))
        .unwrap_or_default()
}

impl From<String> for ModuleError {
    fn from(msg: String) -> Self {
        ModuleError::Failed(msg)
    }
}

impl From<&str> for ModuleError {
    fn from(msg: &str) -> Self {
        ModuleError::Failed(msg.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use enka_template::{Context, Options, TemplarBuilder, VarList};
    use serde_json::json;

    use super::*;
    use crate::catalogue::{AnsibleAction, ModuleRef, modules};
    use crate::{ModuleContext, TaskView};

    /// Runs `module` with `args` in a run without a cluster or a worker.
    fn run(module: ModuleRef, args: serde_json::Value) -> Result<Output, ModuleError> {
        let templar = TemplarBuilder::new(Options::default()).build();
        let ctx = Context::new(
            templar.clone(),
            Arc::new(VarList(Vec::new())),
            Arc::from(Vec::new()),
        );
        let args = enka_template::convert::from_json(&args);
        let mut module_ctx = ModuleContext {
            task: TaskView {
                name: None,
                file: Path::new("tasks/main.yml"),
                written_args: &args,
            },
            ctx: &ctx,
            templar: &templar,
            cluster: None,
            verbosity: 0,
            deadline: None,
            task_timeout: None,
            no_log: false,
            api_time: std::time::Duration::ZERO,
            role_path: None,
            base_dir: Path::new("."),
            owner: None,
            dependents: Vec::new(),
            ansible: None,
            environment: Value::from(()),
            check_mode: false,
            diff: false,
            asynchronous: None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(crate::run(&module, &args, &mut module_ctx))
    }

    fn native(name: &str) -> ModuleRef {
        ModuleRef::Native(modules::lookup(name).expect("a native module"))
    }

    #[test]
    fn each_kind_of_failure_arrives_typed() {
        let refused = run(native("set_fact"), json!({"1bad": 1})).unwrap_err();
        assert!(
            matches!(&refused, ModuleError::Failed(msg) if msg.contains("'1bad' is not valid")),
            "{refused:?}"
        );

        let argument = run(native("pause"), json!({"seconds": [1]})).unwrap_err();
        assert!(matches!(argument, ModuleError::Argument(_)), "{argument:?}");

        let no_cluster = run(native("k8s_info"), json!({"kind": "Pod"})).unwrap_err();
        assert!(
            matches!(no_cluster, ModuleError::NoCluster),
            "{no_cluster:?}"
        );
        assert_eq!(
            no_cluster.to_string(),
            "this run has no connection to a Kubernetes cluster"
        );

        let bridged =
            ModuleRef::Ansible(Arc::new(AnsibleAction::new("file", Arc::from(Vec::new()))));
        let no_worker = run(bridged, json!({"path": "/tmp"})).unwrap_err();
        assert!(
            matches!(&no_worker, ModuleError::NoWorker { action } if action == "file"),
            "{no_worker:?}"
        );
    }

    #[test]
    fn a_whole_failed_result_says_its_msg() {
        let err = ModuleError::result(
            "refused".to_owned(),
            vec![("reason", Value::from("Conflict"))],
        );
        assert_eq!(err.to_string(), "refused");
        let ModuleError::Result(output) = err else {
            panic!("a whole result");
        };
        assert!(
            output
                .fields
                .iter()
                .any(|(k, v)| k == "reason" && v.as_str() == Some("Conflict"))
        );
    }
}
