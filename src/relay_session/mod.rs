//! A relay session's decisions, written over what it stands on ([`Platform`]: its SQLite, R2,
//! KV, tabs, clock, randomness, log and outbound HTTP), so that `cargo test` runs them on real
//! SQLite and in-memory stores (`tests/relay_session*.rs`, backends in `tests/support`) as the
//! Durable Object runs them over the runtime (`durable/src/relay_session/`, which only does
//! the I/O). By job:
//!
//! - [`desk`]: the runs desk, the run machine and what is kept of each run beside it; the one
//!   place the machine is fed and its outputs performed (tab commands, deliveries, the audit).
//! - [`edge`]: a run at the edge executor: the job its isolate starts with, its events fed back.
//! - [`runs`]: a `tools/call` from its job to its answer; tasks; legacy resumption.
//! - [`builds`]: storing capsules, a packaged run's build from presign to finalize.
//! - [`upstreams`]: calls to the tenant's upstream MCP servers and their audit; the `/mcps` tree.
//! - [`workspace`]: the relay session's workspace: its index and bodies, commits, the file
//!   tools answered from it; [`workspace_routes`] the routes of tabs and runs over it;
//!   [`tab_sync`] the changes a run's command carries to its tab, so the tab need not ask.
//! - [`body_sweep`]: the retention sweep of its workspace bodies, when the cron asks.
//! - [`caches`]: what one instance remembers to be faster, never to decide.
//! - [`kept`]: what must outlive an instance (its DO sleeps between runs): saved when idle.
//! - [`store`] over [`sql`]: the SQLite (migrations, the audit chain, metrics, tasks, `/out`
//!   slots, legacy MCP sessions). Every write returns its error: a failed one is reported
//!   ([`RelaySession::audited`], [`RelaySession::persisted`]), never dropped.

pub mod body_sweep;
pub mod builds;
pub mod caches;
pub mod desk;
pub mod edge;
pub mod kept;
pub mod runs;
pub mod sql;
pub mod store;
pub mod tab_sync;
pub mod upstreams;
pub mod workspace;
pub mod workspace_routes;

pub use crate::stores::StorageError;
pub use body_sweep::BodyGuard;
pub use caches::Caches;
pub use desk::{Delivery, Desk, Frames, Tabs};
pub use sql::{Sql, SqlValue};
pub use store::{Ended, McpSessions, Queued, Store, MIGRATIONS};

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::audit::AuditRecord;
use crate::auth::Tenant;
use crate::error::HttpError;
use crate::log::LogLine;
use crate::metrics::{Snapshot, Wake};
use crate::stores::{Blobs, Records};
use crate::upstream::client::{Post, Received};

/// The DO alarm's writes by op, and the kinds they are counted under in the wake-ups' table
/// (not wake-ups: `Wake::ALL` lists those).
const ALARM_WRITES: [(&str, &str); 2] = [("set", "alarm_set"), ("delete", "alarm_delete")];

/// What a relay session stands on. The Durable Object implements it over the runtime
/// (`durable/src/relay_session/shared.rs`), the native tests over SQLite in memory and
/// in-memory stores (`tests/support`).
#[allow(async_fn_in_trait)] // the Worker runs on one thread: no caller needs `post` to be Send
pub trait Platform {
    type Sql: Sql;
    type Blobs: Blobs;
    type Records: Records;
    type Tabs: Tabs;
    /// A response stream being written (a run's answer).
    type Frames: Frames;
    fn sql(&self) -> &Self::Sql;
    fn blobs(&self) -> &Self::Blobs;
    fn records(&self) -> &Self::Records;
    fn tabs(&self) -> &Self::Tabs;
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> u64;
    /// Fills `bytes` from a CSPRNG.
    fn random(&self, bytes: &mut [u8]);
    /// A line of the relay session's log.
    fn log(&self, line: &str);
    /// A line of its error log.
    fn log_error(&self, line: &str);
    /// One POST to an upstream MCP server's `url`, with `redirect: manual`, given up after
    /// `timeout_ms`, its body read up to `body_max`; why not, in words the caller may see.
    async fn post(
        &self,
        url: &str,
        headers: &[(String, String)],
        post: &Post,
        timeout_ms: u64,
        body_max: u64,
    ) -> Result<Received, String>;
    /// Starts run `run` at the edge executor, without waiting for it: the run's job comes from
    /// [`RelaySession::edge_job`], its events go to [`RelaySession::edge_events`].
    fn start_edge(&self, run: &str);
    /// Stops run `run` at the edge, if it is there.
    fn cancel_edge(&self, run: &str);
    /// Run `run` of tenant `tenant` ended after `edge_ms` at the edge (0: it did not run
    /// there): its slot of the tenant's runs in flight comes back and its edge time is added
    /// to the tenant's day (`quota`), without waiting for the ledger to hear it.
    fn run_ended(&self, tenant: &str, run: &str, edge_ms: u64);
    /// Charges `bytes` that `tenant` is about to put in R2 (a capsule, a workspace body) to its
    /// `storedBytes` (`quota`): the refusal (`QuotaExceeded` with its `retry_after_s`, or
    /// `StorageUnavailable` when its ledger did not answer), if not.
    async fn charge_stored(&self, tenant: &Tenant, bytes: u64) -> Result<(), HttpError>;
    /// Tells tenant `tenant`'s ledger that a put of `bytes` charged at `charged_ms` failed, so
    /// they come back (`quota::Charge::StoreFailed`), without waiting for it to hear.
    fn store_failed(&self, tenant: &str, bytes: u64, charged_ms: u64);
}

/// One relay session: its platform, the runs desk, the caches, and the writes to its storage
/// that failed. Never borrow one of its cells across an `.await`: other requests interleave there.
pub struct RelaySession<P: Platform> {
    pub platform: P,
    pub desk: Desk<P::Frames>,
    pub caches: Caches,
    /// What its stores of workspace bodies and their retention sweep tell each other.
    pub bodies: BodyGuard,
    /// Writes to the SQLite that failed since this instance started, by what (the metrics
    /// report them: the storage that failed cannot hold them).
    failures: RefCell<BTreeMap<String, u64>>,
    /// Wake-ups (and alarm writes) counted since they were last written (`woke`,
    /// `alarm_written`, `flush_wakeups`).
    wakeups: RefCell<BTreeMap<&'static str, u64>>,
    /// The kept memory as last saved or restored (`kept`): a save that changes nothing is skipped.
    kept_doc: RefCell<String>,
}

impl<P: Platform> RelaySession<P> {
    pub fn new(platform: P) -> Self {
        RelaySession {
            platform,
            desk: Desk::default(),
            caches: Caches::default(),
            bodies: BodyGuard::default(),
            failures: RefCell::default(),
            wakeups: RefCell::default(),
            kept_doc: RefCell::default(),
        }
    }

    /// The relay session's store.
    pub fn store(&self) -> Store<'_, P::Sql> {
        Store::new(self.platform.sql())
    }

    pub fn now_ms(&self) -> u64 {
        self.platform.now_ms()
    }

    /// `prefix` and `N` random bytes in hex: an id no one can guess.
    pub fn random_id<const N: usize>(&self, prefix: &str) -> String {
        let mut bytes = [0u8; N];
        self.platform.random(&mut bytes);
        format!("{prefix}{}", hex::encode(bytes))
    }

    /// Brings the SQLite up to date, closes the runs a restart cut off (no run can be in
    /// flight in an instance that is only starting) and takes back what an earlier instance
    /// kept (`kept`). A migration that failed is returned: the relay session must then serve
    /// nothing, its schema being half-way.
    pub fn open(&self) -> Result<(), StorageError> {
        self.store().migrate()?;
        let closed = self.store().close_unfinished(self.now_ms());
        self.audited("closing runs cut off by a restart", closed);
        self.restore_memory();
        Ok(())
    }

    /// Logs each record sealed onto the audit chain (a run's log line), or, when sealing
    /// failed, the failure naming `what` was being audited, counted in the metrics: a record
    /// that could not be written is never dropped silently.
    pub fn audited<I: IntoIterator<Item = AuditRecord>>(&self, what: &str, sealed: Result<I, StorageError>) {
        match sealed {
            Ok(records) => {
                for record in records {
                    if let Some(line) = LogLine::run(&record) {
                        self.platform.log(&line.to_json());
                    }
                }
            }
            Err(e) => self.storage_failed("audit", &format!("auditing {what}: {e}")),
        }
    }

    /// Whatever `result` holds; a failed write is logged and counted under `what`.
    pub fn persisted<T>(&self, what: &str, result: Result<T, StorageError>) -> Option<T> {
        result.map_err(|e| self.storage_failed(what, &e.to_string())).ok()
    }

    fn storage_failed(&self, what: &str, why: &str) {
        self.platform.log_error(&format!("relay session storage failed: {why}"));
        *self.failures.borrow_mut().entry(what.to_owned()).or_default() += 1;
    }

    /// The relay session's metrics, with what only this instance knows: its wasm memory
    /// (`wasm_memory_bytes`), the writes to its storage that failed; and its DO's wake-ups,
    /// every kind listed (0 when never counted).
    pub fn metrics(&self, wasm_memory_bytes: u64) -> Result<Snapshot, StorageError> {
        let stored = self.store().metrics()?;
        let counted = self.store().wakeups()?;
        let pending = self.wakeups.borrow();
        let count = |kind: &str| counted.get(kind).copied().unwrap_or(0) + pending.get(kind).copied().unwrap_or(0);
        let wakeups = Wake::ALL.iter().map(|w| (w.as_str().to_owned(), count(w.as_str())));
        let alarm_writes = ALARM_WRITES.iter().map(|(op, kind)| ((*op).to_owned(), count(kind)));
        Ok(Snapshot {
            wasm_memory_bytes,
            storage_failures: self.failures.borrow().clone(),
            wakeups: wakeups.collect(),
            alarm_writes: alarm_writes.collect(),
            ..stored
        })
    }

    /// Its DO ran code, for `wake`: counted in memory until `flush_wakeups` writes it.
    pub fn woke(&self, wake: Wake) {
        *self.wakeups.borrow_mut().entry(wake.as_str()).or_default() += 1;
    }

    /// Its DO's alarm was set (`set`) or deleted: counted with the wake-ups, and written with them.
    pub fn alarm_written(&self, set: bool) {
        let (_, kind) = ALARM_WRITES[usize::from(!set)];
        *self.wakeups.borrow_mut().entry(kind).or_default() += 1;
    }

    /// Writes the wake-ups counted in memory to the SQLite, where they outlive the instance (a
    /// DO that hibernates is a new instance at each wake). The DO calls it when no run is in
    /// hand, after its answer has gone: a write holds the DO's next messages until it is
    /// committed, which in a run's path would delay the run.
    pub fn flush_wakeups(&self) {
        let pending = std::mem::take(&mut *self.wakeups.borrow_mut());
        for (kind, n) in pending {
            self.persisted("wakeups", self.store().count_wakeups(kind, n));
        }
    }
}
