//! Lease-based leader election (coordination.k8s.io/v1), as
//! controller-runtime does it: acquire a Lease when it is free or expired,
//! renew it while running, and stop when it cannot be renewed in time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, Error as KubeError};
use serde_json::{Value as Json, json};

/// How the election runs.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader may fail to renew before it gives up.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
    /// Labels the Lease carries (a shard Lease names its ring).
    pub labels: Vec<(String, String)>,
}

/// A unique identity for this replica: host name and a random suffix.
pub fn identity() -> String {
    use rand::Rng;
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "enka".to_owned());
    let suffix: u32 = rand::rng().random();
    format!("{host}_{suffix:08x}")
}

fn micro_time(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let base = enka_template::time::format_rfc3339(since.as_secs());
    format!(
        "{}.{:06}Z",
        base.trim_end_matches('Z'),
        since.subsec_micros()
    )
}

fn lease_api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &Elector::lease_resource())
}

/// A won election; renew it with [`Leadership::keep`].
pub struct Leadership {
    elector: Elector,
}

enum Attempt {
    Won,
    HeldBy(String),
}

/// The Lease record as last seen, and when this replica first saw it.
///
/// Expiry is judged as client-go judges it: a record another replica holds
/// is free once this replica has seen it unchanged for its
/// `leaseDurationSeconds` on its own monotonic clock. The record's
/// `renewTime` is never compared with the local wall clock, which may be
/// skewed against the holder's.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    holder: String,
    renew_time: String,
    resource_version: Option<String>,
    duration: Duration,
    since: Instant,
}

impl Observed {
    fn same_record(&self, other: &Observed) -> bool {
        self.holder == other.holder
            && self.renew_time == other.renew_time
            && self.resource_version == other.resource_version
    }
}

/// Remembers `seen` (keeping the first time it was seen if the record did
/// not change) and says whether this replica may take the Lease.
fn may_take(observed: &mut Option<Observed>, seen: Observed, identity: &str, now: Instant) -> bool {
    match observed {
        Some(known) if known.same_record(&seen) => {}
        _ => *observed = Some(seen),
    }
    let Some(known) = observed else {
        return true;
    };
    known.holder.is_empty()
        || known.holder == identity
        || now.saturating_duration_since(known.since) >= known.duration
}

struct Elector {
    api: Api<DynamicObject>,
    config: ElectionConfig,
    observed: Option<Observed>,
}

impl ElectionConfig {
    /// client-go's checks: a leader must give up (renew deadline) before
    /// any other replica may take its Lease (lease duration), and must get
    /// more than one try at renewing.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        Ok(())
    }
}

impl Elector {
    fn label(&self, lease: &mut DynamicObject) {
        if self.config.labels.is_empty() {
            return;
        }
        let labels = lease.metadata.labels.get_or_insert_with(Default::default);
        for (key, value) in &self.config.labels {
            labels.insert(key.clone(), value.clone());
        }
    }

    /// Gives the Lease up (an empty holder), so that it is free at once:
    /// a shard's objects move to other shards without waiting for it to
    /// expire. Only a Lease this replica still holds is changed.
    async fn release(&mut self) -> Result<(), KubeError> {
        let config = &self.config;
        let Some(mut lease) = self.api.get_opt(&config.lease_name).await? else {
            return Ok(());
        };
        let holder = lease
            .data
            .pointer("/spec/holderIdentity")
            .and_then(Json::as_str)
            .unwrap_or_default();
        if holder != config.identity {
            return Ok(());
        }
        let now = micro_time(SystemTime::now());
        lease.data["spec"]["holderIdentity"] = Json::String(String::new());
        lease.data["spec"]["leaseDurationSeconds"] = json!(1);
        lease.data["spec"]["renewTime"] = Json::String(now.clone());
        lease.data["spec"]["acquireTime"] = Json::String(now);
        self.api
            .replace(&config.lease_name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }

    fn lease_resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
            "leases",
        )
    }

    async fn try_acquire(&mut self) -> Result<Attempt, KubeError> {
        let config = &self.config;
        let now = SystemTime::now();
        let seconds = i64::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(15);
        let Some(mut lease) = self.api.get_opt(&config.lease_name).await? else {
            let mut lease = DynamicObject::new(&config.lease_name, &Self::lease_resource());
            self.label(&mut lease);
            lease.data = json!({"spec": {
                "holderIdentity": config.identity,
                "leaseDurationSeconds": seconds,
                "acquireTime": micro_time(now),
                "renewTime": micro_time(now),
                "leaseTransitions": 0,
            }});
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Won),
                Err(KubeError::Api(s)) if s.code == 409 => {
                    Ok(Attempt::HeldBy("someone else".into()))
                }
                Err(e) => Err(e),
            };
        };
        let spec = lease.data.get("spec").cloned().unwrap_or(Json::Null);
        let text = |key: &str| {
            spec.get(key)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let holder = text("holderIdentity");
        let duration = spec
            .get("leaseDurationSeconds")
            .and_then(Json::as_i64)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(config.lease_duration, Duration::from_secs);
        let seen = Observed {
            holder: holder.clone(),
            renew_time: text("renewTime"),
            resource_version: lease.metadata.resource_version.clone(),
            duration,
            since: Instant::now(),
        };
        if !may_take(&mut self.observed, seen, &config.identity, Instant::now()) {
            return Ok(Attempt::HeldBy(holder));
        }
        let transitions = spec
            .get("leaseTransitions")
            .and_then(Json::as_i64)
            .unwrap_or(0);
        let mut new_spec = json!({
            "holderIdentity": config.identity,
            "leaseDurationSeconds": seconds,
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
            "acquireTime": spec.get("acquireTime").cloned().unwrap_or_else(|| Json::String(micro_time(now))),
        });
        if holder != config.identity {
            new_spec["acquireTime"] = Json::String(micro_time(now));
            new_spec["leaseTransitions"] = json!(transitions + 1);
        }
        lease.data["spec"] = new_spec;
        self.label(&mut lease);
        // The resourceVersion makes this a compare-and-swap.
        match self
            .api
            .replace(&config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Attempt::Won),
            Err(KubeError::Api(s)) if s.code == 409 => Ok(Attempt::HeldBy(holder)),
            Err(e) => Err(e),
        }
    }
}

/// Waits until this replica holds the Lease. Each attempt is bounded by
/// the renew deadline, so a stalled API server delays but never wedges it.
pub async fn acquire(client: &Client, config: ElectionConfig) -> Leadership {
    let mut elector = Elector {
        api: lease_api(client, &config.namespace),
        config,
        observed: None,
    };
    let mut reported = String::new();
    loop {
        let config = elector.config.clone();
        match tokio::time::timeout(config.renew_deadline, elector.try_acquire()).await {
            Ok(Ok(Attempt::Won)) => {
                tracing::info!(lease = %config.lease_name, namespace = %config.namespace, identity = %config.identity, "acquired leadership");
                return Leadership { elector };
            }
            Ok(Ok(Attempt::HeldBy(holder))) => {
                if holder != reported {
                    tracing::info!(lease = %config.lease_name, %holder, "waiting for leadership");
                    reported = holder;
                }
            }
            Ok(Err(err)) => tracing::warn!(lease = %config.lease_name, "leader election: {err}"),
            Err(_) => {
                tracing::warn!(lease = %config.lease_name, "leader election: the API server did not answer within {:?}", config.renew_deadline)
            }
        }
        tokio::time::sleep(config.retry_period).await;
    }
}

impl Leadership {
    /// A handle that can give the Lease up after [`Leadership::keep`] has
    /// taken this leadership.
    pub fn releaser(&self) -> Releaser {
        Releaser {
            api: self.elector.api.clone(),
            config: self.elector.config.clone(),
        }
    }

    /// Renews the Lease every retry period; returns when leadership is lost:
    /// taken by another replica, or not renewed within the renew deadline.
    /// A renewal counts from when its request was sent (before the API
    /// server wrote it), and a request still pending at the deadline is
    /// abandoned, so the leader stops before another replica can have seen
    /// its Lease expire (renew deadline < lease duration).
    pub async fn keep(mut self) {
        let deadline = self.elector.config.renew_deadline;
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.elector.config.retry_period).await;
            let left = deadline.saturating_sub(last_renewal.elapsed());
            let sent = Instant::now();
            match tokio::time::timeout(left, self.elector.try_acquire()).await {
                Ok(Ok(Attempt::Won)) => last_renewal = sent,
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    tracing::error!(%holder, "leadership lost to another replica");
                    return;
                }
                Ok(Err(err)) => tracing::warn!("could not renew the lease: {err}"),
                Err(_) => {
                    tracing::warn!("could not renew the lease: the API server did not answer")
                }
            }
            if last_renewal.elapsed() >= deadline {
                tracing::error!("leadership lost: the lease was not renewed within {deadline:?}");
                return;
            }
        }
    }
}

/// Gives a held Lease up on a graceful stop.
pub struct Releaser {
    api: Api<DynamicObject>,
    config: ElectionConfig,
}

impl Releaser {
    /// Empties the Lease's holder if this replica still holds it, within
    /// the renew deadline.
    pub async fn release(self) {
        let deadline = self.config.renew_deadline;
        let lease = self.config.lease_name.clone();
        let mut elector = Elector {
            api: self.api,
            config: self.config,
            observed: None,
        };
        match tokio::time::timeout(deadline, elector.release()).await {
            Ok(Ok(())) => tracing::info!(%lease, "released the lease"),
            Ok(Err(err)) => tracing::warn!(%lease, "could not release the lease: {err}"),
            Err(_) => {
                tracing::warn!(%lease, "could not release the lease: the API server did not answer")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_times_are_rfc3339_with_microseconds() {
        let at = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        let text = micro_time(at);
        assert_eq!(text, "2023-11-14T22:13:20.123456Z");
        assert_eq!(
            micro_time(UNIX_EPOCH + Duration::from_secs(951_868_800)),
            "2000-03-01T00:00:00.000000Z"
        );
    }

    fn seen(holder: &str, renew_time: &str, since: Instant) -> Observed {
        Observed {
            holder: holder.into(),
            renew_time: renew_time.into(),
            resource_version: Some("1".into()),
            duration: Duration::from_secs(15),
            since,
        }
    }

    #[test]
    fn a_lease_expires_on_the_local_clock_not_the_holders_timestamp() {
        let start = Instant::now();
        let mut observed = None;
        // Renewed "an hour ago" by a holder whose clock is behind ours:
        // comparing wall clocks would take it now.
        let old = seen("other", "2000-01-01T00:00:00.000000Z", start);
        assert!(!may_take(&mut observed, old.clone(), "me", start));
        assert!(!may_take(
            &mut observed,
            old.clone(),
            "me",
            start + Duration::from_secs(14)
        ));
        assert!(may_take(
            &mut observed,
            old,
            "me",
            start + Duration::from_secs(15)
        ));
        // A renewal (a new record) starts the wait again.
        let later = start + Duration::from_secs(16);
        let renewed = seen("other", "2000-01-01T00:00:20.000000Z", later);
        assert!(!may_take(&mut observed, renewed, "me", later));
        // Our own or an empty holder may always be (re)written.
        assert!(may_take(&mut None, seen("me", "x", start), "me", start));
        assert!(may_take(&mut None, seen("", "x", start), "me", start));
    }

    #[test]
    fn timings_are_checked_as_client_go_checks_them() {
        let config = |lease: u64, renew: u64, retry: u64| ElectionConfig {
            lease_name: "l".into(),
            namespace: "n".into(),
            identity: "i".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
            labels: Vec::new(),
        };
        assert!(config(15, 10, 2).validate().is_ok());
        assert!(
            config(10, 10, 2)
                .validate()
                .unwrap_err()
                .contains("leaseDuration")
        );
        assert!(
            config(15, 2, 2)
                .validate()
                .unwrap_err()
                .contains("renewDeadline")
        );
    }
}
