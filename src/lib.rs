//! enka runs Kubernetes operators written as Ansible-operator projects
//! (`watches.yaml` plus roles) in-process: it reads the same files as
//! upstream `ansible-operator`, renders their templates with minijinja and
//! executes their tasks without spawning Ansible, so a reconcile costs
//! milliseconds instead of seconds.
//!
//! The crate is split by concern, and each layer depends only on the ones
//! listed before it (see `docs/ARCHITECTURE.md`).

#![forbid(unsafe_code)]

/// Ansible's task semantics, a crate of its own (`crates/enka-engine`).
pub use enka_engine as engine;
/// The Kubernetes API as modules see it, a crate of its own (`crates/enka-kube`).
pub use enka_kube as kube;
/// What runs a task's action, native or bridged, a crate of its own
/// (`crates/enka-modules`).
pub use enka_modules as modules;
/// The module catalogue (part of `enka-modules`).
pub use enka_modules::catalogue;
/// The operator, a crate of its own (`crates/enka-operator`).
pub use enka_operator as operator;
/// What `enka version` prints (part of `enka-operator`, whose metrics report it).
pub use enka_operator::version;
/// The project as loaded (watches, roles, inventories, the module
/// catalogue), a crate of its own (`crates/enka-project`).
pub use enka_project::{inventory, paramconv, role, vars, watches};
/// Ansible's Jinja on minijinja, a crate of its own (`crates/enka-template`).
pub use enka_template as template;
/// Ansible's `key=value` argument splitting (part of `enka-template`).
pub use enka_template::freeform;
/// Ansible's seconds, Go's durations and Kubernetes' timestamps (part of `enka-template`).
pub use enka_template::time;
/// The Ansible worker, a crate of its own (`crates/enka-worker`): it needs
/// nothing of the rest.
pub use enka_worker as worker;
/// YAML 1.1 with positions, a crate of its own (`crates/enka-yaml`).
pub use enka_yaml as yaml;

pub mod check;
pub mod cli;
#[doc(hidden)]
pub mod evaluate;
pub mod fuzz;
pub mod logging;
pub mod migration;
pub mod molecule;
pub mod playbook;
pub mod semantics;
pub mod telemetry;
