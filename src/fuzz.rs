//! Entry points for the fuzz targets (`fuzz/`) and their regression tests:
//! each takes arbitrary bytes and must return, whatever they are, without
//! panicking, overflowing the stack or running away.

use std::path::Path;
use std::sync::Arc;

use crate::role::{LoadOptions, Project, RolePaths, Target};
use crate::template::{Context, Options, TemplarBuilder, Var, VarList};

/// Parses `data` as a watches.yaml.
pub fn watches(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut diagnostics = crate::role::Diagnostics::default();
    let _ = crate::watches::parse(&text, Path::new("watches.yaml"), &mut diagnostics);
    // Formatting each finding must not panic either.
    for diagnostic in &diagnostics.0 {
        let _ = diagnostic.to_string();
    }
}

/// Loads `data` as the tasks/main.yml of a role, in a scratch project under
/// `scratch` (a directory the caller owns).
pub fn role(data: &[u8], scratch: &Path) {
    let tasks = scratch.join("roles/fuzzed/tasks");
    if std::fs::create_dir_all(&tasks).is_err()
        || std::fs::write(tasks.join("main.yml"), data).is_err()
    {
        return;
    }
    let options = LoadOptions {
        role_paths: RolePaths {
            roles_path: Vec::new(),
            collections_path: Vec::new(),
            base_dir: scratch.to_path_buf(),
        },
        templates: Options::default(),
        origins: Vec::new(),
        lookups: Vec::new(),
        ansible: None,
    };
    let _ = Project::load(&options, &[Target::Role("fuzzed".to_owned())]);
}

/// Compiles and renders `data` as a template over a few variables of each
/// type (one of them itself a template), and judges it as a `when`.
pub fn template(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let mut builder = TemplarBuilder::new(Options {
        seed: Some(1),
        allow_pipe: false,
        fuel: Some(200_000),
    });
    if builder.add_template(source).is_err() {
        return;
    }
    let templar = builder.build();
    let json = serde_json::json!({
        "n": 3, "s": "abc", "b": true, "none": null, "l": [1, "x", [2]],
        "d": {"a": 1, "b": {"c": "d"}}, "size": "3",
    });
    let mut vars: Vec<(String, Var)> = json
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.clone(),
                Var::templated(crate::template::convert::from_json(v)),
            )
        })
        .collect();
    vars.push((
        "t".to_owned(),
        Var::templated(minijinja::Value::from("{{ n + 1 }}")),
    ));
    let ctx = Context::new(
        templar.clone(),
        Arc::new(VarList(vars)),
        Arc::from(Vec::new()),
    );
    let _ = templar.template_str(source, &ctx);
    let _ = templar.evaluate(&minijinja::Value::from(source), &ctx);
}

/// The templates a role typically runs over what a custom resource says:
/// copies, concatenation, filters, and the parsers a spec string reaches.
const CUSTOM_RESOURCE_TEMPLATES: &[&str] = &[
    "{{ payload }}",
    "prefix {{ payload }}",
    "{{ payload | from_yaml }}",
    "{{ payload | from_yaml_all | list }}",
    "{{ payload | from_json }}",
    "{{ payload | to_json | from_json }}",
    "{{ parsed }}",
    "{{ parsed | to_yaml }}",
    "{{ copy }}",
];

/// A custom resource's data, as far as a CR author controls it: `data` is
/// the string `spec.payload`, and, when it parses as JSON, `spec.parsed`
/// too. Both go through the run's variables (snake-cased, unsafe), every
/// template above renders over them, and a render's result is stored again
/// as `set_fact` stores it (`copy`) and rendered once more.
pub fn custom_resource(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = serde_json::from_str::<serde_json::Value>(text).unwrap_or(serde_json::Value::Null);
    let object = serde_json::json!({
        "metadata": {"name": "fuzzed", "namespace": "ns"},
        "spec": {"payload": text, "parsed": parsed},
    });
    let mut builder = TemplarBuilder::new(Options {
        seed: Some(1),
        allow_pipe: false,
        fuel: Some(200_000),
    });
    for source in CUSTOM_RESOURCE_TEMPLATES {
        if builder.add_template(source).is_err() {
            return;
        }
    }
    let templar = builder.build();
    let options = crate::operator::vars::VarOptions {
        snake_case: true,
        ..Default::default()
    };
    let mut vars: Vec<(String, Var)> =
        crate::operator::vars::extra_vars(&object, "g", "K", &options)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    let render = |vars: &[(String, Var)], source: &str| {
        let ctx = Context::new(
            templar.clone(),
            Arc::new(VarList(vars.to_vec())),
            Arc::from(Vec::new()),
        );
        templar.template_str(source, &ctx).ok()
    };
    if let Some(copied) = render(&vars, "prefix {{ payload }}") {
        vars.push(("copy".to_owned(), Var::templated(copied)));
    }
    for source in CUSTOM_RESOURCE_TEMPLATES {
        let _ = render(&vars, source);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// Every input a fuzzer once crashed on, kept in fuzz/regressions/<target>/.
    fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/regressions")
            .join(target);
        let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .map(|p| {
                let data = std::fs::read(&p).expect("a regression input");
                (p, data)
            })
            .collect();
        inputs.sort();
        inputs
    }

    #[test]
    fn watches_regressions_parse_without_panicking() {
        let inputs = regressions("watches");
        assert!(!inputs.is_empty());
        for (_, data) in inputs {
            super::watches(&data);
        }
    }

    #[test]
    fn role_regressions_load_without_panicking() {
        let scratch = std::env::temp_dir().join(format!("enka-fuzz-role-{}", std::process::id()));
        let inputs = regressions("role");
        assert!(!inputs.is_empty());
        for (_, data) in inputs {
            super::role(&data, &scratch);
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }

    #[test]
    fn custom_resource_regressions_render_without_panicking() {
        let inputs = regressions("custom_resource");
        assert!(inputs.len() >= 4, "the hostile seeds are kept");
        for (_, data) in inputs {
            super::custom_resource(&data);
        }
    }

    #[test]
    fn template_regressions_render_without_panicking() {
        let inputs = regressions("template");
        assert!(!inputs.is_empty());
        for (_, data) in inputs {
            super::template(&data);
        }
    }
}
