//! A role of tasks enka has no native code for (tests/bridged: command,
//! shell, file, copy, template, stat, uri, community.general's ini_file, a
//! library module, a filter plugin, vault), in an operator image built FROM
//! enka's as a user builds theirs, run as the Deployment runs the manager:
//! non-root, read-only root, only its emptyDir mounts writable. What each
//! task registers must be what ansible-playbook registered.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value as Json, json};

use crate::Ctx;
use crate::compare::{differences_where, serve_status};
use crate::container::{Identity, build_with_galaxy, docker_ok};
use crate::deployed::{account, render, start};
use crate::support::{eventually, kubectl, repo_path};

/// The role's one collection (ini_file), at the version of the `ansible`
/// package the tests' virtualenv has, which its results were recorded with.
const REQUIREMENTS: &str = "---
collections:
  - name: community.general
    version: \"10.7.6\"
";

/// The lines the image's Dockerfile tells a user porting an operator to
/// write, plus the role's vault password.
const DOCKERFILE: &str = "FROM {image}
COPY requirements.yml ${HOME}/requirements.yml
RUN ansible-galaxy collection install -r ${HOME}/requirements.yml
COPY watches.yaml ${HOME}/watches.yaml
COPY roles/ ${HOME}/roles/
COPY vault-password.txt ${HOME}/vault-password.txt
";

/// Where the probe's files go in the container: its /tmp is an emptyDir.
const WORKDIR: &str = "/tmp/probe";

fn build_operator_image(ctx: &Ctx) -> String {
    let dir = std::env::temp_dir().join(format!("enka-image-bridged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let copy = |from: &str, to: &str| {
        let status = std::process::Command::new("cp")
            .args([
                "-r",
                repo_path(from).to_str().unwrap(),
                dir.join(to).to_str().unwrap(),
            ])
            .status()
            .expect("cp");
        assert!(status.success(), "copying {from}");
    };
    copy("tests/bridged/watches.yaml", "watches.yaml");
    copy("tests/bridged/roles", "roles");
    copy("tests/bridged/vault-password.txt", "vault-password.txt");
    std::fs::write(dir.join("requirements.yml"), REQUIREMENTS).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        DOCKERFILE.replace("{image}", &ctx.image),
    )
    .unwrap();
    let tag = "enka.local/enka-bridged-test:dev";
    build_with_galaxy(&ctx.galaxy, &dir, tag);
    let _ = std::fs::remove_dir_all(&dir);
    tag.to_owned()
}

/// What differs between the recording's machine and the container without
/// any module deciding it: the recording ran as root on ext4, the image
/// runs as its user (65532, `enka`, whose group must resolve) on the
/// Deployment's emptyDir (tmpfs here): no file attributes, directory
/// sizes of tmpfs, and no `file` command for stat's mimetype and charset.
fn as_in_the_image(value: &mut Json) {
    match value {
        Json::Object(map) => {
            for key in ["attr_flags", "attributes", "mimetype", "charset"] {
                map.remove(key);
            }
            if map.get("state") == Some(&json!("directory"))
                || map.get("isdir") == Some(&json!(true))
            {
                map.remove("size");
            }
            for (key, value) in map.iter_mut() {
                match key.as_str() {
                    "uid" | "gid" if *value == json!(0) => *value = json!(65532),
                    "owner" | "group" | "pw_name" | "gr_name" if *value == json!("root") => {
                        *value = json!("enka")
                    }
                    _ => as_in_the_image(value),
                }
            }
        }
        Json::Array(items) => items.iter_mut().for_each(as_in_the_image),
        _ => {}
    }
}

pub async fn bridged_tasks_in_the_image(ctx: Arc<Ctx>) {
    let image = build_operator_image(&ctx);
    for crd in [
        "tests/bridged/config/crd.yaml",
        "tests/bridged/config/crd-fault.yaml",
    ] {
        kubectl(&ctx.env, &["apply", "-f", crd]);
    }
    kubectl(
        &ctx.env,
        &[
            "wait",
            "--for=condition=established",
            "--timeout=60s",
            "crd/probes.bridged.enka.dev",
        ],
    );
    let ns = ctx
        .env
        .namespace("image-bridged")
        .await
        .expect("a namespace");
    // The role reads and writes what the seed's RBAC does not cover: its
    // ServiceAccount may do anything, the pod is otherwise the Deployment's.
    let identity = Identity {
        token: account(&ctx, &ns, "bridged-operator", Some("cluster-admin")).await,
        namespace: ns.clone(),
        ca_pem: ctx.ca_pem.clone(),
    };
    let manifests = render(&ctx, &repo_path(""));
    let vault = "--ansible-args=--vault-password-file /opt/ansible/vault-password.txt".to_owned();
    let deployed = start(&ctx, manifests, &image, identity, &[vault]).await;
    docker_ok(&["exec", &deployed.container.name, "mkdir", "-p", WORKDIR]);

    let port = serve_status();
    crate::compare::create_probe(&ctx.client, &ns, WORKDIR, port).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let data = eventually("the probe's results", Duration::from_secs(120), || async {
        config_maps.get_opt("probe-results").await.ok()??.data
    })
    .await;
    let results: Json = serde_json::from_str(&data["results"]).expect("results as JSON");
    let differences = differences_where(&results, WORKDIR, port, as_in_the_image);
    assert!(
        differences.is_empty(),
        "registered results in the image differ from ansible-core's:\n{}\n{}",
        differences.join("\n"),
        deployed.container.logs()
    );
    deployed.assert_clean_stop();
    ctx.env
        .delete_namespace(&ns)
        .await
        .expect("deleting the namespace");
}
