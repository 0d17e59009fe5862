//! Metrics an operator reads per tenant: counters (runs by language and outcome, policy
//! denials by kind, upstream MCP calls by server and outcome) and histograms (capsule build,
//! queue wait, run time, output bytes). Each relay session keeps a [`Snapshot`]; the admin
//! route merges a tenant's and renders them in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// Upper bounds of the time histograms, in milliseconds.
pub const MS_BUCKETS: [u64; 12] = [5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 10_000, 30_000, 60_000];
/// Upper bounds of the output histogram, in bytes.
pub const BYTE_BUCKETS: [u64; 7] = [0, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];

/// A histogram over fixed bounds: how many observations fell at or under each bound (not
/// cumulative here; rendering makes it so), their sum and count.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub buckets: Vec<u64>,
    pub sum: u64,
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[u64], value: u64) {
        self.buckets.resize(bounds.len(), 0);
        if let Some(i) = bounds.iter().position(|&bound| value <= bound) {
            self.buckets[i] += 1;
        }
        self.sum = self.sum.saturating_add(value);
        self.count += 1;
    }

    fn merge(&mut self, other: &Histogram) {
        self.buckets.resize(self.buckets.len().max(other.buckets.len()), 0);
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum = self.sum.saturating_add(other.sum);
        self.count += other.count;
    }
}

/// One relay session's metrics, or a tenant's once merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Snapshot {
    /// `language|outcome` -> runs (outcome: `ok`, `exit_nonzero` or an error name).
    pub runs: BTreeMap<String, u64>,
    /// Denial kind (`fetch`, `write`, `mcps-rpc`) -> denials.
    pub denials: BTreeMap<String, u64>,
    /// `server|outcome` -> upstream MCP calls (outcome: `ok` or an error name).
    pub upstream_calls: BTreeMap<String, u64>,
    /// Executor (`tab`, `edge`) -> runs it executed, and their milliseconds (wall time, which
    /// bounds CPU time: what an edge run costs).
    pub executor_runs: BTreeMap<String, u64>,
    pub executor_ms: BTreeMap<String, u64>,
    pub build_ms: Histogram,
    pub queue_wait_ms: Histogram,
    pub run_ms: Histogram,
    pub output_bytes: Histogram,
    /// The wasm linear memory (bytes) of the isolate that answered, filled in when metrics are
    /// asked for and never stored; merged as the largest. Linear memory only grows, so it is
    /// the Rust heap's high-water mark: a rise run after run is a leak.
    #[serde(skip_serializing_if = "is_zero")]
    pub wasm_memory_bytes: u64,
    /// What -> writes to the relay session's own storage that failed (`audit`, `metrics`, ...)
    /// since its instance started: counted in memory, since the storage that failed cannot
    /// hold them, and filled in when metrics are asked for.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub storage_failures: BTreeMap<String, u64>,
    /// [`Wake`] kind -> times the relay session's Durable Object ran code (what an idle tab
    /// costs: see docs/COST.md), kept in its own table and filled in when metrics are asked for.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub wakeups: BTreeMap<String, u64>,
    /// `set` or `delete` -> writes of the relay session DO's alarm, kept with the wake-ups. A
    /// run answered within a tick writes none: an alarm moved earlier holds the storage commit
    /// it is in for the alarm scheduler, and the DO's messages with it (docs/BENCHMARKS.md).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub alarm_writes: BTreeMap<String, u64>,
}

/// Why a relay session's Durable Object ran code: each is billed wall-clock duration (and a
/// request or a WebSocket message, 20 messages to a request) unless it would have been
/// running anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A request from the Worker (a call, a tab's attach, batch POST, lease POST, metrics...).
    Request,
    /// A message (a results batch), close or error on a hibernatable socket; lease pings are
    /// answered by the runtime itself and wake nothing.
    SocketMessage,
    /// The DO's alarm: the run machine's next deadline.
    Alarm,
    /// A ticker on an open response stream fired.
    Tick,
    /// A new instance of the DO started (after it slept and was evicted, or a restart): not a
    /// wake-up of its own (what woke it is counted too), but each is an instance that began
    /// with nothing in memory (`relay_session::kept` is what it takes back).
    Start,
}

impl Wake {
    pub const ALL: [Wake; 5] = [Wake::Request, Wake::SocketMessage, Wake::Alarm, Wake::Tick, Wake::Start];

    /// Its label in `relay_do_wakeups_total{kind}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::Request => "request",
            Wake::SocketMessage => "socket_message",
            Wake::Alarm => "alarm",
            Wake::Tick => "tick",
            Wake::Start => "start",
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a run ended, for [`Snapshot::observe_run`].
pub struct RunEnd<'a> {
    pub tool: &'a str,
    pub exit_code: i32,
    pub error_name: Option<&'a str>,
    pub queue_wait_ms: u64,
    pub run_ms: u64,
    pub output_bytes: u64,
    pub executor: Option<&'a str>,
}

impl Snapshot {
    pub fn observe_run(&mut self, end: &RunEnd) {
        let language = crate::log::language(end.tool).unwrap_or(end.tool);
        let outcome = match (end.error_name, end.exit_code) {
            (Some(name), _) => name,
            (None, 0) => "ok",
            (None, _) => "exit_nonzero",
        };
        *self.runs.entry(format!("{language}|{outcome}")).or_default() += 1;
        self.queue_wait_ms.observe(&MS_BUCKETS, end.queue_wait_ms);
        self.run_ms.observe(&MS_BUCKETS, end.run_ms);
        self.output_bytes.observe(&BYTE_BUCKETS, end.output_bytes);
        if let Some(executor) = end.executor {
            *self.executor_runs.entry(executor.to_owned()).or_default() += 1;
            *self.executor_ms.entry(executor.to_owned()).or_default() += end.run_ms;
        }
    }

    pub fn observe_denial(&mut self, kind: &str) {
        *self.denials.entry(kind.to_owned()).or_default() += 1;
    }

    pub fn observe_upstream_call(&mut self, server: &str, outcome: &str) {
        *self.upstream_calls.entry(format!("{server}|{outcome}")).or_default() += 1;
    }

    /// A capsule built, signed and stored in `ms`.
    pub fn observe_build(&mut self, ms: u64) {
        self.build_ms.observe(&MS_BUCKETS, ms);
    }

    pub fn merge(&mut self, other: &Snapshot) {
        for (mine, theirs) in [
            (&mut self.runs, &other.runs),
            (&mut self.denials, &other.denials),
            (&mut self.upstream_calls, &other.upstream_calls),
            (&mut self.executor_runs, &other.executor_runs),
            (&mut self.executor_ms, &other.executor_ms),
            (&mut self.storage_failures, &other.storage_failures),
            (&mut self.wakeups, &other.wakeups),
            (&mut self.alarm_writes, &other.alarm_writes),
        ] {
            for (key, n) in theirs {
                *mine.entry(key.clone()).or_default() += n;
            }
        }
        self.build_ms.merge(&other.build_ms);
        self.queue_wait_ms.merge(&other.queue_wait_ms);
        self.run_ms.merge(&other.run_ms);
        self.output_bytes.merge(&other.output_bytes);
        self.wasm_memory_bytes = self.wasm_memory_bytes.max(other.wasm_memory_bytes);
    }

    /// The Prometheus text exposition (format 0.0.4) of `tenant`'s metrics.
    pub fn prometheus(&self, tenant: &str) -> String {
        let mut out = String::new();
        let tenant_label = format!("tenant=\"{}\"", escape(tenant));
        counter(
            &mut out,
            "relay_runs_total",
            "Runs that ended, by language and outcome.",
            &tenant_label,
            &self.runs,
            ["language", "outcome"],
        );
        let denials = self.denials.iter().map(|(k, v)| (k.clone(), *v)).collect();
        counter(
            &mut out,
            "relay_policy_denials_total",
            "Things the policy refused guest code, by kind.",
            &tenant_label,
            &denials,
            ["kind", ""],
        );
        counter(
            &mut out,
            "relay_upstream_calls_total",
            "Calls of upstream MCP servers, by server and outcome.",
            &tenant_label,
            &self.upstream_calls,
            ["server", "outcome"],
        );
        counter(
            &mut out,
            "relay_executor_runs_total",
            "Runs that were sent to an executor, by executor (tab or edge).",
            &tenant_label,
            &self.executor_runs,
            ["executor", ""],
        );
        counter(
            &mut out,
            "relay_executor_run_ms_total",
            "Milliseconds of runs by executor (tab or edge): what edge runs cost.",
            &tenant_label,
            &self.executor_ms,
            ["executor", ""],
        );
        counter(
            &mut out,
            "relay_storage_failures_total",
            "Writes to a relay session's storage that failed (its audit chain among them), by what.",
            &tenant_label,
            &self.storage_failures,
            ["what", ""],
        );
        counter(
            &mut out,
            "relay_do_wakeups_total",
            "Times a relay session's Durable Object ran code, by kind (request, socket_message, alarm, tick; start counts new instances, each woken by one of the others).",
            &tenant_label,
            &self.wakeups,
            ["kind", ""],
        );
        counter(
            &mut out,
            "relay_do_alarm_writes_total",
            "Writes of a relay session's Durable Object alarm, by op (set, delete): only runs in hand past a tick set it.",
            &tenant_label,
            &self.alarm_writes,
            ["op", ""],
        );
        histogram(
            &mut out,
            "relay_build_ms",
            "Capsule build, signing and storage time.",
            &tenant_label,
            &self.build_ms,
            &MS_BUCKETS,
        );
        histogram(
            &mut out,
            "relay_queue_wait_ms",
            "Time from a call's admission to its run's start.",
            &tenant_label,
            &self.queue_wait_ms,
            &MS_BUCKETS,
        );
        histogram(&mut out, "relay_run_ms", "Run time in the executor tab.", &tenant_label, &self.run_ms, &MS_BUCKETS);
        histogram(
            &mut out,
            "relay_output_bytes",
            "stdout and stderr bytes of a run.",
            &tenant_label,
            &self.output_bytes,
            &BYTE_BUCKETS,
        );
        let name = "relay_wasm_memory_bytes";
        let _ = writeln!(
            out,
            "# HELP {name} Largest wasm linear memory among the isolates of the tenant's relay sessions.\n# TYPE {name} gauge\n{name}{{{tenant_label}}} {}",
            self.wasm_memory_bytes
        );
        out
    }
}

/// The tenant's quotas as gauges, from its ledger's usage (`quota::Ledger::usage`, the shape
/// `relay://usage` shows): `relay_quota_limit` and `relay_quota_used` by quota; a quota with no
/// value (an edge budget the tenant lacks) has no limit line.
pub fn quota_gauges(tenant: &str, usage: &serde_json::Value) -> String {
    let tenant_label = format!("tenant=\"{}\"", escape(tenant));
    let quotas = usage.as_object().into_iter().flatten();
    let mut out = String::new();
    for (field, name, help) in [
        (
            "limit",
            "relay_quota_limit",
            "Each quota's value (defaults.quotas; edgeCpuMsPerDay is defaults.edge.cpuMsPerDay).",
        ),
        ("used", "relay_quota_used", "What the tenant used of each quota in its current window."),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (quota, figures) in quotas.clone() {
            if let Some(n) = figures[field].as_u64() {
                let _ = writeln!(out, "{name}{{{tenant_label},quota=\"{}\"}} {n}", escape(quota));
            }
        }
    }
    out
}

/// A counter family whose keys are `a|b` (or `a` with one label).
fn counter(out: &mut String, name: &str, help: &str, tenant: &str, values: &BTreeMap<String, u64>, labels: [&str; 2]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (key, n) in values {
        let mut parts = key.splitn(2, '|');
        let mut set = tenant.to_owned();
        for label in labels.iter().filter(|l| !l.is_empty()) {
            let _ = write!(set, ",{label}=\"{}\"", escape(parts.next().unwrap_or("")));
        }
        let _ = writeln!(out, "{name}{{{set}}} {n}");
    }
}

fn histogram(out: &mut String, name: &str, help: &str, tenant: &str, h: &Histogram, bounds: &[u64]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, bound) in bounds.iter().enumerate() {
        cumulative += h.buckets.get(i).copied().unwrap_or(0);
        let _ = writeln!(out, "{name}_bucket{{{tenant},le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{{tenant},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{tenant}}} {}\n{name}_count{{{tenant}}} {}", h.sum, h.count);
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
pub fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
