use std::process::ExitCode;

use clap::Parser;
use enka::cli::Cli;
use tracing_subscriber::EnvFilter;

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
