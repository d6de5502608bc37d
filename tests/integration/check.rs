//! `enka check` on the seed's project and on deliberately broken roles.

use std::process::Command;

fn check(watches: &str) -> (bool, String, String) {
    check_with(watches, &[])
}

fn check_with(watches: &str, extra: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args(["check", "--watches-file", watches])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running enka check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_seed_project_checks_clean() {
    for watches in ["tests/fixtures/zundoko-seed/watches.yaml", "watches.yaml"] {
        let (ok, stdout, stderr) = check(watches);
        assert!(ok, "{watches}: {stdout}{stderr}");
        assert!(
            stdout.contains("\nenka check: ok — 1 watch, 1 role, 0 playbooks, 11 tasks"),
            "{stdout}"
        );
    }
}

#[test]
fn every_broken_role_is_reported_with_its_position() {
    // Filters and modules enka lacks are resolved by Ansible: this needs the
    // worker's Python (make test sets ENKA_ANSIBLE_PYTHON).
    let (ok, stdout, stderr) = check("tests/fixtures/broken/watches.yaml");
    assert!(!ok, "broken roles must fail the check");
    let roles = "tests/fixtures/broken/roles";
    for expected in [
        "tests/fixtures/broken/watches.yaml:15:3: error: duplicate GVK: broken.example.com/v1, Kind=YamlError".to_owned(),
        format!("{roles}/yaml_error/tasks/main.yml:4:4: error: YAML syntax error"),
        format!("{roles}/jinja_syntax/tasks/main.yml:3:10: error: task \"an unclosed call\": debug.msg: template syntax error"),
        format!("{roles}/missing_template/tasks/main.yml:3:10: error: task \"render a file that is not there\": Could not find or access 'not_there.j2'"),
        format!("{roles}/unknown_module/tasks/main.yml:4:3: error: task \"no such module\": couldn't resolve module/action 'community.kubernetes.k8s_frobnicate'"),
        format!("{roles}/unknown_keyword/tasks/main.yml:3:3: error: task \"a typo in when\": 'whne' is not a valid task keyword or module"),
        format!("{roles}/bad_argument/tasks/main.yml:4:11: error: task \"misspelt argument\": unsupported parameter for k8s_info: nmae"),
        format!("{roles}/missing_include/tasks/main.yml:2:18: error: task \"include a file that is not there\": include_tasks: could not find the task file does_not_exist.yml"),
        format!("{roles}/bad_condition/tasks/main.yml:3:9: error: task \"broken when\": when: template syntax error"),
        format!("{roles}/python_filter/tasks/main.yml:5:10: error: task \"a filter nobody has\": no filter named 'no_such_filter'"),
        format!("{roles}/vault/tasks/main.yml:3:15: error: task \"vaulted variable\": Ansible Vault: The vault password file /opt/ansible/pwd.yml was not found"),
        "tests/fixtures/broken/watches.yaml:14:3: error: role no_such_role was not found".to_owned(),
        format!("{roles}/vault_file/vars/main.yml: error: Ansible Vault: The vault password file /opt/ansible/pwd.yml was not found"),
    ] {
        assert!(stderr.contains(&expected), "missing {expected:?} in:\n{stderr}");
    }
    // Each error shows its source line with a caret under the column.
    assert!(
        stderr.contains("3 |     msg: \"{{ lookup('env', 'HOME' }}\"\n  |          ^"),
        "{stderr}"
    );
    assert!(
        stdout.contains("enka check: 13 errors, 0 warnings"),
        "{stdout}"
    );
}

#[test]
fn check_says_which_tasks_go_through_ansible() {
    let vault = format!(
        "--ansible-args=--vault-password-file {}",
        crate::support::repo_path("tests/bridged/vault-password.txt").display()
    );
    let (ok, stdout, stderr) = check_with("tests/bridged/watches.yaml", &[&vault]);
    assert!(ok, "{stdout}\n{stderr}");
    for expected in [
        "bridged.enka.dev/v1, Kind=Probe: 3 tasks native, 15 through Ansible",
        "tests/bridged/roles/bridged_dep/tasks/main.yml:2:3: ansible.builtin.command (no native code in enka",
        "tests/bridged/roles/bridged/tasks/steps.yml:68:3: enka_echo (no native code in enka",
        "tests/bridged/roles/bridged/tasks/steps.yml:73:3: community.general.ini_file (no native code in enka",
        "tests/bridged/roles/bridged/tasks/steps.yml:108:15: filter reverse_words runs through Ansible",
        "bridged.enka.dev/v1, Kind=Fault: 0 tasks native, 4 through Ansible",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // Without the Vault password the vaulted variable is an error at its line.
    let (ok, _, stderr) = check("tests/bridged/watches.yaml");
    assert!(!ok);
    assert!(
        stderr.contains("tests/bridged/roles/bridged/vars/main.yml:4:17: error: Ansible Vault: Attempting to decrypt but no vault secrets found"),
        "{stderr}"
    );
    // The seed's role needs no worker.
    let (ok, stdout, _) = check("watches.yaml");
    assert!(ok);
    assert!(
        stdout.contains("zundokokiyoshi.kaitoy.github.com/v1beta2, Kind=Hikawa: 8 tasks native, 0 through Ansible"),
        "{stdout}"
    );
}

/// Runs `enka check` in `dir` on its `watches.yaml`, as a porting user would.
fn check_in(dir: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args(["check", "--watches-file", "watches.yaml"])
        .current_dir(dir)
        .output()
        .expect("running enka check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn upstreams_memcached_molecule_operator_checks_clean() {
    let dir =
        crate::support::ansible_operator_plugins().join("testdata/memcached-molecule-operator");
    let (ok, stdout, stderr) = check_in(&dir);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("enka check: ok — 4 watches, 4 roles, 3 playbooks"),
        "{stdout}"
    );
    for bridged in [
        "roles/memcached/tasks/main.yml:49:3: ansible.builtin.stat",
        "roles/memcached/tasks/main.yml:56:7: ansible.builtin.file",
    ] {
        assert!(
            stdout.contains(bridged),
            "missing {bridged:?} in:\n{stdout}"
        );
    }
}

#[test]
fn awx_operator_checks_clean() {
    let Some(operators) = crate::support::shared_operators() else {
        return;
    };
    let (ok, stdout, stderr) = check_in(&operators.join("awx-operator"));
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("enka check: ok — 4 watches"), "{stdout}");
    for expected in [
        "awx.ansible.com/v1beta1, Kind=AWX: ",
        "roles/installer/tasks/resources_configuration.yml:56:7: ansible.builtin.tempfile",
        "roles/installer/templates/configmaps/config.yaml.j2:48:1: filter cpu_string_to_decimal runs through Ansible",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

#[test]
fn a_removed_module_is_one_error_at_its_task_and_the_rest_still_resolve() {
    let dir = std::env::temp_dir().join(format!("enka-check-removed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("roles/porting/tasks")).unwrap();
    std::fs::write(
        dir.join("watches.yaml"),
        "- version: v1\n  group: porting.enka.dev\n  kind: Port\n  role: porting\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("roles/porting/tasks/main.yml"),
        "- name: a command\n  command: echo hi\n\
         - name: a stat\n  stat:\n    path: /tmp\n\
         - name: a removed action\n  include:\n    file: other.yml\n\
         - name: a removed collection module\n  community.general.ali_instance_facts: {}\n\
         - name: a file\n  file:\n    path: /tmp\n    state: directory\n",
    )
    .unwrap();
    let (ok, stdout, stderr) = check_in(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "{stdout}{stderr}");
    let main = "roles/porting/tasks/main.yml";
    for (line, name) in [(7, "include"), (10, "community.general.ali_instance_facts")] {
        let at = format!("{main}:{line}:3: error: task \"a removed ");
        let reported = stderr
            .lines()
            .filter(|l| l.contains(&at))
            .collect::<Vec<_>>();
        assert_eq!(reported.len(), 1, "{name}: {at:?} once in:\n{stderr}");
        assert!(reported[0].contains("has been removed"), "{}", reported[0]);
    }
    for line in [1, 3, 12] {
        assert!(
            !stderr.contains(&format!("{main}:{line}:")),
            "line {line} reported:\n{stderr}"
        );
    }
    assert!(stdout.contains("enka check: 2 errors"), "{stdout}");
}
