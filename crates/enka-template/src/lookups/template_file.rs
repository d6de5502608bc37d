//! Template files: the `template` lookup, the `template` module's render
//! (and the `k8s` module's `template`), and what they include.
//!
//! A file under a loaded role's `templates/` was compiled with the project;
//! any other, or one with its own Jinja settings (the lookup's options, its
//! `#jinja2:` header), is compiled for its render. A file that includes,
//! imports or extends another renders in an environment of its own, where
//! those names are found as Jinja's `FileSystemLoader` finds them on the
//! search path Ansible gives it (never relative to the including file, no
//! `..`), and read fresh, as Ansible reads them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, Template, Value};

use super::{Overlay, TEMPLATE_NOT_FOUND, find_in_search_path, invalid, option, overrides, raised};
use crate::context::{Context, Var};
use crate::pyrepr;

/// Which of Ansible's plugins renders a file: they word a missing file
/// differently and search for its includes in another order.
#[derive(Clone, Copy)]
enum Caller {
    Lookup,
    Module,
}

pub(super) fn template(
    ctx: &Context,
    name: &str,
    options: &[(String, Value)],
) -> Result<Value, Error> {
    let render_ctx = match option(options, "template_vars") {
        Some(extra) if extra.kind() == ValueKind::Map => {
            let mut overlay = Vec::new();
            for key in extra.try_iter()? {
                let value = extra.get_item(&key)?;
                overlay.push((pyrepr::to_text(&key), Var::templated(value)));
            }
            Context {
                vars: Arc::new(Overlay {
                    base: ctx.vars().clone(),
                    extra: overlay,
                }),
                ..ctx.fresh()
            }
        }
        // Ansible's configuration refuses any other type for a `dict`
        // option (a None is the default).
        Some(other) if !other.is_none() => {
            return Err(invalid(format!(
                "Invalid type for configuration option plugin_type: lookup plugin: template setting: template_vars (from Direct): Invalid type provided for \"dictionary\": {}",
                pyrepr::repr(other)
            )));
        }
        _ => ctx.clone(),
    };
    let (_, text) = render_file(&render_ctx, name, Caller::Lookup, lookup_settings(options))?;
    // 2.19 renders the file natively, where text is never parsed back
    // into data (a file is text and templates, so text).
    let native = ctx.templar().options().semantics.native();
    if native && text.trim_end_matches('\n').is_empty() {
        // 2.19: a template that renders nothing is None.
        return Ok(Value::from(()));
    }
    let convert = option(options, "convert_data").is_none_or(Value::is_true) && !native;
    Ok(if convert {
        crate::pyliteral::convert_rendered(text)
    } else {
        Value::from(text)
    })
}

/// Renders the template file `name` (searched under `templates/` of the
/// role, then the project) as the `template` module does: with the task's
/// variables, keeping the file's trailing newlines. Returns its path too.
pub fn render_template_file(ctx: &Context, name: &str) -> Result<(PathBuf, String), crate::Error> {
    render_file(ctx, name, Caller::Module, Vec::new())
        .map_err(|e| crate::Error::from_minijinja(&e, name))
}

/// The template lookup's `variable_start_string`, `block_end_string`,
/// `trim_blocks`, … options as settings of the file's Jinja.
fn lookup_settings(options: &[(String, Value)]) -> Vec<(String, String)> {
    options
        .iter()
        .map(|(key, value)| {
            let text = match value.kind() {
                ValueKind::Bool if value.is_true() => "True".to_owned(),
                ValueKind::Bool => "False".to_owned(),
                _ => pyrepr::to_text(value),
            };
            (key.clone(), text)
        })
        .collect()
}

/// What Ansible adds to the variables of a template file it renders
/// (`generate_ansible_template_vars`): where the file is, who owns it,
/// when it changed and when it is rendered, the host, and `ansible_managed`.
fn template_vars(name: &str, path: &std::path::Path) -> Vec<(String, Var)> {
    use std::os::unix::fs::MetadataExt;
    // The host and the user names do not change while enka runs: read once.
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static USERS: std::sync::OnceLock<Vec<(u32, String)>> = std::sync::OnceLock::new();
    let metadata = std::fs::metadata(path).ok();
    let host = HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".to_owned())
    });
    let users = USERS.get_or_init(|| {
        std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(':');
                let user = fields.next()?.to_owned();
                let id = fields.nth(1)?.parse::<u32>().ok()?;
                Some((id, user))
            })
            .collect()
    });
    let uid = metadata.as_ref().map_or(0, MetadataExt::uid);
    let owner = users
        .iter()
        .find(|(id, _)| *id == uid)
        .map_or_else(|| uid.to_string(), |(_, user)| user.clone());
    let mtime = metadata
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| jiff::Timestamp::try_from(t).ok())
        .unwrap_or_else(jiff::Timestamp::now);
    let local =
        |t: jiff::Timestamp| crate::filters::py_datetime(t.to_zoned(jiff::tz::TimeZone::system()));
    let plain = |v: Value| Var::plain(v);
    vec![
        ("template_host".into(), plain(Value::from(host.as_str()))),
        ("template_path".into(), plain(Value::from(name))),
        (
            "template_fullpath".into(),
            plain(Value::from(path.to_string_lossy().as_ref())),
        ),
        ("template_uid".into(), plain(Value::from(owner))),
        ("template_mtime".into(), plain(local(mtime))),
        (
            "template_run_date".into(),
            plain(local(jiff::Timestamp::now())),
        ),
        ("template_destpath".into(), plain(Value::from(()))),
        // C.DEFAULT_MANAGED_STR, strftime'd with the file's mtime (it has
        // no % by default).
        (
            "ansible_managed".into(),
            plain(Value::from("Ansible managed")),
        ),
    ]
}

fn render_file(
    ctx: &Context,
    name: &str,
    caller: Caller,
    settings: Vec<(String, String)>,
) -> Result<(PathBuf, String), Error> {
    let path = find_in_search_path(ctx, "templates", name).ok_or_else(|| {
        let what = match caller {
            Caller::Lookup => "lookup",
            Caller::Module => "template",
        };
        invalid(format!(
            "the template file {name} could not be found for the {what}"
        ))
    })?;
    let key = path.to_string_lossy().into_owned();
    let compiled = match overrides::syntax(&settings)? {
        // Other settings need a compile of their own.
        Some(_) => None,
        None => ctx
            .templar()
            .env()
            .get_template(&key)
            .ok()
            .filter(|t| !t.source().starts_with(overrides::HEADER)),
    };
    let own_env;
    let mut includes: Arc<[PathBuf]> = Arc::from(Vec::new());
    let template = match compiled {
        Some(template) if !reads_other_templates(template.source()) => template,
        _ => {
            includes = include_dirs(ctx, &path, caller).into();
            own_env = file_env(ctx, &path, &key, settings, compiled.is_none(), &includes)?;
            own_env.get_template(&key)?
        }
    };
    let text = render_compiled(ctx, name, &path, &template, &includes)?;
    Ok((path, text))
}

/// Whether a compiled source may name another template.
fn reads_other_templates(source: &str) -> bool {
    ["include", "import", "extends"]
        .iter()
        .any(|word| source.contains(word))
}

/// An environment for one render of the file at `path` (named `key`): the
/// project's, with the file compiled under its own settings unless it was
/// compiled with the project, and its includes found in `includes`.
fn file_env(
    ctx: &Context,
    path: &Path,
    key: &str,
    settings: Vec<(String, String)>,
    compile: bool,
    includes: &Arc<[PathBuf]>,
) -> Result<Environment<'static>, Error> {
    let mut env = ctx.templar().env().clone();
    let searched = includes.clone();
    env.set_path_join_callback(move |name, _parent| match find_include(&searched, name) {
        Some(found) => found.to_string_lossy().into_owned().into(),
        None => name.into(),
    });
    let readable = includes.clone();
    env.set_loader(move |name| load_include(&readable, name));
    if compile {
        let source = std::fs::read_to_string(path)
            .map_err(|e| invalid(format!("could not read {}: {e}", path.display())))?;
        let (header, body) = overrides::split_header(&source)?;
        let settings: Vec<_> = settings.into_iter().chain(header).collect();
        // Operators are found with the default delimiters; a file with its
        // own keeps minijinja's.
        let source = match overrides::syntax(&settings)? {
            Some(syntax) => {
                env.set_syntax(syntax);
                body.to_owned()
            }
            None => crate::file_source(body).map_err(|e| e.to_minijinja())?,
        };
        env.add_template_owned(key.to_owned(), source)
            .map_err(|e| crate::Error::from_minijinja(&e, key).to_minijinja())?;
    }
    Ok(env)
}

/// Where Jinja looks for what a file includes, as Ansible sets its loader's
/// search path: the lookup puts the file's directory first, the module
/// last; each directory of the task's search path comes with its
/// `templates/` before it.
fn include_dirs(ctx: &Context, path: &Path, caller: Caller) -> Vec<PathBuf> {
    let own = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut dirs = Vec::new();
    if let Caller::Lookup = caller {
        dirs.push(own.clone());
    }
    let mut searched: Vec<&Path> = ctx.search_path().iter().map(PathBuf::as_path).collect();
    if let Caller::Module = caller {
        searched.push(&own);
    }
    for dir in searched {
        dirs.push(dir.join("templates"));
        dirs.push(dir.to_path_buf());
    }
    dirs
}

/// The file an include names, as Jinja's `FileSystemLoader` finds it: the
/// name's parts (a leading `/` and `.` dropped) under each directory in
/// turn; a name with `..` is never found.
fn find_include(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = name
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") {
        return None;
    }
    dirs.iter()
        .map(|dir| parts.iter().fold(dir.clone(), |path, part| path.join(part)))
        .find(|candidate| candidate.is_file())
}

/// The source of an include [`find_include`] found: only files inside the
/// search path are read.
fn load_include(dirs: &[PathBuf], name: &str) -> Result<Option<String>, Error> {
    let path = Path::new(name);
    let inside = path.is_absolute() && dirs.iter().any(|dir| path.starts_with(dir));
    if !inside || !path.is_file() {
        return Ok(None);
    }
    let source = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("could not read {name}: {e}")))?;
    crate::file_source(&source)
        .map(Some)
        .map_err(|e| e.to_minijinja())
}

/// Jinja's words for an include it did not find: the name alone when it
/// is no name its loader takes (`..`), else the directories searched.
fn missing_include(err: &Error, includes: &[PathBuf]) -> Option<String> {
    if err.kind() != minijinja::ErrorKind::TemplateNotFound {
        return None;
    }
    let detail = err.detail()?;
    let quoted = detail.split_once('\'')?.1;
    let name = quoted.rsplit_once('\'')?.0;
    if name.split('/').any(|part| part == "..") {
        return Some(name.to_owned());
    }
    let searched: Vec<String> = includes
        .iter()
        .map(|dir| crate::pyrepr::repr(&Value::from(dir.to_string_lossy().as_ref())))
        .collect();
    Some(format!(
        "{} not found in search paths: {}",
        crate::pyrepr::repr(&Value::from(name)),
        searched.join(", ")
    ))
}

/// Renders a compiled file with Ansible's template variables, keeping its
/// trailing newlines.
fn render_compiled(
    ctx: &Context,
    name: &str,
    path: &Path,
    template: &Template<'_, '_>,
    includes: &[PathBuf],
) -> Result<String, Error> {
    let mut extra = template_vars(name, path);
    // 2.19 does not clobber an `ansible_managed` the play defines.
    if ctx.templar().options().semantics.native() && ctx.vars().get("ansible_managed").is_some() {
        extra.retain(|(key, _)| key != "ansible_managed");
    }
    let render_ctx = Context {
        vars: Arc::new(Overlay {
            base: ctx.vars().clone(),
            extra,
        }),
        ..ctx.clone()
    };
    let mut text = crate::guarded_render(template, &render_ctx).map_err(|e| {
        if let Some(name) = missing_include(&e, includes) {
            return raised(TEMPLATE_NOT_FOUND, name);
        }
        match crate::error::Cause::python_class(&e) {
            // The Python exception the render raised, which 2.18's lookup
            // names (`json.decoder.JSONDecodeError`).
            Some(class) => raised(class, e.detail().unwrap_or_default()),
            None => crate::Error::from_minijinja(&e, template.source()).to_minijinja(),
        }
    })?;
    // Jinja drops the final newline; Ansible's template lookup restores it.
    let source = template.source();
    let wanted = source.len() - source.trim_end_matches('\n').len();
    let have = text.len() - text.trim_end_matches('\n').len();
    for _ in have..wanted {
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, TemplarBuilder, VarList};

    /// A role directory with `files` under it, and a context whose search
    /// path is the role's then the playbook's (the directory above it).
    fn role(files: &[(&str, &str)]) -> (PathBuf, Context) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let top =
            std::env::temp_dir().join(format!("enka-template-file-{}-{n}", std::process::id()));
        let role = top.join("roles/r");
        for (name, text) in files {
            let path = top.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let templar = TemplarBuilder::new(Options::default()).build();
        let search: Arc<[PathBuf]> = vec![role.clone(), role.join("tasks"), top.clone()].into();
        let ctx = Context::new(templar, Arc::new(VarList(Vec::new())), search);
        (top, ctx)
    }

    fn lookup(ctx: &Context, name: &str) -> Result<String, String> {
        render_file(ctx, name, Caller::Lookup, Vec::new())
            .map(|(_, text)| text)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn includes_are_found_on_ansibles_search_path() {
        let (top, ctx) = role(&[
            (
                "roles/r/templates/outer.j2",
                "{% set n = 'inner' %}[{% include 'parts/' + n + '.j2' %}|{% include 'templates/b.j2' %}|{% include 'top.j2' %}]",
            ),
            ("roles/r/templates/parts/inner.j2", "{% include 'b.j2' %}"),
            ("roles/r/templates/b.j2", "b"),
            ("templates/top.j2", "top"),
        ]);
        assert_eq!(lookup(&ctx, "outer.j2").unwrap(), "[b|b|top]");
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn macros_import_from_another_file() {
        let (top, ctx) = role(&[
            (
                "roles/r/templates/outer.j2",
                "{% import 'm.j2' as m %}{{ m.hi('x') }}|{% from 'm.j2' import hi %}{{ hi('y') }}",
            ),
            (
                "roles/r/templates/m.j2",
                "{% macro hi(n) %}hi {{ n }}{% endmacro %}",
            ),
        ]);
        assert_eq!(lookup(&ctx, "outer.j2").unwrap(), "hi x|hi y");
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn parent_directories_and_outside_files_are_not_included() {
        let (top, ctx) = role(&[
            (
                "roles/r/templates/up.j2",
                "{% include '../../other/templates/x.j2' %}",
            ),
            ("roles/other/templates/x.j2", "x"),
            ("roles/r/templates/abs.j2", "{% include '/etc/hostname' %}"),
        ]);
        assert!(lookup(&ctx, "up.j2").is_err());
        assert!(lookup(&ctx, "abs.j2").is_err());
        std::fs::remove_dir_all(top).unwrap();
    }
}
