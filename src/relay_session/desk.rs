//! The runs desk: the run machine (`run::machine`) and what the relay session keeps of each run
//! beside it (how its answer is delivered, its tab command, its build), and the one place the
//! machine is fed: every input goes through [`RelaySession::feed`], which performs the
//! machine's outputs (commands written to tabs, output and ends handed to each run's
//! [`Delivery`], the audit) and returns the answers meant for the caller. Nothing here decides
//! anything about a run: the machine does.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::store::Queued;
use super::tab_sync::{inline_delta, TabVersions, WorkspaceDelta};
use super::{Platform, RelaySession, StorageError};
use crate::auth::QueueSettings;
use crate::packages::PendingBuild;
use crate::protocol::{Caller, RanCommand, TabCommand, TabsCommand};
use crate::run::backchannel::EventBody;
use crate::run::contexts::{Ask, Claim, ContextSettings, Contexts, RunEnd};
use crate::run::executor::{EdgeBudget, Executor, EDGE};
use crate::run::machine::{Cancel, Command, Input, Outcome, Output, RunMachine};
use crate::run::readiness::Readiness;

/// Answers of legacy streamed calls, kept for a client that resumes its stream (it may have
/// missed one that was sent); the oldest go first.
pub const ANSWERS_KEPT: usize = 16;
/// The edge runs a page attaching is told of (the newest), as many as its list shows.
pub const EDGE_RUNS_KEPT: usize = 20;
/// What a tab's stream gets when nothing else: a write that fails is how a closed tab is noticed.
pub const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// A response stream being written (a run's answer, as SSE frames).
pub trait Frames {
    /// Writes a frame; false when no one reads the stream any more.
    fn send(&self, frame: Vec<u8>) -> bool;
}

/// How a run's progress and answer reach its client (see `runs.rs`).
pub trait Delivery<F> {
    /// Output or progress, as it comes.
    fn forward(&mut self, body: &EventBody);
    /// The run ended at `now_ms` (`answer`: false when the client cancelled the request). Returns the
    /// answer when a client may come back for it (a legacy stream, which can be resumed).
    fn finish(&mut self, outcome: Outcome, answer: bool, now_ms: u64) -> Option<Value>;
    /// A client of MCP session `session` resumes the stream on `frames`; false when it may not.
    fn resume(&mut self, session: &str, frames: F) -> bool;
}

/// The tabs attached to the relay session, as the desk reaches them (the Durable Object's tab
/// roster: their command streams, results sockets and lease sockets).
pub trait Tabs {
    /// The tabs with an open command stream.
    fn ids(&self) -> Vec<String>;
    /// Writes to a tab's command stream; false (and the tab forgotten) when it is gone.
    fn write(&self, tab: &str, frame: Vec<u8>) -> bool;
    /// A run's command also goes on the tab's results socket, which gets there sooner (the
    /// page runs whichever copy comes first); a copy lost with its socket costs nothing.
    fn copy_to_socket(&self, tab: &str, frame: &[u8]);
    /// Forgets a tab's stream, which ends it, and closes its sockets.
    fn drop_tab(&self, tab: &str);
    /// When each tab last renewed its lease.
    fn seen(&self) -> Vec<(String, u64)>;
    /// What `tab` last said of its runtimes.
    fn readiness(&self, tab: &str) -> Option<Readiness>;
}

/// What the relay session keeps of a run besides the machine's view of it.
struct RunIo<F> {
    delivery: Box<dyn Delivery<F>>,
    /// The command for a tab (`capsule` or `build`), once the run is prepared, and its frame.
    command: Option<(TabCommand, Vec<u8>)>,
    /// Who called: the tenant (its workspace cap, its upstream servers) and the relay session.
    caller: Caller,
    /// The runtime a capsule runs on (none for a file tool).
    runtime: Option<String>,
    /// Identifies the MCP request, for `notifications/cancelled` ([`request_key`]).
    request_key: String,
    /// The context the run names, as its admission claimed it.
    context: Option<Claim>,
    /// The tab it was sent to.
    tab: Option<String>,
}

/// The run machine and the runs in hand.
pub struct Desk<F> {
    pub(super) machine: RefCell<Option<RunMachine>>,
    runs: RefCell<HashMap<String, RunIo<F>>>,
    /// Run -> its answer, for legacy calls whose client may resume (oldest first).
    pub(super) kept_answers: RefCell<VecDeque<(String, Value)>>,
    /// Runs whose deps layer a tab is building, by run id (see `builds.rs`).
    builds: RefCell<HashMap<String, PendingBuild>>,
    /// The relay session's contexts (`run::contexts`).
    pub(super) contexts: RefCell<Contexts>,
    /// The `ran` frames of the last runs at the edge, oldest first, for the pages' lists.
    pub(super) edge_runs: RefCell<VecDeque<String>>,
    /// The tenant's queue settings and edge budget as the last request carried them.
    pub(super) settings: RefCell<Option<Settings>>,
    /// The run whose deps build is running at the edge: one at a time per relay session.
    edge_building: RefCell<Option<String>>,
    /// The workspace version each tab was last given (`tab_sync`).
    tab_versions: RefCell<TabVersions>,
}

/// What the run machine is configured with: the tenant's queue settings and edge budget.
pub type Settings = (QueueSettings, Option<EdgeBudget>);

impl<F> Default for Desk<F> {
    fn default() -> Self {
        Desk {
            machine: RefCell::default(),
            runs: RefCell::default(),
            kept_answers: RefCell::default(),
            builds: RefCell::default(),
            contexts: RefCell::default(),
            edge_runs: RefCell::default(),
            settings: RefCell::default(),
            edge_building: RefCell::default(),
            tab_versions: RefCell::default(),
        }
    }
}

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unadmitted {
    /// `max` runs already wait: the 429 to send.
    QueueFull(u32),
    /// Its audit row could not be written: the 503 to send (no run goes unaudited).
    Storage(StorageError),
    /// The context it names cannot be had (the limit): the ValidationError's message.
    Context(String),
}

/// Identifies an MCP request across eras: legacy session id (if any) and JSON-RPC id.
pub fn request_key(session_id: Option<&str>, id: &Value) -> String {
    format!("{}/{id}", session_id.unwrap_or("-"))
}

impl<P: Platform> RelaySession<P> {
    /// Gives the run machine the tenant's queue settings as this request carries them: makes
    /// it on the first request, and later ones update it (a `PATCH` applies at once).
    pub fn configure(&self, settings: &QueueSettings, edge_budget: Option<EdgeBudget>) {
        let mut machine = self.desk.machine.borrow_mut();
        let machine = machine.get_or_insert_with(|| RunMachine::new(settings.clone()));
        machine.configure(settings);
        machine.set_edge_budget(edge_budget);
        *self.desk.settings.borrow_mut() = Some((settings.clone(), edge_budget));
    }

    /// The tenant's edge spend today, as its ledger said when it charged this call.
    pub fn edge_spent_by_tenant(&self, spent_ms: u64) {
        if let Some(machine) = self.desk.machine.borrow_mut().as_mut() {
            machine.edge_spent_by_tenant(self.now_ms(), spent_ms);
        }
    }

    /// Applies `input` to the run machine (see `configure`), performs its outputs, and returns
    /// those meant for the caller: `Admitted`, `Refused`, `Reply`. The machine first hears when
    /// each tab last renewed its lease, so it judges every input on current leases. A tab found
    /// dead while writing to it is fed back as `TabGone`.
    pub fn feed(&self, input: Input) -> Vec<Output> {
        self.read_leases();
        let tabs_before = self.view().0;
        let answers = self.feed_inputs(input);
        let tabs = self.view().0;
        if tabs != tabs_before {
            self.tabs_changed(&tabs);
        }
        answers
    }

    /// The attached tabs are now `tabs`: each hears the roster, and what the relay session
    /// keeps of the others (their contexts, the workspace versions they held) goes.
    fn tabs_changed(&self, tabs: &[String]) {
        self.announce_tabs(tabs);
        self.desk.contexts.borrow_mut().tabs_now(tabs);
        self.desk.tab_versions.borrow_mut().keep_only(tabs);
    }

    /// The page that was tab `previous` attached anew as `tab` (its command stream broke; its
    /// sandbox, and the contexts in it, stayed): the book has those contexts in `tab` now.
    pub fn tab_came_back(&self, previous: &str, tab: &str) {
        self.desk.contexts.borrow_mut().moved(previous, tab);
    }

    /// A new instance takes back `tabs` (oldest first), which an earlier one had attached: each
    /// attaches again, then the tabs hear the roster once, and contexts whose tab did not come
    /// back are lost. Told after each tab instead, the book would lose the contexts of every
    /// tab but the first (it keeps only those of the tabs attached then).
    pub fn take_tabs_back(&self, tabs: Vec<String>) {
        self.read_leases();
        for tab in tabs {
            self.feed_inputs(Input::TabAttached { tab });
        }
        self.tabs_changed(&self.view().0);
    }

    /// Tells every attached tab how many there are and which gets the next run (the newest),
    /// so each page can say whether it runs next. A write that fails is left to the
    /// heartbeat, which notices a gone tab anyway.
    fn announce_tabs(&self, tabs: &[String]) {
        let frame = TabCommand::Tabs(TabsCommand { count: tabs.len(), next: tabs.last().cloned() }).frame();
        for tab in tabs {
            self.platform.tabs().write(tab, frame.clone());
        }
    }

    /// Tells the machine when each tab last renewed its lease (renewals change nothing else,
    /// so their outputs are none).
    fn read_leases(&self) {
        let seen = self.platform.tabs().seen();
        let mut machine = self.desk.machine.borrow_mut();
        let Some(machine) = machine.as_mut() else { return };
        for (tab, at_ms) in seen {
            machine.handle(self.now_ms(), Input::TabSeen { tab, at_ms });
        }
    }

    fn feed_inputs(&self, input: Input) -> Vec<Output> {
        let mut inputs = VecDeque::from([input]);
        let mut answers = Vec::new();
        while let Some(input) = inputs.pop_front() {
            let outputs = {
                let mut machine = self.desk.machine.borrow_mut();
                let Some(machine) = machine.as_mut() else { return answers };
                machine.handle(self.now_ms(), input)
            };
            for output in outputs {
                match output {
                    Output::Send { tab, command } => inputs.extend(self.send(tab, &command)),
                    Output::DropTab { tab } => self.platform.tabs().drop_tab(&tab),
                    Output::Forward { run, body } => self.forward(&run, &body),
                    Output::Finish { run, outcome, answer } => self.finish(&run, outcome, answer),
                    answer => answers.push(answer),
                }
            }
        }
        answers
    }

    /// Writes a command to its tab: a run's also goes on the tab's results socket, and the
    /// run's client hears if the tab still loads its runtime. A tab that cannot be written to
    /// is gone (the input returned).
    fn send(&self, tab: String, command: &Command) -> Option<Input> {
        if tab == EDGE {
            match command {
                Command::Capsule { run } => {
                    if let Some(io) = self.desk.runs.borrow_mut().get_mut(run) {
                        io.tab = Some(EDGE.to_owned()); // a tab that had it before writes no more
                    }
                    self.platform.start_edge(run)
                }
                Command::Cancel { run } => self.platform.cancel_edge(run),
            }
            return None;
        }
        let frame = self.command_frame(&tab, command);
        if !self.platform.tabs().write(&tab, frame.clone()) {
            return Some(Input::TabGone { tab });
        }
        if let Command::Capsule { run } = command {
            if let Some(io) = self.desk.runs.borrow_mut().get_mut(run) {
                io.tab = Some(tab.clone());
            }
            self.platform.tabs().copy_to_socket(&tab, &frame);
            self.note_warming_up(&tab, run);
        }
        None
    }

    /// Hands a run's output or progress to its delivery; a policy denial is sealed onto the
    /// audit chain first.
    fn forward(&self, run: &str, body: &EventBody) {
        if let EventBody::Denied { what, target, reason } = body {
            let sealed = self.store().audit_denial(run, [what, target, reason], self.now_ms());
            self.audited("a policy denial", sealed);
        }
        if let Some(io) = self.desk.runs.borrow_mut().get_mut(run) {
            io.delivery.forward(body);
        }
    }

    /// Audits a run that ended and hands its end to its delivery; the run is then forgotten
    /// here, but for an answer no one took.
    fn finish(&self, run: &str, mut outcome: Outcome, answer: bool) {
        self.persisted("audit", self.store().audit_workspace_after(run));
        let sealed = self.store().audit_finished(run, &outcome, self.now_ms());
        self.audited("a run's end", sealed);
        self.desk.builds.borrow_mut().remove(run);
        let Some(mut io) = self.desk.runs.borrow_mut().remove(run) else { return };
        self.platform.run_ended(&io.caller.tenant.id, run, outcome.edge_ms);
        if let Some(claim) = &io.context {
            outcome.context = Some(self.context_ended(claim, io.tab.as_deref(), &outcome));
        }
        if let Some((TabCommand::Capsule(capsule), _)) = &io.command {
            self.forget_if_unread(&capsule.hash, &outcome);
        }
        if let (Some(EDGE), Some((TabCommand::Capsule(capsule), _))) = (outcome.executor, &io.command) {
            self.tell_edge_run(RanCommand::new(run, capsule.language, &outcome, self.now_ms()));
        }
        if let Some(answer) = io.delivery.finish(outcome, answer, self.now_ms()) {
            let mut kept_answers = self.desk.kept_answers.borrow_mut();
            kept_answers.push_back((run.to_owned(), answer));
            if kept_answers.len() > ANSWERS_KEPT {
                kept_answers.pop_front();
            }
        }
    }

    /// Tells every attached tab of a run that ended at the edge, and keeps it for tabs to come.
    fn tell_edge_run(&self, ran: RanCommand) {
        let frame = TabCommand::Ran(ran).frame();
        for tab in self.platform.tabs().ids() {
            self.platform.tabs().write(&tab, frame.clone());
        }
        let mut kept = self.desk.edge_runs.borrow_mut();
        kept.push_back(String::from_utf8_lossy(&frame).into_owned());
        if kept.len() > EDGE_RUNS_KEPT {
            kept.pop_front();
        }
    }

    /// The `ran` commands of the last runs at the edge, oldest first, for a tab attaching.
    pub fn edge_run_frames(&self) -> Vec<Vec<u8>> {
        self.desk.edge_runs.borrow().iter().map(|frame| frame.clone().into_bytes()).collect()
    }

    /// What a run of context `claim` that ended as `outcome` on `tab` leaves of it.
    fn context_ended(&self, claim: &Claim, tab: Option<&str>, outcome: &Outcome) -> crate::run::contexts::Report {
        let exit = &outcome.exit;
        let end = RunEnd {
            tab,
            error: exit.error.as_ref().map(|e| (e.name.as_str(), e.message.as_str())),
            runs_before: exit.usage.context_runs,
            by_relay: outcome.by_relay,
            mem_peak_mb: exit.usage.mem_peak_mb,
        };
        self.desk.contexts.borrow_mut().ended(claim, &end, self.now_ms())
    }

    /// `relay://contexts`: the live contexts.
    pub fn contexts_view(&self, settings: &ContextSettings) -> Value {
        self.desk.contexts.borrow_mut().view(settings, self.now_ms())
    }

    /// The context run `run` names, as its admission claimed it: what its tab command says.
    pub fn context_of(&self, run: &str) -> Option<Claim> {
        self.desk.runs.borrow().get(run).and_then(|io| io.context.clone())
    }

    /// Heartbeats every tab (a failed write is how a closed tab is noticed, when the runtime
    /// reports it; a tab's lease is what always tells), then lets the machine check its
    /// deadlines and leases.
    pub fn tick(&self) {
        for tab in self.platform.tabs().ids() {
            if !self.platform.tabs().write(&tab, HEARTBEAT.to_vec()) {
                self.feed(Input::TabGone { tab });
            }
        }
        self.feed(Input::Tick);
    }

    /// When the machine next needs a tick.
    pub fn next_wake(&self) -> Option<u64> {
        self.desk.machine.borrow().as_ref().and_then(RunMachine::next_wake)
    }

    /// What `f` makes of run `run`'s progress (whether a tab has it, its stdout and stderr so
    /// far), if the run is still in hand.
    pub fn progress<T>(&self, run: &str, f: impl FnOnce(bool, &str, &str) -> T) -> Option<T> {
        let machine = self.desk.machine.borrow();
        let (on_tab, stdout, stderr) = machine.as_ref()?.progress(run)?;
        Some(f(on_tab, stdout, stderr))
    }

    /// Attached tabs and the number of runs waiting, for `relay://session`.
    pub fn view(&self) -> (Vec<String>, usize) {
        self.desk.machine.borrow().as_ref().map_or((Vec::new(), 0), |m| (m.tabs().to_vec(), m.queue_depth()))
    }

    /// `Some(max)` when the queue is full (`RunMachine::queue_full`).
    pub fn queue_full(&self) -> Option<u32> {
        self.desk.machine.borrow().as_ref().and_then(RunMachine::queue_full)
    }

    fn command_frame(&self, tab: &str, command: &Command) -> Vec<u8> {
        match command {
            Command::Capsule { run } => self.run_frame(tab, run),
            Command::Cancel { run } => TabCommand::Cancel { run_id: run.clone() }.frame(),
        }
    }

    /// Run `run`'s command for `tab`: a capsule's carries the workspace's changes since the
    /// version `tab` was last given when it may (`tab_sync`), and has `tab` start the run's
    /// context afresh unless the book has the context in `tab` (`Contexts::held_in`).
    fn run_frame(&self, tab: &str, run: &str) -> Vec<u8> {
        let runs = self.desk.runs.borrow();
        let Some((io, (command, frame))) = runs.get(run).and_then(|io| Some((io, io.command.as_ref()?))) else {
            return Vec::new();
        };
        let TabCommand::Capsule(capsule) = command else { return frame.clone() };
        let busy = runs.iter().any(|(other, io)| other != run && io.tab.as_deref() == Some(tab));
        let delta = self.tab_delta(tab, run, io, busy);
        let claim = io.context.as_ref();
        let moved = claim.is_some_and(|claim| !claim.fresh && !self.desk.contexts.borrow().held_in(&claim.key, tab));
        if delta.is_none() && !moved {
            return frame.clone();
        }
        let mut capsule = capsule.clone();
        capsule.workspace = delta.or(capsule.workspace);
        if let Some(order) = capsule.context.as_mut().filter(|_| moved) {
            order.fresh = true;
        }
        TabCommand::Capsule(capsule).frame()
    }

    /// The workspace's changes since the version `tab` was last given, for run `run`'s command,
    /// when it may carry them (`tab_sync`); the run's workspace before it is then recorded for
    /// its audit now, in the turn that sends it (the tab will not ask).
    fn tab_delta(&self, tab: &str, run: &str, io: &RunIo<P::Frames>, busy: bool) -> Option<WorkspaceDelta> {
        let since = self.desk.tab_versions.borrow().since(tab, busy, io.tab.is_some())?;
        let changes = self.persisted("workspace", self.store().workspace_changes(Some(since)))?;
        let delta = inline_delta(since, changes, io.caller.tenant.defaults.workspace.max_bytes)?;
        // Unrecorded, the tab's sync records it.
        self.persisted("audit", self.store().audit_workspace(run, Some(&delta.root), None))?;
        self.desk.tab_versions.borrow_mut().gave(tab, delta.version);
        Some(delta)
    }

    /// The tab run `run` was sent to was given the workspace at `version` (its sync's answer).
    pub(super) fn tab_synced(&self, run: &str, version: u64) {
        let tab = self.desk.runs.borrow().get(run).and_then(|io| io.tab.clone());
        if let Some(tab) = tab {
            self.desk.tab_versions.borrow_mut().gave(&tab, version);
        }
    }

    /// A run just sent to `tab` whose runtime the tab is still loading is told why it waits.
    fn note_warming_up(&self, tab: &str, run: &str) {
        let mut runs = self.desk.runs.borrow_mut();
        let Some(io) = runs.get_mut(run) else { return };
        let note = io.runtime.as_deref().and_then(|id| self.platform.tabs().readiness(tab)?.wait_note(id));
        if let Some(note) = note {
            let body = EventBody::Progress { phase: "warming-up".into(), runtime_id: None, detail: Some(note) };
            io.delivery.forward(&body);
        }
    }

    /// Takes the run's place in line, before anything awaits, so runs keep the order their
    /// calls reached this relay session. The audit row comes first: the machine may end the
    /// run within this very input (no tab and no attach wait), and its end updates the row.
    /// `limits`: the run's timeout and output cap.
    /// `context`: the context the run names, claimed first (`Err(message)`: refused, the limit).
    pub fn admit(
        &self,
        queued: &Queued,
        (timeout_ms, output_cap): (u64, u64),
        (executor, caller): (Executor, &Caller),
        context: Option<Result<Claim, String>>,
        delivery: Box<dyn Delivery<P::Frames>>,
    ) -> Result<(), Unadmitted> {
        let context = match context.transpose() {
            Ok(context) => context,
            Err(message) => return Err(Unadmitted::Context(message)),
        };
        let unclaim = |context: &Option<Claim>| {
            let never_sent = RunEnd { tab: None, error: None, runs_before: None, by_relay: true, mem_peak_mb: 0 };
            context.iter().for_each(|claim| drop(self.desk.contexts.borrow_mut().ended(claim, &never_sent, 0)));
        };
        if let Err(e) = self.store().audit_queued(queued, self.now_ms()) {
            unclaim(&context);
            return Err(Unadmitted::Storage(e));
        }
        let request_key = request_key(queued.mcp_session, queued.request_id);
        let io = RunIo {
            delivery,
            command: None,
            runtime: None,
            request_key,
            context: context.clone(),
            tab: None,
            caller: caller.clone(),
        };
        self.desk.runs.borrow_mut().insert(queued.run_id.to_owned(), io);
        let admit = Input::Admit { run: queued.run_id.to_owned(), timeout_ms, output_cap, executor };
        let admission = self.feed(admit);
        if let Some(Output::Refused { max, .. }) = admission.first() {
            self.desk.runs.borrow_mut().remove(queued.run_id);
            unclaim(&context);
            self.persisted("runs", self.store().forget_run(queued.run_id));
            return Err(Unadmitted::QueueFull(*max));
        }
        Ok(())
    }

    /// Claims context `ask` of `runtime` for a run being admitted (see `run::contexts`).
    pub fn claim_context(&self, runtime: &str, ask: &Ask, settings: &ContextSettings) -> Result<Claim, String> {
        self.desk.contexts.borrow_mut().claim(runtime, ask, settings, self.now_ms())
    }

    /// Whether the run has not ended yet.
    pub fn has_run(&self, run: &str) -> bool {
        self.desk.runs.borrow().contains_key(run)
    }

    /// Where run `run` was sent (a tab's id or [`EDGE`]), if it is in flight; `Some(None)`: not
    /// sent yet.
    pub(super) fn run_executor(&self, run: &str) -> Option<Option<String>> {
        self.desk.runs.borrow().get(run).map(|io| io.tab.clone())
    }

    /// Hands a run still in flight to a client of MCP session `session` resuming its stream.
    pub fn resume_run(&self, run: &str, session: &str, frames: P::Frames) -> bool {
        self.desk.runs.borrow_mut().get_mut(run).is_some_and(|io| io.delivery.resume(session, frames))
    }

    /// The kept answer of an ended legacy call, for the client resuming it (taken once).
    pub fn take_kept_answer(&self, run: &str) -> Option<Value> {
        let mut kept_answers = self.desk.kept_answers.borrow_mut();
        let i = kept_answers.iter().position(|(id, _)| id == run)?;
        kept_answers.remove(i).map(|(_, answer)| answer)
    }

    /// The command for the run's tab, set once the run is prepared, and the runtime it runs on.
    pub fn set_command(&self, run: &str, command: TabCommand, runtime: &str) {
        if let Some(io) = self.desk.runs.borrow_mut().get_mut(run) {
            let frame = command.frame();
            io.command = Some((command, frame));
            io.runtime = Some(runtime.to_owned());
        }
    }

    /// What the edge executor needs of run `run`: its command, and who called.
    pub(super) fn edge_start(&self, run: &str) -> Option<(TabCommand, Caller)> {
        let runs = self.desk.runs.borrow();
        let io = runs.get(run)?;
        Some((io.command.as_ref()?.0.clone(), io.caller.clone()))
    }

    /// `notifications/cancelled`: cancels the run of that request, if there is one; its
    /// request then gets no answer.
    pub fn cancel_request(&self, session_id: Option<&str>, request_id: &Value) {
        let key = request_key(session_id, request_id);
        let run = self.desk.runs.borrow().iter().find(|(_, io)| io.request_key == key).map(|(id, _)| id.clone());
        if let Some(run) = run {
            self.feed(Input::Cancel { run, why: Cancel::ByClient });
        }
    }

    /// Whether run `run` may start its deps build at the edge (none of this relay session's
    /// other runs is building there): then it is the one building.
    pub(super) fn claim_edge_build(&self, run: &str) -> bool {
        let mut building = self.desk.edge_building.borrow_mut();
        match building.as_deref() {
            Some(other) if other != run => false,
            _ => {
                *building = Some(run.to_owned());
                true
            }
        }
    }

    /// Run `run`'s build at the edge is over (built, failed or stopped), if it had one.
    pub fn edge_build_over(&self, run: &str) {
        let mut building = self.desk.edge_building.borrow_mut();
        if building.as_deref() == Some(run) {
            *building = None;
        }
    }

    /// Run `run` waits for its tab to build its deps layer.
    pub(super) fn start_build(&self, run: &str, build: PendingBuild) {
        self.desk.builds.borrow_mut().insert(run.to_owned(), build);
    }

    /// What `f` makes of run `run`'s build, if it is still being built.
    pub(super) fn with_build<T>(&self, run: &str, f: impl FnOnce(&mut PendingBuild) -> T) -> Option<T> {
        self.desk.builds.borrow_mut().get_mut(run).map(f)
    }

    /// Ends run `run`'s build (it was finalized).
    pub(super) fn end_build(&self, run: &str) {
        self.desk.builds.borrow_mut().remove(run);
    }
}
