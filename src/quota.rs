//! Quotas per tenant (`defaults.quotas`) and the ledger that counts them. One ledger per
//! tenant lives in its own Durable Object (`durable/src/ledger.rs`, named by the tenant's id);
//! every rule is here, with the time passed in, so windows, leases and day boundaries are
//! tested natively. What each quota counts:
//!
//! - `callsPerMinute`: `tools/call` requests to `/mcp`, per UTC minute (a fixed window: the
//!   count starts again at each minute's first second). Other methods are not charged: they
//!   cost the relay next to nothing, and most are answered without a Durable Object.
//! - `relaySessions`: relay sessions live at once. A relay session is live from a request the
//!   Worker routes to it (a `tools/call`, any MCP request the Worker does not answer itself, a
//!   tab's attach) until [`SESSION_IDLE_MS`] pass without one: a request to a relay session that
//!   is not live, when as many are, is refused by the Worker, before its Durable Object exists.
//! - `runsInFlight`: runs (`run_js`, `run_py`) admitted and not ended, across all the
//!   tenant's relay sessions. Each holds a lease to its latest possible end (queue wait,
//!   attach wait, timeout, edge start, a margin), so an end that never reaches the ledger
//!   frees its slot then.
//! - `egressRequestsPerDay`, `egressBytesPerDay`: guest fetches through `/egress` and their
//!   bytes (request and response bodies) per UTC day. A fetch is charged its request and the
//!   most its response may carry before it is sent, and what the response did not use comes
//!   back after, so fetches in parallel cannot each pass the bytes check on a stale count.
//!
//! - `storedBytes`: bytes the tenant keeps in R2 (capsule.json files, build records, `/out`
//!   files, workspace bodies over `workspace::INLINE_MAX_BYTES`, and each layer once for every
//!   tenant whose capsules or build records name it: `retention::sweep::measure_stored`).
//!   Measured, then charged between measurements: the hourly retention sweep sums what is
//!   there per tenant ([`Charge::StoredMeasured`]), and each put since is charged its bytes
//!   first ([`Charge::Store`], or with a run's slot in [`Charge::Run`]), refused when it would
//!   take the measured figure and the charges since past the quota; a put that fails gives
//!   them back ([`Charge::StoreFailed`]). A key put again on purpose (a capsule stored again
//!   to show use, an `/out` path overwritten) is charged again until the next measurement sees
//!   it once; a deletion is seen by the next measurement, so nothing is credited.
//!
//! The ledger also adds up the tenant's edge time per UTC day (`defaults.edge.cpuMsPerDay`,
//! whose check stays the run machine's, `run::executor`): each run's end brings its edge
//! milliseconds, and every call charged is answered with the day's total.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{ErrorName, HttpError};
use crate::policy::bounded;
use crate::retention::BODY_GRACE_MS;
use crate::stores::StorageError;

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;
/// How long a relay session stays live after its latest `tools/call`.
pub const SESSION_IDLE_MS: u64 = 10 * MINUTE_MS;
/// What a run's lease adds to its latest possible end, for the hops around it.
pub const RUN_LEASE_MARGIN_MS: u64 = 60_000;
/// How often stored bytes are measured (the retention sweep's Cron Trigger), so how long a
/// refused put waits at most for a measurement that may bring the figure down.
pub const MEASURE_EVERY_MS: u64 = 3_600_000;
/// The most minutes of charged stored bytes a ledger keeps apart (see [`Ledger`]); past them
/// the oldest are merged, which only keeps them counted longer.
const STORE_MINUTES_KEPT: usize = 120;
/// The longest a refused run is told to wait: a slot comes back whenever any run ends.
const RUN_RETRY_AFTER_S: u64 = 5;

/// The most a tenant may be given of relay sessions and runs in flight: each is a name in the
/// ledger's one JSON row, which every charge reads and writes.
pub const MAX_LISTED: u64 = 1_000;

/// A tenant's quotas; every field optional in the tenant record (its default below). The
/// defaults leave room for what one relay session may hold anyway (a queue of 100 and the run
/// ahead of it), so a tenant that sets nothing sees no change but a ceiling across sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Quotas {
    pub calls_per_minute: u64,
    pub relay_sessions: u64,
    pub runs_in_flight: u64,
    pub egress_requests_per_day: u64,
    pub egress_bytes_per_day: u64,
    pub stored_bytes: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            calls_per_minute: 1_200,
            relay_sessions: 100,
            runs_in_flight: 200,
            egress_requests_per_day: 10_000,
            egress_bytes_per_day: 1 << 30,
            stored_bytes: 10 << 30,
        }
    }
}

impl Quotas {
    /// Refuses a quota in an admin's JSON (`defaults.quotas`) that is no whole number, naming
    /// it: read as the record's types, it would fail with a message that names no field.
    pub fn check_json(quotas: &Value) -> Result<(), String> {
        let Some(fields) = quotas.as_object() else {
            return Err("defaults.quotas must be an object of quotas (README \"Quotas\")".into());
        };
        match fields.iter().find(|(_, value)| !value.is_null() && !value.is_u64()) {
            Some((name, value)) => Err(format!("defaults.quotas.{name} is {value}; it must be a whole number")),
            None => Ok(()),
        }
    }

    /// The bounds of each quota; the error names the first one out of them.
    pub fn validate(&self) -> Result<(), String> {
        bounded("quotas.callsPerMinute", self.calls_per_minute, 1, 60_000)?;
        bounded("quotas.relaySessions", self.relay_sessions, 1, MAX_LISTED)?;
        bounded("quotas.runsInFlight", self.runs_in_flight, 1, MAX_LISTED)?;
        bounded("quotas.egressRequestsPerDay", self.egress_requests_per_day, 1, 10_000_000)?;
        bounded("quotas.egressBytesPerDay", self.egress_bytes_per_day, 1, 1 << 40)?;
        bounded("quotas.storedBytes", self.stored_bytes, 1 << 20, 1 << 40)
    }
}

/// A run's slot: its id and when its lease lapses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLease {
    pub run: String,
    pub until_ms: u64,
}

/// What a ledger is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "op")]
pub enum Charge {
    /// A `tools/call` to relay session `session` (the Worker's, before routing it there): a
    /// call, and the relay session admitted.
    Call { session: String },
    /// A request to relay session `session` that is no call (another MCP method the Worker
    /// routes there, a tab's attach): the relay session admitted.
    Admit { session: String },
    /// A run (`run_js`, `run_py`) admitted by its relay session: a slot of the runs in flight,
    /// leased; the same run charged again renews its lease (it was requeued). With the bytes
    /// its capsule will put in R2 (`stored_bytes`, 0 when its relay session stored it lately),
    /// charged as a [`Charge::Store`] in the same step: one hop admits the run and its capsule.
    /// With `call` (a relay session's name) when the Worker left the `tools/call` asking for the
    /// run to this hop (`mcp::Admission::ToSession`): the call is charged first, as a
    /// [`Charge::Call`] to that relay session would be, and stays charged if the run is refused,
    /// as it would have in a hop of its own; one hop then admits the call, the run and its capsule.
    Run {
        lease: RunLease,
        #[serde(default)]
        stored_bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
    },
    /// Run `run` ended after `edge_ms` at the edge: its slot comes back, its edge time counts.
    RunEnded {
        run: String,
        #[serde(default)]
        edge_ms: u64,
    },
    /// `requests` egress requests and `bytes` bytes; only a charge of requests is refused.
    Egress { requests: u64, bytes: u64 },
    /// Bytes charged at `charged_ms` (a response's cap, reserved before it was fetched) that
    /// were not used: they come back, unless a new UTC day started since.
    EgressUnused { bytes: u64, charged_ms: u64 },
    /// A put of `bytes` the tenant is about to store (a capsule, an `/out` file, a workspace
    /// body): refused when it would take what is stored past `storedBytes`.
    Store { bytes: u64 },
    /// A put of `bytes` charged at `charged_ms` (the caller's clock, just before its charge)
    /// that failed: the bytes come back, unless a measurement since replaced that charge (it
    /// did not find the put either).
    StoreFailed { bytes: u64, charged_ms: u64 },
    /// What the tenant stored, summed by the retention sweep from a listing started at `at_ms`.
    StoredMeasured { bytes: u64, at_ms: u64 },
    /// What is used, charging nothing; with the tenant's edge budget (CPU ms a day), if any.
    Usage { edge_cpu_ms_per_day: Option<u64> },
}

/// The request a ledger's Durable Object takes: the tenant's quotas as the caller read them
/// (a PATCH applies with the next request) and the charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRequest {
    pub quotas: Quotas,
    pub charge: Charge,
}

/// A quota reached: which, its value, what was used, and in how many seconds it comes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub quota: String,
    pub limit: u64,
    pub used: u64,
    pub retry_after_s: u64,
    /// The bytes of the put refused (`storedBytes` only: what is stored may be under the quota,
    /// and the put would pass it).
    #[serde(default)]
    pub wanted: u64,
}

impl Refusal {
    fn new(quota: &str, limit: u64, used: u64, retry_after_ms: u64) -> Self {
        Refusal { quota: quota.into(), limit, used, retry_after_s: retry_after_ms.div_ceil(1000).max(1), wanted: 0 }
    }

    /// What a person reads: the quota's name and value, what was used, when it comes back,
    /// and who raises it.
    pub fn message(&self) -> String {
        let stored = format!(
            "bytes stored (capsules and their layers, build records, /out files, workspace bodies), which a put of {} bytes would pass",
            self.wanted
        );
        // A removed file's body is deleted (and stops counting) only once no run can still
        // name it: the retry may come before the room.
        let stored_back = format!(
            "when the hourly measurement finds files deleted (remove files from the workspace: a removed file's body counts until the first measurement {} minutes after it was last stored; /out files go an hour after their URLs expire, unused capsules after the tenant's retention.unusedDays)",
            BODY_GRACE_MS.div_ceil(MINUTE_MS)
        );
        let (what, back) = match self.quota.as_str() {
            "callsPerMinute" => ("calls this minute (UTC)", "at the next minute"),
            "relaySessions" => ("relay sessions live (a tools/call in the last 10 minutes)", "when one idles"),
            "runsInFlight" => ("runs in flight across its relay sessions", "when one ends"),
            "storedBytes" => (stored.as_str(), stored_back.as_str()),
            "egressRequestsPerDay" => ("egress requests today (UTC)", "at 00:00 UTC"),
            _ => ("egress bytes today (UTC)", "at 00:00 UTC"),
        };
        format!(
            "this tenant's quota defaults.quotas.{} is reached: {} of {} {what}; it comes back {back}, retry in {} s. The relay's operator can raise it (PATCH /admin/tenants/<id> with defaults.quotas).",
            self.quota, self.used, self.limit, self.retry_after_s
        )
    }

    /// The 429 `QuotaExceeded` to answer with, and its `Retry-After`.
    pub fn error(&self) -> HttpError {
        let error = HttpError::new(ErrorName::QuotaExceeded, self.message()).retry_after(self.retry_after_s);
        HttpError { quota: Some(self.data()), ..error }
    }

    /// The JSON-RPC error's / HTTP body's data.
    pub fn data(&self) -> Value {
        json!({ "name": "QuotaExceeded", "quota": format!("defaults.quotas.{}", self.quota), "limit": self.limit,
                "used": self.used, "retryAfterS": self.retry_after_s })
    }
}

/// What a ledger answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "answer")]
pub enum LedgerAnswer {
    /// Charged; the tenant's edge milliseconds today, across its relay sessions.
    Charged {
        edge_spent_ms: u64,
    },
    Refused {
        refusal: Refusal,
    },
    Usage {
        usage: Value,
    },
}

/// One tenant's counts. Bounded: at most its quotas' worth of relay sessions and runs (the
/// lapsed ones are dropped on every charge).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Ledger {
    minute: u64,
    calls: u64,
    /// Each live relay session and its latest call.
    sessions: BTreeMap<String, u64>,
    /// Each run in flight and its lease's end.
    runs: BTreeMap<String, u64>,
    day: u64,
    egress_requests: u64,
    egress_bytes: u64,
    /// Milliseconds of runs at the edge today.
    edge_ms: u64,
    /// Bytes stored at the latest measurement, and when its listing started (`None`: never
    /// measured; until then only the charges count).
    measured: Option<(u64, u64)>,
    /// Bytes charged since, by the UTC minute they were charged in: a measurement drops the
    /// minutes its listing surely saw and keeps those it may not have (a put charged just
    /// before the listing started, still uploading).
    stored_since: BTreeMap<u64, u64>,
}

impl Ledger {
    /// Applies `charge` at `now_ms` against `quotas`: all of it, or (refused) none of it; a run
    /// with its call is two charges in turn (`Charge::Run`), the run's refusal leaving the call's.
    pub fn charge(&mut self, quotas: &Quotas, charge: &Charge, now_ms: u64) -> LedgerAnswer {
        self.roll(now_ms);
        let refused = match charge {
            Charge::Call { session } => self.call(quotas, session, now_ms),
            Charge::Admit { session } => self.admit(quotas, session, now_ms),
            Charge::Run { lease, stored_bytes, call } => {
                let called = call.as_deref().map_or(Ok(()), |session| self.call(quotas, session, now_ms));
                called.and_then(|()| self.run(quotas, lease, *stored_bytes, now_ms))
            }
            Charge::RunEnded { run, edge_ms } => {
                self.runs.remove(run);
                self.edge_ms = self.edge_ms.saturating_add(*edge_ms);
                Ok(())
            }
            Charge::Egress { requests, bytes } => self.egress(quotas, *requests, *bytes, now_ms),
            Charge::EgressUnused { bytes, charged_ms } => {
                if charged_ms / DAY_MS == now_ms / DAY_MS {
                    self.egress_bytes = self.egress_bytes.saturating_sub(*bytes);
                }
                Ok(())
            }
            Charge::Store { bytes } => self.store(quotas, *bytes, now_ms),
            Charge::StoreFailed { bytes, charged_ms } => {
                self.store_failed(*bytes, *charged_ms);
                Ok(())
            }
            Charge::StoredMeasured { bytes, at_ms } => {
                self.measure(*bytes, *at_ms);
                Ok(())
            }
            Charge::Usage { edge_cpu_ms_per_day } => {
                return LedgerAnswer::Usage { usage: self.usage(quotas, *edge_cpu_ms_per_day, now_ms) }
            }
        };
        match refused {
            Ok(()) => LedgerAnswer::Charged { edge_spent_ms: self.edge_ms },
            Err(refusal) => LedgerAnswer::Refused { refusal },
        }
    }

    fn call(&mut self, quotas: &Quotas, session: &str, now_ms: u64) -> Result<(), Refusal> {
        if self.calls >= quotas.calls_per_minute {
            let back = MINUTE_MS - now_ms % MINUTE_MS;
            return Err(Refusal::new("callsPerMinute", quotas.calls_per_minute, self.calls, back));
        }
        self.admit(quotas, session, now_ms)?;
        self.calls += 1;
        Ok(())
    }

    /// Relay session `session` live from `now_ms`, unless it is not and as many are.
    fn admit(&mut self, quotas: &Quotas, session: &str, now_ms: u64) -> Result<(), Refusal> {
        let live = self.sessions.len() as u64;
        if !self.sessions.contains_key(session) && live >= quotas.relay_sessions {
            let first_idle = self.sessions.values().min().map_or(0, |&at| at + SESSION_IDLE_MS);
            return Err(Refusal::new("relaySessions", quotas.relay_sessions, live, first_idle.saturating_sub(now_ms)));
        }
        self.sessions.insert(session.to_owned(), now_ms);
        Ok(())
    }

    /// A slot for `lease`'s run, and its capsule's `stored_bytes`; its lease renewed, if it
    /// holds one already. Either refusal takes nothing.
    fn run(&mut self, quotas: &Quotas, lease: &RunLease, stored_bytes: u64, now_ms: u64) -> Result<(), Refusal> {
        let in_flight = self.runs.len() as u64;
        if !self.runs.contains_key(&lease.run) && in_flight >= quotas.runs_in_flight {
            let first_lapse = self.runs.values().min().map_or(0, |&until| until.saturating_sub(now_ms));
            let back = first_lapse.min(RUN_RETRY_AFTER_S * 1000);
            return Err(Refusal::new("runsInFlight", quotas.runs_in_flight, in_flight, back));
        }
        if stored_bytes > 0 {
            self.store(quotas, stored_bytes, now_ms)?;
        }
        self.runs.insert(lease.run.clone(), lease.until_ms);
        Ok(())
    }

    fn egress(&mut self, quotas: &Quotas, requests: u64, bytes: u64, now_ms: u64) -> Result<(), Refusal> {
        if requests > 0 {
            let back = DAY_MS - now_ms % DAY_MS;
            if self.egress_requests >= quotas.egress_requests_per_day {
                let limit = quotas.egress_requests_per_day;
                return Err(Refusal::new("egressRequestsPerDay", limit, self.egress_requests, back));
            }
            if self.egress_bytes >= quotas.egress_bytes_per_day {
                return Err(Refusal::new("egressBytesPerDay", quotas.egress_bytes_per_day, self.egress_bytes, back));
            }
        }
        self.egress_requests += requests;
        self.egress_bytes = self.egress_bytes.saturating_add(bytes);
        Ok(())
    }

    /// The bytes stored as far as the ledger knows: the latest measurement and the charges since.
    fn stored(&self) -> u64 {
        let measured = self.measured.map_or(0, |(bytes, _)| bytes);
        self.stored_since.values().fold(measured, |sum, bytes| sum.saturating_add(*bytes))
    }

    fn store(&mut self, quotas: &Quotas, bytes: u64, now_ms: u64) -> Result<(), Refusal> {
        let stored = self.stored();
        if stored.saturating_add(bytes) > quotas.stored_bytes {
            // The next measurement is due an hour after the latest one's (the Cron Trigger's).
            let next = self.measured.map_or(0, |(_, at)| at + MEASURE_EVERY_MS);
            let back = next.checked_sub(now_ms).filter(|&ms| ms > 0).unwrap_or(MEASURE_EVERY_MS);
            return Err(Refusal { wanted: bytes, ..Refusal::new("storedBytes", quotas.stored_bytes, stored, back) });
        }
        let minute = self.stored_since.entry(now_ms / MINUTE_MS).or_default();
        *minute = minute.saturating_add(bytes);
        if self.stored_since.len() > STORE_MINUTES_KEPT {
            let (_, oldest) = self.stored_since.pop_first().expect("more than one minute kept");
            let next = self.stored_since.values_mut().next().expect("more than one minute kept");
            *next = next.saturating_add(oldest);
        }
        Ok(())
    }

    /// Gives back `bytes` of a failed put charged at `charged_ms`: from its own minute's charges
    /// first, then the later minutes', and the minute before last (a minute's margin for the
    /// caller's clock and the ledger's), since an earlier minute may hold a put that succeeded,
    /// which a measurement can then replace, leaving the failed one's charge counted. None
    /// when a measurement dropped its minute's charges (`measure` keeps from the minute
    /// before its listing's): the listing did not find what failed.
    fn store_failed(&mut self, bytes: u64, charged_ms: u64) {
        let minute = charged_ms / MINUTE_MS;
        if self.measured.is_some_and(|(_, at)| minute < first_unseen_minute(at)) {
            return;
        }
        let left = take_back(self.stored_since.range_mut(minute..).map(|(_, charged)| charged), bytes);
        take_back(self.stored_since.range_mut(minute.saturating_sub(1)..minute).map(|(_, charged)| charged), left);
        self.stored_since.retain(|_, charged| *charged > 0);
    }

    /// A measurement whose listing started at `at_ms`: it replaces an older one, and the
    /// charges of minutes ended a minute before it started are in it (their puts were done).
    /// One older than the latest (two sweeps crossing) is ignored.
    fn measure(&mut self, bytes: u64, at_ms: u64) {
        if self.measured.is_some_and(|(_, latest)| latest > at_ms) {
            return;
        }
        self.measured = Some((bytes, at_ms));
        let first_unseen = first_unseen_minute(at_ms);
        self.stored_since.retain(|&minute, _| minute >= first_unseen);
    }

    /// What `relay://usage` and the operator's view show: each quota's value, what is used and
    /// when its window starts again; the edge's day, with its budget (none: the tenant has none).
    pub fn usage(&self, quotas: &Quotas, edge_cpu_ms_per_day: Option<u64>, now_ms: u64) -> Value {
        let minute_s = (MINUTE_MS - now_ms % MINUTE_MS).div_ceil(1000);
        let day_s = (DAY_MS - now_ms % DAY_MS).div_ceil(1000);
        let mut rolled = self.clone();
        rolled.roll(now_ms);
        let live: Vec<&String> = rolled.sessions.keys().collect();
        json!({
            "callsPerMinute": { "limit": quotas.calls_per_minute, "used": rolled.calls, "resetsInS": minute_s },
            "relaySessions": { "limit": quotas.relay_sessions, "used": live.len(), "live": live },
            "runsInFlight": { "limit": quotas.runs_in_flight, "used": rolled.runs.len() },
            "egressRequestsPerDay": { "limit": quotas.egress_requests_per_day, "used": rolled.egress_requests, "resetsInS": day_s },
            "egressBytesPerDay": { "limit": quotas.egress_bytes_per_day, "used": rolled.egress_bytes, "resetsInS": day_s },
            "edgeCpuMsPerDay": { "limit": edge_cpu_ms_per_day, "used": rolled.edge_ms, "resetsInS": day_s },
            "storedBytes": { "limit": quotas.stored_bytes, "used": rolled.stored(),
                "measured": rolled.measured.map(|(bytes, _)| bytes), "measuredAtMs": rolled.measured.map(|(_, at)| at) },
        })
    }

    /// A stored row read back, or why it does not parse (damaged, or written by a version that
    /// counted otherwise): its store then logs that and starts from an empty ledger, since
    /// counts lost for a minute or a day beat a tenant refused 503 until an operator steps in.
    pub fn from_row(json: &str) -> Result<Ledger, String> {
        serde_json::from_str(json).map_err(|e| format!("the ledger's row does not parse ({e}); it starts again empty"))
    }

    /// Starts the windows that passed again and drops idle relay sessions and lapsed leases.
    fn roll(&mut self, now_ms: u64) {
        if now_ms / MINUTE_MS != self.minute {
            (self.minute, self.calls) = (now_ms / MINUTE_MS, 0);
        }
        if now_ms / DAY_MS != self.day {
            (self.day, self.egress_requests, self.egress_bytes, self.edge_ms) = (now_ms / DAY_MS, 0, 0, 0);
        }
        self.sessions.retain(|_, at| *at + SESSION_IDLE_MS > now_ms);
        self.runs.retain(|_, until| *until > now_ms);
    }
}

/// Where a ledger is kept: the ledger's Durable Object's SQLite, or memory in native tests.
pub trait LedgerStore {
    fn load(&self) -> Result<Option<Ledger>, StorageError>;
    fn save(&self, ledger: &Ledger) -> Result<(), StorageError>;
}

/// Answers `request` at `now_ms` from the ledger in `store`, saving it only when a count
/// changed: a read, or the end of a run it does not hold, writes nothing (so it never makes a
/// row again where there was none, as after an erasure). The windows that passed are started
/// again on each load, so a ledger not saved for that alone loses nothing.
pub fn answer(store: &impl LedgerStore, request: &LedgerRequest, now_ms: u64) -> Result<LedgerAnswer, StorageError> {
    let mut before = store.load()?.unwrap_or_default();
    before.roll(now_ms);
    let mut ledger = before.clone();
    let answer = ledger.charge(&request.quotas, &request.charge, now_ms);
    if ledger != before {
        store.save(&ledger)?;
    }
    Ok(answer)
}

/// A ledger kept in memory, as JSON (so native tests go through its serialization too).
#[derive(Default)]
pub struct MemoryLedger(pub std::cell::RefCell<Option<String>>);

impl LedgerStore for MemoryLedger {
    fn load(&self) -> Result<Option<Ledger>, StorageError> {
        Ok(self.0.borrow().as_deref().and_then(|json| Ledger::from_row(json).ok()))
    }

    fn save(&self, ledger: &Ledger) -> Result<(), StorageError> {
        *self.0.borrow_mut() = Some(serde_json::to_string(ledger).expect("a ledger serializes"));
        Ok(())
    }
}

/// The lease of a run charged at `now_ms` that may take `life_ms` at most
/// (`run::machine::run_life_ms`, which its relay session enforces), with a margin for the hops
/// around it.
pub fn run_lease(run: &str, now_ms: u64, life_ms: u64) -> RunLease {
    RunLease { run: run.to_owned(), until_ms: now_ms + life_ms + RUN_LEASE_MARGIN_MS }
}

/// How long an isolate trusts that it saw a relay session admitted: a request that only needs
/// its relay session admitted ([`Charge::Admit`]: any MCP method but `tools/call`) skips the
/// ledger's hop meanwhile, and a run's call is left to the relay session's admission hop
/// (`mcp::Admission::ToSession`). The ledger keeps a relay session live [`SESSION_IDLE_MS`] after it was
/// admitted, far longer, so a skipped admission never lets a relay session the ledger would
/// refuse through.
pub const ADMITTED_FRESH_MS: u64 = MINUTE_MS;
const _: () = assert!(ADMITTED_FRESH_MS < SESSION_IDLE_MS);
/// The most relay sessions an isolate remembers admitting.
const ADMITTED_KEPT: usize = 1_024;

/// The relay sessions (tenant, name) an isolate saw the ledger admit lately.
#[derive(Debug, Default)]
pub struct Admitted {
    /// When the ledger admitted each, and until when its calls are the Worker's to charge.
    seen: BTreeMap<(String, String), (u64, u64)>,
}

impl Admitted {
    /// Whether relay session `session` of `tenant` was admitted within [`ADMITTED_FRESH_MS`]
    /// and no quota refused a call left to it since ([`Admitted::refused`]).
    pub fn fresh(&self, tenant: &str, session: &str, now_ms: u64) -> bool {
        let seen = self.seen.get(&(tenant.to_owned(), session.to_owned()));
        seen.is_some_and(|&(at, refused_until)| {
            now_ms < at.saturating_add(ADMITTED_FRESH_MS) && now_ms >= refused_until
        })
    }

    /// The ledger admitted relay session `session` of `tenant` at `now_ms`. Past
    /// [`ADMITTED_KEPT`] the stale ones go, and if none is stale, all: forgetting only costs hops.
    pub fn remember(&mut self, tenant: &str, session: &str, now_ms: u64) {
        self.bound(now_ms);
        let seen = self.seen.entry((tenant.to_owned(), session.to_owned())).or_default();
        seen.0 = now_ms;
    }

    /// A quota refused a call left to relay session `session` of `tenant` at `now_ms`, to be
    /// asked again in `retry_after_ms`: until then (a minute at most) the Worker charges its
    /// requests itself, where a refusal costs one ledger hop and no relay session's work, even
    /// if another request admits it again meanwhile.
    pub fn refused(&mut self, tenant: &str, session: &str, now_ms: u64, retry_after_ms: u64) {
        self.bound(now_ms);
        let seen = self.seen.entry((tenant.to_owned(), session.to_owned())).or_default();
        seen.1 = now_ms.saturating_add(retry_after_ms.min(ADMITTED_FRESH_MS));
    }

    fn bound(&mut self, now_ms: u64) {
        if self.seen.len() >= ADMITTED_KEPT {
            self.seen.retain(|_, &mut (at, until)| now_ms < at.saturating_add(ADMITTED_FRESH_MS) || now_ms < until);
            if self.seen.len() >= ADMITTED_KEPT {
                self.seen.clear();
            }
        }
    }
}

/// The first minute whose charges a measurement whose listing started at `at_ms` may not
/// hold: the minute before the listing's (their puts may still have been under way).
fn first_unseen_minute(at_ms: u64) -> u64 {
    (at_ms / MINUTE_MS).saturating_sub(1)
}

/// Takes up to `bytes` back from `charges` in turn; what is left to take.
fn take_back<'a>(charges: impl Iterator<Item = &'a mut u64>, mut bytes: u64) -> u64 {
    for charged in charges {
        let back = bytes.min(*charged);
        *charged -= back;
        bytes -= back;
    }
    bytes
}
