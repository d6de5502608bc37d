//! An Operator SDK scaffold (operator-sdk v1.42's, as the scaffold test
//! generates it, with the tutorial's task), its Dockerfile's FROM line
//! naming enka's image and nothing else changed, built with Docker and
//! deployed by its own `config/default`: its sample reaches Successful.
//!
//! The scaffold's Dockerfile installs its requirements.yml (operator_sdk.util
//! 0.5.0, kubernetes.core 3.2.0, cloud.common 3.0.0, community.docker
//! 3.12.1) from Galaxy, stood in for during the build (galaxy.rs).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, GroupVersionKind};

use crate::Ctx;
use crate::container::build_with_galaxy;
use crate::deployed::deploy;
use crate::integration_scaffold::{
    PROJECT, TUTORIAL_DEFAULTS, TUTORIAL_TASK, await_tutorial_sample, scaffold, swap_base_image_to,
};
use crate::support::{kubectl, shared_operators};

pub async fn scaffold_from_the_image(ctx: Arc<Ctx>) {
    if shared_operators().is_none() {
        return; // operator_sdk.util, which the scaffold requires, is not here
    }
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
    build_with_galaxy(&ctx.galaxy, &dir, tag);

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
    await_tutorial_sample(&ctx.client, &memcacheds, &ns, Duration::from_secs(120)).await;
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
