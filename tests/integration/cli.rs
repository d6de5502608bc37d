//! The `enka` binary's own command line.

use std::process::Command;

fn enka(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_enka"))
        .args(args)
        .output()
        .expect("running the enka binary")
}

#[test]
fn version_prints_the_crate_version() {
    let out = enka(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("enka {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_describes_the_tool() {
    let out = enka(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Usage: enka"), "{text}");
    assert!(text.contains("Ansible-operator"), "{text}");
}

#[test]
fn an_unknown_flag_is_an_error_that_names_it() {
    let out = enka(&["--no-such-flag"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
}

/// `enka run` with a kubeconfig that does not exist: the flags are parsed
/// and checked, then enka fails to reach a cluster.
fn run_without_cluster(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_enka"))
        .arg("run")
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("running the enka binary");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every flag of ansible-operator v1.42's `run` (internal/ansible/flags and
/// controller-runtime's zap options), in upstream's spellings and Go's
/// boolean forms, gets past parsing and validation.
#[test]
fn every_upstream_run_flag_is_accepted() {
    let flags = [
        "--watches-file=./watches.yaml",
        "--inject-owner-ref=false",
        "--ansible-verbosity=3",
        "--ansible-roles-path=/tmp/roles",
        "--ansible-collections-path=/tmp/collections",
        "--ansible-args=--vault-id=dev@/dev/null",
        "--reconcile-period=1m",
        "--max-concurrent-reconciles=4",
        "--metrics-bind-address=:8443",
        "--health-probe-bind-address=:6789",
        "--leader-elect=true",
        "--leader-election-id=my-operator",
        "--leader-election-namespace=default",
        "--leader-elect-resource-lock=leases",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--graceful-shutdown-timeout=30s",
        "--ansible-log-events=Everything",
        "--proxy-port=8888",
        "--enable-http2=false",
        "--metrics-secure",
        "--metrics-require-rbac=true",
        "--zap-devel=false",
        "--zap-encoder=json",
        "--zap-log-level=debug",
        "--zap-stacktrace-level=error",
        "--zap-time-encoding=iso8601",
    ];
    let (ok, stderr) = run_without_cluster(&flags);
    assert!(!ok);
    assert!(
        stderr.contains("cannot connect to Kubernetes"),
        "the flags should parse and enka stop at the cluster:\n{stderr}"
    );
    // Deprecated spellings, alone.
    let (_, stderr) = run_without_cluster(&["--enable-leader-election", "--metrics-addr=:8080"]);
    assert!(stderr.contains("cannot connect to Kubernetes"), "{stderr}");
    assert!(stderr.contains("--metrics-addr is deprecated"), "{stderr}");
    // Inert flags are named once.
    assert!(
        run_without_cluster(&["--proxy-port=8888"])
            .1
            .contains("--proxy-port has no effect"),
    );
}

#[test]
fn upstreams_invalid_combinations_are_refused_with_its_messages() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--metrics-require-rbac"],
            "--metrics-secure flag is required when --metrics-require-rbac is present",
        ),
        (
            &["--leader-elect", "--enable-leader-election"],
            "only one of --leader-elect and --enable-leader-election may be set",
        ),
        (
            &["--metrics-addr=:1", "--metrics-bind-address=:2"],
            "only one of --metrics-addr and --metrics-bind-address may be set",
        ),
        (&["--leader-elect=yes"], "invalid boolean \"yes\""),
    ];
    for (args, message) in cases {
        let (ok, stderr) = run_without_cluster(args);
        assert!(!ok, "{args:?} should fail");
        assert!(
            stderr.contains(message),
            "{args:?}: expected {message:?} in:\n{stderr}"
        );
        assert!(
            !stderr.contains("cannot connect"),
            "{args:?} should fail before connecting"
        );
    }
}

#[test]
fn version_prints_ansible_operators_fields_under_the_name_it_was_started_as() {
    let out = enka(&["version"]);
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.starts_with(&format!(
            "enka version: \"v{}\", commit: ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
    for key in [
        ", kubernetes version: \"v1.",
        ", go version: ",
        ", GOOS: \"linux\"",
        ", GOARCH: \"",
    ] {
        assert!(line.contains(key), "{key} in {line}");
    }
    // The image links /usr/local/bin/ansible-operator to enka, so a
    // user's Dockerfile and manifests that name it keep working.
    let dir = std::env::temp_dir().join(format!("enka-version-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("ansible-operator");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_enka"), &link).unwrap();
    let out = Command::new(&link).arg("version").output().unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.starts_with("ansible-operator version: \"v"), "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A play of native tasks over hosts an inventory file and a host list
/// name starts no Python: enka reads the inventory (with its
/// `group_vars/`) itself. The interpreter it is given (in a virtualenv's
/// layout, whose ansible-core enka reads without starting it) leaves a
/// mark and fails if anything starts it.
#[test]
fn a_play_of_native_tasks_starts_no_python() {
    let dir = std::env::temp_dir().join(format!("enka-native-play-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let site = dir.join("venv/lib/python3.11/site-packages/ansible");
    for sub in [dir.join("group_vars"), dir.join("venv/bin"), site.clone()] {
        std::fs::create_dir_all(sub).expect("a scratch directory");
    }
    let mark = dir.join("python-started");
    let python = dir.join("venv/bin/python");
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("writing");
    write("venv/pyvenv.cfg", "home = /usr/bin\n");
    write(
        "venv/lib/python3.11/site-packages/ansible/release.py",
        "__version__ = '2.18.19'\n",
    );
    write(
        "venv/bin/python",
        &format!("#!/bin/sh\ntouch '{}'\nexit 1\n", mark.display()),
    );
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("an executable stand-in");
    write(
        "inventory",
        "[web]\nweb1 ansible_connection=local port=8080\n",
    );
    write("group_vars/web.yml", "greeting: hello\n");
    write(
        "play.yml",
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: msg=\"{{ greeting }} {{ inventory_hostname }} {{ port + 1 }}\"\n    - set_fact: {seen: '{{ groups.all | length }}'}\n    - assert: {that: [seen | int >= 1]}\n",
    );
    // The host list's hosts are in no group with vars: the extra vars give
    // them what group_vars/web.yml gives web1.
    for (inventory, extra) in [
        ("inventory", "{}"),
        ("web1,web2,", r#"{"greeting": "hi", "port": 1}"#),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_enka"))
            .current_dir(&dir)
            .env("ENKA_ANSIBLE_PYTHON", &python)
            .args(["playbook", "-i", inventory, "-e", extra, "play.yml"])
            .output()
            .expect("running enka playbook");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(!mark.exists(), "-i {inventory} started Python:\n{stdout}");
        if inventory == "inventory" {
            assert!(stdout.contains("hello web1 8081"), "{stdout}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
