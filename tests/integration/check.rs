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
        format!("{roles}/unknown_module/tasks/main.yml:4:3: error: task \"no such module\": couldn't resolve module/action 'community.kubernetes.k8s_frobnicate'"),
        format!("{roles}/unknown_keyword/tasks/main.yml:3:3: error: task \"a typo in when\": 'whne' is not a valid task keyword or module"),
        format!("{roles}/bad_argument/tasks/main.yml:4:11: error: task \"misspelt argument\": unsupported parameter for k8s_info: nmae"),
        format!("{roles}/missing_include/tasks/main.yml:2:18: error: task \"include a file that is not there\": include_tasks: could not find the task file does_not_exist.yml"),
        format!("{roles}/bad_condition/tasks/main.yml:3:9: error: task \"broken when\": when: template syntax error"),
        format!("{roles}/python_filter/tasks/main.yml:5:10: error: task \"a filter nobody has\": no filter named 'no_such_filter'"),
        format!("{roles}/vault/tasks/main.yml:3:15: error: task \"vaulted variable\": vars password: Ansible Vault data cannot be decrypted"),
        "tests/fixtures/broken/watches.yaml:14:3: error: role no_such_role was not found".to_owned(),
        "tests/fixtures/broken/ansible.cfg:6:1: error: vault_password_file: Ansible Vault data cannot be decrypted in-process".to_owned(),
        format!("{roles}/vault_file/vars/main.yml: error: the file is encrypted with Ansible Vault"),
        "tests/fixtures/broken/playbooks/vars/secret.yml: error: the file is encrypted with Ansible Vault".to_owned(),
    ] {
        assert!(stderr.contains(&expected), "missing {expected:?} in:\n{stderr}");
    }
    // Each error shows its source line with a caret under the column.
    assert!(
        stderr.contains("3 |     msg: \"{{ lookup('env', 'HOME' }}\"\n  |          ^"),
        "{stderr}"
    );
    assert!(
        stdout.contains("enka check: 14 errors, 0 warnings"),
        "{stdout}"
    );
}

#[test]
fn check_says_which_tasks_go_through_ansible() {
    let (ok, stdout, stderr) = check("tests/fixtures/broken/watches.yaml");
    assert!(!ok, "{stderr}");
    // The broken project stops the report; a clean project with one bridged
    // task shows it (the seed's role is all native).
    let (ok, stdout_seed, _) = check("watches.yaml");
    assert!(ok);
    assert!(
        stdout_seed.contains("zundokokiyoshi.kaitoy.github.com/v1beta2, Kind=Hikawa: 8 tasks native, 0 through Ansible"),
        "{stdout_seed}"
    );
    assert!(!stdout.contains("through Ansible\n  "), "{stdout}");
}
