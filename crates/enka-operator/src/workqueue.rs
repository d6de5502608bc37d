//! A controller's work queue, with controller-runtime's semantics: a key is
//! queued once however often it is triggered, two workers never reconcile one
//! key at once (a trigger during a run queues one more run after it), at most
//! `concurrency` keys run together, and a requeue waits out its delay while a
//! trigger in the meantime runs the key at once.
//!
//! Why not kube-runtime's `Controller`: its scheduler puts every trigger, even
//! one due now, on a tokio-util `DelayQueue`, which rounds the deadline up to
//! the next millisecond of tokio's timer wheel; that cost 1–2 ms before each
//! reconcile where controller-runtime's workqueue hands the key over at once.
//! Here only a delayed requeue waits on a timer. Each run is its own task, so
//! runs of one controller use every core.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use futures::stream::{FuturesUnordered, Stream, StreamExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where a key is in the queue; a key in none of these is idle.
enum State {
    /// In the ready line, to run as soon as a worker is free.
    Ready,
    /// To become ready at this instant.
    Delayed(Instant),
    /// Being reconciled; `again`: when to run it once more after this run.
    Running { again: Option<Instant> },
}

/// What feeds a queue.
pub struct Sources<T, R, S> {
    /// Keys to reconcile now.
    pub triggers: T,
    /// Each item reconciles every key `all_keys` gives.
    pub reloads: R,
    /// Ends the queue: no run starts after it; running ones finish.
    pub shutdown: S,
}

/// Keys, their states and the two lines they wait in.
struct Queue<K> {
    states: HashMap<K, State>,
    ready: VecDeque<K>,
    /// Delayed keys by due time; an entry whose key has since moved is stale
    /// and skipped when it comes up.
    delayed: BinaryHeap<Reverse<(Instant, u64)>>,
    delayed_keys: HashMap<u64, K>,
    sequence: u64,
}

impl<K: Hash + Eq + Clone> Queue<K> {
    fn new() -> Self {
        Queue {
            states: HashMap::new(),
            ready: VecDeque::new(),
            delayed: BinaryHeap::new(),
            delayed_keys: HashMap::new(),
            sequence: 0,
        }
    }

    /// Runs `key` now: at once if it is idle or waiting out a delay, after
    /// its run if it is running.
    fn trigger(&mut self, key: K, now: Instant) {
        match self.states.get_mut(&key) {
            Some(State::Ready) => {}
            Some(State::Running { again }) => *again = Some(now),
            _ => self.place(key, now, now),
        }
    }

    fn place(&mut self, key: K, at: Instant, now: Instant) {
        if at <= now {
            self.states.insert(key.clone(), State::Ready);
            self.ready.push_back(key);
        } else {
            self.states.insert(key.clone(), State::Delayed(at));
            self.sequence += 1;
            self.delayed.push(Reverse((at, self.sequence)));
            self.delayed_keys.insert(self.sequence, key);
        }
    }

    /// Moves the delayed keys due by `now` to the ready line.
    fn promote(&mut self, now: Instant) {
        while let Some(Reverse((at, sequence))) = self.delayed.peek().copied() {
            if at > now {
                break;
            }
            self.delayed.pop();
            let Some(key) = self.delayed_keys.remove(&sequence) else {
                continue;
            };
            if matches!(self.states.get(&key), Some(State::Delayed(due)) if *due == at) {
                self.states.insert(key.clone(), State::Ready);
                self.ready.push_back(key);
            }
        }
    }

    /// The next ready key, marked running.
    fn take(&mut self) -> Option<K> {
        let key = self.ready.pop_front()?;
        self.states
            .insert(key.clone(), State::Running { again: None });
        Some(key)
    }

    /// Ends `key`'s run; it runs again at the earlier of a trigger during
    /// the run and the run's own requeue.
    fn finish(&mut self, key: K, requeue: Option<Duration>, now: Instant) {
        let again = match self.states.remove(&key) {
            Some(State::Running { again }) => again,
            _ => None,
        };
        let requeue = requeue.map(|after| now + after);
        let at = match (again, requeue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = at {
            self.place(key, at, now);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.delayed.peek().map(|Reverse((at, _))| *at)
    }
}

/// Runs `work` for each key as the queue releases it, until `shutdown`;
/// `work` returns when to run the key again (`None`: only on a trigger).
/// On shutdown, the runs under way finish before this returns.
pub async fn run<K, T, R, S, W, F>(
    sources: Sources<T, R, S>,
    all_keys: impl Fn() -> Vec<K>,
    concurrency: usize,
    mut work: W,
) where
    K: Hash + Eq + Clone + Unpin + Send + 'static,
    T: Stream<Item = K>,
    R: Stream<Item = ()>,
    S: Future<Output = ()>,
    W: FnMut(K) -> F,
    F: Future<Output = Option<Duration>> + Send + 'static,
{
    let Sources {
        triggers,
        reloads,
        shutdown,
    } = sources;
    let (mut triggers, mut reloads) = (std::pin::pin!(triggers), std::pin::pin!(reloads));
    let mut shutdown = std::pin::pin!(shutdown);
    let (mut triggers_open, mut reloads_open) = (true, true);
    let mut queue: Queue<K> = Queue::new();
    let mut running: FuturesUnordered<RunningKey<K>> = FuturesUnordered::new();
    let limit = if concurrency == 0 {
        usize::MAX
    } else {
        concurrency
    };
    loop {
        while running.len() < limit {
            let Some(key) = queue.take() else { break };
            running.push(RunningKey {
                handle: tokio::spawn(work(key.clone())),
                key: Some(key),
            });
        }
        let next_due = queue.next_due();
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some((key, requeue)) = running.next() => queue.finish(key, requeue, Instant::now()),
            trigger = triggers.next(), if triggers_open => match trigger {
                Some(key) => queue.trigger(key, Instant::now()),
                None => triggers_open = false,
            },
            reload = reloads.next(), if reloads_open => match reload {
                Some(()) => {
                    let now = Instant::now();
                    for key in all_keys() {
                        queue.trigger(key, now);
                    }
                }
                None => reloads_open = false,
            },
            () = sleep_until(next_due), if next_due.is_some() => queue.promote(Instant::now()),
        }
    }
    while running.next().await.is_some() {}
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A run's task and its key: yields the key and the run's requeue when the
/// task ends (a task that panicked is not requeued).
struct RunningKey<K> {
    handle: JoinHandle<Option<Duration>>,
    key: Option<K>,
}

impl<K: Unpin> Future for RunningKey<K> {
    type Output = (K, Option<Duration>);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let requeue = match std::pin::Pin::new(&mut self.handle).poll(cx) {
            std::task::Poll::Pending => return std::task::Poll::Pending,
            std::task::Poll::Ready(Ok(requeue)) => requeue,
            std::task::Poll::Ready(Err(err)) => {
                tracing::error!("a reconcile task ended abnormally: {err}");
                None
            }
        };
        match self.key.take() {
            Some(key) => std::task::Poll::Ready((key, requeue)),
            None => std::task::Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::sync::mpsc;

    /// What the runs did: each run's key, start and end (from the paused clock).
    type Log = Arc<Mutex<Vec<(&'static str, Instant, Instant)>>>;

    /// A queue over `&'static str` keys fed by the returned sender, whose runs
    /// take `run_for` and requeue as `requeue` says, logging into the log.
    fn start(
        concurrency: usize,
        run_for: Duration,
        requeue: fn(&str, usize) -> Option<Duration>,
    ) -> (
        mpsc::UnboundedSender<&'static str>,
        Log,
        tokio::sync::oneshot::Sender<()>,
        JoinHandle<()>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let log: Log = Arc::default();
        let runs = log.clone();
        let triggers =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|k| (k, rx)) });
        let handle = tokio::spawn(async move {
            let sources = Sources {
                triggers,
                reloads: futures::stream::pending(),
                shutdown: async move {
                    let _ = stop_rx.await;
                },
            };
            run(sources, Vec::new, concurrency, move |key: &'static str| {
                let runs = runs.clone();
                async move {
                    let start = Instant::now();
                    tokio::time::sleep(run_for).await;
                    let mut runs = runs.lock().unwrap();
                    runs.push((key, start, Instant::now()));
                    let count = runs.iter().filter(|(k, ..)| *k == key).count();
                    requeue(key, count)
                }
            })
            .await
        });
        (tx, log, stop_tx, handle)
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_runs_without_waiting_on_a_timer() {
        let began = Instant::now();
        let (tx, log, _stop, _queue) = start(1, Duration::ZERO, |_, _| None);
        tx.send("a").unwrap();
        settle().await;
        let runs = log.lock().unwrap().clone();
        assert_eq!(runs.len(), 1);
        // The clock is paused: any timer on the way would have moved it.
        assert_eq!(runs[0].1, began);
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_while_queued_or_running_make_one_more_run_never_an_overlap() {
        let (tx, log, _stop, _queue) = start(4, Duration::from_millis(10), |_, _| None);
        for _ in 0..5 {
            tx.send("a").unwrap();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Mid-run: three more triggers make one more run, after this one.
        for _ in 0..3 {
            tx.send("a").unwrap();
        }
        settle().await;
        let runs = log.lock().unwrap().clone();
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert!(runs[1].1 >= runs[0].2, "runs overlapped: {runs:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_concurrency_keys_run_together() {
        let (tx, log, _stop, _queue) = start(2, Duration::from_millis(10), |_, _| None);
        for key in ["a", "b", "c", "d", "e"] {
            tx.send(key).unwrap();
        }
        settle().await;
        let runs = log.lock().unwrap().clone();
        assert_eq!(runs.len(), 5);
        for (key, start, _) in &runs {
            let together = runs
                .iter()
                .filter(|(_, s, e)| s <= start && start < e)
                .count();
            assert!(
                together <= 2,
                "{key} started with {together} running: {runs:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_requeue_waits_its_delay_unless_a_trigger_comes_first() {
        // "a" asks to run again 100 ms after its first run; "b" too, but is
        // triggered 20 ms in.
        let (tx, log, _stop, _queue) = start(4, Duration::ZERO, |_, count| {
            (count == 1).then_some(Duration::from_millis(100))
        });
        let began = Instant::now();
        tx.send("a").unwrap();
        tx.send("b").unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send("b").unwrap();
        settle().await;
        let runs = log.lock().unwrap().clone();
        let starts = |key| -> Vec<Duration> {
            runs.iter()
                .filter(|(k, ..)| *k == key)
                .map(|(_, s, _)| *s - began)
                .collect()
        };
        assert_eq!(starts("a"), [Duration::ZERO, Duration::from_millis(100)]);
        // The trigger ran "b" at once; that second run asked for nothing more.
        assert_eq!(starts("b"), [Duration::ZERO, Duration::from_millis(20)]);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_lets_running_reconciles_finish_and_starts_none() {
        let (tx, log, stop, queue) = start(1, Duration::from_millis(10), |_, _| None);
        tx.send("a").unwrap();
        tx.send("b").unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        stop.send(()).unwrap();
        queue.await.unwrap();
        let runs = log.lock().unwrap().clone();
        assert_eq!(runs.iter().map(|(k, ..)| *k).collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_reconciles_every_key() {
        let log: Log = Arc::default();
        let runs = log.clone();
        let (reload_tx, reload_rx) = mpsc::unbounded_channel::<()>();
        let reloads = futures::stream::unfold(reload_rx, |mut rx| async move {
            rx.recv().await.map(|k| (k, rx))
        });
        tokio::spawn(run(
            Sources {
                triggers: futures::stream::pending(),
                reloads,
                shutdown: std::future::pending(),
            },
            || vec!["a", "b"],
            1,
            move |key: &'static str| {
                let runs = runs.clone();
                async move {
                    let now = Instant::now();
                    runs.lock().unwrap().push((key, now, now));
                    None
                }
            },
        ));
        reload_tx.send(()).unwrap();
        settle().await;
        let keys: Vec<_> = log.lock().unwrap().iter().map(|(k, ..)| *k).collect();
        assert_eq!(keys, ["a", "b"]);
    }
}
