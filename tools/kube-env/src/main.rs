//! `kube-env`: the test control plane for a person at a shell.
//!
//! `make kube-env` runs `kube-env up`, which starts etcd, kube-apiserver and
//! kube-controller-manager in the background (with `--nodes N`, also
//! kube-scheduler and kwok's simulated nodes) and prints the line that points
//! kubectl at them; `make kube-env-down` runs `kube-env down`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use kube_env::{Binaries, KubeEnv, Lifetime, Options};

#[derive(Parser)]
#[command(
    version,
    about = "A real local Kubernetes control plane built from Go modules"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the control plane in the background (or report the running one).
    Up {
        /// State directory: data, certificates, logs and the kubeconfig.
        #[arg(long, default_value = ".kube-env")]
        dir: PathBuf,
        /// Leave out kube-controller-manager (no garbage collection).
        #[arg(long, conflicts_with = "nodes")]
        no_controller_manager: bool,
        /// Simulated nodes (kwok) with kube-scheduler and every default
        /// controller, so Deployments, StatefulSets, Jobs and Services come up.
        #[arg(long, default_value_t = 0)]
        nodes: usize,
        /// With nodes: seconds a Pod stays on a NotReady or unreachable
        /// node before it is evicted (Kubernetes' default is 300).
        #[arg(long, default_value_t = 300)]
        pod_eviction_seconds: u64,
    },
    /// Stop the control plane started by `up` and remove its directory.
    Down {
        #[arg(long, default_value = ".kube-env")]
        dir: PathBuf,
    },
    /// Build the upstream binaries if needed and print their directory.
    BinDir,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Up {
            dir,
            no_controller_manager,
            nodes,
            pod_eviction_seconds,
        } => {
            let options = Options {
                controller_manager: !no_controller_manager,
                lifetime: Lifetime::Detached,
                dir: Some(absolute(&dir)?),
                ..Options::default()
            }
            .nodes(nodes)
            .pod_eviction_after(Duration::from_secs(pod_eviction_seconds));
            up(options)
        }
        Command::Down { dir } => down(&absolute(&dir)?),
        Command::BinDir => {
            println!("{}", Binaries::locate()?.dir().display());
            Ok(())
        }
    }
}

fn absolute(dir: &Path) -> Result<PathBuf> {
    Ok(std::env::current_dir()?.join(dir))
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("pids")
}

fn read_pids(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(state_file(dir))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether `pid` is a live process. A zombie counts as dead: detached servers
/// are reparented to a PID 1 that may never reap them.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rsplit_once(") ")
                .map(|(_, rest)| rest.as_bytes().first().copied()),
            Some(Some(b'Z' | b'X'))
        ),
        Err(_) => false,
    }
}

fn up(options: Options) -> Result<()> {
    let dir = options.dir.clone().unwrap_or_default();
    let dir = dir.as_path();
    let pids = read_pids(dir);
    if !pids.is_empty() && pids.iter().all(|&p| alive(p)) {
        eprintln!("kube-env: already running (pids {pids:?})");
        println!("export KUBECONFIG={}", dir.join("kubeconfig").display());
        return Ok(());
    }
    if !pids.is_empty() {
        eprintln!(
            "kube-env: a previous control plane in {} died; starting afresh",
            dir.display()
        );
        down(dir)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    eprintln!(
        "kube-env: starting {} in {}",
        describe(&options),
        dir.display()
    );
    let started = Instant::now();
    let env = runtime
        .block_on(KubeEnv::start(options))
        .context("starting the control plane")?;
    let kubeconfig = env.kubeconfig().to_owned();
    let server = env.server_url().to_owned();
    let kubectl = env.binaries().path("kubectl");
    let pids = env.release();
    std::fs::write(
        state_file(dir),
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    )?;
    eprintln!(
        "kube-env: ready at {server} in {:.1} s (pids {pids:?}); kubectl is {}",
        started.elapsed().as_secs_f64(),
        kubectl.display()
    );
    println!("export KUBECONFIG={}", kubeconfig.display());
    Ok(())
}

/// The servers `options` starts, in words.
fn describe(options: &Options) -> String {
    match (options.nodes, options.controller_manager) {
        (0, false) => "etcd and kube-apiserver".to_owned(),
        (0, true) => "etcd, kube-apiserver and kube-controller-manager".to_owned(),
        (n, _) => format!(
            "etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with {n} simulated node{}",
            if n == 1 { "" } else { "s" }
        ),
    }
}

fn down(dir: &Path) -> Result<()> {
    let pids = read_pids(dir);
    for &pid in pids.iter().rev() {
        // SAFETY: plain kill(2) on pids this tool recorded.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for &pid in &pids {
        if alive(pid) {
            // SAFETY: as above.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    if pids.iter().any(|&p| alive(p)) {
        bail!("kube-env: processes {pids:?} would not stop");
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    eprintln!("kube-env: stopped ({} processes)", pids.len());
    Ok(())
}
