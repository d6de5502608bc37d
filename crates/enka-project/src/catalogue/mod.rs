//! What a task may name: the modules enka runs natively, with their names,
//! aliases and arguments ([`modules`]), and the actions it hands to Ansible
//! ([`AnsibleAction`]). Role loading resolves each task's action to a
//! [`ModuleRef`] against this catalogue; the modules layer implements what
//! it lists; the engine runs a `ModuleRef` without knowing which way.

mod action;
mod module_ref;
pub mod modules;

pub use action::AnsibleAction;
pub use module_ref::ModuleRef;
pub use modules::validate_args;
