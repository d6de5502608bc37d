//! An Ansible-operator project as enka loads it, before anything runs.
//!
//! [`watches`] reads `watches.yaml` with upstream's fields and defaults;
//! [`role`] loads each role or playbook it names into validated tasks, with
//! every template compiled once and diagnostics at `file:line:column`;
//! [`inventory`] holds the hosts a playbook runs over; [`vars`] makes a
//! watched object into a run's variables as upstream's reconciler does.
//!
//! It stands on `enka-modules` (whose catalogue says what a task's action
//! may be), `enka-template`, `enka-yaml` and `enka-worker` (names enka has no
//! code for are resolved by Ansible once, at load); the engine and the
//! operator stand on it.

#![forbid(unsafe_code)]

pub mod ansible_config;
pub mod inventory;
pub mod paramconv;
pub mod role;
pub mod vars;
pub mod watches;
