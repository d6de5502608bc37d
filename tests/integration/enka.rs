//! A running `enka run` process for the tests: started on a watches file of
//! the repository, with its metrics and health ports, stopped when dropped.

use std::path::PathBuf;
use std::time::Duration;

use kube_env::KubeEnv;
use kube_env::process::{Lifetime, Server};

use crate::support::{free_port, http_get, repo_path, sum_metric, try_http_get};

/// A running `enka run`, stopped when dropped.
pub struct Enka {
    server: Server,
    /// Port of its /metrics endpoint on 127.0.0.1.
    pub metrics_port: u16,
    /// Port of its /healthz and /readyz endpoints on 127.0.0.1.
    pub health_port: u16,
}

impl Enka {
    /// Starts enka on `watches` (relative to the repository) for `namespace`.
    pub fn start(
        env: &KubeEnv,
        watches: &str,
        namespace: &str,
        extra_env: &[(&str, &str)],
    ) -> Enka {
        Self::start_with_args(env, watches, namespace, extra_env, &[], "")
    }

    /// Like [`Enka::start`], with extra flags; `tag` names the log file.
    pub fn start_with_args(
        env: &KubeEnv,
        watches: &str,
        namespace: &str,
        extra_env: &[(&str, &str)],
        extra_args: &[&str],
        tag: &str,
    ) -> Enka {
        let log = std::env::temp_dir().join(format!("enka-{namespace}{tag}.log"));
        let _ = std::fs::remove_file(&log);
        let mut vars: Vec<(String, String)> = vec![
            ("KUBECONFIG".into(), env.kubeconfig().display().to_string()),
            ("WATCH_NAMESPACE".into(), namespace.into()),
            ("ENKA_LOG".into(), "info,enka=debug".into()),
        ];
        vars.extend(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let (metrics_port, health_port) = (free_port(), free_port());
        let args = vec![
            "run".to_owned(),
            "--watches-file".to_owned(),
            repo_path(watches).display().to_string(),
            "--metrics-bind-address".to_owned(),
            format!("127.0.0.1:{metrics_port}"),
            "--health-probe-bind-address".to_owned(),
            format!("127.0.0.1:{health_port}"),
        ];
        // Tests read the log as text; zap's JSON (the default) has a test
        // of its own (logging::every_line_is_zap_json), and a test that
        // parses the log asks for it.
        let mut args = args;
        if !extra_args.iter().any(|a| a.starts_with("--zap-encoder")) {
            args.push("--zap-encoder=console".to_owned());
        }
        let args: Vec<String> = args
            .into_iter()
            .chain(extra_args.iter().map(|a| (*a).to_owned()))
            .collect();
        let server = Server::start_with_env(
            "enka",
            &PathBuf::from(env!("CARGO_BIN_EXE_enka")),
            &args,
            &vars,
            log,
            Lifetime::Tied,
        )
        .expect("starting enka");
        Enka {
            server,
            metrics_port,
            health_port,
        }
    }

    /// The process id of `enka run`.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Waits until its readiness probe passes: every watch has listed.
    pub async fn await_ready(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, _)) = try_http_get(self.health_port, "/readyz").await {
                return;
            }
            if let Some(status) = self.server.exited() {
                panic!(
                    "enka exited with {status} before it was ready:\n{}",
                    self.log()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "enka not ready after 60 s:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and waits up to `limit` for enka to exit by itself:
    /// its exit status, or `None` if it had to be killed.
    pub fn terminate(&mut self, limit: std::time::Duration) -> Option<std::process::ExitStatus> {
        self.server.stop(limit);
        self.server
            .exited()
            .filter(|status| status.code().is_some())
    }

    /// Reconciles finished so far, from /metrics.
    pub async fn reconciles(&self) -> f64 {
        let (_, metrics) = http_get(self.metrics_port, "/metrics").await;
        sum_metric(&metrics, "ansible_operator_reconcile_result")
    }

    /// Waits until no reconcile has finished for a second and a half: the
    /// runs that enka's own writes bring about are over.
    pub async fn settle(&self) {
        let mut last = self.reconciles().await;
        let mut quiet = 0;
        while quiet < 3 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = self.reconciles().await;
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
        }
    }

    /// SIGKILL: no shutdown, no last writes, as a node failure would.
    pub fn kill(&mut self) {
        let pid = self.server.pid();
        let _ = std::process::Command::new("bash")
            .args(["-c", &format!("kill -9 {pid}")])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.server.exited().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.server.exited()
    }

    /// The whole log, for checks over every line.
    pub fn full_log(&self) -> String {
        std::fs::read_to_string(self.server.log_path()).unwrap_or_default()
    }

    /// The end of enka's log, for failure messages.
    pub fn log(&self) -> String {
        self.server.log_tail(6000)
    }
}
