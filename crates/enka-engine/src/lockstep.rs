//! How the hosts of a play on several hosts take turns. Ansible's linear
//! strategy: every host runs task N before any host runs task N+1. Its
//! free strategy: each host goes at its own pace, `forks` at a time.
//!
//! Each host walks the play in its own runner; before each task it
//! arrives here with the task's position (its path in the play's tree:
//! section, block, index, include iteration …, so tree order is
//! lexicographic order). Once no host is running, the hosts waiting at the
//! lowest position go, up to `forks` (or the task's `throttle`) at a time
//! in the play's host order, so hosts that included extra tasks run them
//! while the others wait at the next common task, as the strategy's no-op
//! padding does.

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Positions of tasks in a play, compared in tree order.
pub(crate) type Position = Vec<u32>;

/// How the hosts of a play take turns (the play's `strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Task by task, all hosts together (`linear`, and `debug`, which is
    /// linear with a debugger enka does not have).
    Linear,
    /// Each host at its own pace (`free`, and `host_pinned`, which only
    /// changes the order a full worker pool picks hosts in): `run_once`
    /// runs on every host and `any_errors_fatal` fails no other host, as
    /// Ansible's free strategy warns.
    Free,
}

impl Strategy {
    /// The strategy a play names, with Ansible's error for an unknown one
    /// (Mitogen's strategies are theirs with a faster connection).
    pub(crate) fn named(name: &str) -> Result<Self, String> {
        let short = name.rsplit('.').next().unwrap_or(name);
        match short.strip_prefix("mitogen_").unwrap_or(short) {
            "linear" | "debug" => Ok(Strategy::Linear),
            "free" | "host_pinned" => Ok(Strategy::Free),
            _ => Err(format!("Invalid play strategy specified: {name}")),
        }
    }
}

/// Whether a host may run its next task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// It may.
    Go,
    /// The play ended (`meta: end_play`).
    EndPlay,
    /// A host failed under `any_errors_fatal`: this one fails here too
    /// (into its block's `rescue` or `always`, as a failure of its own).
    Fatal,
}

/// The turn-taking of one batch of hosts.
pub(crate) struct Lockstep {
    inner: Mutex<Inner>,
    /// What `run_once` tasks left, by position: the first host of the
    /// batch runs the task, the others wait for what it left.
    shared: Mutex<std::collections::HashMap<Position, tokio::sync::watch::Sender<Option<Shared>>>>,
}

/// What a `run_once` task (or an action that bypasses the host loop, like
/// `add_host`) left: the variables it set, and whether it failed the run.
#[derive(Clone)]
pub(crate) struct Shared {
    /// Facts and the registered result, as set on the host that ran it.
    pub(crate) vars: Vec<(Arc<str>, enka_template::Var)>,
    /// The failure every host of the batch takes, when it failed.
    pub(crate) failure: Option<super::Failure>,
    /// It was `meta: clear_facts`, which clears every host's facts.
    pub(crate) cleared_facts: bool,
}

struct Inner {
    slots: Vec<Slot>,
    /// `meta: end_play` ran: every host stops at its next task.
    ended: bool,
    /// Per host: a failure under `any_errors_fatal` at this position (on
    /// another host) fails it at its next task, once.
    marked: Vec<Option<Position>>,
    /// Per host: the last position where a task of its own failed.
    failed_at: Vec<Option<Position>>,
    /// The task the running hosts run, and the first host (in the play's
    /// order) to run it.
    current: Option<Position>,
    leader: usize,
    /// How many hosts may run a task at once (`--forks`).
    forks: usize,
    strategy: Strategy,
    /// Per host: the task it was let run, until it arrives at its next one
    /// (a free play's `throttle` counts the hosts running each task).
    running_at: Vec<Option<Position>>,
    /// Hosts that failed out of the play.
    failed: Vec<usize>,
    /// Per host: parked after it could not be reached, and taken back by a
    /// `meta: clear_host_errors` since.
    readmitted: Vec<bool>,
    /// `max_fail_percentage` as a share, and the batch's size (hosts that
    /// failed in earlier plays count in it).
    max_fail: Option<(f64, usize)>,
    /// More than `max_fail` failed: the play ended for every host.
    broken: bool,
}

enum Slot {
    /// Running (or unwinding) until it arrives at its next task.
    Busy,
    /// Waiting to run the task at this position, at most `limit` hosts at
    /// once.
    Waiting(Position, usize, Option<oneshot::Sender<Turn>>),
    /// Could not be reached: out of the play unless a `meta:
    /// clear_host_errors` takes it back before the play ends.
    Parked(Option<oneshot::Sender<Turn>>),
    /// Finished the play.
    Done,
}

impl Lockstep {
    /// Turn-taking for `hosts` hosts, all running toward their first
    /// task, `forks` of them at once.
    pub(crate) fn new(hosts: usize, forks: usize, strategy: Strategy) -> Arc<Self> {
        Arc::new(Lockstep {
            inner: Mutex::new(Inner {
                slots: (0..hosts).map(|_| Slot::Busy).collect(),
                ended: false,
                marked: vec![None; hosts],
                failed_at: vec![None; hosts],
                current: None,
                leader: 0,
                forks: forks.max(1),
                strategy,
                running_at: vec![None; hosts],
                failed: Vec::new(),
                readmitted: vec![false; hosts],
                max_fail: None,
                broken: false,
            }),
            shared: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Whether `host` is the first host of the batch to run the task the
    /// hosts run now: the one that runs a `run_once` task (every host, in
    /// a free play).
    pub(crate) fn leads(&self, host: usize) -> bool {
        self.inner
            .lock()
            .is_ok_and(|inner| inner.strategy == Strategy::Free || inner.leader == host)
    }

    /// Records what the `run_once` task at `position` left.
    pub(crate) fn share(&self, position: &[u32], shared: Shared) {
        self.channel(position).send_replace(Some(shared));
    }

    /// What the `run_once` task at `position` left, once its host ran it.
    pub(crate) async fn shared(&self, position: &[u32]) -> Option<Shared> {
        let mut receiver = self.channel(position).subscribe();
        let shared = receiver.wait_for(Option::is_some).await.ok()?;
        shared.clone()
    }

    fn channel(&self, position: &[u32]) -> tokio::sync::watch::Sender<Option<Shared>> {
        match self.shared.lock() {
            Ok(mut map) => map
                .entry(position.to_vec())
                .or_insert_with(|| tokio::sync::watch::channel(None).0)
                .clone(),
            Err(_) => tokio::sync::watch::channel(None).0,
        }
    }

    /// Waits until host `host` may run the task at `position` (with at
    /// most `throttle` hosts at once, 0 for no limit of its own), or the
    /// play stops it.
    pub(crate) async fn arrive(&self, host: usize, position: Position, throttle: usize) -> Turn {
        let (sender, receiver) = oneshot::channel();
        let released_itself;
        {
            let Ok(mut inner) = self.inner.lock() else {
                return Turn::EndPlay;
            };
            if inner.ended {
                return Turn::EndPlay;
            }
            if inner.marked.get_mut(host).and_then(Option::take).is_some() {
                return Turn::Fatal;
            }
            if let Some(slot) = inner.slots.get_mut(host) {
                *slot = Slot::Waiting(position, throttle, Some(sender));
            }
            if let Some(at) = inner.running_at.get_mut(host) {
                *at = None;
            }
            inner.schedule();
            released_itself = matches!(inner.slots.get(host), Some(Slot::Busy));
        }
        let go = receiver.await.unwrap_or(Turn::EndPlay);
        // The host whose arrival released the others would run before
        // them: it lets them start first, in the play's order.
        if released_itself {
            tokio::task::yield_now().await;
        }
        go
    }

    /// Host `host` finished the play, or `failed` out of it.
    pub(crate) fn done(&self, host: usize, failed: bool) {
        if let Ok(mut inner) = self.inner.lock() {
            if let Some(slot) = inner.slots.get_mut(host) {
                *slot = Slot::Done;
            }
            if let Some(at) = inner.running_at.get_mut(host) {
                *at = None;
            }
            if failed {
                inner.failed.push(host);
            }
            inner.schedule();
        }
    }

    /// `max_fail_percentage`: once more than `share` of the batch's
    /// `batch_size` hosts failed out of the play, the play ends for all
    /// (the linear strategy's check after each task).
    pub(crate) fn limit_failures(&self, share: f64, batch_size: usize) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.max_fail = Some((share, batch_size));
            inner.schedule();
        }
    }

    /// Whether too many hosts failed (`max_fail_percentage`).
    pub(crate) fn broken(&self) -> bool {
        self.inner.lock().is_ok_and(|inner| inner.broken)
    }

    /// The hosts (by place in the batch) that failed out of the play so far.
    pub(crate) fn failed(&self) -> Vec<usize> {
        self.inner
            .lock()
            .map(|inner| inner.failed.clone())
            .unwrap_or_default()
    }

    /// Host `host` could not be reached: it waits, out of the play, where
    /// it is. `Go` when a `meta: clear_host_errors` took it back (once the
    /// hosts still in the play finished, as the linear strategy's task
    /// cursor picks up the hosts behind it last), else `EndPlay`.
    pub(crate) async fn park(&self, host: usize) -> Turn {
        let (sender, receiver) = oneshot::channel();
        {
            let Ok(mut inner) = self.inner.lock() else {
                return Turn::EndPlay;
            };
            if let Some(slot) = inner.slots.get_mut(host) {
                *slot = Slot::Parked(Some(sender));
            }
            inner.schedule();
        }
        receiver.await.unwrap_or(Turn::EndPlay)
    }

    /// `meta: clear_host_errors`: the hosts parked so far come back.
    pub(crate) fn clear_host_errors(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            let inner = &mut *inner;
            for (slot, readmitted) in inner.slots.iter().zip(inner.readmitted.iter_mut()) {
                if matches!(slot, Slot::Parked(_)) {
                    *readmitted = true;
                }
            }
        }
    }

    /// `meta: end_play`: the other hosts stop where they wait.
    pub(crate) fn end_play(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.ended = true;
        }
    }

    /// A task of `host`'s own failed at `position`: a mark another host's
    /// fatal failure of the same task left on it is void (Ansible marks
    /// only the hosts that did not fail the task themselves).
    pub(crate) fn task_failed(&self, host: usize, position: &[u32]) {
        if let Ok(mut inner) = self.inner.lock() {
            if let Some(at) = inner.failed_at.get_mut(host) {
                *at = Some(position.to_vec());
            }
            if let Some(mark) = inner.marked.get_mut(host)
                && mark.as_deref() == Some(position)
            {
                *mark = None;
            }
        }
    }

    /// `host` failed the task at `position` under `any_errors_fatal`: every
    /// other host still in the play that did not fail that task itself
    /// fails at its next task (Ansible's mark_host_failed: a block's
    /// `rescue` then still runs). A waiting host fails now.
    pub(crate) fn fail_all(&self, host: usize, position: &[u32]) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let inner = &mut *inner;
        if inner.strategy == Strategy::Free {
            return;
        }
        for other in 0..inner.slots.len() {
            if other == host || inner.failed_at[other].as_deref() == Some(position) {
                continue;
            }
            match &mut inner.slots[other] {
                Slot::Done | Slot::Parked(_) => {}
                // A host still waiting for its turn at the same task (forks)
                // runs it first: the strategy marks hosts after the round.
                Slot::Busy => inner.marked[other] = Some(position.to_vec()),
                Slot::Waiting(at, _, _) if at.as_slice() == position => {
                    inner.marked[other] = Some(position.to_vec());
                }
                Slot::Waiting(_, _, sender) => {
                    if let Some(sender) = sender.take() {
                        let _ = sender.send(Turn::Fatal);
                    }
                    inner.slots[other] = Slot::Busy;
                }
            }
        }
        inner.schedule();
    }
}

impl Inner {
    /// Once a task's round is over: whether more than `max_fail` of the
    /// batch failed, which ends the play.
    fn check_failures(&mut self) {
        let Some((share, size)) = self.max_fail else {
            return;
        };
        // The round of the current task is over when no host runs it and
        // none still waits for its turn at it (forks).
        let current = self.current.as_ref();
        let round_over = self.slots.iter().all(|slot| match slot {
            Slot::Busy => false,
            Slot::Waiting(position, _, _) => Some(position) != current,
            Slot::Parked(_) | Slot::Done => true,
        });
        if self.broken || !round_over {
            return;
        }
        if self.failed.len() as f64 / size.max(1) as f64 > share {
            self.broken = true;
            self.ended = true;
        }
    }

    fn schedule(&mut self) {
        self.check_failures();
        if self.ended {
            for slot in &mut self.slots {
                if let Slot::Waiting(_, _, sender) | Slot::Parked(sender) = slot {
                    if let Some(sender) = sender.take() {
                        let _ = sender.send(Turn::EndPlay);
                    }
                    *slot = Slot::Busy;
                }
            }
            return;
        }
        // Once no host is running or waiting, parked ones come back if a
        // clear_host_errors took them back, else leave the play.
        if self
            .slots
            .iter()
            .all(|s| matches!(s, Slot::Done | Slot::Parked(_)))
        {
            for (slot, readmitted) in self.slots.iter_mut().zip(self.readmitted.iter_mut()) {
                if let Slot::Parked(sender) = slot {
                    let turn = if *readmitted { Turn::Go } else { Turn::EndPlay };
                    if let Some(sender) = sender.take() {
                        let _ = sender.send(turn);
                    }
                    *readmitted = false;
                    *slot = Slot::Busy;
                }
            }
        }
        let busy = self
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Busy))
            .count();
        if self.strategy == Strategy::Free {
            self.schedule_free(busy);
            return;
        }
        if busy == 0 {
            let next = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s {
                    Slot::Waiting(position, _, _) => Some((position, i)),
                    _ => None,
                })
                .min();
            // The first host let run a task leads it, even when `forks`
            // lets the others run it in later rounds.
            if let Some((position, leader)) = next
                && self.current.as_ref() != Some(position)
            {
                self.current = Some(position.clone());
                self.leader = leader;
            }
        }
        let Some(current) = self.current.clone() else {
            return;
        };
        let mut running = busy;
        for slot in &mut self.slots {
            let Slot::Waiting(position, throttle, sender) = slot else {
                continue;
            };
            let limit = match *throttle {
                0 => self.forks,
                n => n.min(self.forks),
            };
            if *position != current || running >= limit {
                continue;
            }
            if let Some(sender) = sender.take() {
                let _ = sender.send(Turn::Go);
            }
            *slot = Slot::Busy;
            running += 1;
        }
    }

    /// A free play: any waiting host goes, in the play's host order, while
    /// fewer than `forks` run and fewer than its task's `throttle` run that
    /// task.
    fn schedule_free(&mut self, busy: usize) {
        let mut running = busy;
        for host in 0..self.slots.len() {
            if running >= self.forks {
                break;
            }
            let Slot::Waiting(position, throttle, _) = &self.slots[host] else {
                continue;
            };
            if *throttle > 0 {
                let same = self
                    .running_at
                    .iter()
                    .filter(|at| at.as_ref() == Some(position))
                    .count();
                if same >= *throttle {
                    continue;
                }
            }
            let position = position.clone();
            if let Slot::Waiting(_, _, sender) = &mut self.slots[host]
                && let Some(sender) = sender.take()
            {
                let _ = sender.send(Turn::Go);
            }
            self.slots[host] = Slot::Busy;
            self.running_at[host] = Some(position);
            running += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hosts_take_turns_in_task_order() {
        let lockstep = Lockstep::new(2, 1, Strategy::Linear);
        let log = Arc::new(Mutex::new(Vec::new()));
        // Host 0 runs tasks [0] [1,0] [1,1] [2] (it included two tasks at
        // [1]); host 1 runs [0] [1] [2].
        let plans: [Vec<Position>; 2] = [
            vec![vec![0], vec![1], vec![1, 0], vec![1, 1], vec![2]],
            vec![vec![0], vec![1], vec![2]],
        ];
        let runs = plans.into_iter().enumerate().map(|(host, plan)| {
            let lockstep = lockstep.clone();
            let log = log.clone();
            async move {
                for position in plan {
                    assert_eq!(lockstep.arrive(host, position.clone(), 0).await, Turn::Go);
                    log.lock().unwrap().push((host, position));
                    tokio::task::yield_now().await;
                }
                lockstep.done(host, false);
            }
        });
        futures::future::join_all(runs).await;
        let log = log.lock().unwrap().clone();
        let expected: Vec<(usize, Position)> = vec![
            (0, vec![0]),
            (1, vec![0]),
            (0, vec![1]),
            (1, vec![1]),
            (0, vec![1, 0]),
            (0, vec![1, 1]),
            (0, vec![2]),
            (1, vec![2]),
        ];
        assert_eq!(log, expected);
    }

    #[tokio::test]
    async fn forks_and_throttle_bound_the_hosts_running_a_task() {
        let lockstep = Lockstep::new(4, 3, Strategy::Linear);
        let running = Arc::new(Mutex::new((0usize, 0usize)));
        let runs = (0..4).map(|host| {
            let lockstep = lockstep.clone();
            let running = running.clone();
            async move {
                for (position, throttle) in [(vec![0], 0), (vec![1], 2)] {
                    assert_eq!(
                        lockstep.arrive(host, position.clone(), throttle).await,
                        Turn::Go
                    );
                    let limit = if throttle == 0 { 3 } else { throttle };
                    {
                        let mut r = running.lock().unwrap();
                        r.0 += 1;
                        r.1 = r.1.max(r.0);
                        assert!(r.0 <= limit, "{} hosts ran {position:?}", r.0);
                    }
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                    running.lock().unwrap().0 -= 1;
                }
                lockstep.done(host, false);
            }
        });
        futures::future::join_all(runs).await;
        assert_eq!(running.lock().unwrap().1, 3, "hosts ran in parallel");
    }

    #[tokio::test]
    async fn in_a_free_play_a_slow_host_holds_no_other_back() {
        let lockstep = Lockstep::new(2, 2, Strategy::Free);
        let (finished, slow_may_go) = tokio::sync::oneshot::channel::<()>();
        let slow = {
            let lockstep = lockstep.clone();
            async move {
                assert_eq!(lockstep.arrive(0, vec![0], 0).await, Turn::Go);
                // Runs its first task until the other host finished the play.
                let _ = slow_may_go.await;
                assert_eq!(lockstep.arrive(0, vec![1], 0).await, Turn::Go);
                lockstep.done(0, false);
            }
        };
        let fast = {
            let lockstep = lockstep.clone();
            async move {
                for position in [vec![0], vec![1], vec![2]] {
                    assert_eq!(lockstep.arrive(1, position, 0).await, Turn::Go);
                }
                lockstep.done(1, false);
                let _ = finished.send(());
            }
        };
        let both = futures::future::join(slow, fast);
        tokio::time::timeout(std::time::Duration::from_secs(5), both)
            .await
            .expect("the fast host finished while the slow one ran its first task");
        assert!(lockstep.leads(1), "every host runs a run_once task itself");
    }

    #[tokio::test]
    async fn in_a_free_play_throttle_bounds_the_hosts_on_one_task() {
        let lockstep = Lockstep::new(3, 5, Strategy::Free);
        let running = Arc::new(Mutex::new((0usize, 0usize)));
        let runs = (0..3).map(|host| {
            let lockstep = lockstep.clone();
            let running = running.clone();
            async move {
                assert_eq!(lockstep.arrive(host, vec![0], 1).await, Turn::Go);
                {
                    let mut r = running.lock().unwrap();
                    r.0 += 1;
                    r.1 = r.1.max(r.0);
                }
                tokio::task::yield_now().await;
                running.lock().unwrap().0 -= 1;
                lockstep.done(host, false);
            }
        });
        futures::future::join_all(runs).await;
        assert_eq!(running.lock().unwrap().1, 1, "throttle: 1 held");
    }

    #[test]
    fn strategies_by_name() {
        for (name, want) in [
            ("linear", Strategy::Linear),
            ("ansible.builtin.free", Strategy::Free),
            ("host_pinned", Strategy::Free),
            ("debug", Strategy::Linear),
            ("mitogen_linear", Strategy::Linear),
        ] {
            assert_eq!(Strategy::named(name), Ok(want), "{name}");
        }
        assert_eq!(
            Strategy::named("nope"),
            Err("Invalid play strategy specified: nope".to_owned())
        );
    }

    #[tokio::test]
    async fn end_play_stops_the_waiting_hosts() {
        let lockstep = Lockstep::new(2, 1, Strategy::Linear);
        let first = {
            let lockstep = lockstep.clone();
            async move {
                assert_eq!(lockstep.arrive(0, vec![0], 0).await, Turn::Go);
                lockstep.end_play();
                lockstep.done(0, false);
            }
        };
        let second = {
            let lockstep = lockstep.clone();
            async move {
                let ran = lockstep.arrive(1, vec![0], 0).await;
                lockstep.done(1, false);
                ran
            }
        };
        let ((), ran) = futures::join!(first, second);
        assert_eq!(ran, Turn::EndPlay);
    }

    #[tokio::test]
    async fn a_fatal_failure_fails_each_other_host_once_at_its_next_task() {
        let lockstep = Lockstep::new(3, 5, Strategy::Linear);
        // All three run task [0]: host 0 fails it under any_errors_fatal,
        // host 2 fails it too (on its own), host 1 succeeds.
        let arrive_all = |position: Position| {
            futures::future::join_all((0..3).map(|host| {
                let lockstep = lockstep.clone();
                let position = position.clone();
                async move { lockstep.arrive(host, position, 0).await }
            }))
        };
        assert_eq!(arrive_all(vec![0]).await, vec![Turn::Go; 3]);
        lockstep.task_failed(0, &[0]);
        lockstep.fail_all(0, &[0]);
        lockstep.task_failed(2, &[0]);
        // Host 1 fails at its next task, once: then all three go on to
        // their rescue at [2].
        assert_eq!(lockstep.arrive(1, vec![1], 0).await, Turn::Fatal);
        assert_eq!(arrive_all(vec![2]).await, vec![Turn::Go; 3]);
    }

    #[tokio::test]
    async fn an_unreachable_host_comes_back_only_after_clear_host_errors() {
        let lockstep = Lockstep::new(2, 5, Strategy::Linear);
        let arrive = |host: usize, position: Position| {
            let lockstep = lockstep.clone();
            async move { lockstep.arrive(host, position, 0).await }
        };
        // Both run [0]; host 1 is unreachable there and parks.
        let (a, b) = futures::join!(arrive(0, vec![0]), arrive(1, vec![0]));
        assert_eq!((a, b), (Turn::Go, Turn::Go));
        let parked = {
            let lockstep = lockstep.clone();
            tokio::spawn(async move { lockstep.park(1).await })
        };
        tokio::task::yield_now().await;
        // Host 0 goes on alone, clears host errors at [1], finishes [2].
        assert_eq!(arrive(0, vec![1]).await, Turn::Go);
        lockstep.clear_host_errors();
        assert_eq!(arrive(0, vec![2]).await, Turn::Go);
        assert!(!parked.is_finished(), "back only once host 0 is done");
        lockstep.done(0, false);
        assert_eq!(parked.await.unwrap(), Turn::Go);
        // Parked again without a clear: it leaves when the play ends.
        assert_eq!(arrive(1, vec![1]).await, Turn::Go);
        assert_eq!(lockstep.park(1).await, Turn::EndPlay);
    }
}
