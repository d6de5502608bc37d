//! kube-apiserver's requests by verb and resource
//! (`apiserver_request_total`), so that a load row can account for what
//! each Memcached cost the API server against the least its role needs.

use std::collections::BTreeMap;

use kube::Client;

/// What benches/memcached's role and upstream's status cannot do with
/// less, per Memcached, as (verbs, resource, count): the Deployment
/// created, and the status written twice (`manageStatus`: the `Running`
/// condition when the reconcile starts, `Successful` when it ends, as
/// upstream writes them), by update or patch.
pub const MINIMUM: &[(&[&str], &str, f64)] = &[
    (&["POST"], "deployments", 1.0),
    (&["PUT", "PATCH", "APPLY"], "memcacheds/status", 2.0),
];

/// Why a kind of request above the least is made, by `VERB resource`.
const WHY: &[(&str, &str)] = &[
    (
        "GET deployments",
        "k8s reads the object before it writes it; the Deployment is not in the watch cache yet, and a miss \
         goes to the API server, as upstream's proxy sends it",
    ),
    ("LIST deployments", "the watches' lists, once per watch"),
    ("LIST memcacheds", "the watches' lists, once per watch"),
    ("WATCH deployments", "the watches"),
    ("WATCH memcacheds", "the watches"),
    ("GET leases", "leader election and shard Leases"),
    ("PUT leases", "leader election and shard Leases"),
    (
        "GET endpoints",
        "the sharder's webhook Service, its endpoints",
    ),
    (
        "POST endpoints",
        "the sharder's webhook Service, its endpoints",
    ),
];

/// How many requests of `key` (`VERB resource`) the role needs at least.
fn least(key: &str) -> f64 {
    let (verb, resource) = key.split_once(' ').unwrap_or((key, ""));
    MINIMUM
        .iter()
        .filter(|(verbs, name, _)| verbs.contains(&verb) && *name == resource)
        .map(|(_, _, n)| n)
        .sum()
}

/// Request counts by `VERB resource[/subresource]`.
#[derive(Debug, Clone, Default)]
pub struct Requests(BTreeMap<String, f64>);

impl Requests {
    /// The API server's counts now.
    pub async fn read(client: &Client) -> Requests {
        Requests::parse(&crate::support::apiserver_metrics(client).await)
    }

    fn parse(metrics: &str) -> Requests {
        let mut counts = BTreeMap::new();
        for line in metrics.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or("")
                    .to_owned()
            };
            let (resource, subresource) = (label("resource"), label("subresource"));
            let what = match (resource.as_str(), subresource.as_str()) {
                ("", _) => "(no resource)".to_owned(),
                (resource, "") => resource.to_owned(),
                (resource, sub) => format!("{resource}/{sub}"),
            };
            *counts
                .entry(format!("{} {what}", label("verb")))
                .or_insert(0.0) += value;
        }
        Requests(counts)
    }

    /// The requests made since `before`, less `harness` (the bench's own:
    /// its creates, polls and metrics reads).
    pub fn since(&self, before: &Requests, harness: &[(&str, f64)]) -> Requests {
        let mut counts = BTreeMap::new();
        for (key, after) in &self.0 {
            let mut delta = after - before.0.get(key).copied().unwrap_or(0.0);
            for (name, own) in harness {
                if key == name {
                    delta -= own;
                }
            }
            if delta > 0.0 {
                counts.insert(key.clone(), delta);
            }
        }
        Requests(counts)
    }

    pub fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// Each kind of request per Memcached, most first.
    pub fn per(&self, crs: usize) -> Vec<(String, f64)> {
        let mut each: Vec<(String, f64)> = self
            .0
            .iter()
            .map(|(key, count)| (key.clone(), count / crs as f64))
            .collect();
        each.sort_by(|a, b| b.1.total_cmp(&a.1));
        each
    }
}

/// The bench's own requests in a load's window: `crs` creates, `polls`
/// lists of every Memcached, and the metrics read that ends it.
pub fn harness(crs: usize, polls: usize) -> [(&'static str, f64); 3] {
    [
        ("POST memcacheds", crs as f64),
        ("LIST memcacheds", polls as f64),
        ("GET (no resource)", 1.0),
    ]
}

/// A load's requests per Memcached as a sentence: the least the role needs,
/// then every kind of request made, with how many above that least.
pub fn account(each: &[(String, f64)]) -> String {
    let minimum: f64 = MINIMUM.iter().map(|(_, _, n)| n).sum();
    let made: f64 = each.iter().map(|(_, n)| n).sum();
    let parts: Vec<String> = each
        .iter()
        .filter(|(_, n)| *n >= 0.005)
        .map(|(key, n)| {
            let least = least(key);
            if least > 0.0 {
                format!("`{key}` {n:.2} (needed: {least})")
            } else {
                let why = WHY
                    .iter()
                    .find(|(name, _)| name == key)
                    .map_or("unexplained", |(_, why)| why);
                format!("`{key}` {n:.2} (above the least: {why})")
            }
        })
        .collect();
    format!(
        "{made:.2} requests per Memcached where the role needs {minimum}: {}",
        parts.join(", ")
    )
}

/// Why enka sends a kind of request more often than upstream did in the
/// real-operator rows, by `VERB resource`, or by verb alone (`"LIST "`).
const MORE_THAN_UPSTREAM: &[(&str, &str)] = &[
    (
        "POST events",
        "enka records a Warning Event on the custom resource when a run fails, as controller-runtime's \
         recorder does for Go operators; upstream's ansible-operator records none",
    ),
    (
        "PATCH events",
        "the same Event for a later failed run, its count raised",
    ),
    (
        "LIST pods",
        "`k8s_info` of Pods with a field selector (`status.phase=Running`), which only the API server \
         answers (upstream's cache passes such lists on too): one per try of the role's `until` loop, and \
         enka's run reaches the loop while kwok is still starting the Pods, so it tries more often",
    ),
    (
        "LIST ",
        "a kind that one owner kind's dependent watch followed alone, listed again into a store when reads \
         or a second owner kind's dependents came to it (the watch is shared: no second WATCH stays)",
    ),
    ("WATCH ", "the shared watch's new pass after such a list"),
    (
        "PATCH ",
        "a run upstream did not make, applying the role's objects again (kubernetes.core's client-side \
         apply sends what the API server's defaults made differ): enka's runs end in milliseconds, so \
         events arriving during the role's work (a Deployment's status, kwok readying Pods) each make one \
         more run, where upstream's runs of seconds absorb them",
    ),
    (
        "PUT ",
        "the status written at the start and at the end of each run, in runs upstream did not make: \
         enka's runs end in milliseconds, so events arriving during the role's work (a Deployment's \
         status, kwok readying Pods) each make one more run, where upstream's runs of seconds absorb them",
    ),
    (
        "GET ",
        "the reads of runs upstream did not make (enka's runs end in milliseconds, so events arriving \
         during the role's work each make one more run, where upstream's runs of seconds absorb them)",
    ),
];

/// Why enka sends `key` (`VERB resource`) more often than upstream.
fn why_more(key: &str) -> &'static str {
    MORE_THAN_UPSTREAM
        .iter()
        .find(|(known, _)| key == *known)
        .or_else(|| {
            MORE_THAN_UPSTREAM
                .iter()
                .find(|(known, _)| known.ends_with(' ') && key.starts_with(known))
        })
        .map_or("not explained yet", |(_, why)| why)
}

/// Two sides' requests by `VERB resource`, most frequent first, with why
/// enka sends more where it does.
pub fn side_by_side(
    title: &str,
    enka: &BTreeMap<String, f64>,
    upstream: Option<&BTreeMap<String, f64>>,
) -> String {
    let count = |side: Option<&BTreeMap<String, f64>>, key: &str| {
        side.map_or(0.0, |requests| requests.get(key).copied().unwrap_or(0.0))
    };
    let mut keys: Vec<&String> = enka
        .keys()
        .chain(upstream.into_iter().flat_map(BTreeMap::keys))
        .collect();
    keys.sort();
    keys.dedup();
    keys.sort_by(|a, b| {
        let total = |key: &str| count(Some(enka), key) + count(upstream, key);
        total(b).total_cmp(&total(a)).then(a.cmp(b))
    });
    let total = |side: Option<&BTreeMap<String, f64>>| side.map(|r| r.values().sum::<f64>());
    let mut md = format!(
        "\n**{title}**: enka {:.1}, upstream {}.\n\n| request | enka | upstream | why enka sends more |\n|---|---:|---:|---|\n",
        total(Some(enka)).unwrap_or_default(),
        total(upstream).map_or("not run".to_owned(), |n| format!("{n:.1}")),
    );
    for key in keys {
        let (ours, theirs) = (count(Some(enka), key), count(upstream, key));
        let why = match upstream {
            Some(_) if ours > theirs => why_more(key),
            _ => "",
        };
        let theirs = upstream.map_or("-".to_owned(), |_| format!("{theirs:.1}"));
        md.push_str(&format!("| `{key}` | {ours:.1} | {theirs} | {why} |\n"));
    }
    md
}
