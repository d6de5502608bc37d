//! Writing a Kubernetes Event the way client-go's recorder does: a repeat
//! raises the existing Event's `count` instead of adding another object.

use serde_json::{Value as Json, json};

use super::{Cluster, Error, PatchType, Resource};

/// Which call of [`record`] failed, for the caller's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Get,
    Update,
    Create,
}

impl Step {
    /// What was being done, as in "failed to get the event".
    pub fn action(self) -> &'static str {
        match self {
            Step::Get => "get the event",
            Step::Update => "update the event",
            Step::Create => "create the event",
        }
    }
}

/// Writes the Event `name` in `namespace`: when it exists, one more `count`,
/// `now` as `lastTimestamp` and `message`; otherwise `new_event()`. Returns
/// the Event as stored.
pub async fn record(
    cluster: &dyn Cluster,
    events: &Resource,
    namespace: &str,
    name: &str,
    message: Option<&str>,
    now: &str,
    new_event: impl FnOnce() -> Json,
) -> Result<Json, (Step, Error)> {
    let existing = cluster
        .get(events, Some(namespace), name)
        .await
        .map_err(|e| (Step::Get, e))?;
    match existing {
        Some(event) => {
            let count = event.get("count").and_then(Json::as_i64).unwrap_or(1) + 1;
            let patch = json!({"count": count, "lastTimestamp": now, "message": message});
            cluster
                .patch(
                    events,
                    Some(namespace),
                    name,
                    &patch,
                    &PatchType::Merge,
                    None,
                )
                .await
                .map_err(|e| (Step::Update, e))
        }
        None => cluster
            .create(events, Some(namespace), &new_event())
            .await
            .map_err(|e| (Step::Create, e)),
    }
}
