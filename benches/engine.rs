//! Engine overhead: the seed's hikawa role with Kubernetes answered in
//! memory, so the figure is enka's own cost per reconcile (templating,
//! conditions, module logic), without network or API-server time.
//!
//! `cargo bench --bench engine` prints:
//! - the mean time of one reconcile over whole songs (a Hikawa from
//!   creation to Kiyoshi, fixed seeds), and
//! - the mean time of a steady-state reconcile (after Kiyoshi, nothing to do).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use enka::engine::{self, Entry, RunOptions};
use enka::kube::memory::MemoryCluster;
use enka::kube::{Cluster, Owner};
use enka::role::{LoadOptions, Project, RolePaths, Target};
use enka::vars::{VarOptions, extra_vars};
use serde_json::json;

// The allocator the enka binary ships with, so the figures match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";

fn load_project(seed: u64) -> Arc<Project> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zundoko-seed");
    let options = LoadOptions {
        role_paths: RolePaths {
            base_dir: base,
            ..RolePaths::default()
        },
        templates: enka::template::Options {
            seed: Some(seed),
            ..Default::default()
        },
        origins: Vec::new(),
        lookups: Vec::new(),
        ansible: None,
        inventory: enka_project::role::InventoryLoad::WhenNamed,
    };
    Project::load(&options, &[Target::Role("hikawa".into())])
        .0
        .expect("the seed role loads")
}

fn cluster() -> Arc<MemoryCluster> {
    let cluster = MemoryCluster::new()
        .with_kind(GROUP, "v1beta2", "Hikawa", "hikawas", true)
        .with_kind(GROUP, "v1beta1", "Zundoko", "zundokos", true)
        .with_kind(GROUP, "v1beta1", "Kiyoshi", "kiyoshis", true);
    cluster
        .insert(json!({
            "apiVersion": format!("{GROUP}/v1beta2"),
            "kind": "Hikawa",
            "metadata": {"name": "hikawa", "namespace": "bench"},
            "spec": {"intervalMillis": 500}
        }))
        .expect("insert the Hikawa");
    Arc::new(cluster)
}

/// One reconcile; returns whether it wrote anything and the time spent
/// inside (in-memory) Kubernetes calls.
async fn reconcile(
    project: &Arc<Project>,
    cluster: &Arc<MemoryCluster>,
    role: &Path,
) -> (bool, Duration) {
    let resource = cluster
        .resource(&format!("{GROUP}/v1beta2"), "Hikawa")
        .await
        .unwrap();
    let hikawa = cluster
        .get(&resource, Some("bench"), "hikawa")
        .await
        .unwrap()
        .unwrap();
    let hikawa = Arc::new(hikawa);
    let vars = extra_vars(
        &hikawa,
        GROUP,
        "Hikawa",
        &VarOptions {
            snake_case: true,
            ..VarOptions::default()
        },
    );
    let resource = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        GROUP, "v1beta2", "Hikawa",
    ));
    let owner = Owner::from_object(&hikawa, &resource);
    let before = cluster.writes();
    let dyn_cluster: Arc<dyn Cluster> = cluster.clone();
    let options = RunOptions {
        owner: Some(Arc::new(owner)),
        ..RunOptions::default()
    };
    let outcome = engine::run(
        project,
        &Entry::Role(role.to_path_buf()),
        vars,
        Some(dyn_cluster),
        options,
    )
    .await;
    (cluster.writes() != before, outcome.api_time)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let role =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zundoko-seed/roles/hikawa");
    runtime.block_on(async {
        // Whole songs.
        let mut total = Duration::ZERO;
        let mut api = Duration::ZERO;
        let mut reconciles = 0u64;
        // ENKA_BENCH_STEADY_ONLY=1 skips the songs (for profiling).
        let songs = if std::env::var_os("ENKA_BENCH_STEADY_ONLY").is_some() { 0 } else { 50 };
        for seed in 0..songs {
            let project = load_project(seed);
            let cluster = cluster();
            loop {
                let started = Instant::now();
                let (wrote, api_time) = reconcile(&project, &cluster, &role).await;
                total += started.elapsed();
                api += api_time;
                reconciles += 1;
                if !wrote {
                    break;
                }
            }
        }
        let per_song = reconciles as f64 / songs.max(1) as f64;
        let per = |d: Duration, n: u64| d.as_secs_f64() * 1e6 / n as f64;
        println!(
            "engine: {:.1} µs engine time per reconcile over {songs} songs ({:.1} µs in total, {:.1} µs of it in the in-memory API; {reconciles} reconciles, {per_song:.1} per song to Kiyoshi)",
            per(total - api, reconciles),
            per(total, reconciles),
            per(api, reconciles)
        );

        // Steady state: the song is over, every reconcile is a no-op.
        let project = load_project(1);
        let cluster = cluster();
        while reconcile(&project, &cluster, &role).await.0 {}
        for _ in 0..200 {
            reconcile(&project, &cluster, &role).await;
        }
        let iterations = if songs == 0 { 50_000u32 } else { 5_000u32 };
        let started = Instant::now();
        let mut api = Duration::ZERO;
        for _ in 0..iterations {
            api += reconcile(&project, &cluster, &role).await.1;
        }
        let elapsed = started.elapsed();
        println!(
            "engine: {:.1} µs engine time per steady-state reconcile ({:.1} µs with the in-memory API; {iterations} iterations; target < 50 µs)",
            (elapsed - api).as_secs_f64() * 1e6 / f64::from(iterations),
            elapsed.as_secs_f64() * 1e6 / f64::from(iterations)
        );
        let started = Instant::now();
        let loads = 50u32;
        for seed in 0..loads {
            let _ = load_project(u64::from(seed));
        }
        println!(
            "engine: {:.2} ms to load and compile the role (once per file change)",
            started.elapsed().as_secs_f64() * 1e3 / f64::from(loads)
        );
    });
}
