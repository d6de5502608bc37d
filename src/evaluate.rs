//! `enka template`: renders one expression, condition or template file with
//! the variables a task of the operator would see, and says the value and
//! the Python type Ansible 2.18 would give it: the quickest way to debug a
//! `when:` without a cluster or a reconcile.
//!
//! The variables are those of a run for a custom resource (its extra vars:
//! snake-cased spec, `ansible_operator_meta`, `_<group>_<kind>`, …, unsafe
//! as in a run), the vars of its watch in `watches.yaml`, and any vars
//! files, lowest first: vars files, then the watch's vars, then the custom
//! resource's, as extra vars win in Ansible.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::template::{Context, Options, TemplarBuilder, Var, VarList, convert, pyrepr};
use crate::vars::{VarOptions, extra_vars};

/// The variable that names a template file for the lookup that renders it.
const TEMPLATE_FILE_VAR: &str = "__enka_template_file";

/// What to render.
#[derive(Debug, Clone)]
pub enum Source {
    /// A template string, as in a task's argument: `"{{ size | int }}"`.
    Template(String),
    /// A bare condition, as in `when:`: `size | int > 2`.
    Condition(String),
    /// A template file, as `lookup('template', …)` renders it.
    File(PathBuf),
}

/// `enka template`'s inputs.
#[derive(Debug, Clone)]
pub struct EvaluateOptions {
    /// What to render.
    pub source: Source,
    /// A custom resource (YAML or JSON) whose run's variables to use.
    pub custom_resource: Option<PathBuf>,
    /// YAML files of variables (a mapping each).
    pub vars_files: Vec<PathBuf>,
    /// The watches file, for the custom resource's watch (its vars,
    /// `snakeCaseParameters`, `markUnsafe`); absent is fine.
    pub watches_file: PathBuf,
    /// Which ansible-core's templating and conditionals to follow.
    pub semantics: crate::template::Semantics,
}

/// A rendered value and its Python type name.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// `str`, `int`, `bool`, `list`, `dict`, `NoneType`, …
    pub type_name: String,
    /// The value as JSON.
    pub value: Json,
}

/// Why nothing was rendered.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    /// A file could not be read or parsed.
    #[error("{path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The template failed, as the task would have.
    #[error("{0}")]
    Template(String),
}

fn input_error(path: &Path, message: impl ToString) -> EvaluateError {
    EvaluateError::Input {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Reads a YAML (or JSON) file with Ansible's YAML 1.1 reading.
fn read_yaml(path: &Path) -> Result<Json, EvaluateError> {
    let text = std::fs::read_to_string(path).map_err(|e| input_error(path, e))?;
    match crate::yaml::load_one(&text) {
        Ok(Some(node)) => Ok(node.to_json()),
        Ok(None) => Ok(Json::Null),
        Err(e) => Err(input_error(path, e)),
    }
}

/// The variables of a run for the custom resource in `path`, as its watch
/// in `watches_file` would give them.
fn custom_resource_vars(
    path: &Path,
    watches_file: &Path,
) -> Result<Vec<(String, Var)>, EvaluateError> {
    let object = read_yaml(path)?;
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"]
        .as_str()
        .ok_or_else(|| input_error(path, "not a custom resource: it has no `kind`"))?;
    let (group, version) = match api_version.rsplit_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    let watches = if watches_file.exists() {
        crate::watches::load(watches_file).0
    } else {
        Vec::new()
    };
    let watch = watches
        .iter()
        .find(|w| w.gvk.group == group && w.gvk.version == version && w.gvk.kind == kind);
    let options = VarOptions {
        snake_case: watch.is_none_or(|w| w.snake_case_parameters),
        template_custom_resource: watch
            .is_some_and(|w| w.template_custom_resource && !w.mark_unsafe),
        watch_vars: watch.map(|w| w.vars.clone()).unwrap_or_default(),
        finalizer_vars: Vec::new(),
    };
    Ok(extra_vars(&object, group, kind, &options)
        .into_iter()
        .map(|(name, var)| (name.to_string(), var))
        .collect())
}

/// Renders `options.source`; see the module docs.
pub fn evaluate(options: &EvaluateOptions) -> Result<Evaluated, EvaluateError> {
    let mut vars = Vec::new();
    for path in &options.vars_files {
        match read_yaml(path)? {
            Json::Object(map) => vars.extend(
                map.into_iter()
                    .map(|(name, value)| (name, Var::templated(convert::from_json(&value)))),
            ),
            Json::Null => {}
            other => {
                return Err(input_error(
                    path,
                    format!("a vars file holds a mapping, not {}", json_kind(&other)),
                ));
            }
        }
    }
    if let Some(path) = &options.custom_resource {
        vars.extend(custom_resource_vars(path, &options.watches_file)?);
    }
    let (source, is_condition) = match &options.source {
        Source::Template(text) => (text.clone(), false),
        Source::Condition(text) => (text.clone(), true),
        Source::File(path) => {
            // Rendered by the template lookup itself, so the file is read,
            // rendered and typed exactly as a task's lookup would.
            let path = std::fs::canonicalize(path).map_err(|e| input_error(path, e))?;
            vars.push((
                TEMPLATE_FILE_VAR.to_owned(),
                Var::plain(minijinja::Value::from(path.to_string_lossy().into_owned())),
            ));
            (
                format!("{{{{ lookup('template', {TEMPLATE_FILE_VAR}) }}}}"),
                false,
            )
        }
    };
    let mut builder = TemplarBuilder::new(Options {
        semantics: options.semantics,
        ..Options::default()
    });
    for dir in template_dirs(&options.source) {
        for path in crate::role::walk::files_under(&dir) {
            // Unreadable or broken files fail only when a render uses them.
            if let Ok(text) = std::fs::read_to_string(&path) {
                let _ = builder.add_file(&path.to_string_lossy(), text);
            }
        }
    }
    let compiled = if is_condition {
        builder.add_condition(&source)
    } else {
        builder.add_template(&source)
    };
    compiled.map_err(|e| EvaluateError::Template(e.to_string()))?;
    let templar = builder.build();
    let ctx = Context::new(
        templar.clone(),
        Arc::new(VarList(vars)),
        // Absolute, as a role's: a found template's name is then the one it
        // was registered under, and its includes resolve beside it.
        Arc::from(vec![
            std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        ]),
    );
    let value = if is_condition {
        templar
            .evaluate(&minijinja::Value::from(source.as_str()), &ctx)
            .map(minijinja::Value::from)
    } else {
        templar.template_str(&source, &ctx)
    }
    .map_err(|e| EvaluateError::Template(e.to_string()))?;
    Ok(Evaluated {
        type_name: pyrepr::type_name(&value).to_owned(),
        value: convert::to_json(&value).map_err(|e| EvaluateError::Template(e.to_string()))?,
    })
}

/// The directories whose templates are registered, as a role's are, so
/// that `{% include %}` and `{% import %}` find their neighbours: the
/// working directory's `templates/`, and the `templates/` directory a
/// rendered file lives in. (A file outside one is compiled alone: its
/// directory may be a whole project.)
fn template_dirs(source: &Source) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(templates) = std::fs::canonicalize("templates") {
        dirs.push(templates);
    }
    if let Source::File(path) = source
        && let Ok(path) = std::fs::canonicalize(path)
    {
        let own = path
            .ancestors()
            .skip(1)
            .find(|dir| dir.file_name().is_some_and(|n| n == "templates"));
        if let Some(dir) = own.filter(|dir| !dirs.iter().any(|d| d == dir)) {
            dirs.push(dir.to_path_buf());
        }
    }
    dirs
}

fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "nothing",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory with a custom resource, a watches file and a
    /// vars file.
    fn project(watch_options: &str) -> PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "enka-evaluate-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("cr.yaml"),
            "apiVersion: demo.enka.dev/v1\nkind: Sample\nmetadata: {name: s1, namespace: ns}\nspec:\n  intervalMillis: 250\n  shared: from-cr\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("watches.yaml"),
            format!("- {{group: demo.enka.dev, version: v1, kind: Sample, role: sample{watch_options}}}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("vars.yaml"), "shared: from-vars\nonly_here: 1\n").unwrap();
        dir
    }

    fn render(dir: &Path, source: Source) -> Result<Evaluated, EvaluateError> {
        evaluate(&EvaluateOptions {
            source,
            custom_resource: Some(dir.join("cr.yaml")),
            vars_files: vec![dir.join("vars.yaml")],
            watches_file: dir.join("watches.yaml"),
            semantics: Default::default(),
        })
    }

    fn names(dir: &Path) -> Vec<String> {
        match render(dir, Source::Template("{{ vars.keys() | list }}".into())) {
            Ok(Evaluated {
                value: Json::Array(names),
                ..
            }) => names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_watch_decides_how_the_spec_is_named() {
        let snake = project("");
        assert!(names(&snake).contains(&"interval_millis".to_owned()));
        let camel = project(", snakeCaseParameters: false");
        assert!(names(&camel).contains(&"intervalMillis".to_owned()));
        for dir in [snake, camel] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn the_custom_resource_wins_over_a_vars_file() {
        let dir = project(", vars: {only_watch: 2}");
        let shared = render(&dir, Source::Template("{{ shared }}".into())).unwrap();
        assert_eq!(shared.value, Json::from("from-cr"));
        let both = render(
            &dir,
            Source::Condition("only_here == 1 and only_watch == 2".into()),
        );
        assert_eq!(both.unwrap().value, Json::Bool(true));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_failing_template_and_a_missing_file_are_told_apart() {
        let dir = project("");
        assert!(matches!(
            render(&dir, Source::Template("{{ nope }}".into())),
            Err(EvaluateError::Template(_))
        ));
        assert!(matches!(
            render(&dir, Source::File(dir.join("missing.j2"))),
            Err(EvaluateError::Input { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
