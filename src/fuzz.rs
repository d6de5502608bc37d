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
        inventory: crate::role::InventoryLoad::WhenNamed,
    };
    let _ = Project::load(&options, &[Target::Role("fuzzed".to_owned())]);
}

/// Reads `data` as an inventory file `hosts` (YAML where it parses as one,
/// else INI, as Ansible's plugins take it), in `scratch` (a directory the
/// caller owns), and as a host list.
pub fn inventory(data: &[u8], scratch: &Path) {
    if std::fs::create_dir_all(scratch).is_err()
        || std::fs::write(scratch.join("hosts"), data).is_err()
    {
        return;
    }
    let host_list = format!("{},", String::from_utf8_lossy(data));
    for source in ["hosts".to_owned(), host_list] {
        let _ = enka_project::inventory::reader::read(&enka_project::inventory::reader::Sources {
            sources: &[source],
            basedir: None,
            project_dir: scratch,
            plugin_dirs: &[],
            python: "python3",
        });
    }
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
        ..Options::default()
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
///
/// The bytes are read in one of two ways. Text (a first byte below 0xF0) is
/// the payload as it is. Otherwise they are a program of [`Shape`]s that
/// writes the payload: YAML and JSON whose dangerous sizes (nesting depth,
/// alias fan-out, string length) each sit in one or two bytes, so a byte
/// mutation reaches 10 000 levels or a billion-laughs document at once,
/// where plain text needs thousands of lucky insertions.
pub fn custom_resource(data: &[u8]) {
    let shaped;
    let text = match data.split_first() {
        Some((&first, program)) if first >= 0xF0 => {
            shaped = Shape::write_all(program);
            shaped.as_str()
        }
        _ => match std::str::from_utf8(data) {
            Ok(text) => text,
            Err(_) => return,
        },
    };
    let parsed = serde_json::from_str::<serde_json::Value>(text).unwrap_or(serde_json::Value::Null);
    let object = serde_json::json!({
        "metadata": {"name": "fuzzed", "namespace": "ns"},
        "spec": {"payload": text, "parsed": parsed},
    });
    // Compiled once: the templates are the same for every input, and a
    // fuzzer's executions per second are its reach.
    static TEMPLAR: std::sync::OnceLock<Arc<crate::template::Templar>> = std::sync::OnceLock::new();
    let templar = TEMPLAR.get_or_init(|| {
        let mut builder = TemplarBuilder::new(Options {
            seed: Some(1),
            allow_pipe: false,
            fuel: Some(200_000),
            ..Options::default()
        });
        for source in CUSTOM_RESOURCE_TEMPLATES {
            if let Err(e) = builder.add_template(source) {
                panic!("the fuzz target's own template {source:?} does not compile: {e}");
            }
        }
        builder.build()
    });
    let options = crate::vars::VarOptions {
        snake_case: true,
        ..Default::default()
    };
    let mut vars: Vec<(String, Var)> = crate::vars::extra_vars(&object, "g", "K", &options)
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

/// The largest request body the API server accepts (3 MiB), so the
/// largest string a custom resource can hold.
const MAX_PAYLOAD: usize = 3 * 1024 * 1024;

/// One step of a payload program: an opcode byte, then its arguments.
enum Shape {
    /// `[` × n (flow sequences, or JSON arrays) and, unless `open`, as many
    /// `]`.
    FlowNest { levels: usize, open: bool },
    /// `{"k":` × n … `}` × n: JSON (and YAML flow) mappings.
    MapNest { levels: usize },
    /// n lines of a block mapping, each indented one more.
    BlockNest { levels: usize },
    /// `- ` × n on one line: nested block sequences.
    DashNest { levels: usize },
    /// `k: &a0 "x…x"`: an anchor on a string of `len` bytes.
    Anchor { len: usize },
    /// `levels` lines `k: &aN [*aN-1, …]`, each `fanout` aliases of the
    /// line before (the first, of `&a0`): a billion laughs.
    Laughs { levels: u8, fanout: usize },
    /// Bytes copied from the program as they are.
    Literal(Vec<u8>),
}

impl Shape {
    /// Decodes the next step of `program`, advancing it.
    fn next(program: &mut &[u8]) -> Option<Shape> {
        let (&op, rest) = program.split_first()?;
        *program = rest;
        let mut byte = || {
            let (&b, rest) = program.split_first().unwrap_or((&0, &[]));
            *program = rest;
            b as usize
        };
        Some(match op % 7 {
            0 => Shape::FlowNest {
                levels: byte() * 64 + byte(),
                open: op & 0x80 != 0,
            },
            1 => Shape::MapNest {
                levels: byte() * 64 + byte(),
            },
            2 => Shape::BlockNest {
                levels: byte() * 16 + byte(),
            },
            3 => Shape::DashNest {
                levels: byte() * 64 + byte(),
            },
            4 => Shape::Anchor {
                len: byte() * 256 + byte(),
            },
            5 => Shape::Laughs {
                levels: (byte() % 8 + 1) as u8,
                fanout: byte() + 1,
            },
            _ => {
                let len = byte().min(program.len());
                let (literal, rest) = program.split_at(len);
                *program = rest;
                Shape::Literal(literal.to_vec())
            }
        })
    }

    /// Writes the payload `program` describes, up to [`MAX_PAYLOAD`] bytes:
    /// a custom resource cannot carry more, and a few program bytes would
    /// otherwise write gigabytes (a fuzzer once ran out of memory here, in
    /// its own input, before enka saw any of it).
    fn write_all(mut program: &[u8]) -> String {
        let mut out = String::new();
        let mut key = 0usize;
        while let Some(shape) = Shape::next(&mut program) {
            if out.len() >= MAX_PAYLOAD {
                break;
            }
            key += 1;
            shape.write(&mut out, key);
        }
        if out.len() > MAX_PAYLOAD {
            let mut end = MAX_PAYLOAD;
            while !out.is_char_boundary(end) {
                end -= 1;
            }
            out.truncate(end);
        }
        out
    }

    fn write(&self, out: &mut String, key: usize) {
        match self {
            Shape::FlowNest { levels, open } => {
                out.push_str(&"[".repeat(*levels));
                out.push('1');
                if !open {
                    out.push_str(&"]".repeat(*levels));
                }
            }
            Shape::MapNest { levels } => {
                out.push_str(&"{\"k\": ".repeat(*levels));
                out.push('1');
                out.push_str(&"}".repeat(*levels));
            }
            Shape::BlockNest { levels } => {
                for level in 0..*levels {
                    out.push_str(&" ".repeat(level));
                    out.push_str("a:\n");
                }
            }
            Shape::DashNest { levels } => {
                out.push_str(&"- ".repeat(*levels));
                out.push_str("x\n");
            }
            Shape::Anchor { len } => {
                out.push_str(&format!("k{key}: &a0 \"{}\"\n", "x".repeat(*len)));
            }
            Shape::Laughs { levels, fanout } => {
                for level in 1..=*levels {
                    let aliases = vec![format!("*a{}", level - 1); *fanout].join(", ");
                    out.push_str(&format!("k{key}_{level}: &a{level} [{aliases}]\n"));
                }
            }
            Shape::Literal(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
        }
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

    /// Two or three bytes of program are a deep document or a billion
    /// laughs: what lets the fuzzer reach them from an empty corpus.
    #[test]
    fn a_few_program_bytes_write_the_dangerous_shapes() {
        let deep = super::Shape::write_all(&[0, 156, 16]);
        assert_eq!(deep.matches('[').count(), 156 * 64 + 16);
        // However long the program asks, the payload stays what a custom
        // resource could carry.
        let long = super::Shape::write_all(&[2, 255, 255].repeat(1_000));
        assert_eq!(long.len(), super::MAX_PAYLOAD);
        let laughs = [4, 0, 200, 5, 6, 8];
        let bomb = super::Shape::write_all(&laughs);
        assert!(bomb.len() < 1000, "{bomb}");
        assert!(bomb.contains("k2_7: &a7 [*a6, *a6"), "{bomb}");
        // Through the whole target: bounded, no panic.
        let mut input = vec![0xF0];
        input.extend(&laughs);
        super::custom_resource(&input);
    }

    #[test]
    fn inventory_regressions_read_without_panicking() {
        let scratch =
            std::env::temp_dir().join(format!("enka-fuzz-inventory-{}", std::process::id()));
        let inputs = regressions("inventory");
        assert!(!inputs.is_empty());
        for (_, data) in inputs {
            super::inventory(&data, &scratch);
        }
        let _ = std::fs::remove_dir_all(&scratch);
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
