//! Live role reload: a changed role or template file takes effect on the
//! next reconcile, without a restart; a broken edit is rejected and the
//! last good project keeps running.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::controller::ProjectHandle;
use crate::role::{LoadOptions, Project, Target};

/// How often files are checked for changes.
const POLL: Duration = Duration::from_millis(500);

/// The outcome of the last reload attempt, shared with reconciles.
#[derive(Debug, Default)]
pub struct ReloadState {
    broken: RwLock<Option<String>>,
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
}

/// Size and modification time of every file under the project's roles and
/// playbooks.
fn fingerprint(project: &Project) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut roots: Vec<PathBuf> = project.roles.keys().cloned().collect();
    roots.extend(project.playbooks.keys().cloned());
    let mut out: Vec<_> = roots
        .iter()
        .flat_map(|root| crate::role::files_under(root))
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
    let mut seen = fingerprint(&handle.read().unwrap_or_else(|e| e.into_inner()).clone());
    loop {
        tokio::time::sleep(POLL).await;
        let current = handle.read().unwrap_or_else(|e| e.into_inner()).clone();
        let now = fingerprint(&current);
        if now == seen {
            continue;
        }
        seen = now;
        let (project, diagnostics) = Project::load(&options, &targets);
        match project.filter(|_| !diagnostics.has_errors()) {
            Some(project) => {
                *handle.write().unwrap_or_else(|e| e.into_inner()) = project;
                state.set(None);
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
