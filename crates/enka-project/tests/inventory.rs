//! Inventories enka reads itself, each a named trial against what
//! ansible-core's InventoryManager loaded from the same sources
//! (`tests/inventory/record.py`, one recording per line we follow); a case
//! enka leaves to Ansible checks that it does.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value as Json;

use enka_project::inventory::reader::{Sources, read};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inventory")
}

fn main() {
    let text = std::fs::read_to_string(dir().join("cases.yaml")).expect("cases.yaml is readable");
    let cases = enka_yaml::load_one(&text)
        .expect("cases.yaml is YAML")
        .expect("cases.yaml is not empty")
        .to_json();
    let mut trials = Vec::new();
    for line in ["2.18", "2.19", "2.21"] {
        let recording = dir().join(format!("expected-{line}.json"));
        let recorded: Json = serde_json::from_str(
            &std::fs::read_to_string(&recording).expect("the recording is readable"),
        )
        .expect("the recording is JSON");
        for case in cases.as_array().into_iter().flatten() {
            let name = case["name"].as_str().unwrap_or_default().to_owned();
            let want = recorded["cases"][&name].clone();
            let case = case.clone();
            trials.push(Trial::test(format!("{line}::{name}"), move || {
                check(&case, &want)
            }));
        }
    }
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

fn check(case: &Json, want: &Json) -> Result<(), Failed> {
    if want.is_null() && case["through_ansible"].is_null() {
        return Err("not recorded: run tests/inventory/record.py".into());
    }
    let name = case["name"].as_str().unwrap_or_default();
    let root = std::env::temp_dir().join(format!("enka-inventory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in case["files"].as_object().into_iter().flatten() {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(&root))?;
        std::fs::write(path, text.as_str().unwrap_or_default())?;
    }
    std::fs::create_dir_all(&root)?;
    let sources: Vec<String> = case["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    let basedir = case["basedir"].as_str().map(|b| root.join(b));
    let got = read(&Sources {
        sources: &sources,
        basedir: basedir.as_deref(),
        project_dir: &root,
        plugin_dirs: &[],
        python: "<python>",
    });
    let _ = std::fs::remove_dir_all(&root);
    match (got, case["through_ansible"].as_str()) {
        (None, Some(_)) => Ok(()),
        (Some(_), Some(reason)) => {
            Err(format!("enka read it, though {reason} are Ansible's to read").into())
        }
        (None, None) => Err("enka left it to Ansible".into()),
        (Some(got), None) => {
            let got = at_dir(got, &root.to_string_lossy());
            if got == *want {
                Ok(())
            } else {
                Err(format!(
                    "ansible-core: {}\nenka:         {}",
                    serde_json::to_string_pretty(want)?,
                    serde_json::to_string_pretty(&got)?
                )
                .into())
            }
        }
    }
}

/// `value` with the case's directory written `<dir>`, as recorded.
fn at_dir(value: Json, root: &str) -> Json {
    match value {
        Json::String(text) => Json::String(text.replace(root, "<dir>")),
        Json::Array(items) => items.into_iter().map(|v| at_dir(v, root)).collect(),
        Json::Object(map) => map
            .into_iter()
            .map(|(k, v)| (k.replace(root, "<dir>"), at_dir(v, root)))
            .collect(),
        other => other,
    }
}
