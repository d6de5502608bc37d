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
    let base = crate::time::format_rfc3339(since.as_secs());
    format!(
        "{}.{:06}Z",
        base.trim_end_matches('Z'),
        since.subsec_micros()
    )
}

/// Parses `2006-01-02T15:04:05(.ffffff)Z` into seconds since the epoch.
fn parse_time(text: &str) -> Option<f64> {
    let (date, time) = text.trim_end_matches('Z').split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (h, min, s) = (t.next()??, t.next()??, t.next()??);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let fraction: f64 = format!("0.{frac}").parse().unwrap_or(0.0);
    Some((days * 86_400 + h * 3600 + min * 60 + s) as f64 + fraction)
}

fn lease_api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
        "leases",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// A won election; renew it with [`Leadership::keep`].
pub struct Leadership {
    api: Api<DynamicObject>,
    config: ElectionConfig,
}

enum Attempt {
    Won,
    HeldBy(String),
}

async fn try_acquire(
    api: &Api<DynamicObject>,
    config: &ElectionConfig,
) -> Result<Attempt, KubeError> {
    let now = SystemTime::now();
    let seconds = i64::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(15);
    match api.get_opt(&config.lease_name).await? {
        None => {
            let mut lease = DynamicObject::new(
                &config.lease_name,
                &ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
                    "leases",
                ),
            );
            lease.data = json!({"spec": {
                "holderIdentity": config.identity,
                "leaseDurationSeconds": seconds,
                "acquireTime": micro_time(now),
                "renewTime": micro_time(now),
                "leaseTransitions": 0,
            }});
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Won),
                Err(KubeError::Api(s)) if s.code == 409 => {
                    Ok(Attempt::HeldBy("someone else".into()))
                }
                Err(e) => Err(e),
            }
        }
        Some(mut lease) => {
            let spec = lease.data.get("spec").cloned().unwrap_or(Json::Null);
            let holder = spec
                .get("holderIdentity")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned();
            let renewed = spec
                .get("renewTime")
                .and_then(Json::as_str)
                .and_then(parse_time);
            let duration = spec
                .get("leaseDurationSeconds")
                .and_then(Json::as_i64)
                .unwrap_or(seconds) as f64;
            let now_secs = now
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            let expired = renewed.is_none_or(|r| r + duration < now_secs);
            if holder != config.identity && !holder.is_empty() && !expired {
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
            // The resourceVersion makes this a compare-and-swap.
            match api
                .replace(&config.lease_name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => Ok(Attempt::Won),
                Err(KubeError::Api(s)) if s.code == 409 => Ok(Attempt::HeldBy(holder)),
                Err(e) => Err(e),
            }
        }
    }
}

/// Waits until this replica holds the Lease.
pub async fn acquire(client: &Client, config: ElectionConfig) -> Leadership {
    let api = lease_api(client, &config.namespace);
    let mut reported = String::new();
    loop {
        match try_acquire(&api, &config).await {
            Ok(Attempt::Won) => {
                tracing::info!(lease = %config.lease_name, namespace = %config.namespace, identity = %config.identity, "acquired leadership");
                return Leadership { api, config };
            }
            Ok(Attempt::HeldBy(holder)) => {
                if holder != reported {
                    tracing::info!(lease = %config.lease_name, %holder, "waiting for leadership");
                    reported = holder;
                }
            }
            Err(err) => tracing::warn!(lease = %config.lease_name, "leader election: {err}"),
        }
        tokio::time::sleep(config.retry_period).await;
    }
}

impl Leadership {
    /// Renews the Lease every retry period; returns when leadership is lost
    /// (not renewed within the renew deadline, or taken by another replica).
    pub async fn keep(self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match try_acquire(&self.api, &self.config).await {
                Ok(Attempt::Won) => last_renewal = Instant::now(),
                Ok(Attempt::HeldBy(holder)) => {
                    tracing::error!(%holder, "leadership lost to another replica");
                    return;
                }
                Err(err) => tracing::warn!("could not renew the lease: {err}"),
            }
            if last_renewal.elapsed() > self.config.renew_deadline {
                tracing::error!(
                    "leadership lost: the lease was not renewed within {:?}",
                    self.config.renew_deadline
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_times_round_trip() {
        let at = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        let text = micro_time(at);
        assert_eq!(text, "2023-11-14T22:13:20.123456Z");
        let back = parse_time(&text).unwrap();
        assert!((back - 1_700_000_000.123_456).abs() < 1e-6);
        assert_eq!(parse_time("2000-03-01T00:00:00Z"), Some(951_868_800.0));
    }
}
