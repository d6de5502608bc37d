//! Broken projects: `enka check` and `enka run` must both refuse each with
//! a message that names the file, line and column (and the task, for a task),
//! exit with an error rather than a panic, and `enka run` must do so at once
//! rather than start half an operator.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_env::KubeEnv;

use crate::runner::Scenario;

const WATCH: &str = "- {version: v1, group: catalogue.enka.dev, kind: BadInput, role: r}\n";
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
            (TASKS, "- name: shell out\n  shel: echo hi\n"),
        ],
        at: "roles/r/tasks/main.yml:2:3: error: ",
        says: "task \"shell out\": couldn't resolve module/action 'shel'",
    },
];

/// Each case as a scenario; the projects go to a temporary directory.
pub fn cases(env: &Arc<KubeEnv>) -> Vec<Scenario> {
    CASES
        .iter()
        .map(|case| {
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
        })
        .collect()
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

    // enka run loads the same project first and must stop there.
    let mut run = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args([
            "run",
            "--watches-file",
            "watches.yaml",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
        ])
        .current_dir(&dir)
        .env("KUBECONFIG", env.kubeconfig())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running enka run");
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
    let _ = std::fs::remove_dir_all(&dir);
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
