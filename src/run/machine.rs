//! One relay session's runs as a pure state machine: the queue, the tabs attached as executors
//! and which one gets the next run, every deadline, each run's log and the verdicts on the
//! tab's backchannel, cancellation. It has no clock and does no I/O: the relay session
//! (`relay_session::desk`) feeds it [`Input`]s with the current time and performs the
//! [`Output`]s it returns.
//!
//! A run is admitted (its place in line is fixed before its capsule is stored, so runs start
//! in admission order), made ready, sent to the newest tab, acknowledged, executed, and ends
//! exactly once, with one [`Output::Finish`]. One run executes at a time per relay session.
//!
//! Deadlines (docs/ARCHITECTURE.md "Invariants"): a tab whose lease lapses (`lease`: not heard
//! from for `lease::TAB_LEASE_MS`) is dropped, and its run goes back to the front of the line if
//! the tab never acknowledged it (it never started) or ends if it had; a run on a tab whose lease
//! holds is never taken for lost, however busy the tab: it must finish within `LOAD_BUDGET_MS +
//! timeout + TIMEOUT_GRACE_MS` of being sent, and once the tab says the program started, within
//! `timeout + TIMEOUT_GRACE_MS`; a run waits for a tab at most the tenant's attach wait, and in
//! the queue at most its max wait.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

use super::backchannel::{Applied, EventBody, Exit, RunLog, TabEvent, DENIALS_AUDITED};
use super::contexts::Report;
use super::executor::{EdgeBudget, EdgeMeter, Executor, EDGE, EDGE_LOAD_MS};
use super::lease::{TabLease, TAB_LEASE_MS};
use super::queue::{Admission, RunQueue};
use crate::auth::QueueSettings;
use crate::error::ErrorName;

/// What a tab may spend fetching a capsule and loading a runtime before the program starts
/// (the page gives loading a runtime no more, and no more than the run's own timeout).
pub const LOAD_BUDGET_MS: u64 = 120_000;
/// How long past its own timeout a silent tab gets before the run is declared timed out (the
/// tab enforces the timeout itself and reports it; this is for a tab that cannot).
pub const TIMEOUT_GRACE_MS: u64 = 10_000;
/// The longest run `timeout_ms` may take from its admission under `settings`, however it goes
/// (requeued after tabs that took it and went silent, started late on a busy tab): its queue
/// wait, its attach wait, a tab's load budget (an edge start is shorter), its timeout and the
/// grace. The machine ends a run still going then (`end_overdue`), so its slot in the tenant's
/// runs in flight can be leased for this long (`quota::run_lease`).
pub fn run_life_ms(settings: &QueueSettings, timeout_ms: u64) -> u64 {
    let load_ms = LOAD_BUDGET_MS.max(EDGE_LOAD_MS);
    settings.max_wait_ms + settings.attach_wait_ms + load_ms + timeout_ms + TIMEOUT_GRACE_MS + 1_000
}

/// Ended runs remembered, so that late or retried batches get a clear 409.
pub const FINISHED_KEPT: usize = 64;
/// The longest note of what a busy tab is doing that a run keeps for its timeout message.
const BUSY_NOTE_CHARS: usize = 300;
/// A sent run's client hears of it at least this often (at the ticks of its open stream, which
/// come every couple of seconds; not a deadline of `next_wake`): when its tab said nothing
/// forwarded for this long, the machine forwards a progress beat of its own (`running`, or `starting`
/// before the program started, with the seconds since it was sent). A client that resets its
/// request timeout on progress (the TypeScript SDK's `resetTimeoutOnProgress`) then keeps
/// waiting for a long run; the tab's lease says nothing to the client.
pub const PROGRESS_EVERY_MS: u64 = 2_000;

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A `tools/call` for a run: takes its place in line (`Admitted` or `Refused`), to run on
    /// the executors `executor` names.
    Admit { run: String, timeout_ms: u64, output_cap: u64, executor: Executor },
    /// The run's capsule is stored: it may be sent when its turn comes.
    Ready { run: String },
    /// A tab opened its command stream.
    TabAttached { tab: String },
    /// A tab's command stream could not be written, or it said goodbye: it is gone.
    TabGone { tab: String },
    /// A tab renewed its lease at `at_ms` (the DO reads when it last pinged, so this may be a
    /// little before now). Changes nothing else: it needs no answer and moves no run.
    TabSeen { tab: String, at_ms: u64 },
    /// A batch from a tab's backchannel (answered with `Reply`).
    /// `tab`: the tab that sent it, when it says (an event from another tab than the run's is
    /// refused: the run went to it only because that tab was taken for dead).
    Heard { tab: Option<String>, events: Vec<TabEvent> },
    /// Time passed: deadlines are checked.
    Tick,
    /// The run is to end now, for this reason.
    Cancel { run: String, why: Cancel },
}

/// Why a run bound for the edge ends when its tenant has no edge budget (an admin removed
/// `defaults.edge` while it waited): the edge is never used unmetered.
const NO_BUDGET: &str = "this tenant has no edge budget now (defaults.edge was removed), so the run cannot go to the edge. The relay's operator can set one (PATCH /admin/tenants/<id> with defaults.edge); or open the relay page in a browser and run the tool again.";

/// Why a run is cancelled.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancel {
    /// The client sent `notifications/cancelled`: its request gets no answer.
    ByClient,
    /// The client closed the request's response stream.
    ClientGone,
    /// The run could not be prepared (its capsule was not stored).
    Unprepared(String),
    /// Its executor could not run it (the edge's job, isolate or stream failed), with why.
    Failed(ErrorName, String),
    /// The edge refused it before any isolate had it (its job could not be made), with why:
    /// it costs the edge budget nothing, neither its start nor its time.
    Unstarted(ErrorName, String),
}

/// What the DO must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The run is in line.
    Admitted { run: String },
    /// The queue is full (`max` waiting): the run was not admitted.
    Refused { run: String, max: u32 },
    /// Write a command to a tab's stream (a failed write is `Input::TabGone`).
    Send { tab: String, command: Command },
    /// Close a tab's stream: it is taken for dead.
    DropTab { tab: String },
    /// Stream this to the run's client (output kept under the cap, progress).
    Forward { run: String, body: EventBody },
    /// The run ended: answer its client (unless `answer` is false) and audit it.
    Finish { run: String, outcome: Outcome, answer: bool },
    /// The answer to a `Heard` batch.
    Reply(BatchReply),
}

/// A command for a tab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Start this run: its `capsule` (or `file`) command, as the DO prepared it.
    Capsule { run: String },
    /// Stop this run.
    Cancel { run: String },
}

/// How a run ended and what it printed (within its output cap).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
    /// The relay ended the run (a deadline, a cancel, a lost tab): its error message is the
    /// relay's own words. Otherwise the tab reported the end, and the message may quote the run.
    pub by_relay: bool,
    /// What became of the run's context, if it named one (the relay session's book adds it).
    pub context: Option<Report>,
    /// Where it was sent last (`tab` or `edge`), if it was sent at all.
    pub executor: Option<&'static str>,
    /// The milliseconds it was charged at the edge (0: it never ran there), which the tenant's
    /// ledger adds to its day (`quota`).
    pub edge_ms: u64,
}

/// The answer to a backchannel batch: each event applied, skipped as a duplicate, or refused.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchReply {
    pub applied: usize,
    pub duplicates: usize,
    /// `(run, seq, why)` of each refused event.
    pub refused: Vec<(String, u64, EventRefusal)>,
}

/// Why an event was refused. Each means the relay session no longer wants the run from this tab
/// (it ended, never was, went back to the queue, or lost events on the way, which ends it): the
/// tab stops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventRefusal {
    UnknownRun,
    NotOnTab,
    Ended,
    Gap { expected: u64 },
}

impl EventRefusal {
    /// A stable word for the page to act on.
    pub fn code(self) -> &'static str {
        match self {
            EventRefusal::UnknownRun => "unknown",
            EventRefusal::NotOnTab => "not-on-tab",
            EventRefusal::Ended => "ended",
            EventRefusal::Gap { .. } => "gap",
        }
    }

    fn reason(self, run: &str) -> String {
        match self {
            EventRefusal::UnknownRun => format!("no run {run} in this relay session"),
            EventRefusal::NotOnTab => {
                "the run is not on this tab (it went back to the queue, or to another tab)".to_owned()
            }
            EventRefusal::Ended => "the run has already ended".to_owned(),
            EventRefusal::Gap { expected } => format!("expected seq {expected}: events were lost, the run ended"),
        }
    }
}

impl BatchReply {
    /// 200 when nothing was refused; 404 when every refused event named an unknown run and
    /// nothing else was in the batch; 409 otherwise.
    pub fn status(&self) -> u16 {
        let unknown = self.refused.iter().filter(|(_, _, why)| *why == EventRefusal::UnknownRun).count();
        match self.refused.len() {
            0 => 200,
            n if n == unknown && self.applied + self.duplicates == 0 => 404,
            _ => 409,
        }
    }

    pub fn to_json(&self) -> Value {
        let refused: Vec<Value> = self
            .refused
            .iter()
            .map(|(run, seq, why)| json!({ "runId": run, "seq": seq, "code": why.code(), "reason": why.reason(run) }))
            .collect();
        let mut body = json!({ "applied": self.applied, "duplicates": self.duplicates, "refused": refused });
        let name = match self.status() {
            404 => "UnknownRun",
            409 => "EventsRefused",
            _ => return body,
        };
        let total = self.applied + self.duplicates + self.refused.len();
        let message = format!("{} of {total} events refused", self.refused.len());
        body["error"] = json!({ "name": name, "message": message });
        body
    }
}

/// Where a sent run is.
#[derive(Debug, Clone)]
struct Assignment {
    tab: String,
    /// The tab has said something of the run: it has it, so it never goes to another tab.
    acknowledged: bool,
    /// The tab said the program started (`execute`).
    executing: bool,
    /// What the tab last said it was doing before the program started (a progress phase and
    /// its detail, such as the run it is queued behind), for the timeout message.
    busy_note: Option<String>,
    deadline_ms: u64,
    /// At the edge: the deadline is the tenant's edge time left today, not the run's timeout.
    budget_cut: bool,
    /// When the run was sent, and when its client was last forwarded anything of it.
    sent_ms: u64,
    last_forward_ms: u64,
}

/// An attached tab.
#[derive(Debug, Clone)]
struct Tab {
    id: String,
    lease: TabLease,
}

#[derive(Debug, Clone)]
struct Run {
    log: RunLog,
    timeout_ms: u64,
    /// When it ends at the latest, running or not: its admission plus `run_life_ms`.
    end_by_ms: u64,
    assigned: Option<Assignment>,
    /// Since when the run has been waiting with no tab attached.
    no_tab_since: Option<u64>,
    /// The executors it may go to.
    executor: Executor,
    /// It may go to the edge now (a `tab-or-edge` run that waited for a tab long enough).
    edge_now: bool,
    /// Where it was last sent: `tab` or `edge`.
    sent_to: Option<&'static str>,
    /// False once the client cancelled its request: it gets no answer.
    answer: bool,
}

impl Run {
    fn ended(&self) -> bool {
        self.log.exit.is_some()
    }
}

/// The runs of one relay session.
#[derive(Debug, Clone)]
pub struct RunMachine {
    settings: QueueSettings,
    queue: RunQueue,
    /// Attached tabs, oldest first; the newest gets the next run (an older one may be gone
    /// without anyone having noticed yet: its lease says so soon).
    tabs: Vec<Tab>,
    runs: HashMap<String, Run>,
    /// Ended runs, oldest first, kept for late batches until `FINISHED_KEPT` have ended since.
    finished: VecDeque<String>,
    /// When the last tab went away: until a lease time later, one may be coming back.
    tab_left_ms: Option<u64>,
    /// The tenant's edge budget (none: nothing goes to the edge) and what was spent of it.
    edge_budget: Option<EdgeBudget>,
    meter: EdgeMeter,
}

impl RunMachine {
    /// A relay session with the tenant's queue settings.
    pub fn new(settings: QueueSettings) -> Self {
        RunMachine {
            queue: RunQueue::new(settings.max_queued, settings.max_wait_ms),
            settings,
            tabs: Vec::new(),
            runs: HashMap::new(),
            finished: VecDeque::new(),
            tab_left_ms: None,
            edge_budget: None,
            meter: EdgeMeter::default(),
        }
    }

    /// Takes the tenant's edge budget as it is now (none: no run goes to the edge).
    pub fn set_edge_budget(&mut self, budget: Option<EdgeBudget>) {
        self.edge_budget = budget;
    }

    /// The tenant's edge spend today across its relay sessions (as its ledger last said at
    /// `now_ms`): this relay session's budget checks count it, when it is more than its own.
    pub fn edge_spent_by_tenant(&mut self, now_ms: u64, spent_ms: u64) {
        self.meter.seed(now_ms, spent_ms);
    }

    /// What this relay session spent of its edge budget (kept across instances).
    pub fn edge_meter(&self) -> &EdgeMeter {
        &self.meter
    }

    /// The meter an earlier instance kept.
    pub fn restore_edge_meter(&mut self, meter: EdgeMeter) {
        self.meter = meter;
    }

    /// Milliseconds of edge runs spent today, for the metrics.
    pub fn edge_spent_ms(&self) -> u64 {
        self.meter.spent_ms()
    }

    /// Takes the tenant's queue settings as they are now (a `PATCH` of its `queue` applies at
    /// once). Nothing admitted is cancelled, refused or reordered by the change itself: a queue
    /// longer than a lowered `max_queued` keeps its runs and refuses new ones until it is
    /// shorter; the waits bound every run from the next input on.
    pub fn configure(&mut self, settings: &QueueSettings) {
        if self.settings != *settings {
            self.queue.set_limits(settings.max_queued, settings.max_wait_ms);
            self.settings = settings.clone();
        }
    }

    /// Applies `input` at `now_ms`; returns what the DO must do, in order.
    pub fn handle(&mut self, now_ms: u64, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        match input {
            Input::Admit { run, timeout_ms, output_cap, executor } => {
                self.admit(now_ms, run, (timeout_ms, output_cap), executor, &mut out)
            }
            Input::Ready { run } => self.queue.mark_ready(&run),
            Input::TabAttached { tab } => self.tabs.push(Tab { id: tab, lease: TabLease::new(now_ms) }),
            Input::TabGone { tab } => self.tab_gone(now_ms, &tab, &mut out),
            Input::TabSeen { tab, at_ms } => {
                // A reading stamped past the DO's clock (which stands still while it computes)
                // counts as now: nothing stretches a lease past now + TAB_LEASE_MS.
                self.renew(&tab, at_ms.min(now_ms));
                return out;
            }
            Input::Heard { tab, events } => {
                let reply = self.heard(now_ms, tab.as_deref(), &events, &mut out);
                out.push(Output::Reply(reply));
            }
            Input::Tick => {
                self.check_running(now_ms, &mut out);
                self.progress_beat(now_ms, &mut out);
            }
            Input::Cancel { run, why } => self.cancel(now_ms, &run, why, &mut out),
        }
        self.end_overdue(now_ms, &mut out);
        self.expire_tabs(now_ms, &mut out);
        self.pump(now_ms, &mut out);
        out
    }

    /// When the next deadline falls, if any: the DO ticks the machine then at the latest.
    pub fn next_wake(&self) -> Option<u64> {
        let wait = self.settings.max_wait_ms;
        let attach = self.settings.attach_wait_ms;
        self.runs
            .values()
            .filter(|run| !run.ended())
            .flat_map(|run| {
                let assigned = run.assigned.as_ref().map(|a| match a.tab.as_str() {
                    EDGE => a.deadline_ms,
                    tab => self.lease_of(tab).map_or(0, |lease| lease.expires_at_ms()).min(a.deadline_ms),
                });
                let attach_wait = run.no_tab_since.map(|since| since.saturating_add(attach));
                let tab_gone = self.tab_left_ms.filter(|_| run.executor == Executor::TabOrEdge && !run.edge_now);
                let tab_gone = tab_gone.map(|left| left.saturating_add(TAB_LEASE_MS));
                [assigned, attach_wait, tab_gone, Some(run.end_by_ms)]
            })
            .flatten()
            .chain(self.queue.oldest_waiting_since().map(|since| since.saturating_add(wait).saturating_add(1)))
            .min()
    }

    /// Attached tabs, oldest first.
    pub fn tabs(&self) -> Vec<String> {
        self.tabs.iter().map(|tab| tab.id.clone()).collect()
    }

    /// Runs waiting (not counting the one running).
    pub fn queue_depth(&self) -> usize {
        self.queue.depth()
    }

    /// `Some(max)` when the queue is full: a run admitted now would be `Refused`. Asked before
    /// a call's capsule is built, so that a refusal costs nothing but the asking.
    pub fn queue_full(&self) -> Option<u32> {
        self.queue.full()
    }

    /// A run still in hand: whether a tab has it, and its stdout and stderr so far (within
    /// its output cap).
    pub fn progress(&self, run: &str) -> Option<(bool, &str, &str)> {
        self.runs.get(run).map(|r| (r.assigned.is_some(), r.log.stdout.as_str(), r.log.stderr.as_str()))
    }

    fn admit(&mut self, now_ms: u64, run: String, limits: (u64, u64), executor: Executor, out: &mut Vec<Output>) {
        let (timeout_ms, output_cap) = limits;
        if self.runs.contains_key(&run) {
            return; // run ids are unique: a repeat is ignored
        }
        match self.queue.reserve(&run, now_ms) {
            Admission::Full { max } => out.push(Output::Refused { run, max }),
            Admission::Queued => {
                let entry = Run {
                    log: RunLog::new(output_cap),
                    timeout_ms,
                    end_by_ms: now_ms.saturating_add(run_life_ms(&self.settings, timeout_ms)),
                    assigned: None,
                    no_tab_since: None,
                    executor,
                    edge_now: executor == Executor::Edge,
                    sent_to: None,
                    answer: true,
                };
                self.runs.insert(run.clone(), entry);
                out.push(Output::Admitted { run });
            }
        }
    }

    fn tab_gone(&mut self, now_ms: u64, tab: &str, out: &mut Vec<Output>) {
        self.tabs.retain(|t| t.id != tab);
        if self.tabs.is_empty() {
            self.tab_left_ms = Some(now_ms);
        }
        if let Some(run) = self.running_on(tab) {
            self.lost(now_ms, &run, out);
        }
    }

    /// Tab `tab`, if attached, was heard from at `at_ms`.
    fn renew(&mut self, tab: &str, at_ms: u64) {
        if let Some(attached) = self.tabs.iter_mut().find(|t| t.id == tab) {
            attached.lease.renew(at_ms);
        }
    }

    fn lease_of(&self, tab: &str) -> Option<&TabLease> {
        self.tabs.iter().find(|t| t.id == tab).map(|t| &t.lease)
    }

    /// Drops the tabs whose lease lapsed: they are gone, whatever their streams look like.
    fn expire_tabs(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let lapsed: Vec<String> = self.tabs.iter().filter(|t| t.lease.lapsed(now_ms)).map(|t| t.id.clone()).collect();
        for tab in lapsed {
            out.push(Output::DropTab { tab: tab.clone() });
            self.tab_gone(now_ms, &tab, out);
        }
    }

    /// The run's tab is gone: a run it never acknowledged goes back to the front of the line
    /// (it never started); one it had started ends.
    fn lost(&mut self, now_ms: u64, run: &str, out: &mut Vec<Output>) {
        let Some(entry) = self.runs.get_mut(run) else { return };
        let Some(assigned) = entry.assigned.take() else { return };
        if assigned.acknowledged {
            let message = "the executor tab went away mid-run (closed, reloaded or offline); run the tool again";
            self.end(now_ms, run, ErrorName::Internal, message.into(), out);
        } else {
            self.queue.requeue_front(run, now_ms);
        }
    }

    fn running_on(&self, tab: &str) -> Option<String> {
        let run = self.queue.running()?;
        let assigned = self.runs.get(run)?.assigned.as_ref()?;
        (assigned.tab == tab).then(|| run.to_owned())
    }

    /// Applies a batch, event by event: a retried batch's events are duplicates; an event for
    /// an unknown run, a run not on a tab, an ended run, or past a gap is refused alone.
    fn heard(&mut self, now_ms: u64, tab: Option<&str>, events: &[TabEvent], out: &mut Vec<Output>) -> BatchReply {
        let mut reply = BatchReply { applied: 0, duplicates: 0, refused: Vec::new() };
        if let Some(tab) = tab {
            self.renew(tab, now_ms); // any word from a tab renews its lease
        }
        for event in events {
            let refusal = match self.apply(now_ms, tab, event, out) {
                Ok(Applied::New) => {
                    reply.applied += 1;
                    continue;
                }
                Ok(Applied::Duplicate) => {
                    reply.duplicates += 1;
                    continue;
                }
                Ok(Applied::Gap { expected }) => {
                    self.results_lost(now_ms, &event.run_id, expected, out);
                    EventRefusal::Gap { expected }
                }
                Ok(Applied::Finished) => EventRefusal::Ended,
                Err(why) => why,
            };
            reply.refused.push((event.run_id.clone(), event.seq, refusal));
        }
        reply
    }

    /// Applies one event to its run's log, if the run is on a tab or has ended.
    fn apply(
        &mut self,
        now_ms: u64,
        tab: Option<&str>,
        event: &TabEvent,
        out: &mut Vec<Output>,
    ) -> Result<Applied, EventRefusal> {
        let run = self.runs.get_mut(&event.run_id).ok_or(EventRefusal::UnknownRun)?;
        if run.ended() {
            return Ok(run.log.apply(event));
        }
        let Some(assigned) = run.assigned.as_mut().filter(|a| tab.is_none_or(|tab| a.tab == tab)) else {
            return Err(EventRefusal::NotOnTab);
        };
        assigned.acknowledged = true;
        let before = (run.log.stdout.len(), run.log.stderr.len());
        let applied = run.log.apply(event);
        if applied != Applied::New {
            return Ok(applied);
        }
        let forward = match &event.body {
            EventBody::Stdout { .. } => Some(EventBody::Stdout { data: run.log.stdout[before.0..].to_owned() }),
            EventBody::Stderr { .. } => Some(EventBody::Stderr { data: run.log.stderr[before.1..].to_owned() }),
            EventBody::Progress { phase, detail, .. } => {
                if phase == "execute" {
                    assigned.executing = true;
                    if !assigned.budget_cut {
                        assigned.deadline_ms = now_ms.saturating_add(run.timeout_ms).saturating_add(TIMEOUT_GRACE_MS);
                    }
                } else if let Some(detail) = detail.as_deref().filter(|_| !assigned.executing) {
                    assigned.busy_note = Some(format!("{phase}: {detail}").chars().take(BUSY_NOTE_CHARS).collect());
                }
                Some(event.body.clone())
            }
            EventBody::Denied { .. } => (run.log.denials <= DENIALS_AUDITED).then(|| event.body.clone()),
            EventBody::Exit { .. } | EventBody::Error(_) => None,
        };
        let kept_nothing =
            matches!(&forward, Some(EventBody::Stdout { data } | EventBody::Stderr { data }) if data.is_empty());
        if let Some(body) = forward.filter(|_| !kept_nothing) {
            assigned.last_forward_ms = now_ms;
            out.push(Output::Forward { run: event.run_id.clone(), body });
        }
        if run.ended() {
            self.finish(now_ms, &event.run_id, false, out);
        }
        Ok(Applied::New)
    }

    /// Events of a run went missing between its tab and here (the tab gives up on a batch after
    /// its retries, and never resends): its output is incomplete, so the run ends, and its tab
    /// is told to stop.
    fn results_lost(&mut self, now_ms: u64, run: &str, expected: u64, out: &mut Vec<Output>) {
        if let Some(assigned) = self.runs.get(run).and_then(|entry| entry.assigned.as_ref()) {
            out.push(Output::Send { tab: assigned.tab.clone(), command: Command::Cancel { run: run.to_owned() } });
        }
        let from = self.runs.get(run).and_then(|entry| entry.assigned.as_ref()).map(|a| a.tab.as_str());
        let from = if from == Some(EDGE) { "the edge executor's" } else { "the tab's" };
        let message = format!(
            "{from} results for this run were lost on the way here (from event {expected} on); run the tool again"
        );
        self.end(now_ms, run, ErrorName::Internal, message, out);
    }

    /// The running run's deadline. (Its tab's lease is checked for every input: see
    /// `expire_tabs`.)
    fn check_running(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let Some(run) = self.queue.running().map(str::to_owned) else { return };
        let Some(entry) = self.runs.get(&run) else { return };
        let Some(assigned) = entry.assigned.as_ref().filter(|a| now_ms >= a.deadline_ms) else { return };
        out.push(Output::Send { tab: assigned.tab.clone(), command: Command::Cancel { run: run.clone() } });
        if let Some(budget) = self.edge_budget.filter(|_| assigned.budget_cut) {
            let message = format!(
                "this tenant's edge budget for today ({} ms, defaults.edge.cpuMsPerDay) ran out while the run was going, so it was stopped after {} ms. {}",
                budget.cpu_ms_per_day,
                now_ms.saturating_sub(assigned.sent_ms),
                super::executor::RAISE
            );
            return self.end(now_ms, &run, ErrorName::EdgeBudgetExceeded, message, out);
        }
        let message = timeout_message(assigned, entry.timeout_ms);
        self.end(now_ms, &run, ErrorName::Timeout, message, out);
    }

    /// Ends every run past its `end_by_ms`, wherever it is (`run_life_ms` says why).
    fn end_overdue(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let mut overdue: Vec<String> =
            self.runs.iter().filter(|(_, r)| !r.ended() && now_ms >= r.end_by_ms).map(|(id, _)| id.clone()).collect();
        overdue.sort(); // HashMap order is arbitrary; outputs are not
        for run in overdue {
            let Some(entry) = self.runs.get(&run) else { continue };
            if let Some(assigned) = &entry.assigned {
                out.push(Output::Send { tab: assigned.tab.clone(), command: Command::Cancel { run: run.clone() } });
            }
            let life = run_life_ms(&self.settings, entry.timeout_ms);
            let message = format!(
                "the run did not end within {life} ms of its call (the most a run may take: queue wait, attach wait, load budget, its timeout and a grace; it was handed to tabs that went silent, or its tab started it late); it was stopped: run the tool again"
            );
            self.end(now_ms, &run, ErrorName::Timeout, message, out);
        }
    }

    /// A progress beat for the running run whose client heard nothing of it for
    /// `PROGRESS_EVERY_MS` (see there).
    fn progress_beat(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let Some(run) = self.queue.running().map(str::to_owned) else { return };
        let Some(assigned) = self.runs.get_mut(&run).and_then(|entry| entry.assigned.as_mut()) else { return };
        if now_ms < assigned.last_forward_ms.saturating_add(PROGRESS_EVERY_MS) {
            return;
        }
        assigned.last_forward_ms = now_ms;
        let phase = if assigned.executing { "running" } else { "starting" };
        let detail = format!("{} s", now_ms.saturating_sub(assigned.sent_ms) / 1000);
        let beat = EventBody::Progress { phase: phase.into(), runtime_id: None, detail: Some(detail) };
        out.push(Output::Forward { run, body: beat });
    }

    fn cancel(&mut self, now_ms: u64, run: &str, why: Cancel, out: &mut Vec<Output>) {
        let Some(entry) = self.runs.get_mut(run) else { return };
        if entry.ended() {
            return;
        }
        if let Some(assigned) = &entry.assigned {
            out.push(Output::Send { tab: assigned.tab.clone(), command: Command::Cancel { run: run.to_owned() } });
        }
        let (name, message) = match why {
            Cancel::ByClient => {
                entry.answer = false;
                (ErrorName::Cancelled, "the client cancelled the request".to_owned())
            }
            Cancel::ClientGone => (ErrorName::Cancelled, "the client closed the request".to_owned()),
            Cancel::Unprepared(why) => (ErrorName::Internal, format!("the run could not be prepared: {why}")),
            Cancel::Failed(name, message) => (name, message),
            Cancel::Unstarted(name, message) => {
                if let Some(assigned) = entry.assigned.as_mut().filter(|a| a.tab == EDGE) {
                    self.meter.take_back_start(assigned.sent_ms);
                    assigned.sent_ms = now_ms; // `finish` charges nothing
                }
                (name, message)
            }
        };
        self.end(now_ms, run, name, message, out);
    }

    /// Moves the line on: expired runs end, runs waiting too long for a tab end, and the next
    /// ready run goes where `target` says. A head the edge refuses ends at once, and the line
    /// moves on to the run behind it (else it would wait for the next input).
    fn pump(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        self.check_attach_wait(now_ms, out);
        loop {
            // Expired runs leave first: the target is the head's that actually starts.
            for run in self.queue.expire(now_ms) {
                let waited = self.settings.max_wait_ms as f64 / 1000.0;
                let message = format!(
                    "the run waited in the queue for over {waited} s (the tenant's queue.maxWaitMs) and was cancelled"
                );
                self.end(now_ms, &run, ErrorName::Cancelled, message, out);
            }
            let Some(head) = self.queue.next().map(str::to_owned) else { return };
            match self.target(now_ms, &head) {
                None => return,
                Some(Err(why)) => self.end(now_ms, &head, ErrorName::EdgeBudgetExceeded, why, out),
                Some(Ok(target)) => {
                    if let Some(run) = self.queue.step(now_ms, true).started {
                        self.send(now_ms, &run, target, out);
                    }
                    return;
                }
            }
        }
    }

    /// Where run `run` goes if it starts now: the newest tab, unless it runs only at the edge;
    /// the edge when it may go there now and the tenant's edge budget has room (`Err`: why it
    /// has none, or no budget at all); else nowhere yet.
    fn target(&self, now_ms: u64, run: &str) -> Option<Result<String, String>> {
        let run = self.runs.get(run)?;
        let tab = self.tabs.last().map(|t| t.id.clone()).filter(|_| run.executor != Executor::Edge);
        if let Some(tab) = tab {
            return Some(Ok(tab));
        }
        run.edge_now.then(|| {
            let budget = self.edge_budget.as_ref().ok_or_else(|| NO_BUDGET.to_owned())?;
            self.meter.check(budget, now_ms).map(|()| EDGE.to_owned())
        })
    }

    /// Whether a tab of this relay session may be coming back: one went away within a lease.
    fn tab_may_return(&self, now_ms: u64) -> bool {
        self.tab_left_ms.is_some_and(|left| now_ms < left.saturating_add(TAB_LEASE_MS))
    }

    /// Runs waiting with no tab attached: a `tab` run waits the attach wait, then ends
    /// `NoExecutorAttached`; a `tab-or-edge` run goes to the edge once the wait is over or no
    /// tab may be coming back (`tab_may_return`), whichever comes first.
    fn check_attach_wait(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let no_tab = self.tabs.is_empty();
        let attach_wait = self.settings.attach_wait_ms;
        let may_return = self.tab_may_return(now_ms);
        let mut gave_up = Vec::new();
        let waiting = self.runs.iter_mut().filter(|(_, run)| !run.ended() && run.assigned.is_none() && !run.edge_now);
        for (id, run) in waiting {
            run.no_tab_since = if no_tab { run.no_tab_since.or(Some(now_ms)) } else { None };
            let waited = run.no_tab_since.is_some_and(|since| now_ms >= since.saturating_add(attach_wait));
            if run.executor == Executor::TabOrEdge {
                run.edge_now = no_tab && (waited || !may_return);
            } else if waited {
                gave_up.push(id.clone());
            }
        }
        gave_up.sort(); // HashMap order is arbitrary; outputs are not
        for run in gave_up {
            let message = format!("no browser tab attached within {attach_wait} ms");
            self.end(now_ms, &run, ErrorName::NoExecutorAttached, message, out);
        }
    }

    fn send(&mut self, now_ms: u64, run: &str, tab: String, out: &mut Vec<Output>) {
        if tab == EDGE {
            self.meter.record_start(now_ms); // `target` checked the budget
        }
        // An edge run gets no more than the tenant's edge time left today (as its ledger said
        // when the run was charged, or this relay session's own count if more): relay sessions
        // running at once then pass the day's budget by one run's worth at most.
        let left_ms =
            self.edge_budget.filter(|_| tab == EDGE).map(|b| b.cpu_ms_per_day.saturating_sub(self.meter.spent_ms()));
        let Some(entry) = self.runs.get_mut(run) else { return };
        let load_ms = if tab == EDGE { EDGE_LOAD_MS } else { LOAD_BUDGET_MS };
        let deadline_ms = now_ms.saturating_add(load_ms + TIMEOUT_GRACE_MS).saturating_add(entry.timeout_ms);
        let cut_ms = left_ms.map_or(u64::MAX, |left| now_ms.saturating_add(left));
        let (deadline_ms, budget_cut) = (deadline_ms.min(cut_ms), cut_ms < deadline_ms);
        entry.sent_to = Some(if tab == EDGE { EDGE } else { "tab" });
        let assigned = Assignment {
            tab: tab.clone(),
            acknowledged: false,
            executing: false,
            busy_note: None,
            deadline_ms,
            budget_cut,
            sent_ms: now_ms,
            last_forward_ms: now_ms,
        };
        entry.assigned = Some(assigned);
        entry.no_tab_since = None;
        out.push(Output::Send { tab, command: Command::Capsule { run: run.to_owned() } });
        let started = EventBody::Progress { phase: "started".into(), runtime_id: None, detail: None };
        out.push(Output::Forward { run: run.to_owned(), body: started });
    }

    /// Ends a run from the server's side, unless it has ended.
    fn end(&mut self, now_ms: u64, run: &str, name: ErrorName, message: String, out: &mut Vec<Output>) {
        let Some(entry) = self.runs.get_mut(run) else { return };
        if entry.ended() {
            return;
        }
        entry.log.fail(name.as_str(), message, name.exit_code());
        self.finish(now_ms, run, true, out);
    }

    /// The run has ended (its log has its exit): free the line and report it, once. Its output
    /// goes with the report: the log the machine keeps for late batches needs only the exit.
    /// A run at the edge is charged here, however it ended, the time from its sending to now on
    /// the relay's clock: the isolate's own clock stands still while it computes, so what it
    /// reports of a CPU-bound run is about nothing.
    fn finish(&mut self, now_ms: u64, run: &str, by_relay: bool, out: &mut Vec<Output>) {
        self.queue.remove(run);
        let Some(entry) = self.runs.get_mut(run) else { return };
        let edge_ms =
            entry.assigned.take().filter(|a| a.tab == EDGE).map_or(0, |edge| now_ms.saturating_sub(edge.sent_ms));
        self.meter.charge(edge_ms);
        let Some(exit) = entry.log.exit.clone() else { return };
        let (stdout, stderr) = (std::mem::take(&mut entry.log.stdout), std::mem::take(&mut entry.log.stderr));
        let outcome = Outcome { exit, stdout, stderr, by_relay, context: None, executor: entry.sent_to, edge_ms };
        out.push(Output::Finish { run: run.to_owned(), outcome, answer: entry.answer });
        self.finished.push_back(run.to_owned());
        while self.finished.len() > FINISHED_KEPT {
            if let Some(old) = self.finished.pop_front() {
                self.runs.remove(&old);
            }
        }
    }
}

/// Why a run on a live tab ran out of time: its program's timeout, or a tab too busy (or stuck)
/// to start it, with what the tab said it was doing; or the edge executor too slow to start it.
fn timeout_message(assigned: &Assignment, timeout_ms: u64) -> String {
    if assigned.executing {
        return format!(
            "the run did not finish within its {timeout_ms} ms timeout (policy.limits.timeoutMs); it was stopped"
        );
    }
    if assigned.tab == EDGE {
        let budget = EDGE_LOAD_MS + timeout_ms + TIMEOUT_GRACE_MS;
        return format!(
            "the edge executor did not start the run within {budget} ms (reading its capsule and workspace, listing the upstream MCP servers for /mcps, or loading its runtime took that long); it was stopped: run the tool again, and if it fails the same way, run it on a browser tab (open the relay page and call with executor \"tab\")"
        );
    }
    let budget = LOAD_BUDGET_MS + timeout_ms + TIMEOUT_GRACE_MS;
    match (&assigned.busy_note, assigned.acknowledged) {
        (Some(note), _) => format!(
            "the executor tab was busy and did not start the run within {budget} ms ({note}); it was stopped: run the tool again once the tab is free"
        ),
        (None, true) => format!(
            "the executor tab took the run but was busy and did not start it within {budget} ms; it was stopped: run the tool again once the tab is free"
        ),
        (None, false) => format!(
            "the executor tab is attached (it keeps its lease) but did not take up the run within {budget} ms, so its page may be stuck; it was stopped: reload the tab, or open another, and run the tool again"
        ),
    }
}
