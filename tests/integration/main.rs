//! The one integration-test binary. Every test here talks to a real
//! kube-apiserver + etcd (and kube-controller-manager) that the `kube-env`
//! harness builds from Go modules and starts on 127.0.0.1. Tests share one
//! control plane per run and isolate themselves by namespace.

mod support;

mod bridged;
#[path = "../bridged/compare.rs"]
mod bridged_compare;
mod cached_reads;
mod check;
mod cli;
mod control_plane;
mod deploy;
mod diff;
pub mod enka;
mod molecule;
mod nodes;
mod refusals;
mod runtime;
mod scaffold;
mod traces;
pub mod zundoko;
