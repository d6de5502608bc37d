//! Faults, end to end: the shipped Zundoko operator sings while its control
//! plane or enka itself is broken under it, and every song must still end in
//! one Kiyoshi with nothing lost and nothing twice (`zundoko::assert_song`).
//!
//! One control plane (etcd, kube-apiserver; restarted in place by
//! `KubeEnv::restart`), scenarios one after another, each in its own
//! namespace with its own enka. Arguments filter scenarios by name. The
//! workload faults (`nodes`) run a role that waits for its Deployment on a
//! second control plane with simulated nodes.

#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../integration/enka.rs"]
mod enka;

#[path = "../integration/runner.rs"]
mod runner;

mod nodes;
mod stall;

// Its #[tokio::test]s are not built here, so some imports go unused.
#[allow(dead_code, unused_imports)]
#[path = "../integration/zundoko.rs"]
mod zundoko;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube_env::{Component, KubeEnv};
use serde_json::json;
use tokio::sync::Mutex;

use enka::Enka;
use runner::Scenario;

/// Milliseconds between two Zundokos: a song of ~50 takes ~5 s, long enough
/// to break something in the middle of it.
const INTERVAL_MS: u64 = 100;
const SONG_LIMIT: Duration = Duration::from_secs(180);

struct Ctx {
    env: KubeEnv,
    client: Client,
    /// A second control plane, with simulated nodes, for the workload faults.
    nodes: nodes::NodesEnv,
    /// The enkas of the running scenario, for the log on failure.
    operators: Mutex<Vec<Arc<Mutex<Enka>>>>,
}

impl Ctx {
    async fn namespace(&self, prefix: &str) -> String {
        self.env.namespace(prefix).await.expect("a namespace")
    }

    fn start_enka(&self, namespace: &str, args: &[&str], tag: &str) -> Enka {
        self.start_enka_with(namespace, args, tag, &[])
    }

    /// Like [`Ctx::start_enka`], with more environment variables.
    fn start_enka_with(
        &self,
        namespace: &str,
        args: &[&str],
        tag: &str,
        env: &[(&str, &str)],
    ) -> Enka {
        // Seed 42 sings some fifty Zundokos: the song is still going when
        // the fault comes after five.
        let mut vars = vec![
            ("ENKA_LOG", "info,enka=debug,kube_runtime=debug"),
            ("ENKA_RANDOM_SEED", "42"),
        ];
        vars.extend_from_slice(env);
        Enka::start_with_args(&self.env, "watches.yaml", namespace, &vars, args, tag)
    }

    async fn track(&self, enka: Enka) -> Arc<Mutex<Enka>> {
        let enka = Arc::new(Mutex::new(enka));
        self.operators.lock().await.push(enka.clone());
        enka
    }

    async fn logs(&self) -> String {
        let mut out = String::new();
        for enka in self.operators.lock().await.iter() {
            out.push_str(&enka.lock().await.log());
            out.push_str("\n---\n");
        }
        out
    }
}

/// Waits until `enka`'s log says `text`, anywhere in it: at debug level a
/// line scrolls out of the log's tail within one poll.
async fn await_log(enka: &Mutex<Enka>, what: &str, text: &str) {
    support::eventually(what, SONG_LIMIT, || async {
        enka.lock().await.full_log().contains(text).then_some(())
    })
    .await;
}

/// How many Zundokos `name` has sung; `None` while the API cannot answer.
async fn sung(client: &Client, namespace: &str, name: &str) -> Option<usize> {
    let [_, zundokos, _] = zundoko::apis(client, namespace);
    let list = zundokos.list(&ListParams::default()).await.ok()?;
    Some(
        list.items
            .iter()
            .filter(|z| {
                z.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&format!("{name}-zundoko-")))
            })
            .count(),
    )
}

/// Waits until `name` has sung at least `count` Zundokos.
async fn await_sung(client: &Client, namespace: &str, name: &str, count: usize) {
    support::eventually(
        &format!("{count} Zundokos from {name}"),
        SONG_LIMIT,
        || async { sung(client, namespace, name).await.filter(|n| *n >= count) },
    )
    .await;
}

/// Waits for Kiyoshi, riding out API errors while the fault lasts.
async fn await_kiyoshi(client: &Client, namespace: &str, name: &str) {
    let [hikawas, _, _] = zundoko::apis(client, namespace);
    support::eventually(&format!("Kiyoshi from {name}"), SONG_LIMIT, || async {
        let hikawa = hikawas.get(name).await.ok()?;
        (hikawa.data["status"]["kiyoshied"] == json!(true)).then_some(())
    })
    .await;
}

/// One Hikawa sings; `fault` breaks something after five Zundokos; the song
/// must end correctly. Returns the song's length.
async fn sing_through<F, Fut>(ctx: &Ctx, prefix: &str, fault: F) -> usize
where
    F: FnOnce(String, Arc<Mutex<Enka>>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    sing_through_with(ctx, prefix, &[], fault).await
}

/// [`sing_through`] with more environment variables for enka.
async fn sing_through_with<F, Fut>(ctx: &Ctx, prefix: &str, env: &[(&str, &str)], fault: F) -> usize
where
    F: FnOnce(String, Arc<Mutex<Enka>>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let ns = ctx.namespace(prefix).await;
    let enka = ctx
        .track(ctx.start_enka_with(&ns, &[], &format!("-{prefix}"), env))
        .await;
    enka.lock().await.await_ready().await;
    zundoko::create_hikawa(&ctx.client, &ns, INTERVAL_MS).await;
    await_sung(&ctx.client, &ns, "hikawa", 5).await;
    let [hikawas, _, _] = zundoko::apis(&ctx.client, &ns);
    let before = hikawas.get("hikawa").await.expect("the Hikawa");
    assert_ne!(
        before.data["status"]["kiyoshied"],
        json!(true),
        "the song ended before the fault: it would test nothing"
    );
    fault(ns.clone(), enka.clone()).await;
    await_kiyoshi(&ctx.client, &ns, "hikawa").await;
    let (count, _) = zundoko::assert_song(&ctx.client, &ns, "hikawa").await;
    count
}

/// `component` is stopped for 2 s in the middle of a song.
async fn restart_mid_song(ctx: &Ctx, component: Component) {
    let name = match component {
        Component::Etcd => "etcd",
        Component::ApiServer => "kube-apiserver",
    };
    let count = sing_through(ctx, &format!("{name}-restart"), |_, _| async {
        ctx.env
            .restart(component, Duration::from_secs(2))
            .await
            .unwrap_or_else(|e| panic!("{name} did not come back: {e}"));
    })
    .await;
    println!("faults: {name} down 2 s mid-song; Kiyoshi after {count} Zundokos");
}

async fn apiserver_restart(ctx: Arc<Ctx>) {
    restart_mid_song(&ctx, Component::ApiServer).await;
}

async fn etcd_restart(ctx: Arc<Ctx>) {
    restart_mid_song(&ctx, Component::Etcd).await;
}

/// With kube-apiserver stopped, etcd's revision moves past everything enka
/// has seen (a write to a key outside `/registry`) and its history is
/// compacted there; kube-apiserver comes back, and every watch enka resumes
/// asks for a compacted revision, is told 410 Gone, and must relist. Both
/// happen while the API server is down so that no write of enka's can land
/// on the compacted revision and let a watch resume cleanly.
async fn watch_expiry(ctx: Arc<Ctx>) {
    let faulty = ctx.clone();
    let count = sing_through(&ctx, "gone", |_, enka| async move {
        let etcd = faulty.env.etcd_url();
        faulty
            .env
            .restart_after(Component::ApiServer, async {
                let revision = bump_etcd_revision(&etcd).await;
                compact_etcd(&etcd, &revision).await;
            })
            .await
            .expect("kube-apiserver back");
        let enka = enka.clone();
        support::eventually("enka to see a watch expire", SONG_LIMIT, || async {
            let log = enka.lock().await.full_log();
            // kube-runtime's watcher, at debug: the 410 that makes it relist
            // (from the watch cache, "too old resource version"; from etcd
            // directly, "The resourceVersion for the provided watch is too
            // old"; both carry the code).
            log.contains("code: 410").then_some(())
        })
        .await;
    })
    .await;
    println!("faults: watches expired (410 Gone) and relisted; Kiyoshi after {count} Zundokos");
}

/// etcd's client port, from its URL.
fn etcd_port(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("etcd's port")
}

/// Writes a key kube-apiserver never reads, through etcd's JSON gateway, and
/// returns the revision the write made.
async fn bump_etcd_revision(url: &str) -> String {
    // base64 of "/enka-faults/bump" and "1".
    let request = r#"{"key":"L2Vua2EtZmF1bHRzL2J1bXA=","value":"MQ=="}"#;
    let (status, body) = support::http_post(etcd_port(url), "/v3/kv/put", request).await;
    assert_eq!(status, 200, "etcd put: {body}");
    serde_json::from_str::<serde_json::Value>(&body).expect("etcd's answer")["header"]["revision"]
        .as_str()
        .expect("a revision")
        .to_owned()
}

/// Compacts etcd's history up to `revision`, through etcd's JSON gateway.
async fn compact_etcd(url: &str, revision: &str) {
    let request = format!(r#"{{"revision":"{revision}","physical":true}}"#);
    let (status, body) = support::http_post(etcd_port(url), "/v3/kv/compaction", &request).await;
    assert_eq!(status, 200, "etcd compaction: {body}");
}

/// The seed's role writes with patches, which cannot conflict; enka's own
/// status writes (manageStatus) replace the status at a resourceVersion. So
/// this runs the memcached operator of the benches on twenty objects while
/// another writer keeps relabelling them and enka keeps being asked for new
/// sizes: its status writes meet 409 Conflict and must retry from a fresh
/// read, and every object must end Successful at its last size.
async fn conflicts(ctx: Arc<Ctx>) {
    const OBJECTS: usize = 20;
    let ns = ctx.namespace("conflicts").await;
    support::install_crd(&ctx.client, "benches/memcached/crd.yaml").await;
    let enka = ctx
        .track(Enka::start(
            &ctx.env,
            "benches/memcached/watches.yaml",
            &ns,
            &[],
        ))
        .await;
    enka.lock().await.await_ready().await;
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cache.bench.enka.dev", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &resource);
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("memcached-{i}")).collect();
    for name in &names {
        let mut object = DynamicObject::new(name, &resource);
        object.data = json!({"spec": {"size": 1}});
        memcacheds
            .create(&Default::default(), &object)
            .await
            .expect("creating a Memcached");
    }
    let conflicts_before = apiserver_conflicts(&ctx.client).await;
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut round = 0u32;
    while Instant::now() < deadline {
        round += 1;
        for name in &names {
            let relabel = json!({"metadata": {"labels": {"fault-writer": round.to_string()}}});
            let _ = memcacheds
                .patch(name, &PatchParams::default(), &Patch::Merge(&relabel))
                .await;
        }
        if round.is_multiple_of(5) {
            for name in &names {
                let resize = json!({"spec": {"size": 1 + round / 5}});
                let _ = memcacheds
                    .patch(name, &PatchParams::default(), &Patch::Merge(&resize))
                    .await;
            }
        }
    }
    let final_size = i64::from(1 + round / 5);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(ctx.client.clone(), &ns);
    for name in &names {
        support::eventually(
            &format!("{name} Successful at size {final_size}"),
            SONG_LIMIT,
            || async {
                let object = memcacheds.get(name).await.ok()?;
                let successful = object.data["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Successful" && c["status"] == "True");
                let deployment = deployments.get(&format!("{name}-memcached")).await.ok()?;
                let replicas = deployment.spec?.replicas?;
                (successful && i64::from(replicas) == final_size).then_some(())
            },
        )
        .await;
    }
    let conflicts = apiserver_conflicts(&ctx.client).await - conflicts_before;
    assert!(
        conflicts > 0.0,
        "no write met a 409: the scenario tested nothing"
    );
    println!(
        "faults: {conflicts} writes met 409 Conflict over {round} rounds of relabelling; all {OBJECTS} Memcacheds Successful at size {final_size}"
    );
}

/// 409 answers kube-apiserver has given so far.
async fn apiserver_conflicts(client: &Client) -> f64 {
    let text = support::apiserver_metrics(client).await;
    support::sum_metric_where(&text, "apiserver_request_total", "code=\"409\"")
}

async fn sigkill(ctx: Arc<Ctx>) {
    let faulty = ctx.clone();
    let count = sing_through(&ctx, "sigkill", |ns, enka| async move {
        enka.lock().await.kill();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let again = faulty
            .track(faulty.start_enka(&ns, &[], "-sigkill-again"))
            .await;
        again.lock().await.await_ready().await;
    })
    .await;
    println!("faults: enka SIGKILLed mid-song and started again; Kiyoshi after {count} Zundokos");
}

/// Two replicas with leader election and ten Hikawas singing at once: the
/// leader is SIGKILLed mid-way, the other takes over, and all ten songs end
/// correctly.
async fn leader_failover(ctx: Arc<Ctx>) {
    const HIKAWAS: usize = 10;
    let ns = ctx.namespace("failover").await;
    let flags = [
        "--leader-elect",
        "--leader-election-id=enka-test-lease",
        "--leader-election-namespace",
        ns.as_str(),
        "--leader-election-lease-duration",
        "3s",
        "--leader-election-renew-deadline",
        "2s",
        "--leader-election-retry-period",
        "500ms",
    ];
    let first = ctx.track(ctx.start_enka(&ns, &flags, "-failover-a")).await;
    await_log(&first, "the first replica to lead", "acquired leadership").await;
    let second = ctx.track(ctx.start_enka(&ns, &flags, "-failover-b")).await;
    await_log(
        &second,
        "the second replica to wait",
        "waiting for leadership",
    )
    .await;
    let names: Vec<String> = (0..HIKAWAS).map(|i| format!("hikawa-{i}")).collect();
    for name in &names {
        zundoko::create_named_hikawa(&ctx.client, &ns, name, INTERVAL_MS).await;
    }
    for name in &names {
        await_sung(&ctx.client, &ns, name, 3).await;
    }
    first.lock().await.kill();
    let took_over = Instant::now();
    await_log(
        &second,
        "the second replica to take over",
        "acquired leadership",
    )
    .await;
    let takeover = took_over.elapsed();
    let mut total = 0;
    for name in &names {
        await_kiyoshi(&ctx.client, &ns, name).await;
        total += zundoko::assert_song(&ctx.client, &ns, name).await.0;
    }
    println!(
        "faults: leader SIGKILLed with {HIKAWAS} Hikawas singing; the other led after {:.1} s; {HIKAWAS} Kiyoshis after {total} Zundokos",
        takeover.as_secs_f64()
    );
}

/// When the first line of a text log saying `text` was written (its leading
/// RFC 3339 time, with
/// the console format's colour codes taken out).
fn logged_at(log: &str, text: &str) -> Option<String> {
    let line = log.lines().find(|line| line.contains(text))?;
    let mut plain = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain.split_whitespace().next().map(str::to_owned)
}

/// Two replicas; the leader's connection to the API server stalls (its
/// bytes stop, its sockets stay open). It must stop leading within its
/// renew deadline, before the other replica may take the Lease: never two
/// leaders at once. A leader whose renewal waited on the stalled connection
/// led on until it answered.
async fn leader_stalled(ctx: Arc<Ctx>) {
    let ns = ctx.namespace("stalled").await;
    let (proxy, proxied) = proxy_to_apiserver(&ctx, "stalled").await;
    let flags = [
        "--leader-elect",
        "--leader-election-id=enka-stalled-lease",
        "--leader-election-namespace",
        ns.as_str(),
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-election-retry-period=500ms",
    ];
    let first = ctx
        .track(ctx.start_enka_with(
            &ns,
            &flags,
            "-stalled-a",
            &[("KUBECONFIG", proxied.to_str().unwrap_or_default())],
        ))
        .await;
    await_log(&first, "the proxied replica to lead", "acquired leadership").await;
    let second = ctx.track(ctx.start_enka(&ns, &flags, "-stalled-b")).await;
    await_log(
        &second,
        "the second replica to wait",
        "waiting for leadership",
    )
    .await;
    proxy.stall(true);
    await_log(
        &second,
        "the second replica to take over",
        "acquired leadership",
    )
    .await;
    let gave_up = support::eventually(
        "the stalled leader to give up",
        Duration::from_secs(30),
        || async { logged_at(&first.lock().await.full_log(), "leadership lost") },
    )
    .await;
    let took_over = logged_at(&second.lock().await.full_log(), "acquired leadership")
        .expect("the takeover line");
    assert!(
        gave_up < took_over,
        "the stalled leader gave up at {gave_up}, after the other took over at {took_over}"
    );
    support::eventually(
        "the stalled leader to exit",
        Duration::from_secs(30),
        || async { first.lock().await.exited().map(|_| ()) },
    )
    .await;
    proxy.stall(false);
    let _ = std::fs::remove_file(&proxied);
    println!(
        "faults: the leader's connection stalled; it gave up at {gave_up}, the other led at {took_over}"
    );
}

/// A stall proxy in front of kube-apiserver, and a kubeconfig that goes
/// through it.
async fn proxy_to_apiserver(ctx: &Ctx, tag: &str) -> (stall::Proxy, std::path::PathBuf) {
    let server_port: u16 = ctx
        .env
        .server_url()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("the API server's port");
    let proxy = stall::Proxy::start(server_port).await;
    let kubeconfig = std::fs::read_to_string(ctx.env.kubeconfig())
        .expect("the kubeconfig")
        .replace(
            &format!("127.0.0.1:{server_port}"),
            &format!("127.0.0.1:{}", proxy.port),
        );
    let path = std::env::temp_dir().join(format!("enka-{tag}-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, kubeconfig).expect("writing the proxied kubeconfig");
    (proxy, path)
}

/// kube-apiserver stops answering mid-song: every connection enka has stays
/// open and silent, new ones too for 5 s, and the old ones never answer
/// again (as when a load balancer or NAT loses them). Requests must time
/// out and the song go on over new connections. Without request timeouts a
/// reconcile waits on its dead connection for minutes (kube's socket read
/// timeout is 295 s), past this scenario's limit.
async fn apiserver_silent(ctx: Arc<Ctx>) {
    let (proxy, kubeconfig) = proxy_to_apiserver(&ctx, "silent").await;
    let answering_again = std::sync::Mutex::new(None);
    let env = [("KUBECONFIG", kubeconfig.to_str().unwrap_or_default())];
    let count = sing_through_with(&ctx, "silent", &env, |_, _| async {
        proxy.stall(true);
        tokio::time::sleep(Duration::from_secs(5)).await;
        proxy.sever();
        proxy.stall(false);
        *answering_again.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    })
    .await;
    let recovered = answering_again
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .map(|at| at.elapsed().as_secs_f64())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&kubeconfig);
    println!(
        "faults: kube-apiserver silent 5 s mid-song, enka's connections lost for good; Kiyoshi after {count} Zundokos, {recovered:.1} s after it answered again"
    );
}

macro_rules! scenarios {
    ($ctx:expr; $($name:literal => $run:path,)*) => {
        vec![$(($name.to_owned(), Box::pin($run($ctx.clone())) as _),)*]
    };
}

fn main() {
    runner::main(async {
        let env = KubeEnv::start(kube_env::Options::default())
            .await
            .unwrap_or_else(|e| panic!("the faults' control plane could not start: {e}"));
        let client = env.client().expect("a client");
        zundoko::install_zundoko_crds(&client).await;
        let ctx = Arc::new(Ctx {
            env,
            client,
            nodes: nodes::NodesEnv::new(),
            operators: Mutex::default(),
        });
        let all: Vec<Scenario> = scenarios![ctx;
            "kube-apiserver restarted mid-song" => apiserver_restart,
            "etcd restarted mid-song" => etcd_restart,
            "watches expire (410 Gone) and relist" => watch_expiry,
            "409 conflicts on status writes, retried from a fresh read" => conflicts,
            "enka SIGKILLed mid-song and restarted" => sigkill,
            "leader failover under load" => leader_failover,
            "the leader's connection stalls" => leader_stalled,
            "kube-apiserver goes silent mid-song" => apiserver_silent,
            "a Pod of the workload deleted while the role waits for it" => nodes::pod_deleted_while_waiting,
            "a node goes NotReady and its Pods are rescheduled" => nodes::node_not_ready,
        ];
        runner::run(
            "faults",
            "scenarios",
            all,
            &runner::filters(),
            Duration::from_secs(300),
            || ctx.logs(),
        )
        .await
    });
}
