//! Reads answered from the operator's own watch caches.
//!
//! Upstream's proxy answers a role's GET or list from its informer cache,
//! and passes a miss on to the API server (ansible-operator-plugins,
//! `internal/ansible/proxy/cache_response.go`). enka does the same with the
//! reflector stores its controllers keep, and with a watch it starts for a
//! kind roles read ([`kind_watch`]), as controller-runtime's cache starts an
//! informer for each kind it is asked for: a role that reads its own custom
//! resource (`k8s_status`, `k8s`, a `k8s` lookup), lists, or reads again
//! what it read before sends no request.
//!
//! Where upstream starts an informer at a kind's first read, enka starts a
//! watch at a kind's first list, or at the second read by name of one of its
//! objects: a watch costs a list and the memory of every object of its kind
//! in the namespace (the whole cluster for a cluster-wide operator), and
//! only pays when reads repeat. An operator that reads each Deployment once
//! before it creates it, fifty thousand times, keeps no Deployment cache; one
//! whose role reads the same Secrets every run keeps one from its second
//! run. A watch no role has read from for a while stops
//! ([`Informers::idle_after`]), so what the caches hold stays bounded by what
//! roles read lately.
//!
//! A cache is a moment behind the API server. Upstream's roles live with
//! that for every write, their own included; enka's do not for their own:
//! each write to a cached object is remembered with the object the API
//! server answered, and served in place of the cache until the watch
//! delivers that version. Other writers' changes arrive with the watch, as
//! they do upstream.

pub mod kind_watch;
mod reads;
mod selector;
pub mod store;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use serde_json::Value as Json;

use super::Resource;
use super::object::{WatchedKind, WatchedObject};
use kind_watch::{KindWatch, WatchKey};
use selector::LabelSelector;
pub use store::{StoreReader, StoreWriter};

/// How long a remembered write outlives a watch that never delivers its
/// version: a write that changed nothing sends no event, and a relist can
/// pass over a version.
const REMEMBERED_FOR: Duration = Duration::from_secs(30);

/// Past this many remembered writes, the stale ones are dropped as the next
/// is remembered (writes whose object is never read again).
const PRUNE_ABOVE: usize = 256;

/// Past this many remembered writes, a write's answer is not kept, only its
/// version: reads of the object go to the API server until the watch brings
/// it. Under a burst of writes the watch lags by seconds, and keeping every
/// answer held thousands of objects no one read.
const ANSWERS_KEPT: usize = 512;

/// The watch caches reads are served from, and the writes they have not
/// caught up with.
pub struct WatchCaches {
    epoch: Instant,
    stores: RwLock<Vec<Cached>>,
    next_id: AtomicU64,
    written: Mutex<Remembered>,
    /// Where a read kind may get a watch of its own; `None`: nowhere.
    informers: Mutex<Option<Informers>>,
    kind_watches: Mutex<KindWatches>,
    /// Hashes of the objects read by name and asked of the API server, to
    /// tell a second read (which starts its kind's watch) from a first.
    read_once: Mutex<HashSet<u64>>,
}

/// The namespaces read kinds are watched in, and for how long.
struct Informers {
    /// Empty: the whole cluster.
    namespaces: Vec<String>,
    /// How long a store started for reads is kept with no read from it.
    idle_after: Duration,
}

/// The shared watches of kinds, and those that cannot be listed.
#[derive(Default)]
struct KindWatches {
    running: HashMap<WatchKey, Arc<KindWatch>>,
    /// Kinds whose watch failed to list: their reads go to the API server.
    unreadable: HashSet<WatchKey>,
}

/// What a store holds of its kind in its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Every object: it can answer lists.
    Everything,
    /// Those a label selector picks: it answers reads by name only.
    Selected,
}

impl Default for WatchCaches {
    fn default() -> Self {
        WatchCaches {
            epoch: Instant::now(),
            stores: RwLock::default(),
            next_id: AtomicU64::default(),
            written: Mutex::default(),
            informers: Mutex::default(),
            kind_watches: Mutex::default(),
            read_once: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for WatchCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stores = self.stores.read().map(|s| s.len()).unwrap_or_default();
        f.debug_struct("WatchCaches")
            .field("stores", &stores)
            .finish_non_exhaustive()
    }
}

/// One watch's store: its kind, and its namespace (`None`: all).
struct Cached {
    id: u64,
    kind: WatchedKind,
    namespace: Option<String>,
    store: StoreReader,
    holds: Holds,
    /// When a read was last answered from it, in milliseconds since
    /// [`WatchCaches::epoch`].
    read_at: AtomicU64,
}

impl Cached {
    fn covers(&self, namespace: Option<&str>) -> bool {
        self.namespace.is_none() || self.namespace.as_deref() == namespace
    }

    /// Whether it holds `resource`'s kind, in that version, in `namespace`.
    fn holds_kind(&self, resource: &Resource, namespace: Option<&str>) -> bool {
        self.kind.group == resource.group
            && self.kind.version == resource.version
            && self.kind.plural == resource.plural
            && self.covers(namespace)
    }

    fn is_ready(&self) -> bool {
        self.store.is_ready()
    }
}

/// An object, whichever version it is read in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    group: String,
    plural: String,
    namespace: Option<String>,
    name: String,
}

/// The writes the watches may not have delivered yet.
#[derive(Default)]
struct Remembered {
    entries: HashMap<ObjectKey, Written>,
    /// The size past which stale entries are dropped.
    prune_at: usize,
}

/// A write the watch may not have delivered yet.
struct Written {
    at: Instant,
    outcome: Outcome,
}

enum Outcome {
    /// Stored at `resource_version`, written in API `version`; the object as
    /// the API server answered, when kept.
    Stored {
        version: String,
        resource_version: String,
        object: Option<Arc<WatchedObject>>,
    },
    /// Deleted (or found absent) by this process.
    Deleted,
    /// The write got no answer: it may or may not have been made.
    Unknown,
}

/// Keeps a store serving reads; dropping it stops them (a store whose
/// watch has ended is no longer kept current).
#[must_use = "the store serves reads only while this is kept"]
pub struct Serving {
    caches: Arc<WatchCaches>,
    id: u64,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let mut stores = self
            .caches
            .stores
            .write()
            .unwrap_or_else(|e| e.into_inner());
        stores.retain(|cached| cached.id != self.id);
    }
}

/// Whether version `seen` of an object is `written` or a later one.
/// Resource versions of one kind compare as increasing integers (Kubernetes
/// 1.35, KEP-5504: a conformance requirement); a version that is not such
/// an integer (an older or aggregated API server) is compared for equality
/// alone. The watch delivers a write's version either before the write's
/// answer is read or after it, so equality alone would keep a write that
/// the cache has passed, and serve it over newer changes.
fn at_least(seen: Option<&str>, written: Option<&str>) -> bool {
    let (Some(seen), Some(written)) = (seen, written) else {
        return false;
    };
    let integer = |v: &str| {
        !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'))
    };
    if integer(seen) && integer(written) {
        (seen.len(), seen) >= (written.len(), written)
    } else {
        seen == written
    }
}

impl WatchCaches {
    /// Serves reads of `kind` in `namespace` (`None`: all namespaces, or a
    /// cluster-scoped kind) from `store`, once its first list is in, for as
    /// long as the returned guard is kept. The watch filling the store must
    /// pass each event to [`WatchCaches::observe`] after the store took it.
    pub fn serve(
        self: &Arc<Self>,
        kind: WatchedKind,
        namespace: Option<String>,
        store: StoreReader,
        holds: Holds,
    ) -> Serving {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut stores = self.stores.write().unwrap_or_else(|e| e.into_inner());
        stores.push(Cached {
            id,
            kind,
            namespace,
            store,
            holds,
            read_at: AtomicU64::new(self.now_millis()),
        });
        Serving {
            caches: self.clone(),
            id,
        }
    }

    /// The store serving `resource` in `namespace`, with its kind: the same
    /// version only (another version is another conversion of the object).
    fn store_for(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        holds: Holds,
    ) -> Option<(WatchedKind, StoreReader)> {
        let stores = self.stores.read().unwrap_or_else(|e| e.into_inner());
        stores
            .iter()
            .find(|cached| {
                cached.holds_kind(resource, namespace)
                    && (holds == Holds::Selected || cached.holds == Holds::Everything)
                    && cached.is_ready()
            })
            .map(|cached| {
                cached.read_at.store(self.now_millis(), Ordering::Relaxed);
                (cached.kind.clone(), cached.store.clone())
            })
    }

    fn now_millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// How long since a read was answered from the store of `serving`
    /// (`None`: it serves no more).
    pub(crate) fn unread_for(&self, serving: &Serving) -> Option<Duration> {
        let stores = self.stores.read().unwrap_or_else(|e| e.into_inner());
        let cached = stores.iter().find(|cached| cached.id == serving.id)?;
        let read_at = cached.read_at.load(Ordering::Relaxed);
        Some(Duration::from_millis(
            self.now_millis().saturating_sub(read_at),
        ))
    }

    /// Whether some store holds objects of `resource`'s kind in `namespace`,
    /// in any version.
    fn caches_kind(&self, resource: &Resource, namespace: Option<&str>) -> bool {
        let stores = self.stores.read().unwrap_or_else(|e| e.into_inner());
        stores.iter().any(|cached| {
            cached.kind.group == resource.group
                && cached.kind.plural == resource.plural
                && cached.covers(namespace)
        })
    }

    /// `name` as a cache knows it, or `None` when the API server must be
    /// asked: no store serves its kind and namespace, the store has not
    /// listed, does not hold it (a miss goes to the API server, as
    /// upstream's), or holds a version older than this process's last write.
    pub fn get(&self, resource: &Resource, namespace: Option<&str>, name: &str) -> Option<Json> {
        self.newest(resource, namespace, name)?.to_json().ok()
    }

    /// `name` as a cache knows it, if that is a later version than
    /// `known_version`: after a role wrote the object, its status is written
    /// over what the role left rather than over the copy the run began with.
    pub fn newer_than(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        known_version: Option<&str>,
    ) -> Option<Json> {
        let newest = self.newest(resource, namespace, name)?;
        let version = newest.metadata.resource_version.as_deref();
        let newer = version != known_version && at_least(version, known_version);
        newer.then(|| newest.to_json().ok()).flatten()
    }

    fn newest(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<WatchedObject>> {
        let namespace = namespace.filter(|_| resource.namespaced);
        if resource.namespaced && namespace.is_none() {
            return None;
        }
        let (kind, store) = self.store_for(resource, namespace, Holds::Selected)?;
        let mut key = ObjectRef::new_with(name, kind);
        key.namespace = namespace.map(str::to_owned);
        let cached = store.get(&key);
        let cached_version = cached
            .as_ref()
            .and_then(|object| object.metadata.resource_version.as_deref());
        let object_key = ObjectKey::of(resource, namespace, name);
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(write) = written.entries.get(&object_key) {
            let caught_up = match &write.outcome {
                Outcome::Stored {
                    resource_version, ..
                } => at_least(cached_version, Some(resource_version.as_str())),
                Outcome::Deleted | Outcome::Unknown => false,
            };
            if caught_up || write.at.elapsed() > REMEMBERED_FOR {
                written.entries.remove(&object_key);
            } else {
                return match &write.outcome {
                    Outcome::Stored {
                        version,
                        object: Some(object),
                        ..
                    } if *version == resource.version => Some(object.clone()),
                    _ => None,
                };
            }
        }
        cached
    }

    /// The objects of `resource` in `namespace` (`None`: all) that
    /// `label_selector` picks, sorted as the API server sorts them, or
    /// `None` when the API server must be asked: no store holds every such
    /// object, a field selector (which only the server reads), a label
    /// selector this cache does not parse, or a write of one of them whose
    /// outcome the cache cannot tell.
    pub fn list(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Option<Vec<Json>> {
        if field_selector.is_some_and(|fields| !fields.trim().is_empty()) {
            return None;
        }
        let selector = LabelSelector::parse(label_selector.unwrap_or_default())?;
        let namespace = namespace.filter(|_| resource.namespaced);
        let (kind, store) = self.store_for(resource, namespace, Holds::Everything)?;
        let mut items = BTreeMap::new();
        for object in store.state() {
            let in_namespace =
                namespace.is_none() || object.metadata.namespace.as_deref() == namespace;
            if in_namespace && selector.matches(object.metadata.labels.as_ref()) {
                let key = (
                    object.metadata.namespace.clone(),
                    object.metadata.name.clone().unwrap_or_default(),
                );
                items.insert(key, object.to_json().ok()?);
            }
        }
        // This process's writes the watch has not delivered yet.
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let pending = written.entries.iter().filter(|(key, write)| {
            key.group == resource.group
                && key.plural == resource.plural
                && (namespace.is_none() || key.namespace.as_deref() == namespace)
                && write.at.elapsed() <= REMEMBERED_FOR
        });
        for (key, write) in pending {
            let mut reference = ObjectRef::new_with(&key.name, kind.clone());
            reference.namespace = key.namespace.clone();
            let cached = store.get(&reference);
            let cached_version = cached
                .as_ref()
                .and_then(|o| o.metadata.resource_version.as_deref());
            let item = (key.namespace.clone(), key.name.clone());
            match &write.outcome {
                Outcome::Stored {
                    resource_version, ..
                } if at_least(cached_version, Some(resource_version.as_str())) => {}
                Outcome::Stored {
                    version,
                    object: Some(object),
                    ..
                } if *version == resource.version => {
                    if selector.matches(object.metadata.labels.as_ref()) {
                        items.insert(item, object.to_json().ok()?);
                    } else {
                        items.remove(&item);
                    }
                }
                Outcome::Deleted if cached.is_none() => {}
                Outcome::Stored { .. } | Outcome::Deleted | Outcome::Unknown => return None,
            }
        }
        Some(items.into_values().collect())
    }

    /// Remembers the object a write of `name` left, as the API server
    /// answered it.
    pub fn wrote(&self, resource: &Resource, namespace: Option<&str>, name: &str, object: &Json) {
        let namespace = namespace.filter(|_| resource.namespaced);
        if !self.caches_kind(resource, namespace) {
            return;
        }
        let Some(resource_version) = object
            .pointer("/metadata/resourceVersion")
            .and_then(Json::as_str)
        else {
            return self.remember(resource, namespace, name, Outcome::Unknown);
        };
        let keep = self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
            < ANSWERS_KEPT;
        // Kept as the watch cache keeps objects: text, managedFields left out.
        let answer = keep
            .then(|| WatchedObject::from_json_text(&object.to_string()).ok())
            .flatten();
        let outcome = Outcome::Stored {
            version: resource.version.clone(),
            resource_version: resource_version.to_owned(),
            object: answer.map(Arc::new),
        };
        self.remember(resource, namespace, name, outcome);
    }

    /// Whether `store`, of `kind` in `namespace` (`None`: all), has not
    /// caught up with some write of this process yet: a follower given a
    /// list from it would miss that write.
    pub(crate) fn writes_pending(
        &self,
        kind: &WatchedKind,
        namespace: Option<&str>,
        store: &StoreReader,
    ) -> bool {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.entries.iter().any(|(key, write)| {
            let ours = key.group == kind.group
                && key.plural == kind.plural
                && (namespace.is_none() || key.namespace.as_deref() == namespace)
                && write.at.elapsed() <= REMEMBERED_FOR;
            if !ours {
                return false;
            }
            let mut reference = ObjectRef::new_with(&key.name, kind.clone());
            reference.namespace = key.namespace.clone();
            let cached = store.get(&reference);
            match &write.outcome {
                Outcome::Stored {
                    resource_version, ..
                } => !at_least(
                    cached
                        .as_ref()
                        .and_then(|o| o.metadata.resource_version.as_deref()),
                    Some(resource_version.as_str()),
                ),
                Outcome::Deleted => cached.is_some(),
                Outcome::Unknown => true,
            }
        })
    }

    /// Remembers that `name` was deleted (or found absent) by a write.
    pub fn deleted(&self, resource: &Resource, namespace: Option<&str>, name: &str) {
        self.remember(resource, namespace, name, Outcome::Deleted);
    }

    /// Remembers that a write of `name` got no answer: reads of it go to
    /// the API server until the cache is known to have caught up.
    pub fn unsure(&self, resource: &Resource, namespace: Option<&str>, name: &str) {
        self.remember(resource, namespace, name, Outcome::Unknown);
    }

    fn remember(&self, resource: &Resource, namespace: Option<&str>, name: &str, outcome: Outcome) {
        let namespace = namespace.filter(|_| resource.namespaced);
        if !self.caches_kind(resource, namespace) {
            return;
        }
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        // Pruned when the map has doubled since the last pruning: a scan
        // per write would cost as much as the writes under a burst.
        if written.entries.len() > written.prune_at {
            written
                .entries
                .retain(|_, write| write.at.elapsed() <= REMEMBERED_FOR);
            written.prune_at = (written.entries.len() * 2).max(PRUNE_ABOVE);
        }
        let write = Written {
            at: Instant::now(),
            outcome,
        };
        written
            .entries
            .insert(ObjectKey::of(resource, namespace, name), write);
    }

    /// Takes note of a watch event of `kind`, once its store has applied it:
    /// a remembered write whose version the store now holds is forgotten,
    /// and so is any write of an object the watch saw deleted.
    pub fn observe(&self, kind: &WatchedKind, event: &Event<WatchedObject>) {
        let (object, deleted) = match event {
            Event::Apply(object) | Event::InitApply(object) => (object, false),
            Event::Delete(object) => (object, true),
            Event::Init | Event::InitDone => return,
        };
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.entries.is_empty() {
            return;
        }
        let key = ObjectKey {
            group: kind.group.clone(),
            plural: kind.plural.clone(),
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone().unwrap_or_default(),
        };
        let delivered = match written.entries.get(&key).map(|write| &write.outcome) {
            None => false,
            Some(_) if deleted => true,
            Some(Outcome::Stored {
                resource_version, ..
            }) => at_least(
                object.metadata.resource_version.as_deref(),
                Some(resource_version.as_str()),
            ),
            Some(Outcome::Deleted | Outcome::Unknown) => false,
        };
        if delivered {
            written.entries.remove(&key);
        }
    }
}

impl ObjectKey {
    fn of(resource: &Resource, namespace: Option<&str>, name: &str) -> Self {
        ObjectKey {
            group: resource.group.clone(),
            plural: resource.plural.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn hikawas(version: &str) -> Resource {
        Resource {
            group: "zundokokiyoshi.kaitoy.github.com".into(),
            version: version.into(),
            kind: "Hikawa".into(),
            plural: "hikawas".into(),
            namespaced: true,
        }
    }

    fn kind() -> WatchedKind {
        WatchedKind::from(hikawas("v1beta2").api_resource())
    }

    fn hikawa(name: &str, resource_version: &str, said: u32) -> Json {
        json!({
            "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta2",
            "kind": "Hikawa",
            "metadata": {"name": name, "namespace": "song", "resourceVersion": resource_version},
            "status": {"numZundokosSaid": said},
        })
    }

    fn watched(object: &Json) -> WatchedObject {
        WatchedObject::from_json_text(&object.to_string()).expect("decodes")
    }

    /// Caches serving one store of Hikawas in `namespace`, listed with
    /// `objects`, and the writer that keeps it.
    fn serving(
        namespace: Option<&str>,
        objects: &[Json],
    ) -> (Arc<WatchCaches>, Serving, StoreWriter) {
        let caches = Arc::new(WatchCaches::default());
        let mut writer = StoreWriter::new(kind());
        let serving = caches.serve(
            kind(),
            namespace.map(str::to_owned),
            writer.as_reader(),
            Holds::Everything,
        );
        writer.apply(&Event::Init);
        for object in objects {
            writer.apply(&Event::InitApply(watched(object)));
        }
        writer.apply(&Event::InitDone);
        (caches, serving, writer)
    }

    fn remembered(caches: &WatchCaches) -> usize {
        caches.written.lock().unwrap().entries.len()
    }

    fn said(object: Option<Json>) -> Option<u64> {
        object?.pointer("/status/numZundokosSaid")?.as_u64()
    }

    #[test]
    fn a_cached_object_is_read_without_the_api_server() {
        let (caches, _serving, _writer) = serving(None, &[hikawa("a", "10", 3)]);
        let object = caches.get(&hikawas("v1beta2"), Some("song"), "a");
        assert_eq!(object, Some(hikawa("a", "10", 3)));
    }

    #[test]
    fn a_miss_another_version_namespace_or_kind_goes_to_the_api_server() {
        let (caches, _serving, _writer) = serving(Some("song"), &[hikawa("a", "10", 3)]);
        assert_eq!(caches.get(&hikawas("v1beta2"), Some("song"), "b"), None);
        assert_eq!(caches.get(&hikawas("v1beta1"), Some("song"), "a"), None);
        assert_eq!(caches.get(&hikawas("v1beta2"), Some("other"), "a"), None);
        assert_eq!(caches.get(&hikawas("v1beta2"), None, "a"), None);
        let zundokos = Resource {
            kind: "Zundoko".into(),
            plural: "zundokos".into(),
            ..hikawas("v1beta2")
        };
        assert_eq!(caches.get(&zundokos, Some("song"), "a"), None);
    }

    /// Caches serving a store that `holds` objects, in the middle of its
    /// first list: Hikawa `a` listed, the list not ended.
    fn listing(holds: Holds) -> (Arc<WatchCaches>, Serving, StoreWriter) {
        let caches = Arc::new(WatchCaches::default());
        let mut writer = StoreWriter::new(kind());
        let serving = caches.serve(kind(), None, writer.as_reader(), holds);
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(watched(&hikawa("a", "10", 3))));
        (caches, serving, writer)
    }

    #[test]
    fn nothing_is_served_before_the_first_list_or_after_the_guard_is_dropped() {
        let (caches, serving, mut writer) = listing(Holds::Everything);
        assert_eq!(caches.get(&hikawas("v1beta2"), Some("song"), "a"), None);
        writer.apply(&Event::InitDone);
        assert!(caches.get(&hikawas("v1beta2"), Some("song"), "a").is_some());
        drop(serving);
        assert_eq!(caches.get(&hikawas("v1beta2"), Some("song"), "a"), None);
    }

    #[test]
    fn an_own_write_is_read_back_until_the_watch_delivers_it() {
        let (caches, _serving, mut writer) = serving(None, &[hikawa("a", "10", 3)]);
        let resource = hikawas("v1beta2");
        caches.wrote(&resource, Some("song"), "a", &hikawa("a", "11", 4));
        assert_eq!(said(caches.get(&resource, Some("song"), "a")), Some(4));
        // The write in another version: the API server converts it.
        assert_eq!(caches.get(&hikawas("v1beta1"), Some("song"), "a"), None);

        let event = Event::Apply(watched(&hikawa("a", "11", 4)));
        writer.apply(&event);
        caches.observe(&kind(), &event);
        assert_eq!(remembered(&caches), 0);
        // Another writer's change comes with the watch.
        let event = Event::Apply(watched(&hikawa("a", "12", 5)));
        writer.apply(&event);
        caches.observe(&kind(), &event);
        assert_eq!(said(caches.get(&resource, Some("song"), "a")), Some(5));
    }

    #[test]
    fn a_write_that_changed_nothing_is_forgotten_once_the_cache_holds_its_version() {
        let (caches, _serving, _writer) = serving(None, &[hikawa("a", "10", 3)]);
        let resource = hikawas("v1beta2");
        caches.wrote(&resource, Some("song"), "a", &hikawa("a", "10", 3));
        assert_eq!(said(caches.get(&resource, Some("song"), "a")), Some(3));
        assert_eq!(remembered(&caches), 0);
    }

    #[test]
    fn a_write_the_watch_delivered_before_its_answer_was_read_yields_to_newer_changes() {
        let (caches, _serving, mut writer) = serving(None, &[hikawa("a", "9", 3)]);
        let resource = hikawas("v1beta2");
        for event in [
            Event::Apply(watched(&hikawa("a", "10", 4))),
            Event::Apply(watched(&hikawa("a", "12", 5))),
        ] {
            writer.apply(&event);
            caches.observe(&kind(), &event);
        }
        caches.wrote(&resource, Some("song"), "a", &hikawa("a", "10", 4));
        assert_eq!(said(caches.get(&resource, Some("song"), "a")), Some(5));
        assert_eq!(remembered(&caches), 0);
    }

    #[test]
    fn a_status_write_takes_a_newer_version_only() {
        let (caches, _serving, _writer) = serving(None, &[hikawa("a", "10", 3)]);
        let resource = hikawas("v1beta2");
        let newer = |known| caches.newer_than(&resource, Some("song"), "a", Some(known));
        assert_eq!(newer("10"), None);
        caches.wrote(&resource, Some("song"), "a", &hikawa("a", "11", 4));
        assert_eq!(said(newer("10")), Some(4));
        assert_eq!(newer("11"), None);
    }

    #[test]
    fn past_the_answers_kept_a_write_sends_reads_to_the_api_server() {
        let objects: Vec<Json> = (0..=ANSWERS_KEPT)
            .map(|i| hikawa(&format!("h{i}"), "10", 0))
            .collect();
        let (caches, _serving, _writer) = serving(None, &objects);
        let resource = hikawas("v1beta2");
        for (i, object) in objects.iter().enumerate() {
            let mut written = object.clone();
            written["metadata"]["resourceVersion"] = json!("11");
            caches.wrote(&resource, Some("song"), &format!("h{i}"), &written);
        }
        let version = |name: &str| {
            let object = caches.get(&resource, Some("song"), name)?;
            Some(object["metadata"]["resourceVersion"].as_str()?.to_owned())
        };
        assert_eq!(version("h0").as_deref(), Some("11"));
        assert_eq!(version(&format!("h{ANSWERS_KEPT}")), None);
    }

    #[test]
    fn resource_versions_compare_as_integers_or_else_for_equality() {
        assert!(at_least(Some("10"), Some("9")));
        assert!(at_least(Some("10"), Some("10")));
        assert!(!at_least(Some("9"), Some("10")));
        assert!(!at_least(Some("99"), Some("100")));
        assert!(at_least(Some("a1"), Some("a1")));
        assert!(!at_least(Some("b"), Some("a")));
        assert!(!at_least(Some("010"), Some("9")));
        assert!(!at_least(None, Some("9")));
        assert!(!at_least(Some("9"), None));
    }

    #[test]
    fn after_a_delete_or_an_unanswered_write_reads_go_to_the_api_server() {
        let (caches, _serving, mut writer) =
            serving(None, &[hikawa("a", "10", 3), hikawa("b", "10", 3)]);
        let resource = hikawas("v1beta2");
        caches.deleted(&resource, Some("song"), "a");
        caches.unsure(&resource, Some("song"), "b");
        assert_eq!(caches.get(&resource, Some("song"), "a"), None);
        assert_eq!(caches.get(&resource, Some("song"), "b"), None);

        let event = Event::Delete(watched(&hikawa("a", "11", 3)));
        writer.apply(&event);
        caches.observe(&kind(), &event);
        assert_eq!(remembered(&caches), 1);
        assert_eq!(caches.get(&resource, Some("song"), "a"), None);
    }

    #[test]
    fn writes_of_kinds_no_store_holds_are_not_remembered() {
        let (caches, _serving, _writer) = serving(Some("song"), &[]);
        caches.wrote(
            &hikawas("v1beta2"),
            Some("other"),
            "a",
            &hikawa("a", "1", 0),
        );
        let configmaps = Resource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
        };
        caches.wrote(&configmaps, Some("song"), "a", &json!({}));
        assert_eq!(remembered(&caches), 0);
        // Written in another version, the object is still the cached kind's.
        caches.wrote(&hikawas("v1beta1"), Some("song"), "a", &hikawa("a", "1", 0));
        assert_eq!(remembered(&caches), 1);
    }

    fn labelled(name: &str, resource_version: &str, label: &str) -> Json {
        let mut object = hikawa(name, resource_version, 0);
        object["metadata"]["labels"] = json!({ "song": label });
        object
    }

    fn names(items: Option<Vec<Json>>) -> Option<Vec<String>> {
        let names = items?.into_iter().map(|item| {
            item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        });
        Some(names.collect())
    }

    #[test]
    fn lists_come_sorted_from_a_store_that_holds_every_object() {
        let (caches, _serving, _writer) = serving(
            None,
            &[
                labelled("c", "3", "a"),
                labelled("a", "1", "a"),
                labelled("b", "2", "b"),
            ],
        );
        let resource = hikawas("v1beta2");
        let list = |labels, fields| names(caches.list(&resource, Some("song"), labels, fields));
        assert_eq!(
            list(None, None),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(
            list(Some("song = a"), None),
            Some(vec!["a".into(), "c".into()])
        );
        assert_eq!(list(Some("song in (b)"), Some("")), Some(vec!["b".into()]));
        assert_eq!(
            names(caches.list(&resource, Some("other"), None, None)),
            Some(vec![])
        );
        // Only the API server reads field selectors, and refuses bad labels.
        assert_eq!(list(None, Some("metadata.name=a")), None);
        assert_eq!(list(Some("song in a"), None), None);
    }

    #[test]
    fn a_store_of_selected_objects_answers_no_list() {
        let (caches, _serving, mut writer) = listing(Holds::Selected);
        writer.apply(&Event::InitDone);
        assert_eq!(
            caches.list(&hikawas("v1beta2"), Some("song"), None, None),
            None
        );
        assert!(caches.get(&hikawas("v1beta2"), Some("song"), "a").is_some());
    }

    #[test]
    fn lists_hold_own_writes_the_watch_has_not_delivered() {
        let (caches, _serving, _writer) =
            serving(None, &[labelled("a", "1", "a"), labelled("b", "2", "a")]);
        let resource = hikawas("v1beta2");
        let list = || names(caches.list(&resource, Some("song"), Some("song=a"), None));
        caches.wrote(&resource, Some("song"), "c", &labelled("c", "5", "a"));
        assert_eq!(list(), Some(vec!["a".into(), "b".into(), "c".into()]));
        // Relabelled out of the selection by this process's write.
        caches.wrote(&resource, Some("song"), "b", &labelled("b", "6", "x"));
        assert_eq!(list(), Some(vec!["a".into(), "c".into()]));
        // Deleted here, and still in the store: only the API server knows
        // whether it is gone or waits on a finalizer.
        caches.deleted(&resource, Some("song"), "a");
        assert_eq!(list(), None);
    }

    #[test]
    fn a_store_tells_how_long_no_read_used_it() {
        let (caches, serving, _writer) = serving(None, &[hikawa("a", "1", 1)]);
        assert!(caches.unread_for(&serving).is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert!(caches.unread_for(&serving) >= Some(Duration::from_millis(30)));
        assert!(caches.get(&hikawas("v1beta2"), Some("song"), "a").is_some());
        assert!(caches.unread_for(&serving) < Some(Duration::from_millis(30)));
    }

    #[test]
    fn cluster_scoped_objects_are_found_without_a_namespace() {
        let caches = Arc::new(WatchCaches::default());
        let resource = Resource {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Cluster".into(),
            plural: "clusters".into(),
            namespaced: false,
        };
        let kind = WatchedKind::from(resource.api_resource());
        let mut writer = StoreWriter::new(kind.clone());
        let _serving = caches.serve(kind, None, writer.as_reader(), Holds::Everything);
        writer.apply(&Event::Init);
        let object = json!({"apiVersion": "example.com/v1", "kind": "Cluster",
            "metadata": {"name": "c", "resourceVersion": "1"}});
        writer.apply(&Event::InitApply(watched(&object)));
        writer.apply(&Event::InitDone);
        assert_eq!(caches.get(&resource, Some("ignored"), "c"), Some(object));
    }
}
