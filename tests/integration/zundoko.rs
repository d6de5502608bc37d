//! The seed's Zundoko operator, end to end: its CRDs, its watches.yaml and
//! its hikawa role, unchanged, run by the `enka` binary against the real
//! control plane, until the Hikawa says "Kiyoshi!".

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube_env::KubeEnv;
use serde_json::json;

use crate::enka::Enka;
use crate::support::{eventually, install_crd};

const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
}

/// Creates the Hikawa `hikawa` in `namespace`; the Hikawas of that namespace.
pub async fn create_hikawa(
    client: &kube::Client,
    namespace: &str,
    interval_millis: u64,
) -> Api<DynamicObject> {
    create_named_hikawa(client, namespace, "hikawa", interval_millis).await
}

/// The Zundoko kinds' APIs in `namespace`: Hikawas, Zundokos, Kiyoshis.
pub fn apis(client: &kube::Client, namespace: &str) -> [Api<DynamicObject>; 3] {
    [
        ("v1beta2", "Hikawa", "hikawas"),
        ("v1beta1", "Zundoko", "zundokos"),
        ("v1beta1", "Kiyoshi", "kiyoshis"),
    ]
    .map(|(version, kind, plural)| {
        Api::namespaced_with(client.clone(), namespace, &resource(version, kind, plural))
    })
}

/// Checks the finished song of the Hikawa `name` from the objects
/// themselves: Zundokos `<name>-zundoko-0001…N` with no gap and no extra
/// (nothing lost, nothing twice), one "Zun Zun Zun Zun Doko" and only at the
/// end, one Kiyoshi, and the Hikawa's counts equal to N. Returns N and the
/// song.
pub async fn assert_song(client: &kube::Client, namespace: &str, name: &str) -> (usize, String) {
    let [hikawas, zundokos, kiyoshis] = apis(client, namespace);
    let hikawa = hikawas.get(name).await.expect("the Hikawa");
    let prefix = format!("{name}-zundoko-");
    let by_name: BTreeMap<String, DynamicObject> = zundokos
        .list(&ListParams::default())
        .await
        .expect("listing Zundokos")
        .items
        .into_iter()
        .filter_map(|z| Some((z.metadata.name.clone()?, z)))
        .filter(|(n, _)| n.starts_with(&prefix))
        .collect();
    let count = by_name.len();
    let expected: Vec<String> = (1..=count).map(|i| format!("{prefix}{i:04}")).collect();
    assert_eq!(
        by_name.keys().cloned().collect::<Vec<_>>(),
        expected,
        "{name}: a gap or an extra Zundoko"
    );
    let sung = by_name
        .values()
        .map(|z| z.data["spec"]["say"].as_str().unwrap_or("?"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(sung.ends_with("Zun Zun Zun Zun Doko"), "{name}: {sung}");
    assert_eq!(
        sung.matches("Zun Zun Zun Zun Doko").count(),
        1,
        "{name}: {sung}"
    );
    let uid = hikawa.metadata.uid.clone().unwrap_or_default();
    for z in by_name.values() {
        let owners = z.metadata.owner_references.as_ref().expect("owned");
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].uid.as_str()),
            ("Hikawa", uid.as_str())
        );
    }
    let kiyoshi_name = format!("{name}-kiyoshi");
    let kiyoshis: Vec<DynamicObject> = kiyoshis
        .list(&ListParams::default())
        .await
        .expect("listing Kiyoshis")
        .items
        .into_iter()
        .filter(|k| k.metadata.name.as_deref() == Some(kiyoshi_name.as_str()))
        .collect();
    assert_eq!(kiyoshis.len(), 1, "{name}: one Kiyoshi");
    assert_eq!(kiyoshis[0].data["spec"]["say"], "Kiyoshi !");
    assert_eq!(
        hikawa.data["status"]["numZundokosSaid"],
        json!(count.to_string()),
        "{name}"
    );
    assert_eq!(
        hikawa.data["spec"]["numZundokos"],
        json!(count.to_string()),
        "{name}"
    );
    (count, sung)
}

/// Creates the Hikawa `name` in `namespace`; the Hikawas of that namespace.
pub async fn create_named_hikawa(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    interval_millis: u64,
) -> Api<DynamicObject> {
    let hikawa_resource = resource("v1beta2", "Hikawa", "hikawas");
    let hikawas: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &hikawa_resource);
    let mut hikawa = DynamicObject::new(name, &hikawa_resource);
    hikawa.data = json!({"spec": {"intervalMillis": interval_millis}});
    hikawas
        .create(&PostParams::default(), &hikawa)
        .await
        .unwrap();
    hikawas
}

/// Waits until the Hikawa `hikawa` says it is kiyoshied.
pub async fn await_kiyoshi(hikawas: &Api<DynamicObject>, what: &str, limit: Duration) {
    eventually(what, limit, || async move {
        let h = hikawas.get("hikawa").await.unwrap();
        (h.data["status"]["kiyoshied"] == json!(true)).then_some(())
    })
    .await
}

pub async fn install_zundoko_crds(client: &kube::Client) {
    for crd in ["hikawas", "zundokos", "kiyoshis"] {
        install_crd(client, &format!("config/crd/bases/{GROUP}_{crd}.yaml")).await;
    }
}

#[tokio::test]
async fn the_seed_operator_sings_until_kiyoshi() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_zundoko_crds(&client).await;
    let ns = env.namespace("zundoko").await.unwrap();
    let enka = Enka::start(
        env,
        "tests/fixtures/zundoko-seed/watches.yaml",
        &ns,
        &[("ENKA_RANDOM_SEED", "42")],
    );

    let hikawas: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &resource("v1beta2", "Hikawa", "hikawas"),
    );
    let zundokos: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &resource("v1beta1", "Zundoko", "zundokos"),
    );
    let kiyoshis: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &resource("v1beta1", "Kiyoshi", "kiyoshis"),
    );
    let mut hikawa = DynamicObject::new("hikawa", &resource("v1beta2", "Hikawa", "hikawas"));
    hikawa.data = json!({"spec": {"intervalMillis": 500}});
    let started = Instant::now();
    let created = hikawas
        .create(&PostParams::default(), &hikawa)
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let h = hikawas.get("hikawa").await.unwrap();
            if h.data["status"]["kiyoshied"] == json!(true) {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no Kiyoshi within 60 s; enka's log:\n{}", enka.log()));
    let time_to_kiyoshi = started.elapsed();

    // The song, read from the objects themselves.
    let (count, sung) = assert_song(&client, &ns, "hikawa").await;
    let done = hikawas.get("hikawa").await.unwrap();
    assert_eq!(done.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        zundokos.list(&ListParams::default()).await.unwrap().items[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()["hikawa.zundokokiyoshi.kaitoy.github.com"],
        "hikawa"
    );
    let reconciles = enka.reconciles().await;
    assert!(reconciles >= count as f64, "{reconciles} reconciles");
    println!(
        "zundoko: Kiyoshi after {count} Zundokos in {:.0} ms ({reconciles} reconciles, {:.1}/s end to end): {sung}",
        time_to_kiyoshi.as_secs_f64() * 1e3,
        reconciles / time_to_kiyoshi.as_secs_f64()
    );
    assert!(
        time_to_kiyoshi < Duration::from_secs(10),
        "took {time_to_kiyoshi:?}"
    );

    // Then nothing more is written.
    let versions = |h: &DynamicObject, zs: &[DynamicObject]| {
        let mut v: Vec<String> = zs
            .iter()
            .map(|z| z.metadata.resource_version.clone().unwrap())
            .collect();
        v.push(h.metadata.resource_version.clone().unwrap());
        v
    };
    let before = versions(
        &hikawas.get("hikawa").await.unwrap(),
        &zundokos.list(&ListParams::default()).await.unwrap().items,
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = versions(
        &hikawas.get("hikawa").await.unwrap(),
        &zundokos.list(&ListParams::default()).await.unwrap().items,
    );
    assert_eq!(
        before,
        after,
        "writes after Kiyoshi; enka's log:\n{}",
        enka.log()
    );
    assert!(
        kiyoshis
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 1
    );

    // Deleting the Hikawa garbage-collects what it owns.
    hikawas
        .delete("hikawa", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the Zundokos and the Kiyoshi to be garbage-collected",
        Duration::from_secs(120),
        || {
            let zundokos = zundokos.clone();
            let kiyoshis = kiyoshis.clone();
            async move {
                let z = zundokos
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .len();
                let k = kiyoshis
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .len();
                (z == 0 && k == 0).then_some(())
            }
        },
    )
    .await;
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

/// The project's own `roles/hikawa` paces the song by `spec.intervalMillis`
/// (the seed's role had to ignore it), and still ends in Kiyoshi.
#[tokio::test]
async fn the_shipped_role_paces_zundokos_by_interval_millis() {
    const INTERVAL_MS: u64 = 50;
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_zundoko_crds(&client).await;
    let ns = env.namespace("paced-song").await.unwrap();
    let enka = Enka::start(env, "watches.yaml", &ns, &[("ENKA_RANDOM_SEED", "7")]);
    let zundokos: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &resource("v1beta1", "Zundoko", "zundokos"),
    );
    let started = Instant::now();
    let hikawas = create_hikawa(&client, &ns, INTERVAL_MS).await;
    await_kiyoshi(
        &hikawas,
        "Kiyoshi from the paced role",
        Duration::from_secs(120),
    )
    .await;
    let elapsed = started.elapsed();
    let mut song: Vec<(String, String)> = zundokos
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|z| {
            let say = z.data["spec"]["say"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (z.metadata.name.unwrap_or_default(), say)
        })
        .collect();
    song.sort();
    let sung = song
        .iter()
        .map(|(_, say)| say.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(sung.ends_with("Zun Zun Zun Zun Doko"), "{sung}");
    assert_eq!(sung.matches("Zun Zun Zun Zun Doko").count(), 1, "{sung}");
    // Each Zundoko after the first waits intervalMillis, so the song cannot be faster.
    let floor = Duration::from_millis(INTERVAL_MS * (song.len() as u64 - 1));
    println!(
        "paced song: {} Zundokos at intervalMillis {INTERVAL_MS} in {:.0} ms (floor {:.0} ms)",
        song.len(),
        elapsed.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3
    );
    assert!(
        elapsed >= floor,
        "{elapsed:?} < {floor:?}: not paced\n{}",
        enka.log()
    );
    assert!(
        !enka.full_log().contains("Fail Intentionally"),
        "the paced role does not fail"
    );
    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

/// The repository's own role (`roles/hikawa`, the seed's with what an
/// ansible-core 2.19 port needs: `| string` where a native integer would
/// not fit the CRD's string fields) sings to Kiyoshi under either line's
/// semantics. The seed's role unchanged fails under 2.19 as 2.19 makes it:
/// its `numZundokosSaid` is an integer the API server refuses.
#[tokio::test]
async fn the_repositorys_role_sings_until_kiyoshi_under_2_18_and_2_19() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_zundoko_crds(&client).await;
    for line in ["2.18", "2.19"] {
        let ns = env.namespace("zundoko-line").await.unwrap();
        let enka = Enka::start(
            env,
            "watches.yaml",
            &ns,
            &[("ENKA_RANDOM_SEED", "42"), ("ENKA_ANSIBLE_SEMANTICS", line)],
        );
        let hikawas = create_hikawa(&client, &ns, 20).await;
        let waited = tokio::time::timeout(
            Duration::from_secs(60),
            await_kiyoshi(&hikawas, "Kiyoshi", Duration::from_secs(90)),
        )
        .await;
        assert!(
            waited.is_ok(),
            "no Kiyoshi under {line}; enka's log:\n{}",
            enka.log()
        );
        let (count, _) = assert_song(&client, &ns, "hikawa").await;
        assert!(count > 0, "{line}: {count} Zundokos");
        assert!(
            enka.full_log()
                .contains(&format!("Ansible{}", line.replace('.', ""))),
            "{line}: enka names the line it follows:\n{}",
            enka.log()
        );
    }
}
