//! The command line: parsing only; each subcommand lives with its layer.

use clap::Parser;

/// enka: runs Ansible-operator projects in-process.
#[derive(Debug, Parser)]
#[command(name = "enka", version, about, long_about = None)]
pub struct Cli {
    /// Log filter, in `tracing_subscriber::EnvFilter` syntax (also `RUST_LOG`).
    #[arg(long, global = true, env = "ENKA_LOG", default_value = "info")]
    pub log: String,
}
