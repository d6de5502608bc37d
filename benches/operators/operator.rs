//! The operators under test, started as processes against the bench's
//! control plane: enka (the binary Cargo built for this bench) and upstream's
//! ansible-operator (from scripts/upstream-ansible-operator.sh).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube_env::KubeEnv;
use kube_env::process::{Lifetime, Server};

use crate::support::{free_port, sum_metric, try_http_get};
use crate::usage::Usage;

/// Which operator runs the role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Enka,
    Upstream,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Enka => "enka",
            Flavour::Upstream => "upstream",
        }
    }
}

/// A running operator, stopped when dropped.
pub struct Operator {
    pub flavour: Flavour,
    server: Server,
    metrics_port: u16,
    health_port: u16,
}

impl Operator {
    /// Starts `flavour` on `watches` for `namespace`, and waits until its
    /// readiness probe passes.
    pub async fn start(
        flavour: Flavour,
        env: &KubeEnv,
        watches: &Path,
        namespace: &str,
        extra_env: &[(&str, &str)],
        log_dir: &Path,
    ) -> Operator {
        Self::start_with_args(flavour, env, watches, namespace, extra_env, &[], log_dir).await
    }

    /// Like [`Operator::start`], with extra flags.
    pub async fn start_with_args(
        flavour: Flavour,
        env: &KubeEnv,
        watches: &Path,
        namespace: &str,
        extra_env: &[(&str, &str)],
        extra_args: &[&str],
        log_dir: &Path,
    ) -> Operator {
        let (metrics_port, health_port) = (free_port(), free_port());
        let mut profiling_args = Vec::new();
        let mut vars: Vec<(String, String)> = vec![
            ("KUBECONFIG".into(), env.kubeconfig().display().to_string()),
            ("WATCH_NAMESPACE".into(), namespace.into()),
        ];
        if flavour == Flavour::Enka {
            // ENKA_BENCH_ENKA_LOG: enka's log filter, to profile a scenario
            // (its log, with nanosecond times, is in target/bench/logs).
            let filter = std::env::var("ENKA_BENCH_ENKA_LOG").ok();
            vars.push((
                "ENKA_LOG".into(),
                filter.clone().unwrap_or_else(|| "warn".into()),
            ));
            if filter.is_some() {
                profiling_args.push("--zap-time-encoding=rfc3339nano".to_owned());
            }
        }
        vars.extend(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let project = watches.parent().expect("watches.yaml is in a directory");
        let mut args = vec![
            "run".to_owned(),
            format!("--watches-file={}", watches.display()),
            format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
            format!("--health-probe-bind-address=127.0.0.1:{health_port}"),
        ];
        args.extend(extra_args.iter().map(|a| (*a).to_owned()));
        args.extend(profiling_args);
        let binary = match flavour {
            Flavour::Enka => PathBuf::from(env!("CARGO_BIN_EXE_enka")),
            Flavour::Upstream => {
                let dir = upstream_dir();
                let venv = dir.join("venv");
                let path = format!(
                    "{}:{}",
                    venv.join("bin").display(),
                    std::env::var("PATH").unwrap_or_default()
                );
                vars.extend([
                    ("PATH".into(), path),
                    ("VIRTUAL_ENV".into(), venv.display().to_string()),
                    // As upstream's scaffolded manager.yaml sets it: no fact
                    // gathering before each role.
                    ("ANSIBLE_GATHERING".into(), "explicit".into()),
                    (
                        "ANSIBLE_ROLES_PATH".into(),
                        project.join("roles").display().to_string(),
                    ),
                    (
                        "HOME".into(),
                        log_dir.join("upstream-home").display().to_string(),
                    ),
                ]);
                dir.join("bin/ansible-operator")
            }
        };
        let log = log_dir.join(format!("{}-{namespace}.log", flavour.name()));
        // In the project's directory, as the image runs in its WORKDIR:
        // playbooks and `lookup('file')` paths resolve from there.
        let server = Server::start_in(
            flavour.name(),
            &binary,
            &args,
            &vars,
            Some(project),
            log,
            Lifetime::Tied,
        )
        .unwrap_or_else(|e| panic!("starting {}: {e}", flavour.name()));
        let mut operator = Operator {
            flavour,
            server,
            metrics_port,
            health_port,
        };
        operator.await_ready().await;
        operator
    }

    async fn await_ready(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok((200, _)) = try_http_get(self.health_port, "/readyz").await {
                return;
            }
            if let Some(status) = self.server.exited() {
                panic!(
                    "{} exited with {status} before it was ready:\n{}",
                    self.flavour.name(),
                    self.server.log_tail(4000)
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} not ready after 120 s:\n{}",
                self.flavour.name(),
                self.server.log_tail(4000)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    pub fn usage(&self) -> Usage {
        Usage::of(self.pid()).unwrap_or_else(|| {
            panic!(
                "{} is gone:\n{}",
                self.flavour.name(),
                self.server.log_tail(4000)
            )
        })
    }

    /// Its /metrics text.
    pub async fn metrics(&self) -> String {
        match try_http_get(self.metrics_port, "/metrics").await {
            Ok((200, body)) => body,
            other => panic!("{} /metrics: {other:?}", self.flavour.name()),
        }
    }

    /// Reconciles finished so far: upstream's `ansible_operator_reconcile_result`
    /// counter, which enka serves as `…_total` (OpenMetrics naming).
    pub async fn reconciles(&self) -> f64 {
        sum_metric(&self.metrics().await, "ansible_operator_reconcile_result")
    }

    /// (The differential harness's.)
    #[allow(dead_code)]
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    /// (The differential harness's.)
    #[allow(dead_code)]
    pub fn log_path(&self) -> &Path {
        self.server.log_path()
    }

    pub fn log_tail(&self) -> String {
        self.server.log_tail(4000)
    }

    pub fn stop(mut self) {
        self.server.stop(Duration::from_secs(10));
    }
}

/// Where scripts/upstream-ansible-operator.sh installed upstream; runs it
/// (a no-op when the cache is warm).
pub fn upstream_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let script = crate::support::repo_path("scripts/upstream-ansible-operator.sh");
        let output = std::process::Command::new(&script)
            .arg(ansible_line())
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} failed ({}); upstream cannot be benchmarked",
            script.display(),
            output.status
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
    .clone()
}

/// The ansible-core line upstream's Python side runs (and enka's semantics
/// and worker follow, in the differential): `ENKA_DIFFERENTIAL_LINE`, 2.18
/// unless it says 2.19 (`make differential-2.19`).
pub fn ansible_line() -> String {
    std::env::var("ENKA_DIFFERENTIAL_LINE").unwrap_or_else(|_| "2.18".to_owned())
}
