//! The seed's Zundoko operator, as the image ships it, deployed by
//! `config/default`: the sample Hikawa sings until "Kiyoshi!", with the
//! semantics of the ansible-core line the image's worker runs.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use crate::Ctx;
use crate::container::docker_ok;
use crate::deployed::deploy;
use crate::support::{eventually, kubectl, repo_path};

/// A song with the sample's 500 ms between Zundokos is some 20 s long;
/// its length is random, so the limit leaves room for a long one.
const SONG_LIMIT: Duration = Duration::from_secs(300);

pub async fn sings_to_kiyoshi_as_deployed(ctx: Arc<Ctx>) {
    let deployed = deploy(&ctx, &repo_path(""), &ctx.image, &[]).await;
    deployed
        .assert_leader(&ctx, "zundoko-ansible-operator")
        .await;

    let ns = ctx.env.namespace("image-seed").await.expect("a namespace");
    let sample = repo_path("config/samples/zundokokiyoshi_v1beta2_hikawa.yaml");
    kubectl(
        &ctx.env,
        &["apply", "-n", &ns, "-f", sample.to_str().unwrap()],
    );
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("zundokokiyoshi.kaitoy.github.com", "v1beta2", "Hikawa"),
        "hikawas",
    );
    let hikawas: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &resource);
    let kiyoshis: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("zundokokiyoshi.kaitoy.github.com", "v1beta1", "Kiyoshi"),
            "kiyoshis",
        ),
    );
    eventually("the sample Hikawa's Kiyoshi", SONG_LIMIT, || async {
        let hikawa = hikawas.get("hikawa").await.ok()?;
        (hikawa.data["status"]["kiyoshied"] == true).then_some(())
    })
    .await;
    let sung = kiyoshis
        .list(&Default::default())
        .await
        .expect("listing Kiyoshis");
    assert_eq!(sung.items.len(), 1, "one Kiyoshi at the end of the song");

    let metrics = deployed
        .assert_metrics_behind_rbac(&ctx, "zundoko-ansible-operator-metrics-reader")
        .await;
    let line = "ansible_operator_reconcile_result{GVK=\"zundokokiyoshi.kaitoy.github.com/v1beta2, Kind=Hikawa\",result=\"succeeded\"}";
    assert!(metrics.contains(line), "missing {line} in:\n{metrics}");
    assert_line(&ctx, &deployed.container.logs());
    deployed.assert_clean_stop();
    ctx.env
        .delete_namespace(&ns)
        .await
        .expect("deleting the namespace");
}

/// The image's worker runs the ansible-core line it was built for, and the
/// operator chose that line's semantics by itself (`auto`).
fn assert_line(ctx: &Ctx, logs: &str) {
    let version = docker_ok(&[
        "run",
        "--rm",
        "--entrypoint",
        "python3",
        &ctx.image,
        "-c",
        "import ansible.release; print(ansible.release.__version__)",
    ]);
    assert!(
        version.trim().starts_with(&format!("{}.", ctx.line)),
        "the image's ansible-core is {version}, not on line {}",
        ctx.line
    );
    let semantics = if ctx.line == "2.18" {
        "Ansible218"
    } else {
        "Ansible219"
    };
    assert!(
        logs.lines()
            .any(|l| l.contains("ansible-core line") && l.contains(semantics)),
        "the operator should follow {semantics} on ansible-core {version}:\n{logs}"
    );
}
