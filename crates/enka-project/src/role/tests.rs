//! Loading whole projects from files.

use std::path::{Path, PathBuf};

use super::*;

/// A project in a fresh directory: `files` are (path, text).
fn project(files: &[(&str, &str)]) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("enka-role-tests-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn load(dir: &Path, role: &str) -> (Option<Arc<Project>>, Diagnostics) {
    let options = LoadOptions {
        role_paths: RolePaths {
            base_dir: dir.to_path_buf(),
            ..RolePaths::default()
        },
        templates: enka_template::Options::default(),
        origins: Vec::new(),
        lookups: Vec::new(),
        ansible: None,
        inventory: super::InventoryLoad::WhenNamed,
    };
    Project::load(&options, &[Target::Role(role.to_owned())])
}

/// A Jinja-templated YAML file kept under tasks/ (awx-operator has them) is
/// never read by Ansible unless included; enka must not fail the project on
/// it, and must say what is wrong if a run-time include names it.
#[test]
fn task_files_nothing_includes_do_not_fail_the_project() {
    let dir = project(&[
        (
            "roles/r/tasks/main.yml",
            "- include_tasks: \"{{ which }}.yml\"\n",
        ),
        ("roles/r/tasks/good.yml", "- debug:\n    msg: hi\n"),
        (
            "roles/r/tasks/resources.yml",
            "{% for x in items %}\n---\nkind: {{ x }}\n{% endfor %}\n",
        ),
    ]);
    let (project, diagnostics) = load(&dir, "r");
    assert!(!diagnostics.has_errors(), "{diagnostics:?}");
    let project = project.expect("the project loads");
    let resources = dir.join("roles/r/tasks/resources.yml");
    assert!(
        project
            .task_files
            .contains_key(&dir.join("roles/r/tasks/good.yml"))
    );
    assert!(!project.task_files.contains_key(&resources));
    assert!(
        project.unloadable_task_files[&resources]
            .message
            .contains("YAML syntax error"),
        "{:?}",
        project.unloadable_task_files
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The same file, imported by name, is an error at load, as in Ansible.
#[test]
fn a_broken_task_file_that_is_imported_is_an_error() {
    let dir = project(&[
        ("roles/r/tasks/main.yml", "- import_tasks: a_broken.yml\n"),
        (
            "roles/r/tasks/a_broken.yml",
            "- debug:\n    msg: hi\n  whne: x\n",
        ),
    ]);
    let (project, diagnostics) = load(&dir, "r");
    assert!(project.is_none());
    let rendered: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
    assert!(
        rendered
            .iter()
            .any(|d| d.contains("a_broken.yml:3:3")
                && d.contains("'whne' is not a valid task keyword")),
        "{rendered:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A template that does not compile fails its task when the task runs, as
/// in Ansible: the role loads, and the finding says it fails then.
#[test]
fn a_template_that_does_not_compile_is_an_error_when_its_task_runs() {
    let dir = project(&[
        (
            "roles/r/tasks/main.yml",
            "- name: fine\n  debug:\n    msg: hi\n- name: broken\n  debug:\n    msg: \"{{ size + }}\"\n  when: \"a ==\"\n",
        ),
        ("roles/r/templates/broken.j2", "{% if x %}\n"),
    ]);
    let (project, diagnostics) = load(&dir, "r");
    assert!(!diagnostics.has_errors(), "{diagnostics:?}");
    assert!(project.is_some(), "the role loads");
    let deferred: Vec<String> = diagnostics
        .0
        .iter()
        .filter(|d| d.severity == Severity::WhenRun)
        .map(ToString::to_string)
        .collect();
    assert_eq!(deferred.len(), 3, "{deferred:?}");
    assert!(
        deferred[0].contains(":6:10: error: task \"broken\": debug.msg: template syntax error"),
        "{deferred:?}"
    );
    assert!(
        deferred[1].contains(":7:9: error: task \"broken\": when: template syntax error"),
        "{deferred:?}"
    );
    assert!(
        deferred[2].contains("broken.j2:1:1: error: template"),
        "{deferred:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Role._load_role_data's list: the role's own collection first, its
/// meta/main.yml's after, and the synthetic collection when none is named.
#[test]
fn role_collections_as_ansible_orders_them() {
    use super::loader::role_collections;
    let listed = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    let in_collection = Path::new("/c/ansible_collections/my_ns/my_col/roles/test");
    assert_eq!(
        &*role_collections(in_collection, &[]),
        ["my_ns.my_col", "ansible.builtin"]
    );
    assert_eq!(
        &*role_collections(in_collection, &listed(&["other.coll", "my_ns.my_col"])),
        ["my_ns.my_col", "other.coll", "ansible.builtin"]
    );
    let legacy = Path::new("/project/roles/hikawa");
    assert!(role_collections(legacy, &[]).is_empty());
    assert_eq!(
        &*role_collections(legacy, &listed(&["kubernetes.core"])),
        ["kubernetes.core", "ansible.legacy"]
    );
}

/// module_defaults naming only enka's native modules (and the Kubernetes
/// group) resolve without Ansible: such a role never starts a worker.
#[test]
fn module_defaults_of_native_modules_need_no_worker() {
    let dir = project(&[(
        "roles/r/tasks/main.yml",
        "- module_defaults:\n    group/k8s: {wait: true}\n    kubernetes.core.k8s_info: {namespace: x}\n  block:\n    - k8s_info: {kind: Pod}\n",
    )]);
    let (loaded, diagnostics) = load(&dir, "r");
    assert!(!diagnostics.has_errors(), "{diagnostics:?}");
    let loaded = loaded.expect("the project loads");
    assert!(loaded.ansible.is_none());
    assert_eq!(
        loaded.module_defaults.keys["group/k8s"],
        ["group/ansible.builtin.k8s"]
    );
    let other = project(&[(
        "roles/r/tasks/main.yml",
        "- debug: {msg: hi}\n  module_defaults:\n    ping: {data: x}\n",
    )]);
    let (_, diagnostics) = load(&other, "r");
    assert!(
        format!("{diagnostics:?}").contains("module_defaults: 'ping'"),
        "{diagnostics:?}"
    );
}

#[test]
fn variable_names_are_ascii_identifiers_and_no_keywords() {
    use super::task::is_ansible_identifier;
    assert!(is_ansible_identifier("my_var2"));
    assert!(is_ansible_identifier("_x"));
    for bad in ["my-var", "1x", "", "in", "True", "None", "naïve", "a b"] {
        assert!(!is_ansible_identifier(bad), "{bad}");
    }
}

/// A static import may name its file with `role_path`, which Ansible knows
/// when it loads the role; another template in the name is refused.
#[test]
fn an_import_named_with_role_path_loads_and_another_template_does_not() {
    let dir = project(&[
        (
            "roles/r/tasks/main.yml",
            "- import_tasks: \"{{ role_path }}/tests/more.yml\"\n",
        ),
        ("roles/r/tests/more.yml", "- debug:\n    msg: imported\n"),
    ]);
    let (loaded, diagnostics) = load(&dir, "r");
    assert!(loaded.is_some(), "{:?}", diagnostics.0);
    let _ = std::fs::remove_dir_all(dir);

    let dir = project(&[
        (
            "roles/r/tasks/main.yml",
            "- import_tasks: \"{{ which }}/tests/more.yml\"\n",
        ),
        ("roles/r/tests/more.yml", "- debug:\n    msg: imported\n"),
    ]);
    let (loaded, diagnostics) = load(&dir, "r");
    assert!(loaded.is_none());
    let rendered: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
    assert!(
        rendered
            .iter()
            .any(|d| d.contains("import_tasks needs a file name without templates")),
        "{rendered:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
