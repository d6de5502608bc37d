//! enka as one shard of a ControllerRing managed by timebertt's sharder
//! (github.com/timebertt/kubernetes-controller-sharding): instead of one
//! leader, every replica holds a Lease of its own, labelled with the ring;
//! the sharder assigns each object to a shard with a label, and moves one by
//! first asking its shard to let go (the drain label). A shard watches only
//! what is assigned to it, and acknowledges a drain by removing both labels
//! without reconciling, so no object is reconciled by two shards at once.
//!
//! Dependents follow their owner when the ring lists their kind among its
//! `controlledResources`: a shard's owner references are controller
//! references (upstream's are not), which the sharder follows to label a
//! dependent with its owner's shard, and a shard watches those kinds with its
//! own selector. Kinds the ring does not list are watched whole; a
//! dependent's event still reaches only the shard of its owner, as no other
//! shard has the owner to reconcile.

use std::collections::HashSet;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value as Json, json};

/// The label a shard Lease carries, naming its ring.
pub const RING_LABEL: &str = "alpha.sharding.timebertt.dev/controllerring";

const SHARD_LABEL_PREFIX: &str = "shard.alpha.sharding.timebertt.dev/";
const DRAIN_LABEL_PREFIX: &str = "drain.alpha.sharding.timebertt.dev/";

/// This replica's place in a ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The ControllerRing's name.
    pub ring: String,
    /// The shard's name: its Lease's name and holder identity.
    pub name: String,
}

/// Why a ring or shard name cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    /// The ring name is part of label keys, whose name part has at most 63
    /// characters.
    #[error(
        "--sharding-ring {0:?} is not a valid ring name: it must be 1 to 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit (it is part of the shard label's key)"
    )]
    Ring(String),
    /// The shard name is a Lease name and a label value.
    #[error(
        "the shard name {0:?} is not valid: it must be 1 to 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit (it is a Lease name and a label value); set --shard-name"
    )]
    Name(String),
}

fn is_label_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
}

impl Shard {
    /// A shard of `ring` named `name`, both checked.
    pub fn new(ring: &str, name: &str) -> Result<Self, ShardError> {
        if !is_label_name(ring) {
            return Err(ShardError::Ring(ring.to_owned()));
        }
        if !is_label_name(name) {
            return Err(ShardError::Name(name.to_owned()));
        }
        Ok(Shard {
            ring: ring.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The label the sharder sets on each object to name its shard.
    pub fn shard_label(&self) -> String {
        format!("{SHARD_LABEL_PREFIX}{}", self.ring)
    }

    /// The label the sharder sets on an object it moves away from its shard.
    pub fn drain_label(&self) -> String {
        format!("{DRAIN_LABEL_PREFIX}{}", self.ring)
    }

    /// The label selector of the objects assigned to this shard, added to
    /// a watch's own selector (`selector`, possibly empty).
    pub fn selector(&self, selector: &str) -> String {
        let own = format!("{}={}", self.shard_label(), self.name);
        if selector.is_empty() {
            own
        } else {
            format!("{selector},{own}")
        }
    }

    /// Whether the sharder asks this shard to let go of an object with
    /// these labels.
    pub fn is_draining(&self, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
        labels.is_some_and(|labels| labels.contains_key(&self.drain_label()))
    }

    /// Whether an object with these labels is assigned to this shard (a
    /// requeue may still bring one that has moved on).
    pub fn holds(&self, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
        labels
            .and_then(|labels| labels.get(&self.shard_label()))
            .is_some_and(|shard| *shard == self.name)
    }

    /// Acknowledges a drain: removes the shard and drain labels, as of the
    /// object's `resource_version` (a compare-and-swap, so a change in
    /// between is seen first). The object then leaves this shard's watch.
    pub async fn acknowledge_drain(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), kube::Error> {
        let patch = json!({"metadata": {
            "resourceVersion": resource_version,
            "labels": {self.shard_label(): null, self.drain_label(): null},
        }});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}

/// A kind by API group and plural resource name, as a ControllerRing names
/// it.
pub type GroupResource = (String, String);

/// What the ring `ring` lists as controlled by its resources: the kinds whose
/// objects the sharder assigns to the shard of their controller.
pub async fn controlled_resources(
    client: &kube::Client,
    ring: &str,
) -> Result<HashSet<GroupResource>, kube::Error> {
    let gvk = GroupVersionKind::gvk("sharding.timebertt.dev", "v1alpha1", "ControllerRing");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "controllerrings");
    let rings: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let ring = rings.get(ring).await?;
    Ok(controlled_in(&ring.data))
}

/// The controlled resources of a ControllerRing's `spec.resources`.
fn controlled_in(ring: &Json) -> HashSet<GroupResource> {
    let text = |value: &Json, key: &str| value[key].as_str().unwrap_or_default().to_owned();
    ring["spec"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|resource| resource["controlledResources"].as_array())
        .flatten()
        .map(|controlled| (text(controlled, "group"), text(controlled, "resource")))
        .filter(|(_, resource)| !resource.is_empty())
        .collect()
}

/// `--sharding-ring`: this replica's shard, and the Lease that announces it
/// (named as the shard, held by it, labelled with the ring).
#[derive(Debug, Clone)]
pub struct Sharding {
    /// The shard.
    pub shard: Shard,
    /// Its Lease, kept as a leader's is.
    pub lease: super::leader::ElectionConfig,
}

/// A shard's name when none is given: the host name (in a pod, the pod's
/// name, unique among the ring's replicas and stable while the pod lives).
pub fn default_name() -> String {
    std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "enka".to_owned())
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn labels_and_selector_follow_the_sharders_protocol() {
        let shard = Shard::new("zundoko", "enka-7d9f-x2").unwrap();
        assert_eq!(
            shard.shard_label(),
            "shard.alpha.sharding.timebertt.dev/zundoko"
        );
        assert_eq!(
            shard.drain_label(),
            "drain.alpha.sharding.timebertt.dev/zundoko"
        );
        assert_eq!(
            shard.selector(""),
            "shard.alpha.sharding.timebertt.dev/zundoko=enka-7d9f-x2"
        );
        assert_eq!(
            shard.selector("app=x"),
            "app=x,shard.alpha.sharding.timebertt.dev/zundoko=enka-7d9f-x2"
        );
    }

    #[test]
    fn draining_and_holding_read_the_objects_labels() {
        let shard = Shard::new("ring", "a").unwrap();
        let mine = labels(&[("shard.alpha.sharding.timebertt.dev/ring", "a")]);
        let moving = labels(&[
            ("shard.alpha.sharding.timebertt.dev/ring", "a"),
            ("drain.alpha.sharding.timebertt.dev/ring", "true"),
        ]);
        let other = labels(&[("shard.alpha.sharding.timebertt.dev/ring", "b")]);
        let other_ring = labels(&[("drain.alpha.sharding.timebertt.dev/elsewhere", "x")]);
        assert!(shard.holds(Some(&mine)) && !shard.is_draining(Some(&mine)));
        assert!(shard.holds(Some(&moving)) && shard.is_draining(Some(&moving)));
        assert!(!shard.holds(Some(&other)) && !shard.holds(None));
        assert!(!shard.is_draining(Some(&other_ring)) && !shard.is_draining(None));
    }

    #[test]
    fn controlled_resources_are_read_from_every_resource_of_the_ring() {
        let ring = json!({"spec": {"resources": [
            {"group": "cache.example.com", "resource": "memcacheds",
             "controlledResources": [{"group": "apps", "resource": "deployments"},
                                     {"group": "", "resource": "configmaps"}]},
            {"group": "x.example.com", "resource": "others"},
            {"group": "y.example.com", "resource": "more",
             "controlledResources": [{"group": "apps", "resource": "deployments"},
                                     {"group": "batch"}]},
        ]}});
        let expected: HashSet<GroupResource> = [("apps", "deployments"), ("", "configmaps")]
            .into_iter()
            .map(|(g, r)| (g.to_owned(), r.to_owned()))
            .collect();
        assert_eq!(controlled_in(&ring), expected);
        assert!(controlled_in(&json!({"spec": {}})).is_empty());
    }

    #[test]
    fn names_must_fit_in_labels() {
        assert!(Shard::new("r", "pod-1").is_ok());
        assert_eq!(
            Shard::new(&"r".repeat(64), "a"),
            Err(ShardError::Ring("r".repeat(64)))
        );
        assert_eq!(
            Shard::new("Ring", "a"),
            Err(ShardError::Ring("Ring".into()))
        );
        assert_eq!(Shard::new("r", "a_b"), Err(ShardError::Name("a_b".into())));
        assert_eq!(Shard::new("r", ""), Err(ShardError::Name(String::new())));
    }
}
