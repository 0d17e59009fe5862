//! Where a run executes: a browser tab of the relay session, or the edge executor (a fresh
//! dynamic Worker per run, issue 27). The tenant's `defaults.executor` says which may take its
//! runs and a call may narrow it; the tenant's `defaults.edge` is the edge budget the operator
//! grants (CPU ms a day, runs a minute), and a tenant without one runs on tabs only. The run
//! machine asks [`EdgeMeter`] before it sends a run to the edge and charges it when the run
//! ends. CPU ms a day are the tenant's, across its relay sessions: each run's edge time goes to
//! the tenant's ledger (`quota`), which tells each relay session the day's total with every
//! call it admits ([`EdgeMeter::seed`]); runs a minute are counted per relay session. No clock
//! here: every answer takes the time.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// The id the run machine gives the edge executor where it names a tab: it is never a tab's
/// (those are `tab_<hex>`), and it has no lease (the edge is not a browser that can go away).
pub const EDGE: &str = "edge";

/// How long a run at the edge may take to start (its capsule checked and QuickJS made) before
/// its own timeout counts.
pub const EDGE_LOAD_MS: u64 = 30_000;

/// The most bytes of workspace an edge run starts with. Each edge run gets the whole workspace
/// inline, about three times over (base64 in a map, its JSON, parsed again in the isolate),
/// in the Durable Object's memory and the isolate's, both capped at 128 MB: at the workspace's
/// 64 MiB default cap that resets the Durable Object and drops every run and tab of the relay
/// session. Past this bound an edge run is refused, saying so. (Bodies read lazily by the
/// isolate, as a tab reads them, would lift it: not done yet.)
pub const EDGE_WORKSPACE_MAX_BYTES: u64 = 16 * 1024 * 1024;

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;

/// Which executors may take a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Executor {
    /// A tab only: with none attached within the attach wait, `NoExecutorAttached`.
    #[default]
    Tab,
    /// A tab when one is attached or may be coming back, else the edge.
    TabOrEdge,
    /// The edge only, even with tabs attached.
    Edge,
}

impl Executor {
    pub fn as_str(self) -> &'static str {
        match self {
            Executor::Tab => "tab",
            Executor::TabOrEdge => "tab-or-edge",
            Executor::Edge => "edge",
        }
    }

    /// What a call gets: the tenant's choice (`self`, as `tab` when the tenant has no edge
    /// budget), narrowed by the call's `asked` (its `executor` argument). A call may narrow
    /// `tab-or-edge` to either; it may never reach the edge where the tenant does not run there,
    /// or leave it where the tenant runs only there.
    pub fn for_call(self, has_budget: bool, asked: Option<Executor>) -> Result<Executor, String> {
        let tenant = if has_budget { self } else { Executor::Tab };
        match (tenant, asked) {
            (tenant, None) => Ok(tenant),
            (tenant, Some(asked)) if asked == tenant => Ok(tenant),
            (Executor::TabOrEdge, Some(asked)) => Ok(asked),
            (tenant, Some(asked)) => {
                let why = if has_budget { "" } else { " (it has no edge budget: defaults.edge)" };
                Err(format!(
                    "executor: \"{}\" is wider than this tenant's \"{}\"{why}; a call may only narrow it. The tenant's admin can change defaults.executor (PATCH /admin/tenants/<id>)",
                    asked.as_str(),
                    tenant.as_str()
                ))
            }
        }
    }

    /// The call argument `executor`, if given: one of the three names.
    pub fn parse(name: &str) -> Option<Executor> {
        [Executor::Tab, Executor::TabOrEdge, Executor::Edge].into_iter().find(|e| e.as_str() == name)
    }
}

/// The edge budget an operator grants a tenant (`defaults.edge`): CPU ms a day across its relay
/// sessions, runs a minute per relay session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EdgeBudget {
    /// Milliseconds of edge runs a UTC day (each run counts its wall time there, which bounds
    /// its CPU time from above).
    pub cpu_ms_per_day: u64,
    /// Runs started at the edge in any 60 s.
    pub runs_per_minute: u32,
}

/// The largest budget an admin may set: a whole day of CPU, a run every 10 ms.
pub const MAX_CPU_MS_PER_DAY: u64 = DAY_MS;
pub const MAX_RUNS_PER_MINUTE: u32 = 6_000;

impl EdgeBudget {
    pub fn validate(&self) -> Result<(), String> {
        if self.cpu_ms_per_day == 0 || self.cpu_ms_per_day > MAX_CPU_MS_PER_DAY {
            return Err(format!("edge.cpuMsPerDay must be 1 to {MAX_CPU_MS_PER_DAY}"));
        }
        if self.runs_per_minute == 0 || self.runs_per_minute > MAX_RUNS_PER_MINUTE {
            return Err(format!("edge.runsPerMinute must be 1 to {MAX_RUNS_PER_MINUTE}"));
        }
        Ok(())
    }
}

/// What a relay session spent of its edge budget: the starts of the last minute and the
/// milliseconds of the current UTC day. Kept across its relay session's instances
/// (`relay_session::kept`): a DO evicted between runs must not start its minute over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeMeter {
    starts: VecDeque<u64>,
    day: u64,
    spent_ms: u64,
}

impl EdgeMeter {
    /// Whether `budget` has room for a start at `now_ms` (changes nothing), or which part of it
    /// is spent, who can raise it, and when it comes back.
    pub fn check(&self, budget: &EdgeBudget, now_ms: u64) -> Result<(), String> {
        let spent_ms = if now_ms / DAY_MS == self.day { self.spent_ms } else { 0 };
        if spent_ms >= budget.cpu_ms_per_day {
            let back_s = (DAY_MS - now_ms % DAY_MS).div_ceil(1000);
            return Err(format!(
                "this tenant's edge budget for today is spent: {spent_ms} of {} ms (defaults.edge.cpuMsPerDay), back at 00:00 UTC in {back_s} s. {RAISE}",
                budget.cpu_ms_per_day
            ));
        }
        let mut recent = self.starts.iter().filter(|&&at| at + MINUTE_MS > now_ms);
        if recent.clone().count() >= budget.runs_per_minute as usize {
            let back_s = recent.next().map_or(0, |first| first + MINUTE_MS).saturating_sub(now_ms).div_ceil(1000);
            return Err(format!(
                "this tenant's edge budget of {} runs a minute (defaults.edge.runsPerMinute) is spent; retry in {back_s} s. {RAISE}",
                budget.runs_per_minute
            ));
        }
        Ok(())
    }

    /// A run started at the edge at `now_ms` (its budget checked).
    pub fn record_start(&mut self, now_ms: u64) {
        self.roll(now_ms);
        self.starts.push_back(now_ms);
    }

    /// The start recorded at `started_ms` never became a run (the edge refused it before any
    /// isolate had it): it no longer counts to its minute.
    pub fn take_back_start(&mut self, started_ms: u64) {
        if let Some(at) = self.starts.iter().rposition(|&at| at == started_ms) {
            self.starts.remove(at);
        }
    }

    /// A run at the edge ended after `ms` milliseconds: they count to the day it started.
    pub fn charge(&mut self, ms: u64) {
        self.spent_ms = self.spent_ms.saturating_add(ms);
    }

    /// The tenant spent `tenant_ms` today as of `now_ms` (its ledger's count, this relay
    /// session's runs among them, or not yet): the day's spend is at least that.
    pub fn seed(&mut self, now_ms: u64, tenant_ms: u64) {
        self.roll(now_ms);
        self.spent_ms = self.spent_ms.max(tenant_ms);
    }

    /// Milliseconds spent today (as of the last start or charge).
    pub fn spent_ms(&self) -> u64 {
        self.spent_ms
    }

    fn roll(&mut self, now_ms: u64) {
        while self.starts.front().is_some_and(|&at| at + MINUTE_MS <= now_ms) {
            self.starts.pop_front();
        }
        let day = now_ms / DAY_MS;
        if day != self.day {
            (self.day, self.spent_ms) = (day, 0);
        }
    }
}

/// Who can raise a spent budget, and the way around it.
pub(crate) const RAISE: &str = "The relay's operator can raise it (PATCH /admin/tenants/<id> with defaults.edge); or open the relay page in a browser so runs go to a tab.";
