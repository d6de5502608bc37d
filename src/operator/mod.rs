//! The operator: one controller per watch, the variables of each run, status
//! conditions and finalizers.

pub mod paramconv;
pub mod vars;
