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
