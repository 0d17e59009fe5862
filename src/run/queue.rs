//! The run queue of one relay session: FIFO, one run at a time, a bounded number waiting, and
//! runs that waited too long cancelled (the bounds are the tenant's `auth::QueueSettings`). A
//! run can take its place in line before it can start (`reserve`, then `mark_ready`), so the
//! order is the order runs were admitted even when preparing one takes longer than preparing
//! the next.

use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Waiting {
    run_id: String,
    since_ms: u64,
    /// False while its capsule is being stored: a run not ready holds up the ones behind it.
    ready: bool,
}

/// Where a new run was put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Queued at the back.
    Queued,
    /// `max` runs are already waiting: answer 429.
    Full { max: u32 },
}

/// What the queue did when asked to move on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// The run that now holds the executor, if one was started.
    pub started: Option<String>,
    /// Runs dropped for waiting longer than the limit.
    pub expired: Vec<String>,
}

/// Where a run was when it was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    Waiting,
    Running,
    Absent,
}

#[derive(Debug, Clone)]
pub struct RunQueue {
    waiting: VecDeque<Waiting>,
    running: Option<String>,
    max_queued: u32,
    max_wait_ms: u64,
}

impl RunQueue {
    pub fn new(max_queued: u32, max_wait_ms: u64) -> Self {
        RunQueue { waiting: VecDeque::new(), running: None, max_queued, max_wait_ms }
    }

    /// New bounds: the runs in line keep their places.
    pub fn set_limits(&mut self, max_queued: u32, max_wait_ms: u64) {
        (self.max_queued, self.max_wait_ms) = (max_queued, max_wait_ms);
    }

    /// Adds a run at the back, unless `max_queued` runs already wait. It keeps its place but
    /// may not start before `mark_ready`.
    pub fn reserve(&mut self, run_id: &str, now_ms: u64) -> Admission {
        if let Some(max) = self.full() {
            return Admission::Full { max };
        }
        self.waiting.push_back(Waiting { run_id: run_id.to_owned(), since_ms: now_ms, ready: false });
        Admission::Queued
    }

    /// `Some(max)` when `max` runs already wait: a run reserved now is refused.
    pub fn full(&self) -> Option<u32> {
        (self.waiting.len() >= self.max_queued as usize).then_some(self.max_queued)
    }

    /// A reserved run may now start when its turn comes.
    pub fn mark_ready(&mut self, run_id: &str) {
        if let Some(waiting) = self.waiting.iter_mut().find(|w| w.run_id == run_id) {
            waiting.ready = true;
        }
    }

    /// The run that starts at the next `step` if an executor is ready: the head of the line,
    /// when it is ready and nothing runs.
    pub fn next(&self) -> Option<&str> {
        let head = self.waiting.front().filter(|w| w.ready && self.running.is_none());
        head.map(|w| w.run_id.as_str())
    }

    /// Drops expired runs and, when the executor is free and `executor_ready`, starts the next
    /// (if it is ready: the runs behind it wait their turn).
    pub fn step(&mut self, now_ms: u64, executor_ready: bool) -> Step {
        let expired = self.expire(now_ms);
        let head_ready = self.waiting.front().is_some_and(|w| w.ready);
        let started = if self.running.is_none() && executor_ready && head_ready {
            self.waiting.pop_front().map(|w| w.run_id)
        } else {
            None
        };
        self.running = self.running.take().or_else(|| started.clone());
        Step { started, expired }
    }

    /// Drops the runs that waited longer than the limit: their ids.
    pub fn expire(&mut self, now_ms: u64) -> Vec<String> {
        let max_wait = self.max_wait_ms;
        let (old, fresh): (Vec<_>, Vec<_>) =
            self.waiting.drain(..).partition(|w| now_ms.saturating_sub(w.since_ms) > max_wait);
        self.waiting = fresh.into();
        old.into_iter().map(|w| w.run_id).collect()
    }

    /// Takes a run out, wherever it is: finished, cancelled, or its client went away.
    pub fn remove(&mut self, run_id: &str) -> Removed {
        if self.running.as_deref() == Some(run_id) {
            self.running = None;
            return Removed::Running;
        }
        match self.waiting.iter().position(|w| w.run_id == run_id) {
            Some(i) => {
                self.waiting.remove(i);
                Removed::Waiting
            }
            None => Removed::Absent,
        }
    }

    /// Puts the running run back at the front: its executor went away before it started.
    pub fn requeue_front(&mut self, run_id: &str, now_ms: u64) {
        if self.running.as_deref() == Some(run_id) {
            self.running = None;
            self.waiting.push_front(Waiting { run_id: run_id.to_owned(), since_ms: now_ms, ready: true });
        }
    }

    pub fn running(&self) -> Option<&str> {
        self.running.as_deref()
    }

    /// Since when the longest-waiting run has waited (a requeued run waits anew).
    pub fn oldest_waiting_since(&self) -> Option<u64> {
        self.waiting.iter().map(|w| w.since_ms).min()
    }

    /// Runs waiting (not counting the one running).
    pub fn depth(&self) -> usize {
        self.waiting.len()
    }
}
