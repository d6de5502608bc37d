//! `enka diff` on the real control plane: the shipped Zundoko operator shows
//! the next Zundoko it would create and the Hikawa status it would write,
//! while every object keeps its resourceVersion and nothing new appears; on
//! a Hikawa whose song is over it says there is nothing to do (exit 0).

use std::collections::BTreeMap;
use std::process::Command;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube_env::KubeEnv;
use serde_json::json;

use crate::support::repo_path;
use crate::zundoko::{apis, install_zundoko_crds};

/// Every object of the namespace the operator could touch, by kind and
/// name, with its resourceVersion.
async fn resource_versions(client: &kube::Client, ns: &str) -> BTreeMap<String, String> {
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Event>(&()),
    );
    let [hikawas, zundokos, kiyoshis] = apis(client, ns);
    let mut versions = BTreeMap::new();
    for (kind, api) in [
        ("Hikawa", hikawas),
        ("Zundoko", zundokos),
        ("Kiyoshi", kiyoshis),
        ("Event", events),
    ] {
        for object in api.list(&ListParams::default()).await.unwrap() {
            versions.insert(
                format!("{kind}/{}", object.metadata.name.unwrap_or_default()),
                object.metadata.resource_version.unwrap_or_default(),
            );
        }
    }
    versions
}

fn enka_diff(env: &KubeEnv, ns: &str, name: &str, output: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args([
            "diff",
            "--name",
            name,
            "--namespace",
            ns,
            "--watches-file",
            &repo_path("watches.yaml").display().to_string(),
            "-o",
            output,
        ])
        .env("KUBECONFIG", env.kubeconfig())
        .output()
        .expect("running enka diff");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn diff_shows_the_next_zundoko_and_writes_nothing() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_zundoko_crds(&client).await;
    let ns = env.namespace("diff").await.unwrap();
    let [hikawas, zundokos, _] = apis(&client, &ns);
    let mut hikawa = DynamicObject::new(
        "hikawa",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "zundokokiyoshi.kaitoy.github.com",
                "v1beta2",
                "Hikawa",
            ),
            "hikawas",
        ),
    );
    hikawa.data = json!({"spec": {"intervalMillis": 500, "numZundokos": "1"}});
    hikawas
        .create(&PostParams::default(), &hikawa)
        .await
        .unwrap();
    let before = resource_versions(&client, &ns).await;

    let (code, stdout, stderr) = enka_diff(env, &ns, "hikawa", "text");
    assert_eq!(
        code, 1,
        "changes exit 1\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let zundoko = format!(
        "reconciled/zundokokiyoshi.kaitoy.github.com/v1beta1/Zundoko/{ns}/hikawa-zundoko-0001 (create)"
    );
    assert!(stdout.contains(&zundoko), "{zundoko} in\n{stdout}");
    assert!(
        stdout.contains("+  say: "),
        "the Zundoko's song line in\n{stdout}"
    );
    // The status the role writes with k8s_status, against the live one.
    assert!(stdout.contains("+  numZundokosSaid: '0'"), "{stdout}");
    assert!(stdout.contains("+  kiyoshied: false"), "{stdout}");

    let (code, json_out, _) = enka_diff(env, &ns, "hikawa", "json");
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&json_out).unwrap();
    let created: Vec<&str> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "create")
        .filter_map(|c| c["after"]["metadata"]["name"].as_str())
        .collect();
    assert_eq!(created, ["hikawa-zundoko-0001"], "{json_out}");

    // Nothing was written: same objects, same resourceVersions, no Zundoko.
    assert_eq!(resource_versions(&client, &ns).await, before);
    assert!(
        zundokos
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // A song that is over: nothing to do.
    let mut done = hikawa.clone();
    done.metadata.name = Some("done".into());
    done.data = json!({"spec": {"intervalMillis": 500, "numZundokos": "0", "sayKiyoshi": true}});
    hikawas.create(&PostParams::default(), &done).await.unwrap();
    hikawas
        .patch_status(
            "done",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"kiyoshied": true, "numZundokosSaid": "0"}})),
        )
        .await
        .unwrap();
    let before = resource_versions(&client, &ns).await;
    let (code, stdout, stderr) = enka_diff(env, &ns, "done", "text");
    assert_eq!(
        code, 0,
        "an up-to-date Hikawa exits 0\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("no changes"), "{stdout}");
    assert_eq!(resource_versions(&client, &ns).await, before);

    // A manifest of a Hikawa nobody created yet: it would be created, with
    // its first Zundoko, and still nothing is written.
    let manifest = std::env::temp_dir().join(format!("enka-diff-{ns}.yaml"));
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta2\nkind: Hikawa\nmetadata:\n  name: fresh\n  namespace: {ns}\nspec:\n  intervalMillis: 500\n  numZundokos: '1'\n"
        ),
    )
    .unwrap();
    let before = resource_versions(&client, &ns).await;
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args([
            "diff",
            "-f",
            &manifest.display().to_string(),
            "--watches-file",
        ])
        .arg(repo_path("watches.yaml"))
        .env("KUBECONFIG", env.kubeconfig())
        .output()
        .expect("running enka diff -f");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("v1beta2/Hikawa/{ns}/fresh (create)")),
        "{stdout}"
    );
    assert!(stdout.contains("fresh-zundoko-0001 (create)"), "{stdout}");
    assert_eq!(resource_versions(&client, &ns).await, before);
    assert!(hikawas.get_opt("fresh").await.unwrap().is_none());
    let _ = std::fs::remove_file(&manifest);

    // A Hikawa that is not there is an error, not a diff.
    let (code, _, stderr) = enka_diff(env, &ns, "nowhere", "text");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");
    env.delete_namespace(&ns).await.unwrap();
}
