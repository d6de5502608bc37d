//! `enka check` on the seed's project and on deliberately broken roles.

use std::process::Command;

fn check(watches: &str) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .args(["check", "--watches-file", watches])
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
            stdout.starts_with("enka check: ok — 1 watch, 1 role, 0 playbooks, 11 tasks"),
            "{stdout}"
        );
    }
}

#[test]
fn every_broken_role_is_reported_with_its_position() {
    let (ok, stdout, stderr) = check("tests/fixtures/broken/watches.yaml");
    assert!(!ok, "broken roles must fail the check");
    let roles = "tests/fixtures/broken/roles";
    for expected in [
        "tests/fixtures/broken/watches.yaml:15:3: error: duplicate GVK: broken.example.com/v1, Kind=YamlError".to_owned(),
        format!("{roles}/yaml_error/tasks/main.yml:4:4: error: YAML syntax error"),
        format!("{roles}/jinja_syntax/tasks/main.yml:3:10: error: task \"an unclosed call\": debug.msg: template syntax error"),
        format!("{roles}/unknown_module/tasks/main.yml:4:3: error: task \"no such module\": module community.kubernetes.k8s_frobnicate is not supported"),
        format!("{roles}/unknown_keyword/tasks/main.yml:3:3: error: task \"a typo in when\": 'whne' is not a valid task keyword or module"),
        format!("{roles}/bad_argument/tasks/main.yml:4:11: error: task \"misspelt argument\": unsupported parameter for k8s_info: nmae"),
        format!("{roles}/missing_include/tasks/main.yml:2:18: error: task \"include a file that is not there\": include_tasks: could not find the task file does_not_exist.yml"),
        format!("{roles}/bad_condition/tasks/main.yml:3:9: error: task \"broken when\": when: template syntax error"),
        format!("{roles}/python_filter/filter_plugins/my_filters.py: error: a Python filter plugin cannot run in-process"),
        format!("{roles}/vault/tasks/main.yml:3:15: error: task \"vaulted variable\": vars password: Ansible Vault data cannot be decrypted"),
        format!("{roles}/command_module/tasks/main.yml:2:3: error: task \"run a command\": module command is not supported"),
        "tests/fixtures/broken/watches.yaml:14:3: error: role no_such_role was not found".to_owned(),
        "tests/fixtures/broken/ansible.cfg:5:1: error: filter_plugins: Python filter plugins cannot run in-process".to_owned(),
        "tests/fixtures/broken/ansible.cfg:6:1: error: vault_password_file: Ansible Vault data cannot be decrypted in-process".to_owned(),
        format!("{roles}/vault_file/vars/main.yml: error: the file is encrypted with Ansible Vault"),
        "tests/fixtures/broken/playbooks/filter_plugins/strings.py: error: a Python filter plugin cannot run in-process".to_owned(),
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
        stdout.contains("enka check: 17 errors, 0 warnings"),
        "{stdout}"
    );
}
