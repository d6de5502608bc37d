//! A watch of a kind a role lists, started the first time it does, as
//! upstream's cache starts an informer for each kind it is asked for. Its
//! store answers the kind's later lists (and reads by name) once its first
//! list is in; until then, and for good if the kind cannot be watched (no
//! RBAC `watch` on it), the API server answers them.

use std::sync::Arc;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use super::{Holds, StoreWriter, WatchCaches};
use crate::Resource;
use crate::object::{WatchedKind, WatchedObject};

/// Watches `resource` in `scope` (`None`: the whole cluster) into a store
/// that `caches` serves, for as long as the process runs.
pub fn start(
    client: Client,
    caches: &Arc<WatchCaches>,
    resource: &Resource,
    scope: Option<String>,
) {
    let kind = WatchedKind::from(resource.api_resource());
    let api: Api<WatchedObject> = match &scope {
        Some(namespace) => Api::namespaced_with(client, namespace, &kind),
        None => Api::all_with(client, &kind),
    };
    let mut writer = StoreWriter::new(kind.clone());
    let serving = caches.serve(
        kind.clone(),
        scope.clone(),
        writer.as_reader(),
        Holds::Everything,
    );
    let caches = caches.clone();
    tracing::info!(kind = %kind.kind, api_version = %kind.api_version, namespace = scope.as_deref().unwrap_or("(all)"), "watching a listed kind; its lists come from the cache once listed");
    let config = watcher::Config::default().timeout(crate::WATCH_TIMEOUT_SECONDS);
    let types = TypeMeta {
        api_version: kind.api_version.clone(),
        kind: kind.kind.clone(),
    };
    tokio::spawn(async move {
        let _serving = serving;
        let mut events = watcher::watcher(api, config)
            .default_backoff()
            // Items of a list of a built-in kind carry no apiVersion or
            // kind; upstream's cache gives both.
            .modify(move |object| {
                if object.types.is_none() {
                    object.types = Some(types.clone());
                }
            })
            .boxed();
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    writer.apply(&event);
                    listed |= matches!(event, Event::InitDone);
                    caches.observe(&kind, &event);
                }
                // Not even listed: most often no RBAC `watch` on the kind.
                // Its lists stay with the API server, which can answer them.
                Err(err) if !listed => {
                    tracing::warn!(kind = %kind.kind, api_version = %kind.api_version, "lists of this kind go to the API server: it cannot be watched: {err}");
                    return;
                }
                Err(err) => {
                    tracing::warn!(kind = %kind.kind, "watch of a listed kind: {err}");
                }
            }
        }
    });
}
