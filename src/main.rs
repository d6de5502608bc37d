use std::process::ExitCode;

use clap::Parser;
use enka::cli::Cli;

// Reconciles allocate many small, short-lived values (template values, JSON
// from the API); mimalloc cuts the engine's time per reconcile by about a
// quarter against glibc's allocator (see benches/engine.rs). Built without
// transparent huge pages: they made an idle enka resident in 2 MiB steps
// (9 MiB of heap instead of under 2).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    Cli::parse().run()
}
