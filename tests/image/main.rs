//! enka's container image, built with Docker from the Dockerfile and run as
//! the Deployment in `config/` runs it, against a real control plane: the
//! seed's Hikawa sings to Kiyoshi from inside the image, a role of bridged
//! tasks registers what ansible-playbook registers, and an Operator SDK
//! scaffold built `FROM` the image with nothing else changed runs its
//! sample to Successful.
//!
//! `make image-test` starts Docker Engine (installed from Debian's
//! packages), builds the image without a registry (scripts/image/build.sh)
//! and runs this with ENKA_IMAGE naming it and DOCKER the engine's CLI.
//! Scenarios run one after another: each container shares the host's
//! network (the control plane listens on 127.0.0.1), so their ports would
//! collide.

#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;

#[path = "../integration/runner.rs"]
mod runner;

// Its #[tokio::test] is not built here; the scaffold it generates is.
#[allow(dead_code, unused_imports)]
#[path = "../integration/scaffold.rs"]
mod integration_scaffold;

#[allow(dead_code)]
#[path = "../bridged/compare.rs"]
mod compare;

mod bridged;
mod container;
mod deployed;
mod galaxy;
mod scaffold;
mod seed;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube_env::KubeEnv;

use runner::Scenario;

pub struct Ctx {
    env: KubeEnv,
    client: Client,
    /// The image under test (ENKA_IMAGE).
    image: String,
    /// Its worker's ansible-core line (ENKA_IMAGE_LINE, 2.18 unless set),
    /// as scripts/image/build.sh built it.
    line: String,
    /// The API server's CA, as a pod's ServiceAccount volume holds it.
    ca_pem: Vec<u8>,
    api_port: u16,
    /// Galaxy for the operators' image builds.
    galaxy: galaxy::Galaxy,
}

impl Ctx {
    async fn start() -> Arc<Ctx> {
        let image = std::env::var("ENKA_IMAGE").expect(
            "ENKA_IMAGE names the image under test; `make image-test` builds it and sets it",
        );
        let line = std::env::var("ENKA_IMAGE_LINE").unwrap_or_else(|_| "2.18".to_owned());
        let bytes = container::docker_ok(&["image", "inspect", "--format", "{{.Size}}", &image]);
        eprintln!(
            "image: {image} is {:.0} MB",
            bytes.trim().parse::<f64>().unwrap_or(0.0) / 1e6
        );
        let env = KubeEnv::start(kube_env::Options::default())
            .await
            .expect("a real control plane (kube-apiserver, etcd, controller-manager)");
        let client = env.client().expect("a client of the control plane");
        let api_port = env
            .server_url()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the API server's port");
        let ca_pem = certificate_authority(&env);
        let shared = support::shared_operators();
        let galaxy = galaxy::Galaxy::start(shared.map(|s| s.join("collections")).as_deref());
        Arc::new(Ctx {
            galaxy,
            line,
            env,
            client,
            image,
            ca_pem,
            api_port,
        })
    }
}

/// The CA of the control plane's kubeconfig, PEM.
fn certificate_authority(env: &KubeEnv) -> Vec<u8> {
    use base64::Engine;
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig()).expect("its kubeconfig");
    let cluster = kubeconfig.clusters[0]
        .cluster
        .clone()
        .expect("a cluster in the kubeconfig");
    if let Some(data) = cluster.certificate_authority_data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .expect("base64 CA data");
    }
    let path = cluster
        .certificate_authority
        .expect("the kubeconfig names its CA");
    std::fs::read(path).expect("the CA file")
}

macro_rules! scenarios {
    ($ctx:expr; $($name:literal => $run:path,)*) => {
        vec![$(($name.to_owned(), Box::pin($run($ctx.clone())) as _),)*]
    };
}

/// The longest a scenario may take: a scaffold's image build included.
const SCENARIO_LIMIT: Duration = Duration::from_secs(600);

fn main() {
    let started = Instant::now();
    runner::main(async {
        let ctx = Ctx::start().await;
        eprintln!(
            "image: control plane up in {:.1} s; image {}",
            started.elapsed().as_secs_f64(),
            ctx.image
        );
        let all: Vec<Scenario> = scenarios![ctx;
            "seed: the image as config/ deploys it sings to Kiyoshi, probes and RBAC metrics answer" => seed::sings_to_kiyoshi_as_deployed,
            "bridged: command, file, template and a collection module in the image register what Ansible registers" => bridged::bridged_tasks_in_the_image,
            "scaffold: an Operator SDK scaffold FROM the image, nothing else changed, runs its sample" => scaffold::scaffold_from_the_image,
        ];
        runner::run(
            "image",
            "scenarios",
            all,
            &runner::filters(),
            SCENARIO_LIMIT,
            || async { String::new() },
        )
        .await
    });
}
