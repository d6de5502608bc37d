//! The command line: parsing, and dispatch to the layer that does the work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// enka: runs Ansible-operator projects in-process.
#[derive(Debug, Parser)]
#[command(name = "enka", version, about, long_about = None)]
pub struct Cli {
    /// Log filter, in `tracing_subscriber::EnvFilter` syntax (also `RUST_LOG`).
    #[arg(long, global = true, env = "ENKA_LOG", default_value = "info")]
    pub log: String,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load every watch, role and template and report all problems with
    /// file:line:column; exit 1 on any error.
    Check(CheckArgs),
}

/// `enka check` flags.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Path to the watches file.
    #[arg(long, env = "WATCHES_FILE", default_value = "./watches.yaml")]
    pub watches_file: PathBuf,
    /// Extra directories to find roles in (colon-separated, like ANSIBLE_ROLES_PATH).
    #[arg(long, value_delimiter = ':')]
    pub ansible_roles_path: Vec<PathBuf>,
    /// Extra directories to find collections in.
    #[arg(long, value_delimiter = ':')]
    pub ansible_collections_path: Vec<PathBuf>,
}

impl Cli {
    /// Runs the chosen subcommand.
    pub fn run(self) -> ExitCode {
        match self.command {
            Some(Command::Check(args)) => {
                let report = crate::check::check(&crate::check::CheckOptions {
                    watches_file: args.watches_file,
                    roles_path: args.ansible_roles_path,
                    collections_path: args.ansible_collections_path,
                });
                for diagnostic in &report.diagnostics.0 {
                    eprintln!("{}\n", diagnostic.render());
                }
                println!("{}", report.summary);
                if report.ok() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
            None => {
                use clap::CommandFactory;
                let _ = Cli::command().print_help();
                ExitCode::from(2)
            }
        }
    }
}
