//! Tasks enka has no native code for, run by Ansible in the worker, on the
//! real control plane. What they register is compared, step by step, with
//! what real `ansible-playbook` registered for the same role
//! (`tests/bridged/expected.json`, recorded by `tests/bridged/record.py`).

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_env::KubeEnv;
use serde_json::{Value as Json, json};

use crate::enka::Enka;
use crate::support::{eventually, install_crd, repo_path};

/// Both kinds of tests/bridged/watches.yaml.
async fn install_crds(client: &kube::Client) {
    install_crd(client, "tests/bridged/config/crd.yaml").await;
    install_crd(client, "tests/bridged/config/crd-fault.yaml").await;
}

#[tokio::test]
async fn bridged_tasks_register_what_ansible_playbook_registers() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crds(&client).await;
    let ns = env.namespace("bridged").await.unwrap();
    let port = crate::bridged_compare::serve_status();
    let workdir = std::env::temp_dir().join(format!("enka-bridged-{ns}"));
    std::fs::create_dir_all(&workdir).unwrap();
    let workdir_text = workdir.display().to_string();

    let vault = format!(
        "--ansible-args=--vault-password-file {}",
        repo_path("tests/bridged/vault-password.txt").display()
    );
    let mut enka =
        Enka::start_with_args(env, "tests/bridged/watches.yaml", &ns, &[], &[&vault], "");
    enka.await_ready().await;
    crate::bridged_compare::create_probe(&client, &ns, &workdir_text, port).await;

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let log = || enka.log();
    let data = eventually("the probe's results", Duration::from_secs(60), || async {
        config_maps.get_opt("probe-results").await.unwrap()?.data
    })
    .await;
    let field = |key: &str| -> Json { serde_json::from_str(&data[key]).unwrap() };
    let results = field("results");
    // lookup('k8s', cluster_info=…), native, as kubernetes.core shapes it.
    let groups = field("api_groups");
    for group in ["apps", "bridged.enka.dev", "apiextensions.k8s.io"] {
        assert!(
            groups.as_array().unwrap().contains(&json!(group)),
            "{groups}"
        );
    }
    assert!(!groups.as_array().unwrap().contains(&json!("")), "{groups}");
    let version = field("server_version");
    assert!(
        version["kubernetes"]["gitVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.36."),
        "{version}"
    );
    let differences = crate::bridged_compare::differences(&results, &workdir_text, port);
    assert!(
        differences.is_empty(),
        "registered results differ from ansible-core's:\n{}\n\nenka's log:\n{}",
        differences.join("\n"),
        log()
    );
    let _ = std::fs::remove_dir_all(&workdir);
}

/// The message of a `ReconcileFailed` Event about `name`.
async fn failure_event(client: &kube::Client, ns: &str, name: &str) -> String {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    eventually(
        &format!("a ReconcileFailed event of {name}"),
        Duration::from_secs(30),
        || async {
            let list = events.list(&Default::default()).await.unwrap();
            list.items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("ReconcileFailed")
                        && e.involved_object.name.as_deref() == Some(name)
                })
                .and_then(|e| e.message)
        },
    )
    .await
}

/// A process on this machine, from /proc.
#[derive(Debug, Clone)]
struct Proc {
    pid: u32,
    parent: u32,
    state: char,
    command: String,
}

fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let mut fields = after.split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let parent = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let command = std::fs::read(entry.path().join("cmdline"))
            .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
            .unwrap_or_default();
        out.push(Proc {
            pid,
            parent,
            state,
            command,
        });
    }
    out
}

/// Every process below `root` (children, their children, …).
fn descendants(root: u32) -> Vec<Proc> {
    let all = processes();
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in all.iter().filter(|p| p.parent == parent) {
            frontier.push(p.pid);
            found.push(p.clone());
        }
    }
    found
}

fn fault_condition(object: &DynamicObject) -> Option<(String, String)> {
    let conditions = object.data["status"]["conditions"].as_array()?;
    let latest = conditions
        .iter()
        .find(|c| c["status"] == "True" && (c["type"] == "Failure" || c["type"] == "Successful"))?;
    Some((
        latest["type"].as_str()?.to_owned(),
        latest["message"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// A bridged task that fails, one that hangs past its `timeout`, and the
/// worker SIGKILLed under a task: each ends its reconcile with a Failure
/// naming the task, the next reconcile succeeds, and nothing is left behind:
/// no process, no zombie, no temporary directory.
#[tokio::test]
async fn bridged_faults_fail_the_reconcile_and_leave_nothing_behind() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crds(&client).await;
    let ns = env.namespace("bridged-faults").await.unwrap();
    let vault = format!(
        "--ansible-args=--vault-password-file {}",
        repo_path("tests/bridged/vault-password.txt").display()
    );
    let mut enka = Enka::start_with_args(
        env,
        "tests/bridged/watches.yaml",
        &ns,
        &[],
        &["--reconcile-timeout=20s", &vault],
        "",
    );
    enka.await_ready().await;
    let enka_pid = enka.pid();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bridged.enka.dev", "v1", "Fault"),
        "faults",
    );
    let faults: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let create = |name: &'static str, case: &'static str| {
        let faults = faults.clone();
        let resource = resource.clone();
        async move {
            let mut fault = DynamicObject::new(name, &resource);
            fault.data = json!({"spec": {"case": case}});
            faults.create(&PostParams::default(), &fault).await.unwrap();
        }
    };
    let await_state = |name: &'static str, kind: &'static str, says: &'static str| {
        let faults = faults.clone();
        async move {
            eventually(
                &format!("{name}: {kind} saying {says:?}"),
                Duration::from_secs(60),
                || async {
                    let object = faults.get(name).await.unwrap();
                    let (found, message) = fault_condition(&object)?;
                    (found == kind && message.contains(says)).then_some(message)
                },
            )
            .await
        }
    };

    // The Failure condition says what upstream's says, the failed result's
    // msg; the Event names the task and where it is.
    create("fails", "fail").await;
    let message = await_state("fails", "Failure", "non-zero return code").await;
    assert_eq!(message, "non-zero return code");
    let event = failure_event(&client, &ns, "fails").await;
    assert!(
        event.contains("task \"a command that fails\"")
            && event.contains("tests/bridged/roles/fault/tasks/main.yml:3:3"),
        "{event}"
    );

    create("hangs", "hang").await;
    let started = std::time::Instant::now();
    let message = await_state("hangs", "Failure", "terminated").await;
    assert!(
        message.contains("The command action failed to execute in the expected time frame (2)"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    create("killed", "kill").await;
    let worker = eventually(
        "a worker running sleep 987 for 'killed'",
        Duration::from_secs(60),
        || async {
            let below = descendants(enka_pid);
            // The sleep runs in a module process forked from a worker; the
            // hang case's sleeps are killed within two seconds, so wait for one
            // that has lived longer than that.
            let sleeping = below
                .iter()
                .filter(|p| p.command.starts_with("sleep 987"))
                .find(|p| age(p.pid) > Duration::from_secs(3))?;
            // Up from the sleep to the worker: the last process before
            // enka or before the fork server the workers are forked from.
            let mut pid = sleeping.parent;
            loop {
                let p = below.iter().find(|p| p.pid == pid)?;
                let server = below
                    .iter()
                    .find(|q| q.pid == p.parent)
                    .is_some_and(|q| q.parent == enka_pid && is_fork_server(q.pid));
                if p.parent == enka_pid || server {
                    return Some(p.pid);
                }
                pid = p.parent;
            }
        },
    )
    .await;
    let pid = rustix::process::Pid::from_raw(worker as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let message = await_state("killed", "Failure", "Ansible worker").await;
    let event = failure_event(&client, &ns, "killed").await;
    assert!(
        event.contains("task \"a command the test kills the worker under\""),
        "{event}"
    );
    assert!(!message.contains("task \""), "{message}");

    // Each recovers once its custom resource asks for nothing bad.
    for name in ["fails", "hangs", "killed"] {
        let patch = json!({"spec": {"case": "ok"}});
        faults
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
    }
    for name in ["fails", "hangs", "killed"] {
        await_state(name, "Successful", "").await;
    }

    // No zombie under enka while it runs: every dead worker was reaped.
    let zombies: Vec<Proc> = descendants(enka_pid)
        .into_iter()
        .filter(|p| p.state == 'Z')
        .collect();
    assert!(zombies.is_empty(), "zombies: {zombies:?}");
    let uid = rustix::process::getuid().as_raw();
    let temp_root = std::env::temp_dir().join(format!("enka-{uid}"));
    let worker_dirs = |pid: u32| -> Vec<String> {
        std::fs::read_dir(&temp_root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("worker-{pid}-")))
            .collect()
    };
    assert!(
        !worker_dirs(enka_pid).is_empty(),
        "the live workers have their directories"
    );
    enka.terminate(Duration::from_secs(30));
    let leftovers: Vec<Proc> = processes()
        .into_iter()
        .filter(|p| {
            p.command.starts_with("sleep 987")
                || (p.command.contains("enka_worker") && p.parent == enka_pid)
        })
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    assert!(
        worker_dirs(enka_pid).is_empty(),
        "temporary directories left: {:?}",
        worker_dirs(enka_pid)
    );
}

/// How long process `pid` has existed.
fn age(pid: u32) -> Duration {
    std::fs::metadata(format!("/proc/{pid}"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .unwrap_or_default()
}

/// A project whose tasks are all native never starts Python: the shipped
/// Zundoko operator sings to Kiyoshi with no child process under enka.
#[tokio::test]
async fn a_native_project_starts_no_worker() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    crate::zundoko::install_zundoko_crds(&client).await;
    let ns = env.namespace("native-only").await.unwrap();
    let mut enka = Enka::start(env, "watches.yaml", &ns, &[("ENKA_RANDOM_SEED", "42")]);
    enka.await_ready().await;
    let hikawas = crate::zundoko::create_hikawa(&client, &ns, 10).await;
    crate::zundoko::await_kiyoshi(&hikawas, "Kiyoshi", Duration::from_secs(60)).await;
    let children = descendants(enka.pid());
    assert!(children.is_empty(), "enka started {children:?}");
    // And --native-only accepts it.
    let (ok, stdout, stderr) = {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_enka"))
            .args(["check", "--watches-file", "watches.yaml"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert!(
        ok && stdout.contains("0 through Ansible"),
        "{stdout}{stderr}"
    );
}

/// `enka run --native-only` refuses a project that needs the worker, at
/// load, naming each task.
#[tokio::test]
async fn native_only_refuses_a_project_that_needs_ansible() {
    let env = KubeEnv::shared().await;
    let ns = env.namespace("native-refused").await.unwrap();
    let mut enka = Enka::start_with_args(
        env,
        "tests/bridged/watches.yaml",
        &ns,
        &[],
        &["--native-only"],
        "",
    );
    let status = eventually("enka to exit", Duration::from_secs(30), || {
        let status = enka.exited();
        async move { status }
    })
    .await;
    assert!(!status.success());
    let log = enka.full_log();
    assert!(
        log.contains("tests/bridged/roles/bridged/tasks/steps.yml:3:3: error: task \"command\": command: enka has no native code for this action, and --native-only forbids running it through Ansible"),
        "{log}"
    );
}

/// A play on an inventory group (`hosts: test`), with the group's
/// group_vars and a filter plugin named in ansible.cfg, as upstream's
/// InventoryTest; a play whose pattern matches no host is skipped.
#[tokio::test]
async fn plays_run_on_the_inventory_host_their_pattern_names() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_crd(&client, "tests/inventory/config/crd.yaml").await;
    let ns = env.namespace("inventory").await.unwrap();
    let mut enka = Enka::start(env, "tests/inventory/watches.yaml", &ns, &[]);
    enka.await_ready().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("inventory.enka.dev", "v1", "InventoryProbe"),
        "inventoryprobes",
    );
    let probes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let mut probe = DynamicObject::new("probe", &resource);
    probe.data = json!({"spec": {}});
    probes.create(&PostParams::default(), &probe).await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = eventually(
        "the inventory ConfigMap",
        Duration::from_secs(60),
        || async { config_maps.get_opt("inventory-cm").await.unwrap()?.data },
    )
    .await;
    assert_eq!(data["sentinel"], "test");
    assert_eq!(data["greeting"], "from the inventory");
    assert_eq!(data["host"], "127.0.0.1");
    assert_eq!(data["group_names"], "test");
    let groups: serde_yaml::Value = serde_yaml::from_str(&data["groups"]).unwrap();
    assert_eq!(groups["test"][0], "127.0.0.1", "{}", data["groups"]);
    assert_eq!(groups["all"][0], "127.0.0.1", "{}", data["groups"]);
    // The second play (hosts: nobody) would fail; the run is Successful.
    eventually("Successful", Duration::from_secs(30), || async {
        let object = probes.get("probe").await.unwrap();
        let (kind, _) = fault_condition(&object)?;
        (kind == "Successful").then_some(())
    })
    .await;
}

/// Whether `pid` was started as the Ansible workers' fork server
/// (ENKA_WORKER_ZYGOTE=1; the workers it forks share its start's
/// environment, so only enka's own child is the server).
fn is_fork_server(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == b"ENKA_WORKER_ZYGOTE=1"))
}
