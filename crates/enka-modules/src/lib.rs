//! What runs a task's action: one file per module enka runs natively, and
//! [`bridged`] for everything else, which goes through Ansible itself in the
//! worker (`enka-worker`).
//!
//! [`catalogue`] lists every native module, each defined in its own file
//! (names, arguments, what the role loader checks, check mode, its code);
//! adding a module is its file plus one line there. The engine calls [`run`]
//! with a [`ModuleRef`] and never learns which way it ran.
//!
//! It stands on `enka-kube` (the cluster the Kubernetes modules talk to),
//! `enka-template` and `enka-worker`; project loading (for the catalogue),
//! the engine and what is above them use it.

#![forbid(unsafe_code)]

use minijinja::Value;

mod args;
mod assert;
mod bridged;
pub mod catalogue;
mod client_apply;
mod debug;
mod error;
mod fail;
mod group_by;
mod include_vars;
mod k8s;
mod k8s_common;
mod k8s_event;
mod k8s_exec;
mod k8s_info;
mod k8s_log;
mod k8s_scale;
mod k8s_status;
pub mod meta;
mod osdk_metric;
mod pause;
mod requeue_after;
mod set_fact;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use args::Args;
pub use error::{ArgumentError, ModuleError};
pub use osdk_metric::{GaugeOp, MetricKind, MetricUpdate};

pub use crate::catalogue::{AnsibleAction, ModuleRef};
use enka_kube::{Cluster, Owner};
use enka_template::{Context, Templar};

/// What a module may look at while it runs.
pub struct ModuleContext<'a> {
    /// What a module may know of the task being run.
    pub task: TaskView<'a>,
    /// Its template context (for `debug: var=` and `assert: that=`).
    pub ctx: &'a Context,
    /// The project's templar.
    pub templar: &'a Arc<Templar>,
    /// The cluster, when the run has one.
    pub cluster: Option<&'a Arc<dyn Cluster>>,
    /// Ansible verbosity of the run.
    pub verbosity: u8,
    /// When the run must stop.
    pub deadline: Option<Instant>,
    /// The task's own `timeout`, which a timed-out result names.
    pub task_timeout: Option<Duration>,
    /// Whether the task's output is hidden.
    pub no_log: bool,
    /// Time the module spent in API calls (added to by modules).
    pub api_time: Duration,
    /// The current role's directory.
    pub role_path: Option<&'a Path>,
    /// The project directory.
    pub base_dir: &'a Path,
    /// The custom resource the run is for.
    pub owner: Option<&'a Owner>,
    /// The owner's dependents this module wrote (for dependent watches).
    pub dependents: Vec<enka_kube::Dependent>,
    /// The project's Ansible worker, for actions enka has no code for.
    pub ansible: Option<&'a Arc<enka_worker::AnsibleWorker>>,
    /// The task's templated `environment` (a mapping; empty when unset).
    pub environment: Value,
    /// Whether the run is a dry run (`--check`): bridged actions run in
    /// Ansible's check mode.
    pub check_mode: bool,
    /// Whether the action reports the changes it makes (`diff`, `--diff`).
    pub diff: bool,
    /// The task's `async` and `poll`, when it has `async`.
    pub asynchronous: Option<Asynchronous>,
}

/// The task being run, as far as a module reads it: its name for logs,
/// its file for Ansible's search path, its arguments as written.
#[derive(Debug, Clone, Copy)]
pub struct TaskView<'a> {
    /// The task's `name`, when it has one.
    pub name: Option<&'a str>,
    /// The file the task is in.
    pub file: &'a Path,
    /// Its arguments as written, before templating (a mapping, or
    /// undefined for a task that is not a module's).
    pub written_args: &'a Value,
}

/// A task's `async` (seconds it may run in the background) and `poll`
/// (seconds between checks; 0: return at once with its job id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asynchronous {
    /// `async`.
    pub seconds: u64,
    /// `poll` (Ansible's default: 15).
    pub poll: u64,
}

impl ModuleContext<'_> {
    /// The cluster, or the error a Kubernetes module reports without one.
    pub fn cluster(&self) -> Result<&Arc<dyn Cluster>, ModuleError> {
        self.cluster.ok_or(ModuleError::NoCluster)
    }

    /// Where files named by the task are looked for: the task's search
    /// path (`ansible_search_path`: the role, the task file's directory,
    /// the playbook's), else the role, then the project.
    pub fn search_path(&self) -> Vec<std::path::PathBuf> {
        if !self.ctx.search_path().is_empty() {
            return self.ctx.search_path().to_vec();
        }
        let mut paths = Vec::with_capacity(2);
        if let Some(role) = self.role_path {
            paths.push(role.to_path_buf());
        }
        paths.push(self.base_dir.to_path_buf());
        paths
    }

    /// Times an API call into [`ModuleContext::api_time`].
    pub async fn api<T>(&mut self, call: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let out = call.await;
        self.api_time += started.elapsed();
        out
    }
}

/// Something a module asks of the run beyond its result.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// `meta: end_play`.
    EndPlay,
    /// `meta: end_host`.
    EndHost,
    /// `meta: end_role`: the rest of the role the task is in is skipped.
    EndRole,
    /// `requeue_after`: reconcile again after this long.
    Requeue(Duration),
    /// `meta: clear_facts`.
    ClearFacts,
    /// `meta: flush_handlers`.
    FlushHandlers,
    /// `meta: clear_host_errors`: a failure of the host so far no longer
    /// stops it (a block's `always` clears the failure it runs after).
    ClearHostErrors,
}

/// A module's result.
#[derive(Debug, Default)]
pub struct Output {
    /// The registered result's fields (`changed`, `failed`, `msg`, …).
    pub fields: Vec<(String, Value)>,
    /// Facts to set (`set_fact`).
    pub facts: Vec<(Arc<str>, Value)>,
    /// Facts a module returned in `ansible_facts`: unsafe, never templated.
    pub plain_facts: Vec<(Arc<str>, Value)>,
    /// Variables loaded by `include_vars`.
    pub included_vars: Vec<(Arc<str>, Value)>,
    /// A request to the run.
    pub control: Option<Control>,
    /// User metrics (`osdk_metric`).
    pub metrics: Vec<MetricUpdate>,
    /// What waiting on a background job saw, in order (the callback's
    /// `ASYNC POLL`, then `ASYNC OK` or `ASYNC FAILED`).
    pub async_events: Vec<AsyncEvent>,
}

/// One thing an async task's wait saw.
#[derive(Debug, Clone, PartialEq)]
pub struct AsyncEvent {
    /// `poll` (not finished yet), `ok` or `failed` (finished).
    pub kind: AsyncEventKind,
    /// The job's id.
    pub jid: String,
    /// The status's `started` and `finished`, as async_status gave them.
    pub started: Value,
    pub finished: Value,
}

/// What an [`AsyncEvent`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEventKind {
    Poll,
    Ok,
    Failed,
}

impl Output {
    /// A result with `changed` set.
    pub fn changed(changed: bool) -> Self {
        Output {
            fields: vec![("changed".to_owned(), Value::from(changed))],
            ..Output::default()
        }
    }

    /// The result's fields as one mapping (a result inside another's, as
    /// kubernetes.core nests one per definition).
    pub fn into_value(self) -> Value {
        Value::from_pairs(
            self.fields
                .into_iter()
                .map(|(key, value)| (Value::from(key), value)),
        )
    }

    /// Adds a field to the result.
    #[must_use]
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.retain(|(k, _)| k != key);
        self.fields.push((key.to_owned(), value.into()));
        self
    }
}

/// Runs `module` with templated `args`.
pub async fn run(
    module: &ModuleRef,
    args: &Value,
    ctx: &mut ModuleContext<'_>,
) -> Result<Output, ModuleError> {
    let spec = match module {
        ModuleRef::Native(spec) => spec,
        ModuleRef::Ansible(action) => return bridged::run(action, args, ctx).await,
    };
    if ctx.check_mode
        && let Some(fqcn) = spec.check_mode_through
    {
        // enka's own cluster writes have no dry run yet; the collection's
        // module does check mode itself (a server-side dry run).
        if ctx.ansible.is_none() {
            return Err(ModuleError::NoWorker {
                action: format!("{}: in check mode {fqcn}", spec.name),
            });
        }
        let action = AnsibleAction::new(fqcn, Arc::from(Vec::new()));
        return bridged::run(&action, args, ctx).await;
    }
    catalogue::check_requirements(spec, args)?;
    let args = Args::new(spec.name, args);
    match spec.run {
        catalogue::Run::Now(run) => run(&args, ctx),
        catalogue::Run::Later(run) => run(&args, ctx).await,
    }
}
