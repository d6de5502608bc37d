//! One watch per kind, scope and label selector, shared by whatever needs
//! it, as controller-runtime shares one informer per kind between a
//! manager's controllers and its cache.
//!
//! Two things follow a kind: reads (a store answering roles' reads and
//! lists, started the first time a role lists the kind or reads one of its
//! objects again) and followers (the operator's dependent watches, which
//! want every event and keep no objects). A kind both read and made by a
//! role is watched once. A kind that one follower alone follows keeps no
//! objects; when reads or a second follower come to it, the watch lists
//! again into a store (one LIST, where a second watch would cost a LIST and
//! a WATCH for good), and a follower that comes later is given the store's
//! list. A store no read has used for the caches' idle time is dropped, and
//! a watch nothing follows or reads stops; the next need starts it again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Notify, mpsc};

use super::{Holds, Serving, StoreReader, StoreWriter, WatchCaches};
use crate::Resource;
use crate::object::{WatchedKind, WatchedObject};

/// How often a watch checks whether its store is still read.
const IDLE_CHECK: Duration = Duration::from_secs(30);

/// How long a follower waits for the store to catch up with this
/// process's writes before the watch lists again for it instead.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(2);

/// What a follower receives: every event of the watch, an initial list
/// first (the watch's own, or one made from its store for a follower that
/// came later).
pub type Followed = mpsc::UnboundedReceiver<Event<WatchedObject>>;

/// Group, version, plural, namespace (`None`: all) and label selector of
/// a shared watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchKey {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub selector: Option<String>,
}

impl WatchKey {
    pub fn new(resource: &Resource, namespace: Option<String>, selector: Option<String>) -> Self {
        WatchKey {
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
            namespace,
            selector,
        }
    }
}

/// A shared watch of one kind in one scope.
pub(crate) struct KindWatch {
    key: WatchKey,
    kind: WatchedKind,
    state: Mutex<State>,
    relist: Notify,
}

impl State {
    /// Whether a store, a follower or a waiting follower is there.
    fn wanted(&self) -> bool {
        self.store.is_some()
            || !self.waiting.is_empty()
            || self.followers.iter().any(|f| !f.is_closed())
    }
}

#[derive(Default)]
struct State {
    /// The store reads are answered from, while reads use it.
    store: Option<(StoreWriter, Serving)>,
    followers: Vec<mpsc::UnboundedSender<Event<WatchedObject>>>,
    /// Followers waiting for the store to catch up with this process's
    /// writes before it gives them its list, since when.
    waiting: Vec<(mpsc::UnboundedSender<Event<WatchedObject>>, Instant)>,
    /// The current list has begun and not ended: a follower joining now
    /// would miss its start.
    listing: bool,
    /// Some event of the current pass was delivered.
    delivered: bool,
    /// The kind could not be listed: reads go to the API server.
    unreadable: bool,
}

impl KindWatch {
    /// Starts the watch `key` names, with a store when `for_reads`.
    pub(crate) fn start(
        client: Client,
        caches: &Arc<WatchCaches>,
        resource: &Resource,
        key: WatchKey,
        for_reads: bool,
    ) -> Arc<KindWatch> {
        let kind = WatchedKind::from(resource.api_resource());
        let watch = Arc::new(KindWatch {
            key,
            kind,
            state: Mutex::new(State::default()),
            relist: Notify::new(),
        });
        if for_reads {
            let mut state = watch.lock();
            watch.add_store(&mut state, caches);
        }
        tracing::info!(kind = %watch.kind.kind, api_version = %watch.kind.api_version, namespace = watch.key.namespace.as_deref().unwrap_or("(all)"), selector = watch.key.selector.as_deref().unwrap_or(""), for_reads, "watching a kind");
        let api: Api<WatchedObject> = match &watch.key.namespace {
            Some(namespace) => Api::namespaced_with(client, namespace, &watch.kind),
            None => Api::all_with(client, &watch.kind),
        };
        tokio::spawn(watch.clone().run(api, caches.clone()));
        watch
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add_store(&self, state: &mut State, caches: &Arc<WatchCaches>) -> StoreReader {
        let writer = StoreWriter::new(self.kind.clone());
        let reader = writer.as_reader();
        let serving = caches.serve(
            self.kind.clone(),
            self.key.namespace.clone(),
            reader.clone(),
            Holds::Everything,
        );
        state.store = Some((writer, serving));
        reader
    }

    /// The store reads are answered from, made (and filled by a new list)
    /// if the watch had none; `None` when the kind cannot be listed.
    pub(crate) fn store_for_reads(&self, caches: &Arc<WatchCaches>) -> Option<StoreReader> {
        let mut state = self.lock();
        if state.unreadable {
            return None;
        }
        if let Some((writer, _)) = &state.store {
            return Some(writer.as_reader());
        }
        let reader = self.add_store(&mut state, caches);
        if state.delivered {
            self.relist.notify_one();
        }
        Some(reader)
    }

    /// A follower of every event from now on, with an initial list first.
    pub(crate) fn follow(&self, caches: &Arc<WatchCaches>) -> Followed {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.lock();
        if !state.delivered {
            // Joined before the first event: it sees the watch's own list.
            state.followers.push(sender);
        } else if state.store.is_some() {
            // The store's list, once the store is listed and holds this
            // process's own writes (a dependent the list lacks counts as
            // deleted): now, or when a later event finds it so.
            state.waiting.push((sender, Instant::now()));
            self.serve_waiting(&mut state, caches);
        } else {
            // No list to give: the watch lists again, for everyone, into a
            // store, so that the next follower to come is given its list
            // (a kind two owner kinds make is held, as upstream's informer
            // holds it; one kind's dependents alone keep no objects).
            self.add_store(&mut state, caches);
            state.followers.push(sender);
            self.relist.notify_one();
        }
        receiver
    }

    /// Gives waiting followers the store's list once it holds this
    /// process's writes; past [`CATCH_UP_LIMIT`], lists again for them.
    fn serve_waiting(&self, state: &mut State, caches: &WatchCaches) {
        if state.waiting.is_empty() {
            return;
        }
        let Some(store) = state.store.as_ref().map(|(writer, _)| writer.as_reader()) else {
            return self.relist_for_waiting(state);
        };
        let caught_up = !state.listing
            && store.is_ready()
            && !caches.writes_pending(&self.kind, self.key.namespace.as_deref(), &store);
        if caught_up {
            for (sender, _) in std::mem::take(&mut state.waiting) {
                give_list(&store, &sender);
                state.followers.push(sender);
            }
        } else if !state.listing
            && store.is_ready()
            && state
                .waiting
                .iter()
                .any(|(_, since)| since.elapsed() >= CATCH_UP_LIMIT)
        {
            // Listed, and still behind this process's writes (one whose
            // answer never came, say): a new list holds them.
            self.relist_for_waiting(state);
        }
    }

    fn relist_for_waiting(&self, state: &mut State) {
        let waiting = std::mem::take(&mut state.waiting);
        state
            .followers
            .extend(waiting.into_iter().map(|(sender, _)| sender));
        self.relist.notify_one();
    }

    fn has_waiting(&self) -> bool {
        !self.lock().waiting.is_empty()
    }

    /// Whether a store or a follower still wants the watch.
    pub(crate) fn wanted(&self) -> bool {
        let state = self.lock();
        state.wanted()
    }

    /// Whether the kind could not be listed.
    pub(crate) fn unreadable(&self) -> bool {
        self.lock().unreadable
    }

    pub(crate) fn key(&self) -> &WatchKey {
        &self.key
    }

    /// Whether a store answers reads now.
    pub(crate) fn has_store(&self) -> bool {
        self.lock().store.is_some()
    }

    /// Hands `event` to the store and the followers; whether anything
    /// still wants the watch.
    fn deliver(&self, caches: &WatchCaches, event: Event<WatchedObject>) -> bool {
        let mut state = self.lock();
        state.delivered = true;
        match &event {
            Event::Init => state.listing = true,
            Event::InitDone => state.listing = false,
            _ => {}
        }
        if let Some((writer, _)) = &mut state.store {
            writer.apply(&event);
            caches.observe(&self.kind, &event);
        }
        state
            .followers
            .retain(|follower| follower.send(event.clone()).is_ok());
        self.serve_waiting(&mut state, caches);
        state.wanted()
    }

    /// Drops the store if no read used it for `idle_after`; whether
    /// anything still wants the watch.
    fn still_wanted(&self, caches: &WatchCaches, idle_after: Duration) -> bool {
        let mut state = self.lock();
        let idle = state.store.as_ref().is_some_and(|(_, serving)| {
            caches
                .unread_for(serving)
                .is_none_or(|unread| unread >= idle_after)
        });
        if idle {
            tracing::info!(kind = %self.kind.kind, "no role read this kind for a while: its store is dropped");
            state.store = None;
        }
        state.followers.retain(|follower| !follower.is_closed());
        state.wanted()
    }

    /// The watch failed before its first list: reads go to the API server
    /// from now on; whether followers still want it retried.
    fn unlisted(&self, err: &watcher::Error) -> bool {
        let mut state = self.lock();
        if state.store.take().is_some() {
            tracing::warn!(kind = %self.kind.kind, api_version = %self.kind.api_version, "reads of this kind go to the API server: it cannot be watched: {err}");
        }
        state.unreadable = true;
        !state.followers.is_empty()
    }

    async fn run(self: Arc<Self>, api: Api<WatchedObject>, caches: Arc<WatchCaches>) {
        let idle_after = caches.idle_after().unwrap_or(Duration::MAX);
        let types = TypeMeta {
            api_version: self.kind.api_version.clone(),
            kind: self.kind.kind.clone(),
        };
        let mut config = watcher::Config::default().timeout(crate::WATCH_TIMEOUT_SECONDS);
        if let Some(selector) = &self.key.selector {
            config = config.labels(selector);
        }
        let mut check = tokio::time::interval(IDLE_CHECK.min(idle_after));
        // Each pass is one watcher from its list on; a relist starts another.
        'pass: loop {
            let types = types.clone();
            let mut events = watcher::watcher(api.clone(), config.clone())
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
            loop {
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(event)) => {
                            listed |= matches!(event, Event::InitDone);
                            if !self.deliver(&caches, event) && caches.end_kind_watch(&self) {
                                return;
                            }
                        }
                        // Not even listed: most often no RBAC `list` or
                        // `watch` on the kind.
                        Some(Err(err)) if !listed => {
                            if !self.unlisted(&err) && caches.end_kind_watch(&self) {
                                return;
                            }
                        }
                        Some(Err(err)) => tracing::warn!(kind = %self.kind.kind, "watch: {err}"),
                        None => break 'pass,
                    },
                    () = self.relist.notified() => {
                        self.lock().delivered = false;
                        continue 'pass;
                    }
                    () = tokio::time::sleep(CATCH_UP_LIMIT / 4), if self.has_waiting() => {
                        let mut state = self.lock();
                        self.serve_waiting(&mut state, &caches);
                    }
                    _ = check.tick() => {
                        if !self.still_wanted(&caches, idle_after) && caches.end_kind_watch(&self) {
                            return;
                        }
                    }
                }
            }
        }
        // A watcher's stream does not end; should it, the watch is over.
        let mut state = self.lock();
        state.followers.clear();
        state.waiting.clear();
        state.store = None;
        drop(state);
        caches.end_kind_watch(&self);
    }
}

/// Sends `store`'s objects to a follower as an initial list.
fn give_list(store: &StoreReader, follower: &mpsc::UnboundedSender<Event<WatchedObject>>) {
    let _ = follower.send(Event::Init);
    for object in store.state() {
        let _ = follower.send(Event::InitApply(object.as_ref().clone()));
    }
    let _ = follower.send(Event::InitDone);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hikawas() -> Resource {
        super::super::tests::hikawas("v1beta2")
    }

    fn hikawa(name: &str, resource_version: &str) -> serde_json::Value {
        json!({
            "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta2",
            "kind": "Hikawa",
            "metadata": {"name": name, "namespace": "song", "resourceVersion": resource_version},
        })
    }

    fn event(name: &str, resource_version: &str, first_list: bool) -> Event<WatchedObject> {
        let object = WatchedObject::from_json_text(&hikawa(name, resource_version).to_string())
            .expect("decodes");
        match first_list {
            true => Event::InitApply(object),
            false => Event::Apply(object),
        }
    }

    /// A watch with a store that nothing runs: its events are handed in.
    fn watch_with_store(caches: &Arc<WatchCaches>) -> KindWatch {
        let resource = hikawas();
        let watch = KindWatch {
            key: WatchKey::new(&resource, Some("song".into()), None),
            kind: WatchedKind::from(resource.api_resource()),
            state: Mutex::new(State::default()),
            relist: Notify::new(),
        };
        let mut state = watch.lock();
        watch.add_store(&mut state, caches);
        drop(state);
        watch
    }

    /// What a follower has received so far, as `Init`, `a@1`, `InitDone`.
    fn received(followed: &mut Followed) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(event) = followed.try_recv() {
            out.push(match event {
                Event::Init => "Init".to_owned(),
                Event::InitDone => "InitDone".to_owned(),
                Event::InitApply(o) | Event::Apply(o) | Event::Delete(o) => format!(
                    "{}@{}",
                    o.metadata.name.unwrap_or_default(),
                    o.metadata.resource_version.unwrap_or_default()
                ),
            });
        }
        out
    }

    #[test]
    fn a_late_follower_gets_the_stores_list_once_it_holds_this_processs_writes() {
        let caches = Arc::new(WatchCaches::default());
        let watch = watch_with_store(&caches);
        for event in [Event::Init, event("a", "1", true), Event::InitDone] {
            assert!(watch.deliver(&caches, event));
        }
        // No write pending: the list at once, then what comes.
        let mut first = watch.follow(&caches);
        assert_eq!(received(&mut first), ["Init", "a@1", "InitDone"]);
        // A write the watch has not delivered: the list waits for it.
        caches.wrote(&hikawas(), Some("song"), "b", &hikawa("b", "5"));
        let mut second = watch.follow(&caches);
        assert!(received(&mut second).is_empty());
        assert!(watch.deliver(&caches, event("a", "3", false)));
        assert!(received(&mut second).is_empty());
        assert!(watch.deliver(&caches, event("b", "5", false)));
        // (The store's objects come in no particular order.)
        let mut list = received(&mut second);
        list[1..3].sort();
        assert_eq!(list, ["Init", "a@3", "b@5", "InitDone"]);
        assert_eq!(received(&mut first), ["a@3", "b@5"]);
    }

    #[test]
    fn a_follower_joining_during_the_first_list_gets_it_whole_at_its_end() {
        let caches = Arc::new(WatchCaches::default());
        let watch = watch_with_store(&caches);
        watch.deliver(&caches, Event::Init);
        watch.deliver(&caches, event("a", "1", true));
        let mut follower = watch.follow(&caches);
        watch.deliver(&caches, event("b", "2", true));
        assert!(received(&mut follower).is_empty());
        watch.deliver(&caches, Event::InitDone);
        let mut list = received(&mut follower);
        list[1..3].sort();
        assert_eq!(list, ["Init", "a@1", "b@2", "InitDone"]);
    }

    #[test]
    fn a_follower_joining_before_any_event_sees_the_watchs_own_list() {
        let caches = Arc::new(WatchCaches::default());
        let watch = watch_with_store(&caches);
        let mut follower = watch.follow(&caches);
        for event in [Event::Init, event("a", "1", true), Event::InitDone] {
            watch.deliver(&caches, event);
        }
        assert_eq!(received(&mut follower), ["Init", "a@1", "InitDone"]);
    }

    #[test]
    fn a_watch_is_wanted_while_a_store_or_a_follower_is_there() {
        let caches = Arc::new(WatchCaches::default());
        let watch = watch_with_store(&caches);
        let follower = watch.follow(&caches);
        assert!(watch.wanted());
        watch.lock().store = None;
        assert!(watch.wanted());
        drop(follower);
        assert!(!watch.wanted());
    }
}
