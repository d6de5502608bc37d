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
    /// Run the operator: one controller per watch, against the cluster of
    /// the current kubeconfig (or in-cluster).
    Run(Box<RunArgs>),
}

/// `enka run` flags, named as upstream's `ansible-operator run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Path to the watches file.
    #[arg(long, env = "WATCHES_FILE", default_value = "./watches.yaml")]
    pub watches_file: PathBuf,
    /// Default period after which an unchanged object is reconciled again (Go duration).
    #[arg(long, default_value = "10h", value_parser = parse_duration)]
    pub reconcile_period: std::time::Duration,
    /// Reconciles in flight per watch (default: the number of CPUs).
    #[arg(long)]
    pub max_concurrent_reconciles: Option<u16>,
    /// Add owner references (or primary-resource annotations) to created objects.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub inject_owner_ref: bool,
    /// Ansible verbosity (0-7); debug tasks above it are skipped.
    #[arg(long, default_value_t = 2)]
    pub ansible_verbosity: u8,
    /// Extra directories to find roles in (colon-separated).
    #[arg(long, value_delimiter = ':')]
    pub ansible_roles_path: Vec<PathBuf>,
    /// Extra directories to find collections in (colon-separated).
    #[arg(long, value_delimiter = ':')]
    pub ansible_collections_path: Vec<PathBuf>,
    /// Address of the Prometheus /metrics endpoint (`0` disables it).
    #[arg(long, default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Address of the /healthz and /readyz endpoints (`0` disables them).
    #[arg(long, default_value = ":6789")]
    pub health_probe_bind_address: String,
    /// Run controllers only while holding a Lease, so one of several replicas acts.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "enka-leader-election")]
    pub leader_election_id: String,
    /// Namespace of the Lease (default: the pod's own namespace).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// How long a Lease holds after its last renewal (enka).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: std::time::Duration,
    /// How long the leader may fail to renew before it stops (enka).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: std::time::Duration,
    /// How often to try to acquire or renew the Lease (enka).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: std::time::Duration,
    /// Longest a single reconcile may take before it fails (enka).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub reconcile_timeout: std::time::Duration,
    /// How long reconciles in flight may finish after SIGTERM before enka exits.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub graceful_shutdown_timeout: std::time::Duration,
    /// Seed for `random` and `shuffle`, to reproduce a run (enka).
    #[arg(long, env = "ENKA_RANDOM_SEED")]
    pub random_seed: Option<u64>,
    /// Accepted for compatibility with earlier enka releases: `lookup('pipe')`
    /// runs commands as in Ansible, like `command` tasks through the worker.
    #[arg(long, hide = true)]
    pub allow_commands: bool,
    /// Refuse to start a project that has tasks or plugins only Ansible can
    /// run, so the operator needs no Python (enka).
    #[arg(long)]
    pub native_only: bool,
    /// The Python interpreter with ansible-core 2.18 that runs what enka has
    /// no native code for (enka).
    /// Default: the virtualenv `make` installs under ~/.cache/enka, else
    /// `python3`.
    #[arg(long, env = crate::worker::PYTHON_ENV)]
    pub ansible_python: Option<PathBuf>,
    /// Arguments upstream passes to ansible-runner; enka uses the Vault ones
    /// (`--vault-password-file`, `--vault-id`) and says which it ignores.
    #[arg(long)]
    pub ansible_args: Option<String>,
    /// Accepted for compatibility; enka has no proxy.
    #[arg(long, hide = true)]
    pub proxy_port: Option<u16>,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    crate::watches::parse_go_duration(text)
        .ok_or_else(|| format!("invalid duration {text:?} (use Go syntax such as 30s, 5m, 10h)"))
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
    /// Upstream's ansible-runner arguments; the Vault ones decrypt Vault
    /// data while checking, as `enka run` would.
    #[arg(long)]
    pub ansible_args: Option<String>,
}

impl Cli {
    /// Runs the chosen subcommand.
    pub fn run(self) -> ExitCode {
        match self.command {
            Some(Command::Check(args)) => {
                let mut ansible = crate::worker::Config::from_env();
                ansible.take_ansible_args(args.ansible_args.as_deref().unwrap_or_default());
                let report = crate::check::check(&crate::check::CheckOptions {
                    watches_file: args.watches_file,
                    roles_path: args.ansible_roles_path,
                    collections_path: args.ansible_collections_path,
                    ansible,
                });
                for diagnostic in &report.diagnostics.0 {
                    eprintln!("{}\n", diagnostic.render());
                }
                for watch in &report.watches {
                    println!("{}", watch.render());
                }
                for (location, plugin) in &report.python_plugins {
                    println!("{location}: {plugin} runs through Ansible (not in enka)");
                }
                println!("{}", report.summary);
                if report.ok() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
            Some(Command::Run(args)) => {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        eprintln!("enka: cannot start the async runtime: {err}");
                        return ExitCode::FAILURE;
                    }
                };
                match runtime.block_on(run(*args)) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(err) => {
                        tracing::error!("{err:#}");
                        eprintln!("enka: {err:#}");
                        ExitCode::FAILURE
                    }
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

async fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.proxy_port.is_some() {
        tracing::warn!(
            "--proxy-port has no effect: enka talks to the API server directly, without a proxy"
        );
    }
    let namespaces: Vec<String> = std::env::var("WATCH_NAMESPACE")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let client = kube::Client::try_default().await.map_err(|e| {
        anyhow::anyhow!("cannot connect to Kubernetes (kubeconfig or in-cluster): {e}")
    })?;
    let leader_election = if args.leader_elect {
        let namespace = match args.leader_election_namespace {
            Some(ns) => ns,
            None => {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .map(|ns| ns.trim().to_owned())
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "--leader-elect outside a cluster needs --leader-election-namespace"
                        )
                    })?
            }
        };
        Some(crate::operator::leader::ElectionConfig {
            lease_name: args.leader_election_id,
            namespace,
            identity: crate::operator::leader::identity(),
            lease_duration: args.leader_election_lease_duration,
            renew_deadline: args.leader_election_renew_deadline,
            retry_period: args.leader_election_retry_period,
        })
    } else {
        None
    };
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let max_concurrent_reconciles = args
        .max_concurrent_reconciles
        .filter(|n| *n > 0)
        .unwrap_or(u16::try_from(cpus).unwrap_or(1));
    // One worker process per reconcile that may run at once, so concurrent
    // reconciles never queue behind one slow bridged task.
    let ansible = (!args.native_only).then(|| {
        let mut config = crate::worker::Config {
            python: args
                .ansible_python
                .clone()
                .unwrap_or_else(crate::worker::default_python),
            size: usize::from(max_concurrent_reconciles),
            verbosity: args.ansible_verbosity.min(7),
            ..crate::worker::Config::from_env()
        };
        let ignored = config.take_ansible_args(args.ansible_args.as_deref().unwrap_or_default());
        if !ignored.is_empty() {
            tracing::warn!(
                "--ansible-args: {} has no effect (enka runs no ansible-runner; Vault options are used)",
                ignored.join(" ")
            );
        }
        config
    });
    let options = crate::operator::OperatorOptions {
        watches_file: args.watches_file,
        reconcile_period: args.reconcile_period,
        max_concurrent_reconciles,
        reconcile_timeout: args.reconcile_timeout,
        graceful_shutdown_timeout: args.graceful_shutdown_timeout,
        roles_path: args.ansible_roles_path,
        collections_path: args.ansible_collections_path,
        verbosity: args.ansible_verbosity.min(7),
        namespaces,
        inject_owner_ref: args.inject_owner_ref,
        leader_election,
        metrics_address: crate::operator::metrics::parse_bind(&args.metrics_bind_address)
            .map_err(anyhow::Error::msg)?,
        health_address: crate::operator::metrics::parse_bind(&args.health_probe_bind_address)
            .map_err(anyhow::Error::msg)?,
        templates: crate::template::Options {
            seed: args.random_seed,
            allow_pipe: true,
            fuel: None,
        },
        ansible,
    };
    crate::operator::run(options, client).await
}
