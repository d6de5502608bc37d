//! `watchDependentResources`: the kinds a role creates are watched, and a
//! dependent that is deleted, or changed outside its status, reconciles its
//! owner (found by ownerReference or by the primary-resource annotations).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use enka_kube::cache::kind_watch::Followed;
use enka_kube::client::KubeCluster;
use enka_kube::object::{WatchedKind, WatchedObject};
use enka_kube::{Dependent, Resource};
use enka_project::watches::Gvk;

/// How long a run waits for a new dependent watch's first list.
const LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

type OwnerSender = mpsc::UnboundedSender<ObjectRef<WatchedObject>>;

/// What a dependent watch's first list held, and when it ended.
pub struct Listing {
    at: Instant,
    /// Namespace and name of each object listed, with its fingerprint.
    objects: HashMap<(Option<String>, String), u64>,
}

/// A watch's namespace (`None`: all) and the receiver of its first list.
type Scope = (Option<String>, watch::Receiver<Option<Arc<Listing>>>);

/// Sends owners to reconcile into the controller of their namespace.
#[derive(Clone, Default)]
pub struct Triggers {
    senders: Arc<Mutex<HashMap<Option<String>, OwnerSender>>>,
}

impl Triggers {
    /// A stream of owners to reconcile for the controller of `namespace`
    /// (`None`: all namespaces).
    pub fn stream(
        &self,
        namespace: Option<String>,
    ) -> impl futures::Stream<Item = ObjectRef<WatchedObject>> + Send + 'static {
        let (tx, rx) = mpsc::unbounded_channel();
        self.senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(namespace, tx);
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) })
    }

    fn send(&self, owner: ObjectRef<WatchedObject>) {
        let senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        let sender = senders.get(&owner.namespace).or_else(|| senders.get(&None));
        if let Some(sender) = sender {
            let _ = sender.send(owner);
        }
    }
}

/// The dependent watches of one watch.
pub struct DependentWatches {
    owner_gvk: Gvk,
    owner_resource: WatchedKind,
    owner_namespaced: bool,
    blacklist: Vec<Gvk>,
    cluster_scoped: bool,
    namespaces: Vec<String>,
    watched: Mutex<HashMap<Resource, Vec<Scope>>>,
    triggers: Triggers,
    assigned: Option<AssignedKinds>,
}

/// A shard's dependents of the kinds its ring lists as controlled: the
/// sharder labels them with their owner's shard, so the shard watches only
/// its own (`selector`).
pub struct AssignedKinds {
    /// The shard's label selector.
    pub selector: String,
    /// The kinds (group, plural) the ring assigns by controller.
    pub kinds: std::collections::HashSet<super::shard::GroupResource>,
}

impl DependentWatches {
    /// Dependent watches for the owner kind of `watch`.
    pub fn new(
        watch: &enka_project::watches::Watch,
        owner_resource: ApiResource,
        owner_namespaced: bool,
        namespaces: Vec<String>,
        triggers: Triggers,
    ) -> Self {
        DependentWatches {
            owner_gvk: watch.gvk.clone(),
            owner_resource: owner_resource.into(),
            owner_namespaced,
            blacklist: watch.blacklist.clone(),
            cluster_scoped: watch.watch_cluster_scoped_resources,
            namespaces,
            watched: Mutex::new(HashMap::new()),
            triggers,
            assigned: None,
        }
    }

    /// Watches only this shard's dependents of the kinds `assigned` names.
    pub fn assigned(self, assigned: AssignedKinds) -> Self {
        DependentWatches {
            assigned: Some(assigned),
            ..self
        }
    }

    /// The label selector of `kind`'s watch: the shard's, when the ring
    /// assigns that kind's objects.
    fn selector_for(&self, kind: &Resource) -> Option<String> {
        let assigned = self.assigned.as_ref()?;
        let key = (kind.group.clone(), kind.plural.clone());
        assigned
            .kinds
            .contains(&key)
            .then(|| assigned.selector.clone())
    }

    /// Starts watching each kind of `dependents` not watched yet, and returns
    /// once those watches have listed (or `LIST_WAIT` passed): the run that
    /// made the first dependent of a kind ends only when later changes to it
    /// are seen, so an edit right after the owner reports success is not
    /// missed. A dependent the run wrote that a watch's first list, made
    /// after the run began, no longer holds was deleted before the watch
    /// could see it go: `owner` is reconciled again to make it anew.
    pub async fn ensure(
        self: &Arc<Self>,
        cluster: &KubeCluster,
        dependents: &[Dependent],
        owner: &serde_json::Value,
        run_started: Instant,
    ) {
        // Receivers of first lists that ended after this run began (or have
        // not ended): only those can have missed a deletion. Once every
        // watch has listed, a run clones and waits for nothing.
        let mut pending: Vec<(Resource, Option<String>, watch::Receiver<_>)> = Vec::new();
        {
            let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
            for dependent in dependents {
                let kind = &dependent.resource;
                if !self.wants(kind) || pending.iter().any(|(k, _, _)| k == kind) {
                    continue;
                }
                if !watched.contains_key(kind) {
                    watched.insert(kind.clone(), self.start_watches(cluster, kind));
                }
                for (scope, listed) in watched.get(kind).into_iter().flatten() {
                    let settled = listed
                        .borrow()
                        .as_ref()
                        .is_some_and(|listing| listing.at <= run_started);
                    if !settled {
                        pending.push((kind.clone(), scope.clone(), listed.clone()));
                    }
                }
            }
        }
        let deadline = tokio::time::Instant::now() + LIST_WAIT;
        let mut lost = None;
        for (kind, scope, mut listed) in pending {
            let waited = tokio::time::timeout_at(deadline, listed.wait_for(Option::is_some)).await;
            let Ok(Ok(listing)) = waited else {
                tracing::warn!(owner = %self.owner_gvk, dependent = %kind.kind, "a new dependent watch has not listed yet; going on without it");
                continue;
            };
            let Some(listing) = listing.clone() else {
                continue;
            };
            lost = lost.or_else(|| {
                dependents.iter().find(|d| {
                    d.resource == kind
                        && (scope.is_none() || d.namespace == scope)
                        && d.name.as_ref().is_some_and(|name| {
                            let listed = listing.objects.get(&(d.namespace.clone(), name.clone()));
                            // Gone, or changed since the run saw it.
                            listed.is_none() || d.seen.is_some_and(|seen| Some(&seen) != listed)
                        })
                })
            });
        }
        if let Some(gone) = lost {
            let name = owner["metadata"]["name"].as_str().unwrap_or_default();
            let mut key = ObjectRef::new_with(name, self.owner_resource.clone());
            if let Some(namespace) = owner["metadata"]["namespace"].as_str() {
                key = key.within(namespace);
            }
            tracing::info!(owner = %key, dependent = ?gone.name, kind = %gone.resource.kind, "a dependent went before its watch listed; reconciling its owner again");
            self.triggers.send(key);
        }
    }

    /// One watch per scope of `kind`, each with the receiver of its first
    /// list.
    fn start_watches(self: &Arc<Self>, cluster: &KubeCluster, kind: &Resource) -> Vec<Scope> {
        super::watch_scopes(&self.namespaces, kind.namespaced)
            .into_iter()
            .map(|scope| {
                let selector = self.selector_for(kind);
                tracing::info!(owner = %self.owner_gvk, dependent = %kind.api_version(), kind = %kind.kind, selector = selector.as_deref().unwrap_or(""), "watching dependents");
                // The kind's watch is shared with reads of it and with the
                // dependents of other watches, as upstream's informers are.
                let events = cluster.watch_caches().follow(
                    cluster.client(),
                    kind,
                    scope.clone(),
                    selector,
                );
                let (on_listed, listed) = watch::channel(None);
                tokio::spawn(self.clone().watch(events, on_listed));
                (scope, listed)
            })
            .collect()
    }

    /// Whether dependents of `kind` are watched: not when blacklisted, and
    /// cluster-scoped kinds under a namespaced owner only with
    /// `watchClusterScopedResources` and a cluster-wide operator.
    fn wants(&self, kind: &Resource) -> bool {
        let blacklisted = self
            .blacklist
            .iter()
            .any(|b| b.group == kind.group && b.version == kind.version && b.kind == kind.kind);
        let cluster_scoped_allowed = kind.namespaced
            || !self.owner_namespaced
            || (self.cluster_scoped && self.namespaces.is_empty());
        !blacklisted && cluster_scoped_allowed
    }

    /// The owner an object points at, if it is one of ours.
    fn owner_of(&self, object: &WatchedObject) -> Option<ObjectRef<WatchedObject>> {
        let api_version = self.owner_gvk.api_version();
        if let Some(reference) = object.metadata.owner_references.iter().flatten().find(|r| {
            r.kind == self.owner_gvk.kind
                && r.api_version.split('/').next() == api_version.split('/').next()
        }) {
            let mut owner = ObjectRef::new_with(&reference.name, self.owner_resource.clone());
            if self.owner_namespaced {
                owner = owner.within(object.metadata.namespace.as_deref().unwrap_or_default());
            }
            return Some(owner);
        }
        let annotations = object.metadata.annotations.as_ref()?;
        let kind = if self.owner_gvk.group.is_empty() {
            self.owner_gvk.kind.clone()
        } else {
            format!("{}.{}", self.owner_gvk.kind, self.owner_gvk.group)
        };
        if annotations.get("operator-sdk/primary-resource-type") != Some(&kind) {
            return None;
        }
        let primary = annotations.get("operator-sdk/primary-resource")?;
        let owner = match primary.split_once('/') {
            Some((ns, name)) if !ns.is_empty() => {
                ObjectRef::new_with(name, self.owner_resource.clone()).within(ns)
            }
            Some((_, name)) => ObjectRef::new_with(name, self.owner_resource.clone()),
            None => ObjectRef::new_with(primary, self.owner_resource.clone()),
        };
        Some(owner)
    }

    async fn watch(
        self: Arc<Self>,
        mut events: Followed,
        on_listed: watch::Sender<Option<Arc<Listing>>>,
    ) {
        // Upstream's DependentPredicate: creates are ignored, deletes pass,
        // updates pass when something besides status, resourceVersion and
        // managed-field timestamps changed. A relist compares against the
        // fingerprints from before it, so a change made while the watch was
        // down still counts and objects gone since then are forgotten.
        let mut seen: HashMap<String, u64> = HashMap::new();
        let mut before_relist: HashMap<String, u64> = HashMap::new();
        let mut first_list = Some(HashMap::new());
        while let Some(event) = events.recv().await {
            match event {
                Event::Init => before_relist = std::mem::take(&mut seen),
                Event::InitApply(object) => {
                    let Some(uid) = object.metadata.uid.clone() else {
                        continue;
                    };
                    let fingerprint = fingerprint(&object);
                    if let (Some(objects), Some(name)) = (&mut first_list, &object.metadata.name) {
                        objects.insert(
                            (object.metadata.namespace.clone(), name.clone()),
                            fingerprint,
                        );
                    }
                    let previous = before_relist.remove(&uid);
                    seen.insert(uid, fingerprint);
                    if previous.is_some_and(|p| p != fingerprint) {
                        self.reconcile_owner_of(&object, "changed");
                    }
                }
                Event::InitDone => {
                    before_relist.clear();
                    if let Some(objects) = first_list.take() {
                        let listing = Listing {
                            at: Instant::now(),
                            objects,
                        };
                        let _ = on_listed.send(Some(Arc::new(listing)));
                    }
                }
                Event::Apply(object) => {
                    let Some(uid) = object.metadata.uid.clone() else {
                        continue;
                    };
                    let fingerprint = fingerprint(&object);
                    if seen
                        .insert(uid, fingerprint)
                        .is_some_and(|p| p != fingerprint)
                    {
                        self.reconcile_owner_of(&object, "changed");
                    }
                }
                Event::Delete(object) => {
                    if let Some(uid) = &object.metadata.uid {
                        seen.remove(uid);
                    }
                    self.reconcile_owner_of(&object, "deleted");
                }
            }
        }
    }

    fn reconcile_owner_of(&self, dependent: &WatchedObject, what: &str) {
        if let Some(owner) = self.owner_of(dependent) {
            tracing::debug!(
                dependent = dependent.metadata.name.as_deref().unwrap_or(""),
                owner = %owner,
                "dependent {what}; reconciling its owner"
            );
            self.triggers.send(owner);
        }
    }
}

fn fingerprint(object: &WatchedObject) -> u64 {
    object.dependent_fingerprint()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dependents(watch_yaml: &str) -> DependentWatches {
        let mut diagnostics = enka_project::role::Diagnostics::default();
        let (watches, _) = enka_project::watches::parse(
            watch_yaml,
            std::path::Path::new("/p/watches.yaml"),
            &mut diagnostics,
        );
        let watch = &watches[0];
        let resource = ApiResource {
            group: watch.gvk.group.clone(),
            version: watch.gvk.version.clone(),
            api_version: watch.gvk.api_version(),
            kind: watch.gvk.kind.clone(),
            plural: "samples".into(),
        };
        DependentWatches::new(watch, resource, true, Vec::new(), Triggers::default())
    }

    fn object(value: serde_json::Value) -> WatchedObject {
        WatchedObject::from_json_text(&value.to_string()).unwrap()
    }

    fn resource(kind: &str, plural: &str, namespaced: bool) -> Resource {
        Resource {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    const WATCH: &str = "- {group: enka.test, version: v1, kind: Sample, role: sample}\n";

    #[test]
    fn the_owner_comes_from_the_owner_reference_in_the_dependents_namespace() {
        let d = dependents(WATCH);
        let cm = object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "out", "namespace": "ns1", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "other", "uid": "1"},
                {"apiVersion": "enka.test/v1", "kind": "Sample", "name": "s1", "uid": "2"}
            ]}
        }));
        let owner = d.owner_of(&cm).unwrap();
        assert_eq!(
            (owner.name.as_str(), owner.namespace.as_deref()),
            ("s1", Some("ns1"))
        );
    }

    #[test]
    fn the_owner_of_a_cross_namespace_dependent_comes_from_the_annotations() {
        let d = dependents(WATCH);
        let ns = object(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "made", "annotations": {
                "operator-sdk/primary-resource": "ns1/s1",
                "operator-sdk/primary-resource-type": "Sample.enka.test"
            }}
        }));
        let owner = d.owner_of(&ns).unwrap();
        assert_eq!(
            (owner.name.as_str(), owner.namespace.as_deref()),
            ("s1", Some("ns1"))
        );

        let foreign = object(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "made", "annotations": {
                "operator-sdk/primary-resource": "ns1/s1",
                "operator-sdk/primary-resource-type": "Other.enka.test"
            }}
        }));
        assert!(d.owner_of(&foreign).is_none());
        let unowned =
            object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}));
        assert!(d.owner_of(&unowned).is_none());
    }

    #[test]
    fn status_and_bookkeeping_do_not_change_the_fingerprint() {
        let base = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "resourceVersion": "1",
                "managedFields": [{"manager": "enka", "time": "2026-01-01T00:00:00Z"}]},
            "spec": {"replicas": 1},
            "status": {"readyReplicas": 0}
        });
        let mut bookkeeping = base.clone();
        bookkeeping["metadata"]["resourceVersion"] = json!("2");
        bookkeeping["metadata"]["managedFields"][0]["time"] = json!("2026-01-02T00:00:00Z");
        bookkeeping["status"]["readyReplicas"] = json!(1);
        let mut edited = base.clone();
        edited["spec"]["replicas"] = json!(3);
        let print = |v: &serde_json::Value| fingerprint(&object(v.clone()));
        assert_eq!(print(&base), print(&bookkeeping));
        assert_ne!(print(&base), print(&edited));
    }

    #[test]
    fn a_new_manager_of_status_changes_the_fingerprint_as_upstream_compares_it() {
        // operator-lib's DependentPredicate compares managedFields without
        // their times: a controller's first status write adds its entry.
        let entry = |manager: &str, time: &str, fields: serde_json::Value| {
            json!({"manager": manager, "operation": "Update", "apiVersion": "apps/v1",
                   "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields})
        };
        let with = |entries: Vec<serde_json::Value>| {
            let text = json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "resourceVersion": "1", "managedFields": entries},
                "spec": {"replicas": 1}
            })
            .to_string();
            fingerprint(&WatchedObject::from_json_text(&text).unwrap())
        };
        let spec = json!({"f:spec": {"f:replicas": {}}});
        let status = json!({"f:status": {"f:replicas": {}}});
        let before = with(vec![entry("enka", "2026-01-01T00:00:00Z", spec.clone())]);
        let later = with(vec![entry("enka", "2026-01-02T00:00:00Z", spec.clone())]);
        let controller = with(vec![
            entry("enka", "2026-01-01T00:00:00Z", spec.clone()),
            entry("kube-controller-manager", "2026-01-01T00:00:01Z", status),
        ]);
        assert_eq!(before, later, "a new time alone");
        assert_ne!(before, controller, "a new manager's entry");
    }

    #[test]
    fn a_list_item_without_its_type_prints_as_the_write_answer_with_it() {
        let answered = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "resourceVersion": "1"},
            "data": {"said": "hello"}
        });
        let mut listed = answered.clone();
        if let Some(map) = listed.as_object_mut() {
            map.remove("apiVersion");
            map.remove("kind");
        }
        assert_eq!(fingerprint(&object(answered)), fingerprint(&object(listed)));
    }

    #[test]
    fn blacklisted_and_cluster_scoped_kinds_are_not_watched_from_a_namespaced_owner() {
        let d = dependents(
            "- group: enka.test\n  version: v1\n  kind: Sample\n  role: sample\n  blacklist:\n  - {group: '', version: v1, kind: Secret}\n",
        );
        let secret = resource("Secret", "secrets", true);
        let namespace = resource("Namespace", "namespaces", false);
        let config_map = resource("ConfigMap", "configmaps", true);
        assert!(!d.wants(&secret));
        assert!(!d.wants(&namespace));
        assert!(d.wants(&config_map));
    }
}
