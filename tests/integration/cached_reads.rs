//! Reads by name of a watched kind, and lists of a kind a role lists, come
//! from enka's watch caches, as upstream's proxy serves them from its
//! informer cache: a role reads its own writes at once, sees other writers'
//! changes that came before its trigger, finds objects its watch does not
//! hold through the API server, and sends the API server no GET or LIST
//! for what the caches hold. A kind a role reads is watched from its first
//! read on, and a run reads its own writes of it back at once.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;

use crate::enka::Enka;
use crate::runtime::{Project, sample_resource};
use crate::support::{apiserver_metrics, eventually, install_crd};

const WATCHES: &str = "- version: v1
  group: enka.test
  kind: Reading
  role: sample
  reconcilePeriod: 0s
  selector:
    matchLabels:
      watched: \"yes\"
";

/// Writes the round into the status, reads the object back by name (and,
/// in the first round, a Reading the watch's selector leaves out), and
/// records what the reads saw.
const ROLE: &str = r#"
- name: write the round into the status
  operator_sdk.util.k8s_status:
    api_version: enka.test/v1
    kind: Reading
    name: '{{ ansible_operator_meta.name }}'
    namespace: '{{ ansible_operator_meta.namespace }}'
    status:
      round: '{{ round }}'
- name: read the object back by name
  set_fact:
    read: "{{ query('k8s', api_version='enka.test/v1', kind='Reading', namespace=ansible_operator_meta.namespace, resource_name=ansible_operator_meta.name) | first }}"
- name: read a Reading the watch does not hold
  when: round == 1
  set_fact:
    unwatched: "{{ query('k8s', api_version='enka.test/v1', kind='Reading', namespace=ansible_operator_meta.namespace, resource_name='unwatched') | first }}"
- name: write a note of this round
  k8s:
    definition:
      apiVersion: enka.test/v1
      kind: Note
      metadata:
        name: '{{ ansible_operator_meta.name }}-note-{{ round }}'
        namespace: '{{ ansible_operator_meta.namespace }}'
        labels:
          reading: '{{ ansible_operator_meta.name }}'
- name: list the notes
  k8s_info:
    api_version: enka.test/v1
    kind: Note
    namespace: '{{ ansible_operator_meta.namespace }}'
    label_selectors:
    - reading = {{ ansible_operator_meta.name }}
  register: notes
- name: record what the reads saw
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: '{{ ansible_operator_meta.name }}-seen'
        namespace: '{{ ansible_operator_meta.namespace }}'
      data:
        round: '{{ read.status.round | string }}'
        outside: '{{ read.status.outside | default("") }}'
        unwatched: '{{ unwatched.spec.note | default("") }}'
        notes: '{{ notes.resources | length }}'
"#;

fn readings() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("enka.test", "v1", "Reading"),
        "readings",
    )
}

/// Requests with `verb` on `resource` the API server has answered, whatever
/// their outcome.
async fn requests(client: &kube::Client, verb: &str, resource: &str) -> f64 {
    let (verb, resource) = (
        format!("verb=\"{verb}\""),
        format!("resource=\"{resource}\""),
    );
    apiserver_metrics(client)
        .await
        .lines()
        .filter(|line| line.starts_with("apiserver_request_total{"))
        .filter(|line| line.contains(&resource) && line.contains(&verb))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until the role recorded `round` (and `outside`) as read back, and
/// listed the `round` notes it has written so far.
async fn await_seen(config_maps: &Api<ConfigMap>, round: u32, outside: &str) -> ConfigMap {
    let what = format!("round {round} read back (outside: {outside:?})");
    eventually(&what, Duration::from_secs(30), || async move {
        let seen = config_maps.get_opt("r1-seen").await.unwrap()?;
        let data = seen.data.as_ref()?;
        let matches = data.get("round")? == &round.to_string()
            && data.get("outside").map(String::as_str) == Some(outside)
            && data.get("notes")? == &round.to_string();
        matches.then_some(seen)
    })
    .await
}

/// Waits until the run that wrote `round` has ended (its Successful
/// condition written), reading by LIST: the test's own reads must not
/// count as GETs.
async fn await_run_end(objects: &Api<DynamicObject>, round: u32) {
    let what = format!("the run of round {round} to end");
    // Not by a metadata.name field selector: the API server counts such a
    // list as a GET.
    eventually(&what, Duration::from_secs(30), || async move {
        let list = objects.list(&ListParams::default()).await.unwrap();
        let r1 = list
            .items
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some("r1"))?;
        let status = &r1.data["status"];
        let running = status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Running")?;
        let ended = status["round"] == round && running["reason"] == "Successful";
        ended.then_some(())
    })
    .await
}

/// The shared control plane with `crds` (of tests/fixtures/crds) installed,
/// a fresh namespace `name` with the Api of the watched `kind` in it, and a
/// project of `watches` whose role is `role`.
async fn set_up(
    name: &str,
    crds: [&str; 2],
    kind: &ApiResource,
    watches: &str,
    role: &str,
) -> (
    &'static kube_env::KubeEnv,
    kube::Client,
    String,
    Api<DynamicObject>,
    Project,
) {
    let env = kube_env::KubeEnv::shared().await;
    let client = env.client().unwrap();
    for crd in crds {
        install_crd(&client, &format!("tests/fixtures/crds/{crd}")).await;
    }
    let ns = env.namespace(name).await.unwrap();
    let objects = Api::namespaced_with(client.clone(), &ns, kind);
    let project = Project::with_watches(name, watches);
    project.write_role(role);
    (env, client, ns, objects, project)
}

#[tokio::test]
async fn reads_of_watched_objects_come_from_the_cache_and_see_their_own_writes() {
    let crds = ["enka.test_readings.yaml", "enka.test_notes.yaml"];
    let (env, client, ns, objects, project) =
        set_up("cached-reads", crds, &readings(), WATCHES, ROLE).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    let mut unwatched = DynamicObject::new("unwatched", &readings());
    unwatched.data = json!({"spec": {"note": "from the API server"}});
    objects
        .create(&PostParams::default(), &unwatched)
        .await
        .unwrap();
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    let mut watched = DynamicObject::new("r1", &readings());
    watched.metadata.labels = Some([("watched".to_owned(), "yes".to_owned())].into());
    watched.data = json!({"spec": {"round": 1}});
    objects
        .create(&PostParams::default(), &watched)
        .await
        .unwrap();

    // A miss (the selector leaves `unwatched` out of the cache) is read
    // from the API server.
    let seen = await_seen(&config_maps, 1, "").await;
    let unwatched_note = seen.data.as_ref().and_then(|d| d.get("unwatched")).cloned();
    assert_eq!(unwatched_note.as_deref(), Some("from the API server"));

    await_run_end(&objects, 1).await;
    let patch = PatchParams::default();
    let mut before = None;
    for round in 2..=6u32 {
        // From the second run's end on: the first list of Notes went to the
        // API server and started their watch, whose own first list is done.
        if round == 3 {
            before = Some((
                requests(&client, "GET", "readings").await,
                requests(&client, "LIST", "notes").await,
            ));
        }
        // Another writer's change, made before the change that triggers the
        // run, is in the cache when the run reads.
        let outside = format!("outside {round}");
        let status = json!({"status": {"outside": outside}});
        objects
            .patch_status("r1", &patch, &Patch::Merge(&status))
            .await
            .unwrap();
        let spec = json!({"spec": {"round": round}});
        objects
            .patch("r1", &patch, &Patch::Merge(&spec))
            .await
            .unwrap();
        // The run reads back the round it has just written, never the
        // cache's older copy.
        await_seen(&config_maps, round, &outside).await;
        await_run_end(&objects, round).await;
    }
    let (gets_before, lists_before) = before.expect("measured from round 3");
    let gets = requests(&client, "GET", "readings").await - gets_before;
    let lists = requests(&client, "LIST", "notes").await - lists_before;
    // Each of those runs read r1 twice by name (k8s_status, the lookup),
    // wrote its status twice (the role, the Successful condition) without
    // a conflict, and listed its notes, the one it had just written among
    // them: all of it from the caches and the writes' own answers.
    assert_eq!(
        gets, 0.0,
        "GETs of Readings sent to the API server in four runs"
    );
    assert_eq!(
        lists, 0.0,
        "LISTs of Notes sent to the API server in four runs"
    );

    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}

const LEDGER_WATCHES: &str = "- version: v1
  group: enka.test
  kind: Sample
  role: sample
  reconcilePeriod: 0s
";

/// Reads a Ledger by name (a kind nothing watches: the read of it in the
/// `k8s` task, the second, starts its watch), adds this round to it, reads
/// it back in the next task and adds ten times the round to what it read,
/// and records the rounds the last write left in the status. A read older
/// than the run's own last write loses a round: the last run's read before
/// writing loses the last run's rounds, the read back loses this round.
const LEDGER_ROLE: &str = r#"
- name: read the ledger before this run writes it
  k8s_info:
    api_version: enka.test/v1
    kind: Ledger
    name: '{{ ansible_operator_meta.name }}-ledger'
    namespace: '{{ ansible_operator_meta.namespace }}'
  register: before
- name: add this round
  k8s:
    definition:
      apiVersion: enka.test/v1
      kind: Ledger
      metadata:
        name: '{{ ansible_operator_meta.name }}-ledger'
        namespace: '{{ ansible_operator_meta.namespace }}'
      spec:
        rounds: "{{ (before.resources | map(attribute='spec.rounds') | first | default([])) | union([round]) }}"
- name: read it back in the next task
  k8s_info:
    api_version: enka.test/v1
    kind: Ledger
    name: '{{ ansible_operator_meta.name }}-ledger'
    namespace: '{{ ansible_operator_meta.namespace }}'
  register: after
- name: add ten times the round to what was read back
  k8s:
    definition:
      apiVersion: enka.test/v1
      kind: Ledger
      metadata:
        name: '{{ ansible_operator_meta.name }}-ledger'
        namespace: '{{ ansible_operator_meta.namespace }}'
      spec:
        rounds: "{{ (after.resources | map(attribute='spec.rounds') | first | default([])) | union([round * 10]) }}"
  register: written
- name: record the rounds written
  operator_sdk.util.k8s_status:
    api_version: enka.test/v1
    kind: Sample
    name: '{{ ansible_operator_meta.name }}'
    namespace: '{{ ansible_operator_meta.namespace }}'
    status:
      rounds: '{{ written.result.spec.rounds }}'
"#;

/// Waits until a run of `round` recorded its rounds; those rounds.
async fn await_ledger_round(objects: &Api<DynamicObject>, round: u64) -> Vec<u64> {
    let what = format!("a run of round {round} to record its rounds");
    eventually(&what, Duration::from_secs(30), || async move {
        let list = objects.list(&ListParams::default()).await.unwrap();
        let rounds: Vec<u64> = list.items.first()?.data["status"]["rounds"]
            .as_array()?
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .collect();
        rounds.contains(&(round * 10)).then_some(rounds)
    })
    .await
}

#[tokio::test]
async fn a_kind_first_read_in_a_run_is_watched_and_reads_back_its_own_writes() {
    let crds = ["enka.test_samples.yaml", "enka.test_ledgers.yaml"];
    let (env, client, ns, objects, project) = set_up(
        "ledger-reads",
        crds,
        &sample_resource(),
        LEDGER_WATCHES,
        LEDGER_ROLE,
    )
    .await;
    let watches = project.dir.join("watches.yaml").display().to_string();
    let enka = Enka::start(env, &watches, &ns, &[]);
    let lists_before = requests(&client, "LIST", "ledgers").await;
    let mut sample = DynamicObject::new("l1", &sample_resource());
    sample.data = json!({"spec": {"round": 1}});
    objects
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();
    assert_eq!(await_ledger_round(&objects, 1).await, [1, 10]);
    let gets_before = requests(&client, "GET", "ledgers").await;
    let patch = PatchParams::default();
    for round in 2..=5u64 {
        let spec = json!({"spec": {"round": round}});
        objects
            .patch("l1", &patch, &Patch::Merge(&spec))
            .await
            .unwrap();
        await_ledger_round(&objects, round).await;
    }
    // Every run read the rounds every earlier run wrote, and read back its
    // own write a task later.
    // (In the order Ansible's `union` leaves them, a set's.)
    let mut rounds = await_ledger_round(&objects, 5).await;
    rounds.sort_unstable();
    assert_eq!(rounds, [1, 2, 3, 4, 5, 10, 20, 30, 40, 50]);
    let gets = requests(&client, "GET", "ledgers").await - gets_before;
    let lists = requests(&client, "LIST", "ledgers").await - lists_before;
    // Every read after the first run's came from the watch started in it,
    // which the dependent watch of Ledgers shares: its one list, and no GET
    // since.
    assert_eq!(
        gets, 0.0,
        "GETs of Ledgers sent to the API server in four runs"
    );
    assert_eq!(lists, 1.0, "LISTs of Ledgers: the watch's first list only");

    drop(enka);
    env.delete_namespace(&ns).await.unwrap();
}
