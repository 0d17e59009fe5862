//! Whether the tab running a run is still there. A closed tab's SSE stream is not reliably
//! noticed by the runtime (a client disconnect does not always cancel a response stream), so
//! the executor holds a lease instead: it acknowledges a capsule at once and reports at least
//! every couple of seconds while the run lasts. Silence ends the lease.

/// How long a tab has to acknowledge a capsule before it is taken for dead. Longer than the
/// tab's batch retries (1 + 2 + 4 s): an acknowledgement queued behind a retried batch must not
/// get a live tab dropped and its run sent out a second time.
pub const ACK_WITHIN_MS: u64 = 10_000;
/// How long a running tab may stay silent (it reports every 2 s).
pub const SILENCE_MS: u64 = 10_000;

/// The lease of one started run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    started_ms: u64,
    last_heard_ms: Option<u64>,
}

/// What the lease says at a given moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Fine; look again at [`Lease::check_at_ms`].
    Alive,
    /// The tab never acknowledged the capsule: it was gone before the run began, so the run can
    /// go to another tab.
    NeverAcknowledged,
    /// The tab went silent mid-run.
    Silent,
}

impl Lease {
    pub fn new(started_ms: u64) -> Self {
        Lease { started_ms, last_heard_ms: None }
    }

    /// The tab reported something for this run.
    pub fn heard(&mut self, now_ms: u64) {
        self.last_heard_ms = Some(now_ms.max(self.last_heard_ms.unwrap_or(0)));
    }

    /// Whether the tab has said anything for this run: then it has started it.
    pub fn acknowledged(&self) -> bool {
        self.last_heard_ms.is_some()
    }

    /// When the verdict can next change.
    pub fn check_at_ms(&self) -> u64 {
        match self.last_heard_ms {
            None => self.started_ms + ACK_WITHIN_MS,
            Some(last) => last + SILENCE_MS,
        }
    }

    pub fn verdict(&self, now_ms: u64) -> Verdict {
        match self.last_heard_ms {
            _ if now_ms < self.check_at_ms() => Verdict::Alive,
            None => Verdict::NeverAcknowledged,
            Some(_) => Verdict::Silent,
        }
    }
}
