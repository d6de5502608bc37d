//! A real Kubernetes control plane on 127.0.0.1 for enka's tests and demos.
//!
//! [`KubeEnv::start`] runs upstream etcd and kube-apiserver (and, when asked,
//! kube-controller-manager with only the garbage-collector and namespace
//! controllers), all built from Go modules by `tools/kube-env/build.sh`.
//! With [`Options::nodes`] it also runs kube-scheduler and kwok, so Pods are
//! scheduled to simulated nodes and become Ready (see [`nodes`]). It
//! waits until `/readyz` passes and the `default` namespace exists, then hands
//! out [`kube::Client`]s and a kubeconfig file authenticated as a
//! `system:masters` user by a static token. A second such user's requests
//! are written to the API server's audit log and counted ([`audit`]), to
//! measure what an operator started with its kubeconfig asks.
//!
//! # One control plane per test binary
//!
//! Starting etcd and kube-apiserver costs seconds, so tests share one control
//! plane per test process through [`KubeEnv::shared`] and isolate themselves
//! by namespace (see [`KubeEnv::namespace`]). Tests that break the control
//! plane on purpose (restarts, faults) start their own with [`KubeEnv::start`].
//!
//! # Nothing outlives the tests
//!
//! Every child is tied to the test process with `PR_SET_PDEATHSIG` (see
//! [`process`]), dropping a [`KubeEnv`] stops its servers and removes its
//! directory, and the shared one is torn down by an `atexit` hook.

pub mod audit;
pub mod binaries;
pub mod nodes;
pub mod process;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub use audit::{AUDITED_USER, AuditMark};
pub use binaries::Binaries;
pub use nodes::Kwok;
pub use process::Lifetime;
use process::Server;

/// How long a control plane may take to become ready. Generous because the
/// machine has two cores and test binaries start in parallel.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Prefix of every temporary directory, used to sweep ones left by killed runs.
const DIR_PREFIX: &str = "enka-kube-env-";

/// Everything that can go wrong while starting or using a control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Go build of the upstream binaries failed.
    #[error("failed to build the control plane with {script}: {reason}")]
    Build { script: PathBuf, reason: String },
    /// A binary the build should have produced is missing.
    #[error("control-plane binary {path} is missing; run tools/kube-env/build.sh")]
    MissingBinary { path: PathBuf },
    /// A server process could not be started.
    #[error("failed to start {name}: {reason}")]
    Spawn { name: &'static str, reason: String },
    /// A file of the control plane could not be written or read.
    #[error("failed to {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A server exited while it should be running.
    #[error("{name} exited with {status}; the end of its log:\n{log}")]
    Exited {
        name: &'static str,
        status: std::process::ExitStatus,
        log: String,
    },
    /// The control plane did not become ready in time.
    #[error("{what} not ready after {after:?} (last error: {last}); the end of the logs:\n{log}")]
    NotReady {
        what: &'static str,
        after: Duration,
        last: String,
        log: String,
    },
    /// The generated kubeconfig could not be turned into a client.
    #[error("failed to build a client from {path}: {source}")]
    Client {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

pub(crate) fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// What to start, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Also run kube-controller-manager (garbage collection, namespace deletion).
    pub controller_manager: bool,
    /// Whether the servers die with this process or run on (`make kube-env`).
    pub lifetime: Lifetime,
    /// A fixed directory for state; `None` means a fresh temporary directory
    /// that is removed on drop.
    pub dir: Option<PathBuf>,
    /// Simulated nodes (kwok) with kube-scheduler and every default
    /// controller; 0 keeps the lighter control plane, where no Pod runs.
    pub nodes: usize,
    /// With nodes: how long a Pod stays on a node that is not ready or
    /// unreachable before it is evicted (the API server's default
    /// tolerations; Kubernetes' own default is five minutes).
    pub pod_eviction_after: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            controller_manager: true,
            lifetime: Lifetime::Tied,
            dir: None,
            nodes: 0,
            pod_eviction_after: Duration::from_secs(300),
        }
    }
}

impl Options {
    /// Adds or removes kube-controller-manager.
    #[must_use]
    pub fn controller_manager(mut self, on: bool) -> Self {
        self.controller_manager = on;
        self
    }

    /// Runs `count` simulated nodes (and kube-controller-manager with every
    /// default controller, kube-scheduler and kwok).
    #[must_use]
    pub fn nodes(mut self, count: usize) -> Self {
        self.nodes = count;
        if count > 0 {
            self.controller_manager = true;
        }
        self
    }

    /// Sets how long Pods of a failed node stay bound before eviction.
    #[must_use]
    pub fn pod_eviction_after(mut self, after: Duration) -> Self {
        self.pod_eviction_after = after;
        self
    }
}

#[derive(Debug, Default)]
struct Servers {
    etcd: Option<Server>,
    apiserver: Option<Server>,
    controller_manager: Option<Server>,
    scheduler: Option<Server>,
    kwok: Option<Server>,
}

impl Servers {
    /// Every slot, in the order the servers start.
    fn in_start_order(&mut self) -> [&mut Option<Server>; 5] {
        [
            &mut self.etcd,
            &mut self.apiserver,
            &mut self.controller_manager,
            &mut self.scheduler,
            &mut self.kwok,
        ]
    }

    fn running(&self) -> impl Iterator<Item = &Server> {
        [
            &self.etcd,
            &self.apiserver,
            &self.controller_manager,
            &self.scheduler,
            &self.kwok,
        ]
        .into_iter()
        .flatten()
    }

    /// Takes every server out, last started first.
    fn take_all(&mut self) -> Vec<Server> {
        let mut taken: Vec<Server> = self
            .in_start_order()
            .into_iter()
            .filter_map(Option::take)
            .collect();
        taken.reverse();
        taken
    }

    fn stop_all(&mut self) {
        // Reverse order of start, so nothing logs a storm of errors about a
        // dependency that vanished first.
        for server in self.take_all() {
            drop(server);
        }
    }

    fn log_tails(&self) -> String {
        let mut out = String::new();
        for server in self.running() {
            let _ = writeln!(
                out,
                "--- {} ({}) ---\n{}",
                server.name(),
                server.log_path().display(),
                server.log_tail(3000)
            );
        }
        out
    }
}

/// A server of the control plane that a fault test can restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Etcd,
    ApiServer,
}

/// How a server was started, to start it again the same way.
#[derive(Debug, Clone)]
struct Launch {
    args: Vec<String>,
    lifetime: Lifetime,
}

/// A running control plane.
#[derive(Debug)]
pub struct KubeEnv {
    etcd_launch: Launch,
    apiserver_launch: Launch,
    etcd_port: u16,
    restarts: std::sync::atomic::AtomicUsize,
    dir: PathBuf,
    remove_dir: bool,
    binaries: Binaries,
    server_url: String,
    kubeconfig: PathBuf,
    audited_kubeconfig: PathBuf,
    audit_log: PathBuf,
    config: Config,
    servers: Mutex<Servers>,
    node_count: usize,
}

impl KubeEnv {
    /// Starts etcd and kube-apiserver (and kube-controller-manager if asked),
    /// and waits until the API server is ready and `default` exists. With
    /// nodes, also kube-scheduler and kwok, and waits until every node is
    /// Ready.
    pub async fn start(options: Options) -> Result<Self, Error> {
        let binaries = locate(Binaries::locate).await?;
        let kwok = match options.nodes {
            0 => None,
            _ => Some(locate(Kwok::locate).await?),
        };
        let (dir, remove_dir) = match &options.dir {
            Some(dir) => (dir.clone(), false),
            None => (fresh_temp_dir()?, true),
        };
        std::fs::create_dir_all(dir.join("pki"))
            .map_err(io_error(format!("create {}", dir.display())))?;

        let [etcd_port, peer_port, api_port] = free_ports()?;
        let token = random_token();
        let audited_token = random_token();
        let files = write_credentials(&dir, &token, &audited_token)?;
        let audit = audit::write_policy(&dir)?;
        let server_url = format!("https://127.0.0.1:{api_port}");

        let mut servers = Servers::default();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_launch = Launch {
            args: etcd_args(&dir, &etcd_url, peer_port),
            lifetime: options.lifetime,
        };
        let mut apiserver_flags = apiserver_args(&dir, &etcd_url, api_port, &files);
        apiserver_flags.extend(audit::apiserver_args(&audit));
        if options.nodes > 0 {
            apiserver_flags.extend(nodes::apiserver_args(options.pod_eviction_after));
        }
        let apiserver_launch = Launch {
            args: apiserver_flags,
            lifetime: options.lifetime,
        };
        servers.etcd = Some(Server::start(
            "etcd",
            &binaries.path("etcd"),
            &etcd_launch.args,
            dir.join("etcd.log"),
            options.lifetime,
        )?);
        servers.apiserver = Some(Server::start(
            "kube-apiserver",
            &binaries.path("kube-apiserver"),
            &apiserver_launch.args,
            dir.join("kube-apiserver.log"),
            options.lifetime,
        )?);

        let kubeconfig = dir.join("kubeconfig");
        let audited_kubeconfig = dir.join("kubeconfig-audited");
        let ca = dir.join("pki").join("apiserver.crt");
        let mut env = KubeEnv {
            etcd_launch,
            apiserver_launch,
            etcd_port,
            restarts: std::sync::atomic::AtomicUsize::new(0),
            dir,
            remove_dir,
            binaries,
            server_url,
            kubeconfig,
            audited_kubeconfig,
            audit_log: audit.log,
            config: Config::new("https://127.0.0.1".parse().map_err(
                |e: http::uri::InvalidUri| Error::Spawn {
                    name: "config",
                    reason: e.to_string(),
                },
            )?),
            servers: Mutex::new(servers),
            node_count: options.nodes,
        };
        // From here on, dropping `env` tears everything down on any error.
        env.wait_for_file(&ca).await?;
        std::fs::write(
            &env.kubeconfig,
            kubeconfig_yaml(&env.server_url, &ca, "admin", &token),
        )
        .map_err(io_error("write the kubeconfig"))?;
        std::fs::write(
            &env.audited_kubeconfig,
            kubeconfig_yaml(&env.server_url, &ca, AUDITED_USER, &audited_token),
        )
        .map_err(io_error("write the audited user's kubeconfig"))?;
        env.config = load_config(&env.kubeconfig).await?;
        env.wait_until_ready().await?;

        if options.controller_manager {
            env.start_controller_manager(options.lifetime).await?;
        }
        if let Some(kwok) = kwok {
            env.start_nodes(&kwok, options.lifetime).await?;
        }
        Ok(env)
    }

    /// Starts kube-controller-manager: garbage collection and namespaces
    /// only, or with nodes every default controller.
    async fn start_controller_manager(&self, lifetime: Lifetime) -> Result<(), Error> {
        let args = match self.node_count {
            0 => controller_manager_args(&self.kubeconfig),
            _ => nodes::controller_manager_args(&self.kubeconfig),
        };
        let server = Server::start(
            "kube-controller-manager",
            &self.binaries.path("kube-controller-manager"),
            &args,
            self.dir.join("kube-controller-manager.log"),
            lifetime,
        )?;
        self.lock_servers().controller_manager = Some(server);
        // It has no readiness endpoint with --secure-port=0; a quick exit
        // is how a bad flag or kubeconfig shows.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.check_alive()
    }

    /// Starts kube-scheduler and kwok, creates the nodes and the default
    /// StorageClass, and waits until every node is Ready.
    async fn start_nodes(&self, kwok: &Kwok, lifetime: Lifetime) -> Result<(), Error> {
        let client = self.client()?;
        nodes::create(&client, self.node_count).await?;
        let scheduler = Server::start(
            "kube-scheduler",
            &self.binaries.path("kube-scheduler"),
            &nodes::scheduler_args(&self.kubeconfig),
            self.dir.join("kube-scheduler.log"),
            lifetime,
        )?;
        self.lock_servers().scheduler = Some(scheduler);
        let config = self.dir.join("kwok.yaml");
        kwok.write_config(&config)?;
        let server = Server::start(
            "kwok",
            &kwok.binary(),
            &nodes::kwok_args(&self.kubeconfig, &config),
            self.dir.join("kwok.log"),
            lifetime,
        )?;
        self.lock_servers().kwok = Some(server);
        let started = Instant::now();
        loop {
            self.check_alive()?;
            let last = match nodes::all_ready(&client, self.node_count).await {
                Ok(()) => return Ok(()),
                Err(last) => last,
            };
            if started.elapsed() > READY_TIMEOUT {
                return Err(self.not_ready("simulated nodes", started, last));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// How many simulated nodes this control plane runs (0: none, no Pod
    /// is ever scheduled).
    pub fn node_count(&self) -> usize {
        self.node_count
    }

    /// Names of the simulated nodes.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.node_count).map(nodes::node_name).collect()
    }

    /// Makes a simulated node NotReady (or Ready again), as a kubelet that
    /// stops reporting would: see [`nodes::set_ready`].
    pub async fn set_node_ready(&self, name: &str, ready: bool) -> Result<(), kube::Error> {
        let client = self.client().map_err(|e| kube::Error::Service(e.into()))?;
        nodes::set_ready(&client, name, ready).await
    }

    /// The control plane shared by every test of this test binary, started
    /// on first use with kube-controller-manager. Panics with the reason when
    /// it cannot start: a test that needs a cluster must fail, never skip.
    pub async fn shared() -> &'static KubeEnv {
        static SHARED: SharedCell = tokio::sync::OnceCell::const_new();
        shared_in(&SHARED, Options::default()).await
    }

    /// Like [`KubeEnv::shared`], a control plane with `SHARED_NODES`
    /// simulated nodes, for the tests of this binary that need Pods to run.
    pub async fn shared_with_nodes() -> &'static KubeEnv {
        static SHARED: SharedCell = tokio::sync::OnceCell::const_new();
        shared_in(&SHARED, Options::default().nodes(SHARED_NODES)).await
    }

    /// A new client for this control plane. Each Tokio runtime (each
    /// `#[tokio::test]`) needs its own, because a client's background task
    /// lives on the runtime that built it.
    pub fn client(&self) -> Result<Client, Error> {
        Client::try_from(self.config.clone()).map_err(|source| Error::Client {
            path: self.kubeconfig.clone(),
            source: Box::new(source),
        })
    }

    /// The client configuration (admin, by static token).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Path of a kubeconfig file for this control plane.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kubeconfig for [`AUDITED_USER`]: what a process started with it
    /// asks the API server is counted by [`KubeEnv::audited_requests`].
    pub fn audited_kubeconfig(&self) -> &Path {
        &self.audited_kubeconfig
    }

    /// Where the audit log ends now.
    pub fn audit_mark(&self) -> AuditMark {
        audit::mark(&self.audit_log)
    }

    /// [`AUDITED_USER`]'s requests since `since`, by `VERB resource`.
    pub fn audited_requests(&self, since: AuditMark) -> Result<BTreeMap<String, u64>, Error> {
        audit::requests_since(&self.audit_log, since)
    }

    /// [`AUDITED_USER`]'s requests since `since` as the audit log has them:
    /// one JSON event a line, each with its URI, verb and object.
    pub fn audited_events(&self, since: AuditMark) -> Result<String, Error> {
        audit::events_since(&self.audit_log, since)
    }

    /// `https://127.0.0.1:<port>` of the API server.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The control plane's state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory holding the upstream binaries, kubectl included.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// Creates a namespace with a unique name starting with `prefix`, for a
    /// test to work in without seeing other tests' objects.
    pub async fn namespace(&self, prefix: &str) -> Result<String, kube::Error> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let client = self.client().map_err(|e| kube::Error::Service(e.into()))?;
        let api: Api<Namespace> = Api::all(client);
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        api.create(&PostParams::default(), &ns).await?;
        Ok(name)
    }

    /// Deletes a namespace made by [`KubeEnv::namespace`] (asynchronously: the
    /// namespace controller empties it).
    pub async fn delete_namespace(&self, name: &str) -> Result<(), kube::Error> {
        let client = self.client().map_err(|e| kube::Error::Service(e.into()))?;
        let api: Api<Namespace> = Api::all(client);
        api.delete(name, &DeleteParams::background()).await?;
        Ok(())
    }

    /// Stops `component` (SIGTERM, then SIGKILL after 5 s), leaves it down
    /// for `down`, starts it again with the same flags and data, and waits
    /// until the API server answers again: a fault for tests to inject.
    pub async fn restart(&self, component: Component, down: Duration) -> Result<(), Error> {
        self.restart_after(component, tokio::time::sleep(down))
            .await
    }

    /// Stops `component` as [`KubeEnv::restart`] does, runs `while_down` to
    /// its end (a fault that needs the component stopped, such as rewriting
    /// etcd's history behind the API server's back), then starts it again.
    pub async fn restart_after(
        &self,
        component: Component,
        while_down: impl std::future::Future<Output = ()>,
    ) -> Result<(), Error> {
        let (name, binary, launch) = match component {
            Component::Etcd => ("etcd", "etcd", &self.etcd_launch),
            Component::ApiServer => ("kube-apiserver", "kube-apiserver", &self.apiserver_launch),
        };
        let stopped = {
            let mut servers = self.lock_servers();
            match component {
                Component::Etcd => servers.etcd.take(),
                Component::ApiServer => servers.apiserver.take(),
            }
        };
        if let Some(mut server) = stopped {
            tokio::task::spawn_blocking(move || server.stop(Duration::from_secs(5)))
                .await
                .map_err(|e| Error::Spawn {
                    name,
                    reason: e.to_string(),
                })?;
        }
        while_down.await;
        let n = self
            .restarts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let server = Server::start(
            name,
            &self.binaries.path(binary),
            &launch.args,
            self.dir.join(format!("{name}.restart-{n}.log")),
            launch.lifetime,
        )?;
        {
            let mut servers = self.lock_servers();
            match component {
                Component::Etcd => servers.etcd = Some(server),
                Component::ApiServer => servers.apiserver = Some(server),
            }
        }
        self.wait_until_ready().await
    }

    /// etcd's client URL, for tests that talk to it directly (compaction).
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// Pids of the running servers, in start order (for `make kube-env`).
    pub fn pids(&self) -> Vec<u32> {
        self.lock_servers().running().map(Server::pid).collect()
    }

    /// Lets detached servers run on after this value is dropped, returning
    /// their pids in start order (for `make kube-env`, which exits right
    /// after starting).
    pub fn release(self) -> Vec<u32> {
        let mut servers = self.lock_servers();
        let mut released: Vec<u32> = servers
            .take_all()
            .into_iter()
            .map(Server::release)
            .collect();
        released.reverse();
        drop(servers);
        released
    }

    /// Stops every server and removes a temporary directory. Idempotent.
    pub fn shutdown(&self) {
        self.lock_servers().stop_all();
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn lock_servers(&self) -> std::sync::MutexGuard<'_, Servers> {
        // A panic while holding the lock leaves plain data behind; teardown
        // must still work, so poisoning is ignored.
        self.servers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_alive(&self) -> Result<(), Error> {
        let mut guard = self.lock_servers();
        for server in guard.in_start_order().into_iter().flatten() {
            if let Some(status) = server.exited() {
                return Err(Error::Exited {
                    name: server.name(),
                    status,
                    log: server.log_tail(4000),
                });
            }
        }
        Ok(())
    }

    fn not_ready(&self, what: &'static str, started: Instant, last: String) -> Error {
        Error::NotReady {
            what,
            after: started.elapsed(),
            last,
            log: self.lock_servers().log_tails(),
        }
    }

    async fn wait_for_file(&self, path: &Path) -> Result<(), Error> {
        let started = Instant::now();
        while !path.exists() {
            self.check_alive()?;
            if started.elapsed() > READY_TIMEOUT {
                return Err(self.not_ready(
                    "kube-apiserver serving certificate",
                    started,
                    format!("{} was never written", path.display()),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    async fn wait_until_ready(&self) -> Result<(), Error> {
        let client = self.client()?;
        let started = Instant::now();
        let mut last = String::from("none yet");
        loop {
            self.check_alive()?;
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::Spawn {
                    name: "readiness probe",
                    reason: e.to_string(),
                })?;
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => break,
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(self.not_ready("kube-apiserver /readyz", started, last));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let namespaces: Api<Namespace> = Api::all(client);
        loop {
            match namespaces.get_opt("default").await {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => "namespace default does not exist yet".clone_into(&mut last),
                Err(e) => last = e.to_string(),
            }
            self.check_alive()?;
            if started.elapsed() > READY_TIMEOUT {
                return Err(self.not_ready("namespace default", started, last));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for KubeEnv {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Runs a blocking lookup (which may build on a cold cache) off the runtime.
async fn locate<T: Send + 'static>(lookup: fn() -> Result<T, Error>) -> Result<T, Error> {
    tokio::task::spawn_blocking(lookup)
        .await
        .map_err(|e| Error::Spawn {
            name: "binary lookup",
            reason: e.to_string(),
        })?
}

/// How many nodes [`KubeEnv::shared_with_nodes`] runs.
pub const SHARED_NODES: usize = 3;

type SharedCell = tokio::sync::OnceCell<Result<KubeEnv, String>>;

/// The control plane in `cell`, started with `options` on first use and torn
/// down at exit. Panics with the reason when it cannot start: a test that
/// needs a cluster must fail, never skip.
async fn shared_in(cell: &'static SharedCell, options: Options) -> &'static KubeEnv {
    let result = cell
        .get_or_init(|| async {
            let started = KubeEnv::start(options).await.map_err(|e| e.to_string());
            if started.is_ok() {
                register_shared_teardown(cell);
            }
            started
        })
        .await;
    match result {
        Ok(env) => env,
        Err(reason) => panic!("the shared test control plane could not start: {reason}"),
    }
}

fn register_shared_teardown(cell: &'static SharedCell) {
    static CELLS: Mutex<Vec<&'static SharedCell>> = Mutex::new(Vec::new());
    extern "C" fn teardown() {
        let cells = CELLS.lock().unwrap_or_else(|e| e.into_inner());
        for cell in cells.iter() {
            if let Some(Ok(env)) = cell.get() {
                env.shutdown();
            }
        }
    }
    let mut cells = CELLS.lock().unwrap_or_else(|e| e.into_inner());
    if cells.is_empty() {
        // SAFETY: registers a plain extern "C" fn; it runs once at exit.
        unsafe {
            libc::atexit(teardown);
        }
    }
    cells.push(cell);
}

struct Credentials {
    tokens: PathBuf,
    sa_key: PathBuf,
    sa_pub: PathBuf,
}

fn write_credentials(dir: &Path, token: &str, audited: &str) -> Result<Credentials, Error> {
    let tokens = dir.join("tokens.csv");
    let lines = format!(
        "{token},admin,admin,system:masters\n{audited},{AUDITED_USER},{AUDITED_USER},system:masters\n"
    );
    std::fs::write(&tokens, lines).map_err(io_error("write tokens.csv"))?;
    let key = rcgen::KeyPair::generate().map_err(|e| Error::Spawn {
        name: "service-account key generation",
        reason: e.to_string(),
    })?;
    let sa_key = dir.join("pki").join("sa.key");
    let sa_pub = dir.join("pki").join("sa.pub");
    std::fs::write(&sa_key, key.serialize_pem()).map_err(io_error("write sa.key"))?;
    std::fs::write(&sa_pub, key.public_key_pem()).map_err(io_error("write sa.pub"))?;
    Ok(Credentials {
        tokens,
        sa_key,
        sa_pub,
    })
}

fn etcd_args(dir: &Path, client_url: &str, peer_port: u16) -> Vec<String> {
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    vec![
        "--name=kube-env".into(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=kube-env={peer_url}"),
        // Test data is disposable; fsync only slows every write down.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ]
}

fn apiserver_args(dir: &Path, etcd_url: &str, port: u16, files: &Credentials) -> Vec<String> {
    vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--cert-dir={}", dir.join("pki").display()),
        "--bind-address=127.0.0.1".into(),
        // Without it the server derives an address from the default route.
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        format!("--service-account-key-file={}", files.sa_pub.display()),
        format!(
            "--service-account-signing-key-file={}",
            files.sa_key.display()
        ),
        "--authorization-mode=RBAC".into(),
        format!("--token-auth-file={}", files.tokens.display()),
        "--allow-privileged=true".into(),
        // No controller creates default ServiceAccounts here.
        "--disable-admission-plugins=ServiceAccount".into(),
        "--profiling=false".into(),
    ]
}

fn controller_manager_args(kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--controllers=garbage-collector-controller,namespace-controller".into(),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
    ]
}

fn kubeconfig_yaml(server: &str, ca: &Path, user: &str, token: &str) -> String {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kube-env", "cluster": {
            "server": server,
            "certificate-authority": ca.display().to_string(),
        }}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "kube-env", "context": {"cluster": "kube-env", "user": user}}],
        "current-context": "kube-env",
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

async fn load_config(path: &Path) -> Result<Config, Error> {
    let client_error = |source: Box<dyn std::error::Error + Send + Sync>| Error::Client {
        path: path.to_owned(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| client_error(Box::new(e)))?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| client_error(Box::new(e)))
}

/// Three distinct free ports, held open together so the OS cannot hand out
/// the same one twice.
fn free_ports() -> Result<[u16; 3], Error> {
    let bind = || {
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|source| Error::Spawn {
            name: "port allocation",
            reason: source.to_string(),
        })
    };
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0u16; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(|source| Error::Spawn {
                name: "port allocation",
                reason: source.to_string(),
            })?
            .port();
    }
    Ok(ports)
}

fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)]))
        .collect()
}

/// A new directory under the system temp dir, after removing ones whose
/// owning process is gone (left by a run that was killed).
fn fresh_temp_dir() -> Result<PathBuf, Error> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let tmp = std::env::temp_dir();
    sweep_stale_dirs(&tmp);
    let dir = tmp.join(format!(
        "{DIR_PREFIX}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(io_error(format!("create {}", dir.display())))?;
    Ok(dir)
}

fn sweep_stale_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
