//! The command line: parsing, and dispatch to the layer that does the work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod tools;

/// enka: runs Ansible-operator projects in-process.
#[derive(Debug, Parser)]
#[command(name = "enka", version, about, long_about = None)]
pub struct Cli {
    /// Log filter, in `tracing_subscriber::EnvFilter` syntax (also
    /// `RUST_LOG`); wins over `--zap-log-level`.
    #[arg(long, global = true, env = "ENKA_LOG")]
    pub log: Option<String>,

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
    /// Print the version, commit and build platform, as `ansible-operator
    /// version` does.
    Version,
    /// Render a template, a condition or a template file with the variables
    /// a task would see for a custom resource, and print the value with the
    /// type Ansible gives it. Exit 1 when the template fails, 2 on bad input.
    Template(TemplateArgs),
    /// Run playbooks on localhost with enka's engine, as `ansible-playbook`
    /// does (its output, its exit codes): try a role without a cluster.
    Playbook(PlaybookArgs),
    /// Show what one reconcile of a custom resource would change, as a
    /// unified diff per object, without changing anything (every write a
    /// server-side dry run). Exit 0: no change; 1: changes; 2: error.
    Diff(DiffArgs),
    /// Run the project's molecule test tasks (molecule/<scenario>/tasks/
    /// *_test.yml) against the current kubeconfig's cluster, the operator
    /// running in this process on a fresh namespace: no molecule, kind or
    /// image build. Exit 0 when every test file passes, 1 when one fails.
    Test(TestArgs),
}

/// `enka test` flags.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Only test files whose name contains one of these (`memcached`).
    pub filters: Vec<String>,
    /// The molecule scenario.
    #[arg(long, default_value = "default")]
    pub scenario: String,
    /// Path to the watches file (the project is its directory).
    #[arg(long, env = "WATCHES_FILE", default_value = "./watches.yaml")]
    pub watches_file: PathBuf,
    /// Leave the test namespace for a look afterwards.
    #[arg(long)]
    pub keep_namespace: bool,
    /// More output per task (as ansible-playbook's -v).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(flatten)]
    pub semantics: crate::semantics::SemanticsArgs,
    #[command(flatten)]
    pub migration: crate::migration::MigrationArgs,
}

/// `enka diff` flags.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A custom resource manifest: the live object with its fields over it,
    /// or it as created when none is live.
    #[arg(
        long,
        short = 'f',
        required_unless_present = "name",
        conflicts_with = "name"
    )]
    pub file: Option<PathBuf>,
    /// The name of a live custom resource.
    #[arg(long)]
    pub name: Option<String>,
    /// Its namespace (default: the kubeconfig's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Its kind, when the watches file watches more than one.
    #[arg(long)]
    pub kind: Option<String>,
    /// The project.
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Longest the reconcile may take.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub reconcile_timeout: std::time::Duration,
    /// `text` (unified diffs) or `json`.
    #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
    pub output: String,
    #[command(flatten)]
    pub semantics: crate::semantics::SemanticsArgs,
    #[command(flatten)]
    pub migration: crate::migration::MigrationArgs,
}

/// `enka playbook` flags: the `ansible-playbook` ones enka can honour.
#[derive(Debug, Args)]
pub struct PlaybookArgs {
    /// The playbooks, run in order.
    #[arg(required = true)]
    pub playbooks: Vec<PathBuf>,
    /// Inventory file, directory or host list; repeat for more.
    #[arg(short = 'i', long = "inventory", alias = "inventory-file")]
    pub inventory: Vec<PathBuf>,
    /// Extra vars: `key=value …`, YAML/JSON, or `@file`; repeat for more.
    #[arg(short = 'e', long = "extra-vars")]
    pub extra_vars: Vec<String>,
    /// More output (`-vvv`).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only tasks with these tags (comma lists allowed).
    #[arg(short = 't', long = "tags")]
    pub tags: Vec<String>,
    /// Not tasks with these tags.
    #[arg(long = "skip-tags")]
    pub skip_tags: Vec<String>,
    /// Only these hosts: a host pattern (`web:&prod`, `@file` of host
    /// names), applied to every play's `hosts`.
    #[arg(short = 'l', long = "limit", env = "ANSIBLE_LIMIT")]
    pub limit: Option<String>,
    /// Vault password file.
    #[arg(long = "vault-password-file", alias = "vault-pass-file")]
    pub vault_password_files: Vec<PathBuf>,
    /// Vault identity (`label@source`).
    #[arg(long = "vault-id")]
    pub vault_ids: Vec<String>,
    /// The connection of hosts that name none (Ansible's default: `ssh`,
    /// `local` for localhost). enka reaches hosts over `local` only; others
    /// are unreachable.
    #[arg(short = 'c', long = "connection")]
    pub connection: Option<String>,
    /// How many hosts of a play run a task at once (default 5).
    #[arg(short = 'f', long = "forks")]
    pub forks: Option<u32>,
    /// Clear the fact cache; enka keeps no facts between runs, so there is
    /// nothing to clear.
    #[arg(long = "flush-cache")]
    pub flush_cache: bool,
    /// Check mode: Ansible's modules only report what they would change
    /// (enka's cluster writes then run as kubernetes.core's modules do).
    #[arg(short = 'C', long = "check")]
    pub check: bool,
    /// Diff mode: actions that change files or objects report before and
    /// after.
    #[arg(short = 'D', long = "diff")]
    pub diff: bool,
    /// Start at the first task whose name matches this (fnmatch) pattern.
    #[arg(long = "start-at-task")]
    pub start_at_task: Option<String>,
    /// Run the handlers a host notified even when it fails (every play's
    /// `force_handlers`).
    #[arg(long = "force-handlers", env = "ANSIBLE_FORCE_HANDLERS", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub force_handlers: bool,
    /// List the tasks each play would run (with their tags), not run them.
    #[arg(long = "list-tasks")]
    pub list_tasks: bool,
    /// List the tags of each play's tasks, not run them.
    #[arg(long = "list-tags")]
    pub list_tags: bool,
    /// List the hosts each play would run on, not run them.
    #[arg(long = "list-hosts")]
    pub list_hosts: bool,
    /// Append each task's result to this file as a JSON line.
    #[arg(long, env = "ENKA_PLAYBOOK_EVENTS")]
    pub events_file: Option<PathBuf>,
    #[command(flatten)]
    pub semantics: crate::semantics::SemanticsArgs,
    #[command(flatten)]
    pub migration: crate::migration::MigrationArgs,
}

/// `enka template` flags.
#[derive(Debug, Args)]
pub struct TemplateArgs {
    /// The template, as in a task's argument: '{{ size | int }}'.
    #[arg(required_unless_present_any = ["when", "file"], conflicts_with_all = ["when", "file"])]
    pub template: Option<String>,
    /// A bare condition, as in `when:` (`size | int > 2`).
    #[arg(long, conflicts_with = "file")]
    pub when: Option<String>,
    /// A template file, rendered as `lookup('template', FILE)` renders it.
    #[arg(long, short = 'f')]
    pub file: Option<PathBuf>,
    /// A custom resource (YAML or JSON): its run's variables (snake-cased
    /// spec, `ansible_operator_meta`, `_<group>_<kind>`, …).
    #[arg(long)]
    pub cr: Option<PathBuf>,
    /// A YAML file of variables; repeat for more (later ones win, the
    /// custom resource's win over all).
    #[arg(long = "vars")]
    pub vars_files: Vec<PathBuf>,
    /// The watches file, for the custom resource's watch.
    #[arg(long, env = "WATCHES_FILE", default_value = "./watches.yaml")]
    pub watches_file: PathBuf,
    /// `text` (`<type>: <value as JSON>`) or `json` (`{"type": …, "value": …}`).
    #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
    pub output: String,
    #[command(flatten)]
    pub semantics: crate::semantics::SemanticsArgs,
}

/// `enka run` flags: upstream's `ansible-operator run` flags with their
/// meanings (deprecated spellings included), then enka's own.
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
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub inject_owner_ref: bool,
    /// Ansible verbosity (0-7); debug tasks above it are skipped.
    #[arg(long, default_value_t = 2)]
    pub ansible_verbosity: u8,
    /// Extra directories to find roles in (colon-separated; sets ANSIBLE_ROLES_PATH).
    #[arg(long, value_delimiter = ':')]
    pub ansible_roles_path: Vec<PathBuf>,
    /// Extra directories to find collections in (colon-separated; sets ANSIBLE_COLLECTIONS_PATH).
    #[arg(long, value_delimiter = ':')]
    pub ansible_collections_path: Vec<PathBuf>,
    /// Arguments upstream passes to ansible-runner; enka uses the Vault ones
    /// (`--vault-password-file`, `--vault-id`) and says which it ignores.
    #[arg(long)]
    pub ansible_args: Option<String>,
    /// Which Ansible events are logged: Tasks (task starts, debug output,
    /// failures), Everything (every task result) or Nothing.
    #[arg(long, default_value = "tasks")]
    pub ansible_log_events: String,
    /// Address of the Prometheus /metrics endpoint (`0` disables it).
    /// Default `:8443`.
    #[arg(long)]
    pub metrics_bind_address: Option<String>,
    /// Deprecated spelling of --metrics-bind-address.
    #[arg(long, hide = true)]
    pub metrics_addr: Option<String>,
    /// Serve /metrics over HTTPS (a self-signed certificate, as
    /// controller-runtime makes when none is given).
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub metrics_secure: bool,
    /// Allow /metrics only to callers whose bearer token the API server
    /// authenticates (TokenReview) and authorizes for `get` on the
    /// non-resource URL /metrics (SubjectAccessReview). Needs --metrics-secure.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub metrics_require_rbac: bool,
    /// Directory with `tls.crt` and `tls.key` for the metrics endpoint
    /// (controller-runtime's CertDir; enka). Default: a self-signed one.
    #[arg(long)]
    pub metrics_cert_dir: Option<PathBuf>,
    /// Enable HTTP/2 on the metrics server; off by default upstream (HTTP/2
    /// rapid-reset). enka serves HTTP/1.1 either way.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub enable_http2: bool,
    /// Address of the /healthz and /readyz endpoints (`0` disables them).
    #[arg(long, default_value = ":6789")]
    pub health_probe_bind_address: String,
    /// Run controllers only while holding a Lease, so one of several replicas acts.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub leader_elect: Option<bool>,
    /// Deprecated spelling of --leader-elect.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub enable_leader_election: Option<bool>,
    /// Name of the leader-election Lease (default: $OPERATOR_NAME, as
    /// upstream; required with --leader-elect).
    #[arg(long)]
    pub leader_election_id: Option<String>,
    /// Namespace of the Lease (default: the pod's own namespace, or outside
    /// a cluster the kubeconfig context's).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Accepted as upstream does: only Leases are used.
    #[arg(long, hide = true)]
    pub leader_elect_resource_lock: Option<String>,
    /// How long a Lease holds after its last renewal.
    #[arg(long, alias = "leader-election-lease-duration", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: std::time::Duration,
    /// How long the leader may fail to renew before it stops.
    #[arg(long, alias = "leader-election-renew-deadline", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: std::time::Duration,
    /// How often to try to acquire or renew the Lease (enka).
    #[arg(long, alias = "leader-elect-retry-period", default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: std::time::Duration,
    /// Run as a shard of this ControllerRing of timebertt's sharder (enka):
    /// hold a shard Lease of its own instead of leader election, and
    /// reconcile only the objects the sharder assigns to this replica.
    #[arg(long, env = "ENKA_SHARDING_RING")]
    pub sharding_ring: Option<String>,
    /// The shard's name with --sharding-ring: its Lease's name and holder
    /// (default: $POD_NAME, else the host name).
    #[arg(long, env = "ENKA_SHARD_NAME")]
    pub shard_name: Option<String>,
    /// How long reconciles in flight may finish after SIGTERM before enka exits.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub graceful_shutdown_timeout: std::time::Duration,
    /// Accepted for compatibility; enka has no proxy (roles reach the API
    /// server through enka's own client).
    #[arg(long)]
    pub proxy_port: Option<u16>,
    /// Log text for humans at debug level (controller-runtime's development mode).
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub zap_devel: bool,
    /// Log encoding: json or console.
    #[arg(long, value_enum, ignore_case = true)]
    pub zap_encoder: Option<crate::logging::Encoder>,
    /// Log level: debug, info, error, panic, or an integer > 0 for logr's
    /// verbosity levels.
    #[arg(long)]
    pub zap_log_level: Option<crate::logging::ZapLevel>,
    /// Level from which zap adds stack traces: info, error or panic. enka's
    /// logs carry no stack traces; the value is checked and has no effect.
    #[arg(long, value_parser = ["info", "error", "panic"], ignore_case = true)]
    pub zap_stacktrace_level: Option<String>,
    /// Time encoding: epoch, millis, nano, iso8601, rfc3339 or rfc3339nano.
    #[arg(long, value_enum, ignore_case = true)]
    pub zap_time_encoding: Option<crate::logging::TimeEncoding>,
    /// Longest a single reconcile may take before it fails (enka); no limit
    /// unless given, as upstream never cuts a run.
    #[arg(long, value_parser = parse_duration)]
    pub reconcile_timeout: Option<std::time::Duration>,
    /// Seed for `random` and `shuffle`, to reproduce a run (enka).
    #[arg(long, env = "ENKA_RANDOM_SEED")]
    pub random_seed: Option<u64>,
    /// Send each reconcile's trace (its tasks and their API calls) to this
    /// OTLP/HTTP collector, e.g. `http://localhost:4318` (enka).
    #[arg(long, env = "ENKA_TRACE_OTLP_ENDPOINT")]
    pub trace_otlp_endpoint: Option<String>,
    /// Accepted for compatibility with earlier enka releases: `lookup('pipe')`
    /// runs commands as in Ansible, like `command` tasks through the worker.
    #[arg(long, hide = true, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub allow_commands: bool,
    /// Refuse to start a project that has tasks or plugins only Ansible can
    /// run, so the operator needs no Python (enka).
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub native_only: bool,
    /// The Python interpreter with ansible-core 2.18 that runs what enka has
    /// no native code for (enka).
    /// Default: the virtualenv `make` installs under ~/.cache/enka, else
    /// `python3`.
    #[arg(long, env = crate::worker::PYTHON_ENV)]
    pub ansible_python: Option<PathBuf>,
    /// How long an Ansible worker process may stay idle before it exits
    /// (the next bridged task starts one); 0 keeps them (enka).
    #[arg(long, env = "ENKA_ANSIBLE_WORKER_IDLE_EXIT", default_value = "60s", value_parser = parse_duration)]
    pub ansible_worker_idle_exit: std::time::Duration,
    /// The data (heap) each Ansible worker process may hold, with the
    /// modules it forks; a task past it fails alone: `auto` (the workers
    /// share three quarters of the container's memory limit; 1Gi each
    /// outside one), a quantity such as `256Mi`, or 0 for none (enka).
    #[arg(long, env = "ENKA_ANSIBLE_WORKER_MEMORY_LIMIT", default_value = "auto")]
    pub ansible_worker_memory_limit: String,
    /// What one reconcile may keep (registered results, facts) and each of
    /// its templates hold while rendering: a quantity such as `16Mi`, or 0
    /// for none. Past it the task fails alone, naming its template (enka).
    #[arg(long, env = "ENKA_RECONCILE_MEMORY_BUDGET", default_value = "16Mi", value_parser = parse_memory)]
    pub reconcile_memory_budget: usize,
    #[command(flatten)]
    pub semantics: crate::semantics::SemanticsArgs,
    #[command(flatten)]
    pub migration: crate::migration::MigrationArgs,
}

/// Go's `strconv.ParseBool`, which pflag uses for `--flag=value`.
fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("invalid boolean {text:?} (use true or false)")),
    }
}

/// The name enka was started as: `ansible-operator` when the image's
/// upstream-named link runs it.
fn invoked_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|arg0| {
            std::path::Path::new(&arg0)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "enka".to_owned())
}

/// A memory quantity (`32Mi`, `64M`, bytes) for clap.
fn parse_memory(text: &str) -> Result<usize, String> {
    crate::worker::memory::quantity(text.trim())
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(|| format!("{text:?} is not a memory quantity (such as 32Mi, or 0 for none)"))
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    crate::watches::parse_go_duration(text)
        .ok_or_else(|| format!("invalid duration {text:?} (use Go syntax such as 30s, 5m, 10h)"))
}

/// `enka check` flags.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The project.
    #[command(flatten)]
    pub project: ProjectArgs,
}

/// Where a project is and how Ansible reads it: `check`'s and `diff`'s.
#[derive(Debug, Args)]
pub struct ProjectArgs {
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
    /// data, as `enka run` would.
    #[arg(long)]
    pub ansible_args: Option<String>,
}

impl ProjectArgs {
    /// The Ansible worker's configuration, with the Vault arguments.
    fn ansible(&self) -> crate::worker::Config {
        let mut ansible = crate::worker::Config::from_env();
        ansible.take_ansible_args(self.ansible_args.as_deref().unwrap_or_default());
        ansible
    }
}

impl Cli {
    /// How to log: zap's JSON for `run` (as upstream), text otherwise.
    pub fn log_options(&self) -> crate::logging::LogOptions {
        let mut options = crate::logging::LogOptions {
            filter: self.log.clone(),
            encoder: Some(crate::logging::Encoder::Console),
            ..Default::default()
        };
        // `enka test` prints the tests' results; the in-process operator
        // speaks only of trouble.
        if let Some(Command::Test(_)) = &self.command {
            options.level = Some(crate::logging::ZapLevel::Warn);
        }
        // `enka playbook` keeps stderr for Ansible's warnings and errors,
        // as ansible-playbook does: its printer says what failed.
        if let Some(Command::Playbook(_)) = &self.command {
            options.level = Some(crate::logging::ZapLevel::Error);
        }
        if let Some(Command::Run(args)) = &self.command {
            options.devel = args.zap_devel;
            options.encoder = args.zap_encoder;
            options.level = args.zap_log_level;
            options.time_encoding = args.zap_time_encoding;
        }
        options
    }

    /// Runs the chosen subcommand.
    pub fn run(self) -> ExitCode {
        let logs = self.log_options();
        // `enka run` installs its subscriber once its runtime is up (the
        // trace exporter needs one).
        if !matches!(self.command, Some(Command::Run(_))) {
            logs.init(None);
        }
        match self.command {
            Some(Command::Check(args)) => tools::check(args),
            Some(Command::Run(args)) => run_operator(*args, logs),
            Some(Command::Version) => {
                println!("{}", crate::version::line(&invoked_name()));
                ExitCode::SUCCESS
            }
            Some(Command::Template(args)) => tools::template(args),
            Some(Command::Playbook(args)) => tools::playbook(args),
            Some(Command::Diff(args)) => tools::diff(args),
            Some(Command::Test(args)) => tools::test(args),
            None => {
                use clap::CommandFactory;
                let _ = Cli::command().print_help();
                ExitCode::from(2)
            }
        }
    }
}

/// `enka run`: the operator on a multi-threaded runtime, with the trace
/// exporter on it when asked, and the log subscriber installed once it is.
fn run_operator(args: RunArgs, logs: crate::logging::LogOptions) -> ExitCode {
    let Some(runtime) = multi_thread_runtime() else {
        return ExitCode::FAILURE;
    };
    // The trace exporter runs on this runtime.
    let traces = match &args.trace_otlp_endpoint {
        Some(endpoint) => {
            let _entered = runtime.enter();
            match crate::telemetry::otlp_provider(endpoint) {
                Ok(provider) => Some(provider),
                Err(err) => {
                    eprintln!("enka: {err}");
                    return ExitCode::from(2);
                }
            }
        }
        None => None,
    };
    logs.init(traces.as_ref());
    let code = match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("enka: {err:#}");
            ExitCode::FAILURE
        }
    };
    // Sends what is still queued while the runtime still runs.
    if let Some(provider) = traces
        && let Err(err) = provider.shutdown()
    {
        eprintln!("enka: sending the last traces: {err}");
    }
    code
}

/// Tokio's multi-threaded runtime; `None` (said on stderr) when it cannot
/// start.
fn multi_thread_runtime() -> Option<tokio::runtime::Runtime> {
    // A role's includes nest (up to the engine's include depth), each level
    // a few polls deeper: room for that on every worker thread, which
    // costs only the stack a run touches.
    const WORKER_STACK: usize = 8 * 1024 * 1024;
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK)
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(err) => {
            eprintln!("enka: cannot start the async runtime: {err}");
            None
        }
    }
}

/// Upstream's checks of flag combinations, before anything starts.
fn validate(args: &RunArgs) -> anyhow::Result<()> {
    if args.metrics_require_rbac && !args.metrics_secure {
        anyhow::bail!("--metrics-secure flag is required when --metrics-require-rbac is present");
    }
    if args.leader_elect.is_some() && args.enable_leader_election.is_some() {
        anyhow::bail!("only one of --leader-elect and --enable-leader-election may be set");
    }
    if args.metrics_addr.is_some() && args.metrics_bind_address.is_some() {
        anyhow::bail!("only one of --metrics-addr and --metrics-bind-address may be set");
    }
    Ok(())
}

/// What enka accepts for compatibility but does differently, said once.
fn warn_inert_flags(args: &RunArgs) {
    if args.proxy_port.is_some() {
        tracing::warn!(
            "--proxy-port has no effect: enka talks to the API server directly, without a proxy"
        );
    }
    if args.enable_leader_election.is_some() {
        tracing::warn!("--enable-leader-election is deprecated; use --leader-elect");
    }
    if args.metrics_addr.is_some() {
        tracing::warn!("--metrics-addr is deprecated; use --metrics-bind-address");
    }
    if let Some(lock) = &args.leader_elect_resource_lock {
        tracing::warn!(
            "--leader-elect-resource-lock={lock} has no effect: leader election uses a Lease, as upstream now does"
        );
    }
    if args.enable_http2 {
        tracing::warn!("--enable-http2 has no effect: enka serves metrics over HTTP/1.1");
    }
    if args.zap_stacktrace_level.is_some() {
        tracing::info!("--zap-stacktrace-level has no effect: enka's logs carry no stack traces");
    }
}

/// `--ansible-log-events`, case-insensitive as upstream; an unknown value
/// is logged and means Tasks. `ANSIBLE_DEBUG_LOGS=true` adds every task's
/// result, as upstream then logs each run's whole output.
fn log_events(args: &RunArgs) -> crate::engine::LogEvents {
    use crate::engine::LogEvents;
    let chosen = match args.ansible_log_events.to_ascii_lowercase().as_str() {
        "everything" => LogEvents::Everything,
        "nothing" => LogEvents::Nothing,
        "tasks" | "" => LogEvents::Tasks,
        other => {
            tracing::error!(
                "--ansible-log-events flag value '{other}' not recognized. Must be one of: Tasks, Everything, Nothing"
            );
            LogEvents::Tasks
        }
    };
    let debug_logs = std::env::var("ANSIBLE_DEBUG_LOGS")
        .ok()
        .and_then(|v| parse_go_bool(v.trim()).ok())
        .unwrap_or(false);
    if debug_logs && chosen == LogEvents::Tasks {
        LogEvents::Everything
    } else {
        chosen
    }
}

/// The Lease name: `--leader-election-id`, else `$OPERATOR_NAME` (deprecated
/// upstream, still read).
fn leader_election_id(args: &RunArgs) -> Option<String> {
    let operator_name = std::env::var("OPERATOR_NAME")
        .ok()
        .filter(|n| !n.is_empty());
    if operator_name.is_some() {
        tracing::info!(
            "Environment variable OPERATOR_NAME has been deprecated, use --leader-election-id instead."
        );
    }
    args.leader_election_id
        .clone()
        .filter(|id| !id.is_empty())
        .or(operator_name)
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    validate(&args)?;
    warn_inert_flags(&args);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = crate::version::COMMIT,
        "Version"
    );
    let namespaces: Vec<String> = std::env::var("WATCH_NAMESPACE")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let config = kube::Config::infer().await.map_err(|e| {
        anyhow::anyhow!("cannot connect to Kubernetes (kubeconfig or in-cluster): {e}")
    })?;
    let leader_elect = args
        .leader_elect
        .or(args.enable_leader_election)
        .unwrap_or(false);
    let sharding = sharding(&args, &config, leader_elect)?;
    let leader_election = if leader_elect && sharding.is_none() {
        Some(leader_election(&args, &config)?)
    } else {
        None
    };
    let metrics_bind = args
        .metrics_bind_address
        .clone()
        .or_else(|| args.metrics_addr.clone())
        .unwrap_or_else(|| ":8443".to_owned());
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let max_concurrent_reconciles = args
        .max_concurrent_reconciles
        .filter(|n| *n > 0)
        .unwrap_or(u16::try_from(cpus).unwrap_or(1));
    let ansible = match args.native_only {
        true => None,
        false => Some(ansible_config(&args, max_concurrent_reconciles)?),
    };
    let (semantics, installed) = run_semantics(&args, ansible.as_ref())?;
    tracing::info!(ansible_semantics = ?semantics, "templating and conditionals follow this ansible-core line");
    let migration = args
        .migration
        .migration_report
        .as_deref()
        .map(crate::migration::Report::to);
    let log_events = log_events(&args);
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
        sharding,
        metrics_address: crate::operator::metrics::parse_bind(&metrics_bind)
            .map_err(anyhow::Error::msg)?,
        metrics_serving: crate::operator::metrics::Serving {
            secure: args.metrics_secure,
            require_rbac: args.metrics_require_rbac,
            cert_dir: args.metrics_cert_dir.clone(),
        },
        log_events,
        health_address: crate::operator::metrics::parse_bind(&args.health_probe_bind_address)
            .map_err(anyhow::Error::msg)?,
        templates: crate::template::Options {
            seed: args.random_seed,
            allow_pipe: true,
            fuel: None,
            memory_budget: Some(args.reconcile_memory_budget),
            semantics,
            migration: migration.as_ref().map(|r| r.recorder.clone()),
            release: installed.release(),
            ansible_core: installed.ansible_core.as_deref().map(std::sync::Arc::from),
            python: installed.python,
        },
        ansible,
    };
    let writer = migration
        .clone()
        .map(crate::migration::Report::keep_written);
    let result = crate::operator::run(options, config).await;
    if let Some(migration) = migration {
        if let Some(writer) = writer {
            writer.abort();
        }
        migration.finish();
    }
    result
}

/// `--sharding-ring`: this replica as a shard of the ring, with the Lease
/// it holds as a shard (`--leader-elect` is not used then).
fn sharding(
    args: &RunArgs,
    config: &kube::Config,
    leader_elect: bool,
) -> anyhow::Result<Option<crate::operator::shard::Sharding>> {
    Ok(match &args.sharding_ring {
        Some(ring) => {
            let name = args
                .shard_name
                .clone()
                .unwrap_or_else(crate::operator::shard::default_name);
            let shard = crate::operator::shard::Shard::new(ring, &name)?;
            if leader_elect {
                tracing::info!(
                    "--leader-elect is not used with --sharding-ring: each shard holds a Lease of its own"
                );
            }
            let lease = crate::operator::leader::ElectionConfig {
                lease_name: shard.name.clone(),
                namespace: args
                    .leader_election_namespace
                    .clone()
                    .unwrap_or_else(|| config.default_namespace.clone()),
                identity: shard.name.clone(),
                lease_duration: args.leader_elect_lease_duration,
                renew_deadline: args.leader_elect_renew_deadline,
                retry_period: args.leader_election_retry_period,
                labels: vec![(
                    crate::operator::shard::RING_LABEL.to_owned(),
                    shard.ring.clone(),
                )],
            };
            lease.validate().map_err(anyhow::Error::msg)?;
            Some(crate::operator::shard::Sharding { shard, lease })
        }
        None => None,
    })
}

/// `--leader-elect`: the one Lease the leader holds.
fn leader_election(
    args: &RunArgs,
    config: &kube::Config,
) -> anyhow::Result<crate::operator::leader::ElectionConfig> {
    let lease_name = leader_election_id(args).ok_or_else(|| {
        anyhow::anyhow!("LeaderElectionID must be configured: set --leader-election-id")
    })?;
    // In a pod the client's default namespace is the pod's own (as
    // upstream); outside one, the kubeconfig context's, where upstream
    // would refuse to start without --leader-election-namespace.
    let namespace = args
        .leader_election_namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let election = crate::operator::leader::ElectionConfig {
        lease_name,
        namespace,
        identity: crate::operator::leader::identity(),
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_election_retry_period,
        labels: Vec::new(),
    };
    election.validate().map_err(anyhow::Error::msg)?;
    Ok(election)
}

/// The semantics `run` follows and what its worker's Python has installed
/// (nothing without a worker, whose semantics default to 2.18's).
fn run_semantics(
    args: &RunArgs,
    ansible: Option<&crate::worker::Config>,
) -> anyhow::Result<(crate::template::Semantics, crate::semantics::Installed)> {
    Ok(match ansible {
        Some(config) => args.semantics.resolve(&config.python)?,
        None => (
            args.semantics.resolve(std::path::Path::new(""))?.0,
            crate::semantics::Installed::default(),
        ),
    })
}

/// The Ansible worker: one process per reconcile that may run at once, so
/// concurrent reconciles never queue behind one slow bridged task.
fn ansible_config(
    args: &RunArgs,
    max_concurrent_reconciles: u16,
) -> anyhow::Result<crate::worker::Config> {
    let mut config = crate::worker::Config {
        python: args
            .ansible_python
            .clone()
            .unwrap_or_else(crate::worker::default_python),
        size: usize::from(max_concurrent_reconciles),
        verbosity: args.ansible_verbosity.min(7),
        idle_exit_after: (!args.ansible_worker_idle_exit.is_zero())
            .then_some(args.ansible_worker_idle_exit),
        memory_limit: crate::worker::memory::limit_for(
            &args.ansible_worker_memory_limit,
            usize::from(max_concurrent_reconciles),
        )
        .map_err(|err| anyhow::anyhow!("--ansible-worker-memory-limit: {err}"))?,
        ..crate::worker::Config::from_env()
    };
    let ignored = config.take_ansible_args(args.ansible_args.as_deref().unwrap_or_default());
    if !ignored.is_empty() {
        tracing::warn!(
            "--ansible-args: {} has no effect (enka runs no ansible-runner; Vault options are used)",
            ignored.join(" ")
        );
    }
    Ok(config)
}
