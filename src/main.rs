use std::process::ExitCode;

use clap::Parser;
use enka::cli::Cli;
use tracing_subscriber::EnvFilter;

// Reconciles allocate many small, short-lived values (template values, JSON
// from the API); mimalloc cuts the engine's time per reconcile by about a
// quarter against glibc's allocator (see benches/engine.rs). Built without
// transparent huge pages: they made an idle enka resident in 2 MiB steps
// (9 MiB of heap instead of under 2).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&cli.log)),
        )
        .with_writer(std::io::stderr)
        .init();
    cli.run()
}
