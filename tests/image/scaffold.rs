//! An Operator SDK scaffold (operator-sdk v1.42's, as the scaffold test
//! generates it, with the tutorial's task), its Dockerfile's FROM line
//! naming enka's image and nothing else changed, built with Docker and
//! deployed by its own `config/default`: its sample reaches Successful.
//!
//! The scaffold's Dockerfile installs its requirements.yml from Galaxy,
//! which is not reachable here: tests/image/galaxy.py stands in for it at
//! galaxy.ansible.com during the build, serving the collections at the
//! versions the scaffold pins from their published packages.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, GroupVersionKind};

use crate::Ctx;
use crate::container::build;
use crate::deployed::deploy;
use crate::integration_scaffold::{
    PROJECT, TUTORIAL_DEFAULTS, TUTORIAL_TASK, scaffold, swap_base_image_to,
};
use crate::support::{eventually, kubectl, repo_path, shared_operators};

/// The Galaxy stand-in, stopped on drop.
struct Galaxy {
    child: Child,
    workdir: PathBuf,
}

impl Galaxy {
    /// Serves Galaxy's install API on 127.0.0.1:443 as galaxy.ansible.com,
    /// with operator_sdk.util from `collections` (published only on Galaxy).
    fn start(collections: &Path) -> Galaxy {
        let python = std::env::var("ENKA_ANSIBLE_PYTHON")
            .expect("ENKA_ANSIBLE_PYTHON: the worker's Python, with ansible-galaxy");
        let ansible_galaxy = Path::new(&python).with_file_name("ansible-galaxy");
        let workdir = std::env::temp_dir().join(format!("enka-galaxy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&workdir);
        std::fs::create_dir_all(&workdir).unwrap();
        let ready = workdir.join("ready");
        let log = std::fs::File::create(workdir.join("log")).unwrap();
        let child = Command::new(&python)
            .arg(repo_path("tests/image/galaxy.py"))
            .args(["serve", "--port", "443", "--source"])
            .arg(collections)
            .arg("--ansible-galaxy")
            .arg(&ansible_galaxy)
            .arg("--workdir")
            .arg(&workdir)
            .arg("--ready")
            .arg(&ready)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting the Galaxy stand-in");
        let mut galaxy = Galaxy { child, workdir };
        let started = std::time::Instant::now();
        while !ready.exists() {
            if let Ok(Some(status)) = galaxy.child.try_wait() {
                panic!("the Galaxy stand-in exited ({status}):\n{}", galaxy.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "the Galaxy stand-in did not start:\n{}",
                galaxy.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        galaxy
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.workdir.join("log")).unwrap_or_default()
    }
}

impl Drop for Galaxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

pub async fn scaffold_from_the_image(ctx: Arc<Ctx>) {
    let Some(shared) = shared_operators() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("enka-image-scaffold-{}", std::process::id()));
    scaffold(&dir);
    swap_base_image_to(&dir, &ctx.image);
    std::fs::write(dir.join("roles/memcached/tasks/main.yml"), TUTORIAL_TASK).unwrap();
    std::fs::write(
        dir.join("roles/memcached/defaults/main.yml"),
        TUTORIAL_DEFAULTS,
    )
    .unwrap();

    let tag = "enka.local/memcached-operator:dev";
    {
        let galaxy = Galaxy::start(&shared.join("collections"));
        // The image's base trusts the stand-in's CA (ENKA_BASE_EXTRA_CA).
        build(
            &dir,
            tag,
            &[
                "--network",
                "host",
                "--add-host",
                "galaxy.ansible.com:127.0.0.1",
            ],
        );
        eprintln!("image: scaffold built; Galaxy stand-in:\n{}", galaxy.log());
    }

    let deployed = deploy(&ctx, &dir, tag, &[]).await;
    deployed.assert_leader(&ctx, PROJECT).await;
    let ns = ctx
        .env
        .namespace("image-scaffold")
        .await
        .expect("a namespace");
    let sample = dir.join("config/samples/cache_v1alpha1_memcached.yaml");
    kubectl(
        &ctx.env,
        &["apply", "-n", &ns, "-f", sample.to_str().unwrap()],
    );
    let gvk = GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached");
    let (resource, _) = kube::discovery::pinned_kind(&ctx.client, &gvk)
        .await
        .expect("the Memcached kind");
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &resource);
    eventually(
        "the sample's Successful condition",
        Duration::from_secs(120),
        || async {
            let object = memcacheds.get("memcached-sample").await.ok()?;
            let conditions = object.data["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "Successful" && c["status"] == "True")
                .then_some(())
        },
    )
    .await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(ctx.client.clone(), &ns);
    deployments
        .get("memcached-sample-memcached")
        .await
        .expect("the tutorial task's Deployment");
    let metrics = deployed
        .assert_metrics_behind_rbac(&ctx, &format!("{PROJECT}-metrics-reader"))
        .await;
    assert!(metrics.contains("ansible_operator_reconcile_result{GVK=\"cache.example.com/v1alpha1, Kind=Memcached\",result=\"succeeded\"}"), "{metrics}");
    deployed.assert_clean_stop();
    ctx.env
        .delete_namespace(&ns)
        .await
        .expect("deleting the namespace");
    let _ = std::fs::remove_dir_all(&dir);
}
