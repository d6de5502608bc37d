//! Loading the watches' roles and playbooks, then live reload: a changed
//! role or template file takes effect on the next reconcile, without a
//! restart; a broken edit is rejected and the last good project keeps
//! running. A role or playbook that does not load fails only the watches
//! that run it, as each of upstream's runs fails alone, and is tried again
//! whenever files change.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use enka_project::role::{Diagnostics, LoadOptions, Project, Target};

/// The loaded project, replaced as a whole when its files change.
pub type ProjectHandle = Arc<RwLock<Arc<Project>>>;

/// How often files are checked for changes.
const POLL: Duration = Duration::from_millis(500);

/// The outcome of the last reload attempt, shared with reconciles.
#[derive(Debug, Default)]
pub struct ReloadState {
    broken: RwLock<Option<String>>,
    unloaded: RwLock<Vec<(Target, String)>>,
}

impl ReloadState {
    /// Why the files on disk are not running, when a reload failed.
    pub fn broken(&self) -> Option<String> {
        self.broken
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, value: Option<String>) {
        *self.broken.write().unwrap_or_else(|e| e.into_inner()) = value;
    }

    /// Why `target` is not loaded, when it does not load.
    pub fn unloaded(&self, target: &Target) -> Option<String> {
        self.unloaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(t, _)| t == target)
            .map(|(_, why)| why.clone())
    }

    /// The state at start, with the targets that did not load.
    pub fn with_unloaded(unloaded: Vec<(Target, String)>) -> Self {
        ReloadState {
            broken: RwLock::default(),
            unloaded: RwLock::new(unloaded),
        }
    }

    fn set_unloaded(&self, unloaded: Vec<(Target, String)>) {
        *self.unloaded.write().unwrap_or_else(|e| e.into_inner()) = unloaded;
    }
}

/// Loads `targets` together; when that fails, loads each alone to find the
/// ones that do not load, and the rest together. Returns the project of the
/// targets that load, and each other target with its errors. `None` when
/// even the loadable ones fail together.
pub fn load_each(
    options: &LoadOptions,
    targets: &[Target],
) -> (Option<Arc<Project>>, Vec<(Target, String)>, Diagnostics) {
    let (project, diagnostics) = Project::load(options, targets);
    if let Some(project) = project.filter(|_| !diagnostics.has_errors()) {
        return (Some(project), Vec::new(), diagnostics);
    }
    let mut good = Vec::new();
    let mut unloaded = Vec::new();
    for target in targets {
        match load_alone(options, target) {
            Ok(()) => good.push(target.clone()),
            Err(why) => unloaded.push((target.clone(), why)),
        }
    }
    let (project, together) = Project::load(options, &good);
    let project = project.filter(|_| !together.has_errors());
    (project, unloaded, diagnostics)
}

/// Whether `target` loads on its own; its errors when it does not.
fn load_alone(options: &LoadOptions, target: &Target) -> Result<(), String> {
    let (alone, problems) = Project::load(options, std::slice::from_ref(target));
    if alone.is_some() && !problems.has_errors() {
        return Ok(());
    }
    let errors: Vec<String> = problems.errors().map(ToString::to_string).collect();
    Err(errors.join("; "))
}

/// Size and modification time of every file under the project's roles and
/// playbooks, and under those that did not load (`unloaded`).
fn fingerprint(project: &Project, unloaded: &[PathBuf]) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut roots: Vec<PathBuf> = project.roles.keys().cloned().collect();
    roots.extend(project.playbooks.keys().cloned());
    roots.extend(unloaded.iter().cloned());
    let mut out: Vec<_> = roots
        .iter()
        .flat_map(|root| enka_project::role::files_under(root))
        .map(|path| match std::fs::metadata(&path) {
            Ok(meta) => {
                let modified = meta.modified().ok();
                (path, meta.len(), modified)
            }
            Err(_) => (path, 0, None),
        })
        .collect();
    out.sort();
    out
}

/// Watches the project's files and swaps in a new project when they change
/// and load cleanly; `changed` is notified after every attempt, so objects
/// run the new version or report why it was rejected.
pub async fn run(
    options: LoadOptions,
    targets: Vec<Target>,
    handle: ProjectHandle,
    state: Arc<ReloadState>,
    changed: watch::Sender<u64>,
) {
    let mut generation = 0u64;
    let unloaded_roots = |state: &ReloadState| -> Vec<PathBuf> {
        let unloaded = state.unloaded.read().unwrap_or_else(|e| e.into_inner());
        unloaded
            .iter()
            .filter_map(|(target, _)| match target {
                Target::Playbook(path) => Some(path.clone()),
                Target::Role(name) => {
                    enka_project::role::resolve_role(&options.role_paths, name).ok()
                }
            })
            .collect()
    };
    let mut seen = fingerprint(
        &handle.read().unwrap_or_else(|e| e.into_inner()).clone(),
        &unloaded_roots(&state),
    );
    loop {
        tokio::time::sleep(POLL).await;
        let current = handle.read().unwrap_or_else(|e| e.into_inner()).clone();
        let now = fingerprint(&current, &unloaded_roots(&state));
        if now == seen {
            continue;
        }
        seen = now;
        // What did not load is tried alone first: one broken playbook must
        // not hold back an edit of another watch's role.
        let previously_unloaded: Vec<Target> = state
            .unloaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(t, _)| t.clone())
            .collect();
        let mut wanted = Vec::new();
        let mut still_unloaded = Vec::new();
        for target in &targets {
            if !previously_unloaded.contains(target) {
                wanted.push(target.clone());
                continue;
            }
            match load_alone(&options, target) {
                Ok(()) => wanted.push(target.clone()),
                Err(why) => still_unloaded.push((target.clone(), why)),
            }
        }
        let (project, diagnostics) = Project::load(&options, &wanted);
        match project.filter(|_| !diagnostics.has_errors()) {
            Some(project) => {
                *handle.write().unwrap_or_else(|e| e.into_inner()) = project;
                state.set(None);
                state.set_unloaded(still_unloaded);
                generation += 1;
                tracing::info!(
                    roles = current.roles.len(),
                    "roles changed on disk: reloaded; reconciling every object"
                );
                let _ = changed.send(generation);
            }
            None => {
                let errors: Vec<String> = diagnostics.errors().map(ToString::to_string).collect();
                for error in &errors {
                    tracing::error!("rejected role edit: {error}");
                }
                state.set(Some(format!(
                    "the edited roles do not load; still running the last good version: {}",
                    errors.join("; ")
                )));
                // Reconcile everything so each object reports the rejected edit.
                generation += 1;
                let _ = changed.send(generation);
            }
        }
    }
}

/// A stream that yields each time `changed` moves on.
pub fn triggers(changed: watch::Receiver<u64>) -> impl futures::Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(changed, |mut receiver| async move {
        receiver.changed().await.ok()?;
        Some(((), receiver))
    })
}
