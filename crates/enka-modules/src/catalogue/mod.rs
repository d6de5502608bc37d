//! What a task may name: the modules enka runs natively, with their names,
//! aliases, arguments and code ([`MODULES`]: each module's file defines its
//! own entry), and the actions it hands to Ansible ([`AnsibleAction`]). Role loading resolves each task's action to a
//! [`ModuleRef`] against this catalogue; the modules layer implements what
//! it lists; the engine runs a `ModuleRef` without knowing which way.

mod action;
mod module_ref;
pub mod modules;

pub use action::AnsibleAction;
pub use module_ref::ModuleRef;
pub use modules::{
    Answer, FreeForm, MODULES, ModuleSpec, Requirement, Run, check_requirements, lookup,
    unsupported, validate_args,
};
pub(crate) use modules::{BUILTIN, KUBERNETES, OPERATOR_SDK};
