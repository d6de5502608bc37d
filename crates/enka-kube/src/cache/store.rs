//! A watch's store, and whether its first list is in, for any number of
//! waiters.
//!
//! Why not kube's `Store::wait_until_ready`: it waits on a futures oneshot,
//! which keeps one waker, that of the task that polled it last. With several
//! reconciles waiting for the first list, only the last to poll is woken;
//! and a `now_or_never` readiness check swaps in a no-op waker. A
//! controller's first run could then wait for good (seen in the leader
//! failover test: one of ten objects never reconciled by the new leader).
//! A tokio watch channel wakes every waiter and can be read without waiting.

use std::sync::Arc;

use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use crate::object::{WatchedKind, WatchedObject};

/// Fills a store from a watch's events; the one place the store changes.
pub struct StoreWriter {
    writer: Writer<WatchedObject>,
    listed: watch::Sender<bool>,
}

/// Reads a store; cheap to clone.
#[derive(Clone)]
pub struct StoreReader {
    store: Store<WatchedObject>,
    listed: watch::Receiver<bool>,
}

/// The writer went away before the first list was in.
#[derive(Debug, thiserror::Error)]
#[error("the watch ended before its first list was in")]
pub struct WatchEnded;

impl StoreWriter {
    pub fn new(kind: WatchedKind) -> Self {
        StoreWriter {
            writer: Writer::new(kind),
            listed: watch::channel(false).0,
        }
    }

    pub fn as_reader(&self) -> StoreReader {
        StoreReader {
            store: self.writer.as_reader(),
            listed: self.listed.subscribe(),
        }
    }

    /// Applies one event; the end of the first list makes the store ready,
    /// after its objects are in.
    pub fn apply(&mut self, event: &Event<WatchedObject>) {
        self.writer.apply_watcher_event(event);
        if matches!(event, Event::InitDone) {
            self.listed.send_replace(true);
        }
    }
}

impl StoreReader {
    /// Whether the first list is in, without waiting.
    pub fn is_ready(&self) -> bool {
        *self.listed.borrow()
    }

    /// Waits for the first list.
    pub async fn wait_until_ready(&self) -> Result<(), WatchEnded> {
        let mut listed = self.listed.clone();
        listed
            .wait_for(|listed| *listed)
            .await
            .map(|_| ())
            .map_err(|_| WatchEnded)
    }

    pub fn get(&self, key: &ObjectRef<WatchedObject>) -> Option<Arc<WatchedObject>> {
        self.store.get(key)
    }

    pub fn state(&self) -> Vec<Arc<WatchedObject>> {
        self.store.state()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;
    use std::time::Duration;

    fn kind() -> WatchedKind {
        WatchedKind::from(ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Hikawa".into(),
            plural: "hikawas".into(),
        })
    }

    /// Many tasks wait for the first list while the readiness is checked in
    /// between: every one of them is woken when it is in.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiter_wakes_when_the_first_list_is_in() {
        let mut writer = StoreWriter::new(kind());
        let reader = writer.as_reader();
        let waiters: Vec<_> = (0..16)
            .map(|_| {
                let reader = reader.clone();
                tokio::spawn(async move { reader.wait_until_ready().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!reader.is_ready());
        writer.apply(&Event::Init);
        writer.apply(&Event::InitDone);
        assert!(reader.is_ready());
        for waiter in waiters {
            let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await;
            assert!(matches!(woken, Ok(Ok(Ok(())))), "a waiter was never woken");
        }
    }

    #[tokio::test]
    async fn a_writer_gone_before_the_list_ends_the_wait() {
        let writer = StoreWriter::new(kind());
        let reader = writer.as_reader();
        drop(writer);
        assert!(reader.wait_until_ready().await.is_err());
    }
}
