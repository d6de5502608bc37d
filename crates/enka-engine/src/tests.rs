//! The engine on whole roles, with Kubernetes answered in memory. (The real
//! control plane runs the same roles in `tests/integration/`.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value as Json, json};

use super::*;
use enka_kube::memory::MemoryCluster;
use enka_kube::{Cluster, Owner};
use enka_project::role::{LoadOptions, RolePaths, Target};
use enka_project::vars::{VarOptions, extra_vars};

const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";

fn fixture(name: &str) -> PathBuf {
    // The workspace's fixtures, as one path (roles are found by theirs).
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
        .canonicalize()
        .expect("the fixture exists")
}

fn load(base: &Path, role: &str, seed: u64) -> Arc<Project> {
    let options = LoadOptions {
        role_paths: RolePaths {
            base_dir: base.to_path_buf(),
            ..RolePaths::default()
        },
        templates: enka_template::Options {
            seed: Some(seed),
            ..Default::default()
        },
        origins: Vec::new(),
        lookups: Vec::new(),
        ansible: Some(enka_worker::Config::from_env()),
        inventory: enka_project::role::InventoryLoad::WhenNamed,
    };
    let (project, diagnostics) = Project::load(&options, &[Target::Role(role.to_owned())]);
    for d in &diagnostics.0 {
        eprintln!("{}", d.render());
    }
    project.expect("the role loads")
}

fn zundoko_cluster() -> Arc<MemoryCluster> {
    Arc::new(
        MemoryCluster::new()
            .with_kind(GROUP, "v1beta2", "Hikawa", "hikawas", true)
            .with_kind(GROUP, "v1beta1", "Zundoko", "zundokos", true)
            .with_kind(GROUP, "v1beta1", "Kiyoshi", "kiyoshis", true),
    )
}

async fn reconcile(
    project: &Arc<Project>,
    cluster: &Arc<MemoryCluster>,
    role: &Path,
) -> (RunOutcome, Json) {
    let resource = cluster
        .resource(&format!("{GROUP}/v1beta2"), "Hikawa")
        .await
        .unwrap();
    let hikawa = cluster
        .get(&resource, Some("ns"), "hikawa")
        .await
        .unwrap()
        .expect("the Hikawa exists");
    let hikawa = Arc::new(hikawa);
    let vars = extra_vars(
        &hikawa,
        GROUP,
        "Hikawa",
        &VarOptions {
            snake_case: true,
            ..VarOptions::default()
        },
    );
    let resource = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        GROUP, "v1beta2", "Hikawa",
    ));
    let owner = Owner::from_object(&hikawa, &resource);
    let options = RunOptions {
        owner: Some(Arc::new(owner)),
        ..RunOptions::default()
    };
    let dyn_cluster: Arc<dyn Cluster> = cluster.clone();
    let outcome = run(
        project,
        &Entry::Role(role.to_path_buf()),
        vars,
        Some(dyn_cluster),
        options,
    )
    .await;
    (outcome, (*hikawa).clone())
}

/// Runs reconciles the way the operator would (after each change of the
/// Hikawa, or after a failure) until the role stops changing things.
async fn sing(seed: u64) -> (Arc<MemoryCluster>, usize) {
    let base = fixture("zundoko-seed");
    let project = load(&base, "hikawa", seed);
    let role = base.join("roles/hikawa");
    let cluster = zundoko_cluster();
    cluster
        .insert(json!({
            "apiVersion": format!("{GROUP}/v1beta2"),
            "kind": "Hikawa",
            "metadata": {"name": "hikawa", "namespace": "ns"},
            "spec": {"intervalMillis": 500}
        }))
        .unwrap();
    let mut reconciles = 0;
    loop {
        reconciles += 1;
        assert!(reconciles < 500, "the song never ended");
        let writes_before = cluster.writes();
        let (outcome, _) = reconcile(&project, &cluster, &role).await;
        if let Some(failure) = outcome.failure() {
            assert_eq!(
                failure.message, "Fail Intentionally in order to go to next loop",
                "{failure}"
            );
            assert_eq!(&*failure.task, "Go to next loop");
        }
        if cluster.writes() == writes_before && outcome.is_success() {
            break;
        }
    }
    (cluster, reconciles)
}

#[tokio::test]
async fn the_seed_role_sings_until_kiyoshi() {
    let (cluster, reconciles) = sing(42).await;
    let mut zundokos = cluster.objects("Zundoko");
    zundokos.sort_by_key(|z| z["metadata"]["name"].as_str().unwrap().to_owned());
    let names: Vec<&str> = zundokos
        .iter()
        .map(|z| z["metadata"]["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (1..=names.len())
        .map(|i| format!("hikawa-zundoko-{i:04}"))
        .collect();
    assert_eq!(names, expected);
    let song: Vec<&str> = zundokos
        .iter()
        .map(|z| z["spec"]["say"].as_str().unwrap())
        .collect();
    assert!(song.join(" ").ends_with("Zun Zun Zun Zun Doko"), "{song:?}");
    assert_eq!(
        song.join(" ").matches("Zun Zun Zun Zun Doko").count(),
        1,
        "it stops at the first Kiyoshi: {song:?}"
    );
    for z in &zundokos {
        assert_eq!(
            z["metadata"]["labels"]["hikawa.zundokokiyoshi.kaitoy.github.com"],
            "hikawa"
        );
        assert_eq!(z["metadata"]["ownerReferences"][0]["kind"], "Hikawa");
    }
    let kiyoshis = cluster.objects("Kiyoshi");
    assert_eq!(kiyoshis.len(), 1);
    assert_eq!(kiyoshis[0]["metadata"]["name"], "hikawa-kiyoshi");
    assert_eq!(kiyoshis[0]["spec"]["say"], "Kiyoshi !");
    let hikawa = &cluster.objects("Hikawa")[0];
    assert_eq!(hikawa["status"]["kiyoshied"], true);
    assert_eq!(
        hikawa["status"]["numZundokosSaid"],
        json!(names.len().to_string())
    );
    assert_eq!(
        hikawa["spec"]["numZundokos"],
        json!(names.len().to_string())
    );
    assert_eq!(hikawa["spec"]["sayKiyoshi"], true);
    assert!(
        hikawa["metadata"].get("ownerReferences").is_none(),
        "never owned by itself"
    );
    assert!(reconciles > names.len());
}

#[tokio::test]
async fn a_fixed_seed_gives_the_same_song() {
    let song = |cluster: &MemoryCluster| -> Vec<String> {
        let mut z = cluster.objects("Zundoko");
        z.sort_by_key(|z| z["metadata"]["name"].as_str().unwrap().to_owned());
        z.iter()
            .map(|z| z["spec"]["say"].as_str().unwrap().to_owned())
            .collect()
    };
    let (a, _) = sing(7).await;
    let (b, _) = sing(7).await;
    assert_eq!(song(&a), song(&b));
}

/// Runs a one-role project whose `tasks/main.yml` is `tasks`, with `vars`
/// (no cluster), and removes it again.
async fn run_tasks(
    name: &str,
    tasks: &str,
    vars: Vec<(Arc<str>, enka_template::Var)>,
) -> RunOutcome {
    let dir = std::env::temp_dir().join(format!("enka-{name}-{}", std::process::id()));
    let role = dir.join("roles").join(name);
    std::fs::create_dir_all(role.join("tasks")).unwrap();
    std::fs::write(role.join("tasks/main.yml"), tasks).unwrap();
    let project = load(&dir, name, 1);
    let outcome = run(
        &project,
        &Entry::Role(role),
        vars,
        None,
        RunOptions::default(),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// A variable `pw` holding a password, as the no_log tests use it.
fn password() -> Vec<(Arc<str>, enka_template::Var)> {
    vec![(
        Arc::from("pw"),
        enka_template::Var::plain(minijinja::Value::from("hunter2")),
    )]
}

/// Every way a `no_log` task can fail is censored, not only a module's
/// failure: here the loop's value is quoted by the loop check's message.
#[tokio::test]
async fn no_log_hides_a_loop_failure_that_quotes_the_value() {
    let outcome = run_tasks(
        "nolog-loop",
        "- name: leaks\n  debug:\n    msg: hi\n  loop: \"{{ pw }}\"\n  no_log: true\n",
        password(),
    )
    .await;
    let failure = outcome.failure().expect("the loop check fails");
    assert!(!failure.message.contains("hunter2"), "{}", failure.message);
    assert!(!format!("{:?}", failure.result).contains("hunter2"));
    assert!(failure.message.contains("no_log"), "{}", failure.message);
}

#[tokio::test]
async fn no_log_hides_a_failure_message() {
    let outcome = run_tasks(
        "nolog",
        "- name: leaks\n  fail:\n    msg: \"password is {{ pw }}\"\n  no_log: true\n",
        password(),
    )
    .await;
    let failure = outcome.failure().expect("the task fails");
    assert!(!failure.message.contains("hunter2"), "{}", failure.message);
    assert!(
        !format!("{:?}", failure.result).contains("hunter2"),
        "{:?}",
        failure.result
    );
    assert!(failure.message.contains("no_log"));
}

/// Values from the custom resource stay unsafe through every copy: a spec
/// string holding Jinja is never evaluated, whether copied by `set_fact`,
/// concatenated, put in a dict, registered, passed through a filter or
/// looped over (Ansible's `AnsibleUnsafeText`).
#[tokio::test]
async fn custom_resource_strings_stay_unsafe_through_every_copy() {
    let dir = std::env::temp_dir().join(format!("enka-unsafe-{}", std::process::id()));
    let role = dir.join("roles/copier");
    std::fs::create_dir_all(role.join("tasks")).unwrap();
    std::fs::create_dir_all(role.join("defaults")).unwrap();
    std::fs::write(
        role.join("defaults/main.yml"),
        "expected: !unsafe '{{ 7 * 6 }}'\n",
    )
    .unwrap();
    std::fs::write(
        role.join("tasks/main.yml"),
        r#"
- name: copy the field
  set_fact:
    copied: "{{ field }}"
    nested:
      inner: "{{ field }}"
    shouted: "{{ field | upper }}"
- name: copy the copy into a longer string
  set_fact:
    again: "prefix {{ copied }}"
- name: register it
  debug:
    msg: "{{ again }}"
  register: shown
- name: copy the registered result
  set_fact:
    from_result: "{{ shown.msg }}"
- name: loop over it
  set_fact:
    looped: "{{ (looped | default([])) + [item ~ ' suffix'] }}"
  loop: "{{ [field] }}"
- name: copy the nested copy
  set_fact:
    from_nested: "{{ nested }}"
- name: judge
  assert:
    that:
      - copied == expected
      - nested.inner == expected
      - from_nested.inner == expected
      - shouted == expected
      - again == 'prefix ' ~ expected
      - from_result == 'prefix ' ~ expected
      - looped[0] == expected ~ ' suffix'
"#,
    )
    .unwrap();
    let project = load(&dir, "copier", 1);
    let object = json!({
        "apiVersion": "enka.test/v1",
        "kind": "Copier",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"field": "{{ 7 * 6 }}"},
    });
    let vars = extra_vars(&object, "enka.test", "Copier", &VarOptions::default());
    let outcome = run(
        &project,
        &Entry::Role(role),
        vars,
        None,
        RunOptions::default(),
    )
    .await;
    assert!(outcome.failure().is_none(), "{:?}", outcome.failure());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failure message is bounded, whatever the task's data held: it lands
/// in the object's status, an Event and the log.
#[tokio::test]
async fn a_huge_failure_message_is_cut() {
    let outcome = run_tasks(
        "huge-msg",
        "- name: shout\n  fail:\n    msg: \"{{ 'x' * 1000000 }}\"\n",
        Vec::new(),
    )
    .await;
    let failure = outcome.failure().expect("the task fails");
    assert!(
        failure.message.len() < crate::result::MAX_FAILURE_MESSAGE + 64,
        "{} bytes",
        failure.message.len()
    );
    assert!(
        failure.message.ends_with("more bytes)"),
        "{}",
        &failure.message[4000..]
    );
}

/// `k8s` never adopts an object the run did not create: an owner reference
/// on it would let the garbage collector delete it with the custom
/// resource, and a CR author may choose its name. An object the role owns
/// keeps its owner through later applies and replaces.
#[tokio::test]
async fn k8s_adopts_nothing_it_did_not_create() {
    let dir = std::env::temp_dir().join(format!("enka-adopt-{}", std::process::id()));
    let tasks = dir.join("roles/adopter/tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let config_map = |name: &str, value: &str| {
        format!(
            "      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: {name}\n        namespace: ns\n      data:\n        a: \"{value}\"\n"
        )
    };
    let mut role = String::new();
    for (name, value, how) in [
        ("taken", "1", "apply: true"),
        ("taken", "2", "force: true"),
        ("mine", "1", "apply: true"),
        ("mine", "2", "apply: true"),
        ("mine", "3", "force: true"),
    ] {
        role.push_str(&format!(
            "- name: write {name} {value}\n  k8s:\n    {how}\n    definition:\n{}",
            config_map(name, value)
        ));
    }
    std::fs::write(tasks.join("main.yml"), role).unwrap();
    let project = load(&dir, "adopter", 1);
    let cluster =
        Arc::new(MemoryCluster::new().with_kind("", "v1", "ConfigMap", "configmaps", true));
    let resource = cluster.resource("v1", "ConfigMap").await.unwrap();
    let existing = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "taken", "namespace": "ns"}});
    cluster
        .create(&resource, Some("ns"), &existing)
        .await
        .unwrap();
    let owner = Owner {
        api_version: "enka.test/v1".into(),
        group: "enka.test".into(),
        kind: "Adopter".into(),
        name: "a".into(),
        uid: "uid-of-a".into(),
        namespace: Some("ns".into()),
        controller: false,
    };
    let outcome = run(
        &project,
        &Entry::Role(dir.join("roles/adopter")),
        Vec::new(),
        Some(cluster.clone()),
        RunOptions {
            owner: Some(Arc::new(owner)),
            ..RunOptions::default()
        },
    )
    .await;
    assert!(outcome.failure().is_none(), "{:?}", outcome.failure());
    let taken = cluster
        .get(&resource, Some("ns"), "taken")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        taken.pointer("/data/a"),
        Some(&json!("2")),
        "the role still wrote it"
    );
    assert!(
        taken.pointer("/metadata/ownerReferences").is_none(),
        "adopted: {taken}"
    );
    let mine = cluster
        .get(&resource, Some("ns"), "mine")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(mine.pointer("/data/a"), Some(&json!("3")));
    assert_eq!(
        mine.pointer("/metadata/ownerReferences/0/uid"),
        Some(&json!("uid-of-a")),
        "the owner kept through apply and replace: {mine}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a run keeps (registered results, facts, a loop's results) counts
/// against the reconcile's memory budget (16 MiB by default), and each
/// render may hold only what is left: the task that would take the run past
/// it fails alone, and a name set again gives back what it held.
#[tokio::test]
async fn what_a_run_keeps_stays_within_its_memory_budget() {
    let five = "\"{{ 'x' * 5000000 }}\"";
    let outcome = run_tasks(
        "budget-facts",
        &format!(
            "- set_fact:\n    a: {five}\n- set_fact:\n    a: {five}\n- set_fact:\n    b: {five}\n\
             - set_fact:\n    c: {five}\n- name: fourth\n  set_fact:\n    d: {five}\n"
        ),
        Vec::new(),
    )
    .await;
    let failure = outcome.failure().expect("the fourth name fails");
    assert_eq!(&*failure.task, "fourth");
    assert!(
        failure.message.contains("--reconcile-memory-budget"),
        "{}",
        failure.message
    );

    let outcome = run_tasks(
        "budget-loop",
        &format!("- debug:\n    msg: {five}\n  loop: [1, 2, 3, 4]\n  register: r\n"),
        Vec::new(),
    )
    .await;
    let failure = outcome.failure().expect("the loop fails");
    assert!(
        failure.message.contains("--reconcile-memory-budget"),
        "{}",
        failure.message
    );

    let register = format!("- debug:\n    msg: {five}\n  register: r\n");
    let outcome = run_tasks("budget-again", &register.repeat(5), Vec::new()).await;
    assert!(
        outcome.failure().is_none(),
        "{:?}",
        outcome.failure().map(|f| &f.message)
    );
}

/// A reconcile's role sees the paths of the directory upstream's
/// ansible-runner would run it in, and the play it writes for a role, as
/// ansible-runner 2.4 gives them to a role of ansible-operator's layout (the
/// differential's `surroundings` subject compares every one with upstream).
#[tokio::test]
async fn a_reconciles_role_sees_ansible_runners_surroundings() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/differential/surroundings-operator")
        .canonicalize()
        .expect("the project exists");
    let project = load(&base, "dump", 1);
    let cluster =
        Arc::new(MemoryCluster::new().with_kind("", "v1", "ConfigMap", "configmaps", true));
    let meta = enka_template::Var::plain(minijinja::Value::from_pairs([
        ("name", "role-run"),
        ("namespace", "ns1"),
    ]));
    let group = "surroundings.compat.enka.dev";
    let runner = RunnerDir::for_object(group, "v1", "RoleRun", "ns1", "role-run");
    let outcome = run(
        &project,
        &Entry::Role(base.join("roles/dump")),
        vec![(Arc::from("ansible_operator_meta"), meta)],
        Some(cluster.clone() as Arc<dyn Cluster>),
        RunOptions {
            runner_dir: Some(Arc::new(runner)),
            ..RunOptions::default()
        },
    )
    .await;
    assert!(
        matches!(outcome.status, RunStatus::Successful),
        "{:?}",
        outcome.status
    );
    let seen = &cluster.objects("ConfigMap")[0]["data"];
    let json = |key: &str| -> Json {
        serde_json::from_str(seen[key].as_str().expect("dumped as text")).expect("JSON")
    };
    let dir = format!("/tmp/ansible-operator/runner/{group}/v1/RoleRun/ns1/role-run");
    let role = base.join("roles/dump").display().to_string();
    assert_eq!(
        json("inventory_file"),
        json!(format!("{dir}/inventory/hosts"))
    );
    assert_eq!(
        json("hostvars.localhost.inventory_file"),
        json!(format!("{dir}/inventory/hosts"))
    );
    assert_eq!(json("inventory_dir"), json!(format!("{dir}/inventory")));
    assert_eq!(
        json("ansible_inventory_sources"),
        json!([format!("{dir}/inventory")])
    );
    assert_eq!(json("playbook_dir"), json!(format!("{dir}/project")));
    assert_eq!(
        json("ansible_search_path"),
        json!([
            role.clone(),
            format!("{role}/tasks"),
            format!("{dir}/project")
        ])
    );
    assert_eq!(
        json("inventory_file.split"),
        json!([group, "v1", "RoleRun", "ns1"])
    );
    assert_eq!(json("group_names"), json!(["ungrouped"]));
    assert_eq!(
        json("groups"),
        json!({"all": ["localhost"], "ungrouped": ["localhost"]})
    );
    assert_eq!(json("hostvars"), json!(["localhost"]));
    for name in [
        "role_names",
        "ansible_play_role_names",
        "ansible_role_names",
    ] {
        assert_eq!(json(name), json!(["dump"]), "{name}");
    }
    assert_eq!(json("ansible_dependent_role_names"), json!([]));
    assert_eq!(json("ansible_role_name"), json!("dump"));
    assert_eq!(json("ansible_collection_name"), json!(null));
    assert_eq!(json("ansible_play_name"), json!("localhost"));
    assert_eq!(json("ansible_forks"), json!(5));
    assert_eq!(json("ansible_connection"), json!("local"));
    assert_eq!(json("ansible_parent_role_names"), json!("<undefined>"));
}
