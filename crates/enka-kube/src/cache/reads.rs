//! Which reads the caches take on: where a kind gets a watch for reads,
//! when (a list, or the second read by name of one of its objects), and the
//! shared watches ([`KindWatch`]) that followers and reads hold together.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use super::kind_watch::{Followed, KindWatch, WatchKey};
use super::{Holds, Informers, ObjectKey, StoreReader, WatchCaches};
use crate::Resource;

/// Past this many objects read once, the record of them starts again: a
/// bound on its memory that costs at worst one more GET per object.
const READ_ONCE_KEPT: usize = 8192;

impl WatchCaches {
    /// Lets kinds that roles read or list be watched in `namespaces`
    /// (empty: the whole cluster), as upstream's cache starts an informer
    /// for each kind it is asked for, within the operator's namespaces; a
    /// store with no read for `idle_after` is dropped.
    pub fn inform_reads_in(&self, namespaces: Vec<String>, idle_after: Duration) {
        let mut informers = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        *informers = Some(Informers {
            namespaces,
            idle_after,
        });
    }

    /// How long a store started for reads is kept unread.
    pub(crate) fn idle_after(&self) -> Option<Duration> {
        let informers = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        informers.as_ref().map(|informers| informers.idle_after)
    }

    /// Whether `name` was read by name before (and asked of the API
    /// server); notes that it is read now.
    pub(crate) fn read_again(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> bool {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        ObjectKey::of(resource, namespace, name).hash(&mut hasher);
        let hash = hasher.finish();
        let mut read_once = self.read_once.lock().unwrap_or_else(|e| e.into_inner());
        if read_once.len() >= READ_ONCE_KEPT {
            read_once.clear();
        }
        !read_once.insert(hash)
    }

    /// The namespace (`None`: all, or a cluster-scoped kind) a watch for
    /// reads of `resource` in `namespace` covers; `None` when reads there
    /// are not watched (outside the operator's namespaces, or no operator).
    fn read_scope(&self, resource: &Resource, namespace: Option<&str>) -> Option<Option<String>> {
        let informers = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        let informers = informers.as_ref()?;
        match (resource.namespaced, namespace) {
            (false, _) => Some(None),
            _ if informers.namespaces.is_empty() => Some(None),
            (true, Some(namespace)) if informers.namespaces.iter().any(|n| n == namespace) => {
                Some(Some(namespace.to_owned()))
            }
            (true, _) => None,
        }
    }

    /// A store that holds (or, once listed, will hold) every object of
    /// `resource` in `namespace`: a controller's, a shared watch's, or, when
    /// `start`, a new one (a watch started, or a followed watch listing
    /// again into a store). `None`: the API server answers.
    pub(crate) fn store_for_reads(
        self: &Arc<Self>,
        client: &Client,
        resource: &Resource,
        namespace: Option<&str>,
        start: bool,
    ) -> Option<StoreReader> {
        let scope = self.read_scope(resource, namespace)?;
        if let Some(store) = self.everything_in(resource, scope.as_deref()) {
            return Some(store);
        }
        let key = WatchKey::new(resource, scope, None);
        let mut watches = self.kind_watches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(watch) = watches.running.get(&key) {
            return (start || watch.has_store())
                .then(|| watch.store_for_reads(self))
                .flatten();
        }
        if !start || watches.unreadable.contains(&key) {
            return None;
        }
        let watch = KindWatch::start(client.clone(), self, resource, key.clone(), true);
        let store = watch.store_for_reads(self);
        watches.running.insert(key, watch);
        store
    }

    /// Every event of `resource` in `namespace` (`None`: all) that
    /// `selector` picks, from the watch shared with reads and other
    /// followers, started if there is none.
    pub fn follow(
        self: &Arc<Self>,
        client: &Client,
        resource: &Resource,
        namespace: Option<String>,
        selector: Option<String>,
    ) -> Followed {
        let key = WatchKey::new(resource, namespace, selector);
        let mut watches = self.kind_watches.lock().unwrap_or_else(|e| e.into_inner());
        let watch = watches
            .running
            .entry(key.clone())
            .or_insert_with(|| KindWatch::start(client.clone(), self, resource, key, false));
        watch.follow(self)
    }

    /// Ends `watch` unless something came to want it since it found itself
    /// unwanted; whether it ended. A kind that could not be listed is not
    /// watched for reads again.
    pub(crate) fn end_kind_watch(&self, watch: &KindWatch) -> bool {
        let mut watches = self.kind_watches.lock().unwrap_or_else(|e| e.into_inner());
        if watch.wanted() {
            return false;
        }
        watches.running.remove(watch.key());
        if watch.unreadable() {
            watches.unreadable.insert(watch.key().clone());
        }
        true
    }

    /// A store holding every object of `resource` in `scope`, listed or not.
    fn everything_in(&self, resource: &Resource, scope: Option<&str>) -> Option<StoreReader> {
        let stores = self.stores.read().unwrap_or_else(|e| e.into_inner());
        stores
            .iter()
            .find(|cached| cached.holds_kind(resource, scope) && cached.holds == Holds::Everything)
            .map(|cached| cached.store.clone())
    }

    /// The keys of the shared watches running, for tests.
    #[cfg(test)]
    pub(crate) fn kind_watch_keys(&self) -> std::collections::HashSet<WatchKey> {
        let watches = self.kind_watches.lock().unwrap_or_else(|e| e.into_inner());
        watches.running.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hikawas() -> Resource {
        super::super::tests::hikawas("v1beta2")
    }

    /// A client of an API server that is not there: every list fails.
    fn nowhere() -> Client {
        let url = "http://127.0.0.1:9".parse().expect("a URL");
        Client::try_from(kube::Config::new(url)).expect("a client")
    }

    #[test]
    fn a_second_read_of_an_object_is_told_from_a_first() {
        let caches = WatchCaches::default();
        let v1 = super::super::tests::hikawas("v1");
        assert!(!caches.read_again(&hikawas(), Some("song"), "a"));
        assert!(!caches.read_again(&hikawas(), Some("song"), "b"));
        assert!(!caches.read_again(&hikawas(), Some("other"), "a"));
        assert!(caches.read_again(&hikawas(), Some("song"), "a"));
        // Another version reads the same object.
        assert!(caches.read_again(&v1, Some("song"), "b"));
    }

    #[test]
    fn reads_are_watched_only_in_the_operators_namespaces() {
        let caches = WatchCaches::default();
        assert_eq!(caches.read_scope(&hikawas(), Some("song")), None);
        let idle = Duration::from_secs(60);
        caches.inform_reads_in(vec!["song".into()], idle);
        assert_eq!(
            caches.read_scope(&hikawas(), Some("song")),
            Some(Some("song".into()))
        );
        assert_eq!(caches.read_scope(&hikawas(), Some("other")), None);
        assert_eq!(caches.read_scope(&hikawas(), None), None);
        let mut cluster_scoped = hikawas();
        cluster_scoped.namespaced = false;
        assert_eq!(caches.read_scope(&cluster_scoped, Some("song")), Some(None));
        caches.inform_reads_in(Vec::new(), idle);
        assert_eq!(caches.read_scope(&hikawas(), Some("other")), Some(None));
    }

    #[tokio::test]
    async fn a_kind_that_cannot_be_listed_is_read_from_the_api_server() {
        let caches = Arc::new(WatchCaches::default());
        caches.inform_reads_in(vec!["song".into()], Duration::from_secs(60));
        let client = nowhere();
        // A first read by name starts nothing.
        assert!(
            caches
                .store_for_reads(&client, &hikawas(), Some("song"), false)
                .is_none()
        );
        assert!(caches.kind_watch_keys().is_empty());
        let store = caches
            .store_for_reads(&client, &hikawas(), Some("song"), true)
            .expect("a watch started for reads");
        assert_eq!(caches.kind_watch_keys().len(), 1);
        // Its list fails: the wait ends, and the kind is not tried again.
        let waited = tokio::time::timeout(Duration::from_secs(10), store.wait_until_ready()).await;
        assert!(matches!(waited, Ok(Err(_))), "{waited:?}");
        tokio::time::timeout(Duration::from_secs(10), async {
            while !caches.kind_watch_keys().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the watch ends");
        assert!(
            caches
                .store_for_reads(&client, &hikawas(), Some("song"), true)
                .is_none()
        );
    }

    #[tokio::test]
    async fn followers_of_one_kind_and_scope_share_a_watch() {
        let caches = Arc::new(WatchCaches::default());
        let client = nowhere();
        let song = Some("song".to_owned());
        let _a = caches.follow(&client, &hikawas(), song.clone(), None);
        let _b = caches.follow(&client, &hikawas(), song.clone(), None);
        assert_eq!(caches.kind_watch_keys().len(), 1);
        let _c = caches.follow(&client, &hikawas(), song, Some("shard=a".into()));
        let _d = caches.follow(&client, &hikawas(), None, None);
        assert_eq!(caches.kind_watch_keys().len(), 3);
    }
}
