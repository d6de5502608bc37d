//! Broken projects: `enka check` must refuse each with a message that names
//! the file, line and column (and the task, for a task), and exit with an
//! error rather than a panic. `enka run` refuses a broken watches file at
//! once; a role that does not load fails only the watches that run it, as
//! upstream's runs of it fail: enka logs the same message and stays up (no
//! crash loop), and each object of such a watch says why in its status.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_env::KubeEnv;

use crate::runner::Scenario;

const WATCH: &str = "- {version: v1, group: catalogue.enka.dev, kind: BadInput, role: r}\n";
/// The BadInput CRD, which `enka run` must find to start its watch.
const CRD: &str = "tests/catalogue/project/config/crd.yaml";
const TASKS: &str = "roles/r/tasks/main.yml";

/// One broken project: its files, and where and what the error must say.
struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    /// The start of the diagnostic line: `file:line:column: error: `, or
    /// `file: error: ` where a whole file is at fault.
    at: &'static str,
    /// What the message must say after it.
    says: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "watches.yaml is not YAML",
        files: &[("watches.yaml", "- version: v1\n  group: [unclosed\n")],
        at: "watches.yaml:3:1: error: ",
        says: "YAML syntax error",
    },
    Case {
        name: "watches.yaml is a mapping, not a list",
        files: &[("watches.yaml", "version: v1\ngroup: x\nkind: Y\nrole: r\n")],
        at: "watches.yaml:1:1: error: ",
        says: "list",
    },
    Case {
        name: "a watch without a kind",
        files: &[(
            "watches.yaml",
            "- version: v1\n  group: g.example.com\n  role: r\n",
        )],
        at: "watches.yaml:1:3: error: ",
        says: "kind",
    },
    Case {
        name: "a watch without a version",
        files: &[(
            "watches.yaml",
            "- group: g.example.com\n  kind: K\n  role: r\n",
        )],
        at: "watches.yaml:1:3: error: ",
        says: "version",
    },
    Case {
        name: "a watch with neither role nor playbook",
        files: &[(
            "watches.yaml",
            "- version: v1\n  group: g.example.com\n  kind: K\n",
        )],
        at: "watches.yaml:1:3: error: ",
        says: "must specify Role or Playbook",
    },
    Case {
        name: "a reconcilePeriod that is not a duration",
        files: &[(
            "watches.yaml",
            "- version: v1\n  group: g.example.com\n  kind: K\n  role: r\n  reconcilePeriod: soon\n",
        )],
        at: "watches.yaml:5:20: error: ",
        says: "reconcilePeriod",
    },
    Case {
        name: "a selector with an unknown operator",
        files: &[(
            "watches.yaml",
            "- version: v1\n  group: g.example.com\n  kind: K\n  role: r\n  selector:\n    matchExpressions:\n      - {key: a, operator: Sometimes}\n",
        )],
        at: "watches.yaml:7:",
        says: "Sometimes",
    },
    Case {
        name: "a finalizer without a name",
        files: &[(
            "watches.yaml",
            "- version: v1\n  group: g.example.com\n  kind: K\n  role: r\n  finalizer:\n    role: r\n",
        )],
        at: "watches.yaml:6:5: error: ",
        says: "name",
    },
    Case {
        name: "the same kind watched twice",
        files: &[(
            "watches.yaml",
            "- {version: v1, group: g.example.com, kind: K, role: r}\n- {version: v1, group: g.example.com, kind: K, role: r}\n",
        )],
        at: "watches.yaml:2:3: error: ",
        says: "duplicate GVK",
    },
    Case {
        name: "manageStatus that is not a boolean",
        files: &[(
            "watches.yaml",
            "- version: v1\n  group: g.example.com\n  kind: K\n  role: r\n  manageStatus: maybe\n",
        )],
        at: "watches.yaml:5:17: error: ",
        says: "manageStatus",
    },
    Case {
        name: "an empty watches.yaml",
        files: &[("watches.yaml", "---\n")],
        at: "watches.yaml:2:1: error: ",
        says: "the watches file must be a list of watches",
    },
    Case {
        name: "a missing role",
        files: &[("watches.yaml", WATCH)],
        at: "watches.yaml:1:3: error: ",
        says: "role r was not found",
    },
    Case {
        name: "a missing playbook",
        files: &[(
            "watches.yaml",
            "- {version: v1, group: g.example.com, kind: K, playbook: playbooks/gone.yml}\n",
        )],
        at: "watches.yaml:1:58: error: ",
        says: "playbook playbooks/gone.yml was not found",
    },
    Case {
        name: "a YAML error in a role",
        files: &[
            ("watches.yaml", WATCH),
            (TASKS, "- name: fine\n  debug:\n    msg: [unclosed\n"),
        ],
        at: "roles/r/tasks/main.yml:4:1: error: ",
        says: "YAML syntax error",
    },
    Case {
        name: "a Jinja syntax error",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: broken braces\n  debug:\n    msg: \"{{ size + }}\"\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:3:10: error: ",
        says: "task \"broken braces\": debug.msg: template syntax error",
    },
    Case {
        name: "a Jinja block left open",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: open block\n  debug:\n    msg: \"{% if size %}big\"\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:3:10: error: ",
        says: "task \"open block\": debug.msg: template syntax error",
    },
    Case {
        name: "an unknown module",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: make coffee\n  kubernetes.core.k8s_coffee:\n    strength: 3\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:2:3: error: ",
        says: "task \"make coffee\": couldn't resolve module/action 'kubernetes.core.k8s_coffee'",
    },
    Case {
        name: "an unknown task keyword",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: typo\n  debug:\n    msg: hi\n  wehn: size > 1\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:4:3: error: ",
        says: "task \"typo\": 'wehn' is not a valid task keyword or module",
    },
    Case {
        name: "a misspelt module argument",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: read\n  k8s_info:\n    api_version: v1\n    kind: ConfigMap\n    nmae: x\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:5:11: error: ",
        says: "task \"read\": unsupported parameter for k8s_info: nmae",
    },
    Case {
        name: "retries that is not a number",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: poll\n  debug:\n    msg: hi\n  register: r\n  until: r is defined\n  retries: many\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:6:12: error: ",
        says: "retries must be an integer, got \"many\"",
    },
    Case {
        name: "a when that does not parse",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: judge\n  debug:\n    msg: hi\n  when: size ==\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:4:9: error: ",
        says: "task \"judge\": when: template syntax error",
    },
    Case {
        name: "a task that is a string",
        files: &[("watches.yaml", WATCH), (TASKS, "- just some words\n")],
        at: "roles/r/tasks/main.yml:1:3: error: ",
        says: "mapping",
    },
    Case {
        name: "a task file that is a mapping",
        files: &[
            ("watches.yaml", WATCH),
            (TASKS, "name: x\ndebug:\n  msg: hi\n"),
        ],
        at: "roles/r/tasks/main.yml:1:1: error: ",
        says: "list",
    },
    Case {
        name: "two modules in one task",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: both\n  debug:\n    msg: hi\n  fail:\n    msg: no\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:4:3: error: ",
        says: "task \"both\": conflicting action statements: debug, fail",
    },
    Case {
        name: "a task file that imports itself",
        files: &[
            ("watches.yaml", WATCH),
            (TASKS, "- name: again\n  import_tasks: main.yml\n"),
        ],
        at: "roles/r/tasks/main.yml:2:17: error: ",
        says: "task \"again\": recursive import of",
    },
    Case {
        name: "a role that includes itself",
        files: &[
            ("watches.yaml", WATCH),
            (TASKS, "- name: again\n  import_role:\n    name: r\n"),
        ],
        at: "roles/r/tasks/main.yml:",
        says: "role r includes itself",
    },
    Case {
        name: "a filter that neither enka nor the role's filter_plugins has",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: shout\n  debug:\n    msg: \"{{ 'x' | shouty }}\"\n",
            ),
            (
                "roles/r/filter_plugins/shout.py",
                "class FilterModule:\n    def filters(self):\n        return {'shout': str.upper}\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:3:10: error: ",
        says: "task \"shout\": no filter named 'shouty'",
    },
    Case {
        name: "an ansible.cfg whose Vault password file is not there",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: vaulted\n  debug:\n    msg: \"{{ password }}\"\n  vars:\n    password: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      3638\n",
            ),
            (
                "ansible.cfg",
                "[defaults]\nvault_password_file = /nonexistent/enka-vault-pw\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:5:15: error: ",
        says: "task \"vaulted\": Ansible Vault: The vault password file /nonexistent/enka-vault-pw was not found",
    },
    Case {
        name: "a Vault-encrypted value",
        files: &[
            ("watches.yaml", WATCH),
            (
                TASKS,
                "- name: vaulted\n  debug:\n    msg: \"{{ password }}\"\n  vars:\n    password: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      3638\n",
            ),
        ],
        at: "roles/r/tasks/main.yml:5:15: error: ",
        says: "task \"vaulted\": Ansible Vault: Attempting to decrypt but no vault secrets found",
    },
    Case {
        name: "a Vault-encrypted vars file",
        files: &[
            ("watches.yaml", WATCH),
            (TASKS, "- debug:\n    msg: hi\n"),
            (
                "roles/r/defaults/main.yml",
                "$ANSIBLE_VAULT;1.1;AES256\n6231336539\n",
            ),
        ],
        at: "roles/r/defaults/main.yml: error: ",
        says: "Ansible Vault: Attempting to decrypt but no vault secrets found",
    },
    Case {
        name: "a module Ansible does not have either",
        files: &[
            ("watches.yaml", WATCH),
            // Arguments as a mapping: with free-form text Ansible reports
            // the text ("has extra params") before the name.
            (TASKS, "- name: shell out\n  shel:\n    cmd: echo hi\n"),
        ],
        at: "roles/r/tasks/main.yml:2:3: error: ",
        says: "task \"shell out\": couldn't resolve module/action 'shel'",
    },
    Case {
        name: "a module Ansible does not have, given free-form text",
        files: &[
            ("watches.yaml", WATCH),
            (TASKS, "- name: shell out\n  shel: echo hi\n"),
        ],
        at: "roles/r/tasks/main.yml:2:9: error: ",
        says: "task \"shell out\": this task 'shel' has extra params, which is only allowed in the following modules",
    },
];

/// Each case as a scenario; the projects go to a temporary directory.
pub fn cases(env: &Arc<KubeEnv>) -> Vec<Scenario> {
    let broken_role = env.clone();
    let mut cases: Vec<Scenario> = vec![(
        "load: a role that does not load fails its objects until it is fixed".to_owned(),
        Box::pin(broken_role_fails_its_objects(broken_role)),
    )];
    cases.extend(CASES.iter().map(|case| {
        let env = env.clone();
        let scenario: Scenario = (
            format!("load: {}", case.name),
            Box::pin(async move {
                tokio::task::spawn_blocking(move || refused(&env, case))
                    .await
                    .expect("the case ran");
            }),
        );
        scenario
    }));
    cases
}

/// A role that does not load, under `enka run`: each object of its watch
/// gets a Failure condition and an Event with the diagnostic (file, line,
/// column); once the file is fixed, the reload loads it and the object's
/// next retry runs it, without a restart.
async fn broken_role_fails_its_objects(env: Arc<KubeEnv>) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
    const NAMESPACE: &str = "catalogue-broken-role";
    let client = env.client().expect("a client");
    crate::support::install_crd(&client, CRD).await;
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Namespace")),
    );
    let namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}
    }))
    .expect("a Namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("creating the namespace");
    let dir =
        std::env::temp_dir().join(format!("enka-catalogue-{}-broken-role", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("roles/r/tasks")).expect("the project");
    std::fs::write(dir.join("watches.yaml"), WATCH).expect("watches.yaml");
    let tasks = dir.join(TASKS);
    std::fs::write(&tasks, "- name: Say\n  debug:\n    msg: [unclosed\n").expect("the role");
    let watches = dir.join("watches.yaml").display().to_string();
    let mut enka =
        crate::enka::Enka::start_with_args(&env, &watches, NAMESPACE, &[], &[], "-broken-role");
    enka.await_ready().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("catalogue.enka.dev", "v1", "BadInput"),
        "badinputs",
    );
    let inputs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let object = serde_json::from_value(serde_json::json!({
        "apiVersion": "catalogue.enka.dev/v1", "kind": "BadInput",
        "metadata": {"name": "waits-for-a-fix"}, "spec": {}
    }))
    .expect("a BadInput");
    inputs
        .create(&PostParams::default(), &object)
        .await
        .expect("creating the BadInput");
    let failed = crate::runtime::await_condition(
        &inputs,
        "waits-for-a-fix",
        "Failure",
        Duration::from_secs(30),
    )
    .await;
    let message = failed.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Failure")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("does not load") && message.contains("roles/r/tasks/main.yml:"),
        "the Failure condition does not give the diagnostic: {message}"
    );
    assert!(
        enka.exited().is_none(),
        "enka stopped:\n{}",
        enka.full_log()
    );
    std::fs::write(&tasks, "- name: Say\n  debug:\n    msg: fixed\n").expect("the fixed role");
    crate::runtime::await_condition(
        &inputs,
        "waits-for-a-fix",
        "Successful",
        Duration::from_secs(60),
    )
    .await;
    enka.kill();
    let _ = namespaces
        .delete(NAMESPACE, &kube::api::DeleteParams::default())
        .await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn refused(env: &KubeEnv, case: &Case) {
    let dir = write_project(case);
    let check = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args(["check", "--watches-file", "watches.yaml"])
        .current_dir(&dir)
        .output()
        .expect("running enka check");
    let stderr = String::from_utf8_lossy(&check.stderr).into_owned();
    assert_eq!(check.status.code(), Some(1), "enka check exit:\n{stderr}");
    assert_reported(&stderr, case, "enka check");

    if case.at.starts_with("watches.yaml") {
        run_refuses(env, case, &dir);
    } else {
        run_stays_up(env, case, &dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A broken watches file: `enka run` stops at once, saying why.
fn run_refuses(env: &KubeEnv, case: &Case, dir: &Path) {
    let mut run = enka_run(env, dir, Stdio::piped());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = run.try_wait().expect("waiting for enka run") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            panic!("enka run did not refuse the project within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = run.wait_with_output().expect("enka run's output");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !status.success() && status.code().is_some(),
        "enka run: {status}\n{stderr}"
    );
    assert_reported(&log_messages(&stderr), case, "enka run");
}

/// A role that does not load: `enka run` logs the diagnostic and keeps
/// serving (the watch's objects fail, see `broken_role_fails_its_objects`).
fn run_stays_up(env: &KubeEnv, case: &Case, dir: &Path) {
    crate::support::kubectl(
        env,
        &[
            "apply",
            "-f",
            &crate::support::repo_path(CRD).display().to_string(),
        ],
    );
    let log = dir.join("enka-run.log");
    let file = std::fs::File::create(&log).expect("the log file");
    let mut run = enka_run(env, dir, Stdio::from(file));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(status) = run.try_wait().expect("waiting for enka run") {
            panic!("enka run stopped ({status}) on a role that does not load:\n{stderr}");
        }
        if stderr.contains("enka is running") {
            assert_reported(&log_messages(&stderr), case, "enka run");
            break;
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            panic!("enka run was not running within 20 s:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = run.kill();
    let _ = run.wait();
}

fn enka_run(env: &KubeEnv, dir: &Path, stderr: Stdio) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_enka"))
        .args([
            "run",
            "--watches-file",
            "watches.yaml",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
        ])
        .current_dir(dir)
        .env("KUBECONFIG", env.kubeconfig())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("running enka run")
}

/// `enka run` logs zap JSON lines: each line's `msg` (other lines as they
/// are, such as the final error on stderr), so the diagnostic must reach
/// the log intact.
fn log_messages(stderr: &str) -> String {
    stderr
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|json| json.get("msg").and_then(|m| m.as_str()).map(str::to_owned))
                .unwrap_or_else(|| line.to_owned())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_reported(stderr: &str, case: &Case, who: &str) {
    assert!(!stderr.contains("panicked"), "{who} panicked:\n{stderr}");
    assert!(
        stderr
            .lines()
            .any(|line| line.contains(case.at) && line.contains(case.says)),
        "{who} did not say {:?} at {:?}:\n{stderr}",
        case.says,
        case.at
    );
}

fn write_project(case: &Case) -> PathBuf {
    let slug: String = case
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = std::env::temp_dir().join(format!("enka-catalogue-{}-{slug}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in case.files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
            .expect("creating the project");
        std::fs::write(&path, text).expect("writing the project");
    }
    dir
}
