//! The README's "Porting an Ansible operator", step by step, on the
//! memcached operator: a copy of this repository's layout takes in the
//! operator's files, checks clean and runs it.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

use crate::cluster::{
    Ctx, MEMCACHED_PROJECT, apply_crds, await_condition, await_object, create_namespace,
};
use crate::enka::Enka;
use crate::support::{kubectl, repo_path};

const NAMESPACE: &str = "compat-porting";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("creating {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copying {}: {e}", entry.path().display()));
        }
    }
}

pub async fn readme_porting_guide(ctx: Arc<Ctx>) {
    let readme = std::fs::read_to_string(repo_path("README.md")).expect("README.md");
    let guide = readme
        .split("## Porting an Ansible operator")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has a porting guide");
    // The steps this test performs, as the guide words them.
    for step in [
        "Copy its `watches.yaml` and `roles/` (and `playbooks/`, if it has them)",
        "enka check",
        "Replace `config/crd/bases` with its CRDs",
        "make install",
        "enka run --watches-file watches.yaml",
    ] {
        assert!(
            guide.contains(step),
            "the porting guide no longer says {step:?}"
        );
    }

    // A checkout of enka to port into.
    let work = std::env::temp_dir().join(format!("enka-porting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("a work directory");
    std::fs::copy(repo_path("watches.yaml"), work.join("watches.yaml")).expect("watches.yaml");
    for dir in ["roles", "config"] {
        copy_dir(&repo_path(dir), &work.join(dir));
    }

    // 1. Copy its watches.yaml, roles/ and playbooks/ over, unchanged.
    let operator = repo_path(MEMCACHED_PROJECT);
    std::fs::copy(operator.join("watches.yaml"), work.join("watches.yaml"))
        .expect("copying watches.yaml");
    copy_dir(&operator.join("roles"), &work.join("roles"));
    copy_dir(&operator.join("playbooks"), &work.join("playbooks"));

    // 2. enka check loads everything.
    let check = Command::new(env!("CARGO_BIN_EXE_enka"))
        .arg("check")
        .current_dir(&work)
        .output()
        .expect("running enka check");
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && stdout.contains("\nenka check: ok"),
        "enka check in the ported project:\n{stdout}{}",
        String::from_utf8_lossy(&check.stderr)
    );

    // 3. Its CRDs replace the seed's, and are installed (what `make install`
    //    does: kubectl apply -f config/crd/bases).
    let bases = work.join("config/crd/bases");
    std::fs::remove_dir_all(&bases).expect("removing the seed's CRDs");
    copy_dir(&operator.join("config/crd/bases"), &bases);
    apply_crds(&ctx.env, &bases);

    // enka run on the ported watches.yaml, then the operator's own sample.
    create_namespace(&ctx.client, NAMESPACE).await;
    let watches = work.join("watches.yaml");
    let mut enka = Enka::start(&ctx.env, &watches.display().to_string(), NAMESPACE, &[]);
    enka.await_ready().await;
    let sample = operator.join("config/samples/cache_v1alpha1_memcached.yaml");
    kubectl(
        &ctx.env,
        &[
            "apply",
            "-n",
            NAMESPACE,
            "-f",
            &sample.display().to_string(),
        ],
    );
    let memcacheds = ctx.custom("cache.compat.enka.dev", "Memcached", NAMESPACE);
    await_condition(&memcacheds, "memcached-sample", "Successful", "True").await;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    await_object(&deployments, "memcached-sample-memcached").await;
    drop(enka);
    let _ = std::fs::remove_dir_all(&work);
}
