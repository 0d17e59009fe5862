//! Whether a tab is still there. The runtime does not reliably report a closed client (a write
//! to a dead tab's stream may succeed for minutes), so each tab holds a lease that it keeps
//! renewing, idle or busy: its page's lease worker pings the relay session every
//! `TAB_LEASE_MS / 5` from a thread of its own, which long work on the page's thread and the
//! timer throttling of a background tab cannot hold up, and every batch the tab sends renews
//! it too. A tab not heard from for `TAB_LEASE_MS` is gone. A run's fate follows its tab's: while
//! the lease holds, the run ends by its own deadline, never as lost.

/// How long a tab may go unheard before it is taken for gone. Five renewals fit in it, so a
/// late ping or two under load costs nothing.
pub const TAB_LEASE_MS: u64 = 10_000;

/// One attached tab's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TabLease {
    renewed_ms: u64,
}

impl TabLease {
    /// A lease that starts at `now_ms` (the tab attached).
    pub fn new(now_ms: u64) -> Self {
        TabLease { renewed_ms: now_ms }
    }

    /// The tab was heard from at `at_ms` (a renewal read late is still a renewal; an older one
    /// changes nothing).
    pub fn renew(&mut self, at_ms: u64) {
        self.renewed_ms = self.renewed_ms.max(at_ms);
    }

    /// When the lease lapses unless renewed.
    pub fn expires_at_ms(&self) -> u64 {
        self.renewed_ms.saturating_add(TAB_LEASE_MS)
    }

    pub fn lapsed(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_at_ms()
    }
}
