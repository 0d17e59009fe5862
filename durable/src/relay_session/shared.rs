//! The Session DO's state, and the one place its run machine (`run::session`) is fed: every
//! input goes through [`Shared::feed`], which performs the machine's outputs (commands written
//! to tabs, output and results handed to each run's [`Delivery`], the audit) and returns the
//! answers meant for the caller. Nothing here decides anything about a run.

use super::leases::Leases;
use super::store;
use crate::edge::{now_ms, sleep};
use futures::channel::mpsc::UnboundedSender;
use futures::{future, Stream, StreamExt};
use relay_core::auth::QueueSettings;
use relay_core::capsule::jws::Signer;
use relay_core::capsule::{Capsule, CapsuleError, CapsuleMemo, CapsuleSpec};
use relay_core::mcp::sse_frame;
use relay_core::packages::PendingBuild;
use relay_core::run::backchannel::EventBody;
use relay_core::run::readiness::Readiness;
use relay_core::run::session::{Command, Input, Outcome, Output, Session};
use relay_core::upstream::client::Known;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use worker::{Env, Result, Storage, WebSocket};

/// MCP clients remembered for `relay://session` (the page lists them).
const CLIENTS_KEPT: usize = 10;
/// Longest client name or version kept.
const CLIENT_FIELD_MAX: usize = 100;
/// Capsule hashes remembered as stored in R2 before the set starts over.
const STORED_KEPT: usize = 10_000;
/// Answers of legacy streamed calls, kept for a client that resumes its stream (it may have
/// missed one that was sent); the oldest go first.
const ANSWERS_KEPT: usize = 16;
/// How often an open stream ticks the machine (and heartbeats the tabs) at the least. A closed
/// tab or client is noticed when a write to it fails, so this bounds how long that takes.
const TICK_MS: u64 = 2_000;

/// An SSE response body being written.
pub type Frames = UnboundedSender<Result<Vec<u8>>>;

/// How a run's progress and answer reach its client (see `runs.rs`).
pub trait Delivery {
    /// Output or progress, as it comes.
    fn forward(&mut self, body: &EventBody);
    /// The run ended (`answer`: false when the client cancelled the request). Returns the
    /// answer when a client may come back for it (a legacy stream, which can be resumed).
    fn finish(&mut self, outcome: Outcome, answer: bool) -> Option<Value>;
    /// A client of MCP session `session` resumes the stream on `frames`; false when it may not.
    fn resume(&mut self, session: &str, frames: Frames) -> bool;
}

/// What the DO keeps of a run besides the machine's view of it.
struct RunIo {
    delivery: Box<dyn Delivery>,
    /// The command for a tab (`capsule` or `file`), once the run is prepared.
    command: Option<Vec<u8>>,
    /// The runtime a capsule runs on (none for a file tool).
    runtime: Option<String>,
    /// Identifies the MCP request, for `notifications/cancelled`.
    request_key: String,
}

/// State shared by the DO and the streams it returns (which outlive a `&self`). Never borrow
/// one of its cells across an `.await`: other requests interleave there.
pub struct Shared {
    pub env: Env,
    pub storage: Storage,
    machine: RefCell<Option<Session>>,
    tabs: RefCell<HashMap<String, Frames>>,
    /// What each tab last said of its runtimes.
    readiness: RefCell<HashMap<String, Readiness>>,
    /// Each tab's results socket, if it opened one: a run's command goes on it too.
    sockets: RefCell<HashMap<String, WebSocket>>,
    /// The tabs' lease sockets, which say when each tab last renewed its lease.
    leases: Leases,
    runs: RefCell<HashMap<String, RunIo>>,
    /// Run -> its answer, for legacy calls whose client may resume (oldest first).
    kept_answers: RefCell<VecDeque<(String, Value)>>,
    /// Capsules this instance has stored in R2 (content-addressed: stored once is stored).
    stored: RefCell<HashSet<String>>,
    /// Capsules this instance has built, by what they were built from.
    capsules: RefCell<CapsuleMemo>,
    /// What each upstream MCP server's protocol era turned out to be, by name and URL.
    upstream_eras: RefCell<HashMap<String, Known>>,
    /// The `/mcps` tree last listed, and when.
    mcps_tree: RefCell<Option<(u64, Value)>>,
    /// MCP clients seen recently (`{name, version, lastSeenMs}`), newest first.
    clients: RefCell<VecDeque<Value>>,
    /// Runs whose deps layer a tab is building, by run id (see `builds.rs`).
    builds: RefCell<HashMap<String, PendingBuild>>,
    /// Whether this instance has served a request yet (see `first_request`).
    served: Cell<bool>,
}

impl Shared {
    pub fn new(env: Env, storage: Storage, leases: Leases) -> Self {
        Shared {
            env,
            storage,
            leases,
            machine: RefCell::default(),
            tabs: RefCell::default(),
            readiness: RefCell::default(),
            sockets: RefCell::default(),
            runs: RefCell::default(),
            kept_answers: RefCell::default(),
            stored: RefCell::default(),
            capsules: RefCell::default(),
            upstream_eras: RefCell::default(),
            mcps_tree: RefCell::default(),
            clients: RefCell::default(),
            builds: RefCell::default(),
            served: Cell::new(false),
        }
    }

    /// True for the first request this instance serves, false after.
    pub fn first_request(&self) -> bool {
        !self.served.replace(true)
    }

    /// Gives the run machine the tenant's queue settings as this request carries them: makes
    /// it on the first request, and later ones update it (a `PATCH` applies at once).
    pub fn configure(&self, settings: &QueueSettings) {
        let mut machine = self.machine.borrow_mut();
        match machine.as_mut() {
            Some(machine) => machine.configure(settings),
            None => *machine = Some(Session::new(settings.clone())),
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
            self.announce_tabs(&tabs);
        }
        answers
    }

    /// Tells every attached tab how many there are and which gets the next run (the newest),
    /// so each page can say whether it runs next. A write that fails is left to the
    /// heartbeat, which notices a gone tab anyway.
    fn announce_tabs(&self, tabs: &[String]) {
        let frame = sse_frame("tabs", &json!({ "count": tabs.len(), "next": tabs.last() }), None).into_bytes();
        for tab in tabs {
            self.write(tab, frame.clone());
        }
    }

    /// Tells the machine when each tab last pinged its lease socket (renewals change nothing
    /// else, so their outputs are none).
    fn read_leases(&self) {
        let seen = self.leases.seen();
        let mut machine = self.machine.borrow_mut();
        let Some(machine) = machine.as_mut() else { return };
        for (tab, at_ms) in seen {
            machine.handle(now_ms(), Input::TabSeen { tab, at_ms });
        }
    }

    fn feed_inputs(&self, input: Input) -> Vec<Output> {
        let mut inputs = VecDeque::from([input]);
        let mut answers = Vec::new();
        while let Some(input) = inputs.pop_front() {
            let outputs = {
                let mut machine = self.machine.borrow_mut();
                let Some(machine) = machine.as_mut() else { return answers };
                machine.handle(now_ms(), input)
            };
            for output in outputs {
                match output {
                    Output::Send { tab, command } => {
                        let frame = self.command_frame(&command);
                        if !self.write(&tab, frame.clone()) {
                            inputs.push_back(Input::TabGone { tab });
                        } else if let Command::Capsule { run } = &command {
                            self.copy_to_socket(&tab, &frame);
                            self.note_warming_up(&tab, run);
                        }
                    }
                    Output::DropTab { tab } => self.drop_tab(&tab),
                    Output::Forward { run, body } => {
                        if let EventBody::Denied { what, target, reason } = &body {
                            store::audit_denial(&self.storage.sql(), &run, [what, target, reason], now_ms());
                        }
                        if let Some(io) = self.runs.borrow_mut().get_mut(&run) {
                            io.delivery.forward(&body);
                        }
                    }
                    Output::Finish { run, outcome, answer } => self.finish(&run, outcome, answer),
                    answer => answers.push(answer),
                }
            }
        }
        answers
    }

    /// Audits a run that ended and hands its end to its delivery; the run is then forgotten
    /// here, but for an answer no one took.
    fn finish(&self, run: &str, outcome: Outcome, answer: bool) {
        let sql = self.storage.sql();
        store::audit_finished(&sql, run, &outcome, now_ms());
        self.builds.borrow_mut().remove(run);
        let Some(mut io) = self.runs.borrow_mut().remove(run) else { return };
        if let Some(answer) = io.delivery.finish(outcome, answer) {
            let mut kept_answers = self.kept_answers.borrow_mut();
            kept_answers.push_back((run.to_owned(), answer));
            if kept_answers.len() > ANSWERS_KEPT {
                kept_answers.pop_front();
            }
        }
    }

    /// Heartbeats every tab (a failed write is how a closed tab is noticed, when the runtime
    /// reports it; a tab's lease is what always tells), then lets the machine check its
    /// deadlines and leases.
    pub fn tick(&self) {
        let ids: Vec<String> = self.tabs.borrow().keys().cloned().collect();
        for tab in ids {
            if !self.write(&tab, b": heartbeat\n\n".to_vec()) {
                self.feed(Input::TabGone { tab });
            }
        }
        self.feed(Input::Tick);
    }

    /// When the machine next needs a tick.
    pub fn next_wake(&self) -> Option<u64> {
        self.machine.borrow().as_ref().and_then(Session::next_wake)
    }

    /// What `f` makes of run `run`'s progress (whether a tab has it, its stdout and stderr so
    /// far), if the run is still in hand.
    pub fn progress<T>(&self, run: &str, f: impl FnOnce(bool, &str, &str) -> T) -> Option<T> {
        let machine = self.machine.borrow();
        let (on_tab, stdout, stderr) = machine.as_ref()?.progress(run)?;
        Some(f(on_tab, stdout, stderr))
    }

    /// Attached tabs and the number of runs waiting, for `relay://session`.
    pub fn view(&self) -> (Vec<String>, usize) {
        self.machine.borrow().as_ref().map_or((Vec::new(), 0), |m| (m.tabs().to_vec(), m.queue_depth()))
    }

    /// `Some(max)` when the queue is full (`Session::queue_full`).
    pub fn queue_full(&self) -> Option<u32> {
        self.machine.borrow().as_ref().and_then(Session::queue_full)
    }

    pub fn add_tab(&self, tab: &str, sender: Frames) {
        self.tabs.borrow_mut().insert(tab.to_owned(), sender);
    }

    /// Forgets a tab's stream, which ends it, and closes its lease socket (it said it is going
    /// away, or the machine dropped it).
    pub fn drop_tab(&self, tab: &str) {
        self.tabs.borrow_mut().remove(tab);
        self.readiness.borrow_mut().remove(tab);
        self.sockets.borrow_mut().remove(tab);
        self.leases.close(tab);
    }

    /// `tab`'s results socket, in place of any earlier one.
    pub fn set_socket(&self, tab: &str, socket: WebSocket) {
        self.sockets.borrow_mut().insert(tab.to_owned(), socket);
    }

    /// Forgets a results socket that closed, unless its tab has a newer one.
    pub fn forget_socket(&self, socket: &WebSocket) {
        self.sockets.borrow_mut().retain(|_, kept| kept != socket);
    }

    /// A run's command goes to its tab on the stream, and a copy on the tab's results socket,
    /// which gets there sooner (the page runs whichever copy comes first). The stream is the
    /// one to rely on: a copy lost with its socket costs nothing.
    fn copy_to_socket(&self, tab: &str, frame: &[u8]) {
        let mut sockets = self.sockets.borrow_mut();
        let sent = sockets.get(tab).is_some_and(|socket| socket.send_with_str(String::from_utf8_lossy(frame)).is_ok());
        if !sent {
            sockets.remove(tab);
        }
    }

    pub fn has_tab(&self, tab: &str) -> bool {
        self.tabs.borrow().contains_key(tab)
    }

    /// Writes to a tab's stream; false (and the tab forgotten) when it is gone.
    fn write(&self, tab: &str, frame: Vec<u8>) -> bool {
        let mut tabs = self.tabs.borrow_mut();
        let written = tabs.get(tab).is_some_and(|sender| sender.unbounded_send(Ok(frame)).is_ok());
        if !written {
            tabs.remove(tab);
        }
        written
    }

    fn command_frame(&self, command: &Command) -> Vec<u8> {
        match command {
            Command::Capsule { run } => {
                self.runs.borrow().get(run).and_then(|io| io.command.clone()).unwrap_or_default()
            }
            Command::Cancel { run } => sse_frame("cancel", &json!({ "runId": run }), None).into_bytes(),
        }
    }

    /// Keeps what an attached tab (the caller checked: `has_tab`) said of its runtimes.
    pub fn set_readiness(&self, tab: &str, readiness: Readiness) {
        self.readiness.borrow_mut().insert(tab.to_owned(), readiness);
    }

    /// What `tab` last said of its runtimes.
    pub fn readiness(&self, tab: &str) -> Option<Readiness> {
        self.readiness.borrow().get(tab).cloned()
    }

    /// A run just sent to `tab` whose runtime the tab is still loading is told why it waits.
    fn note_warming_up(&self, tab: &str, run: &str) {
        let mut runs = self.runs.borrow_mut();
        let Some(io) = runs.get_mut(run) else { return };
        let note = io.runtime.as_deref().and_then(|id| self.readiness.borrow().get(tab)?.wait_note(id));
        if let Some(note) = note {
            let body = EventBody::Progress { phase: "warming-up".into(), runtime_id: None, detail: Some(note) };
            io.delivery.forward(&body);
        }
    }

    /// Registers how a run's results are delivered, before the run is admitted.
    pub fn add_run(&self, run: &str, delivery: Box<dyn Delivery>, request_key: String) {
        self.runs.borrow_mut().insert(run.to_owned(), RunIo { delivery, command: None, runtime: None, request_key });
    }

    /// Forgets a run the machine refused.
    pub fn remove_run(&self, run: &str) {
        self.runs.borrow_mut().remove(run);
    }

    /// Whether the run has not ended yet.
    pub fn has_run(&self, run: &str) -> bool {
        self.runs.borrow().contains_key(run)
    }

    /// Hands a run still in flight to a client of MCP session `session` resuming its stream.
    pub fn resume(&self, run: &str, session: &str, frames: Frames) -> bool {
        self.runs.borrow_mut().get_mut(run).is_some_and(|io| io.delivery.resume(session, frames))
    }

    /// The kept answer of an ended legacy call, for the client resuming it (taken once).
    pub fn take_kept_answer(&self, run: &str) -> Option<Value> {
        let mut kept_answers = self.kept_answers.borrow_mut();
        let i = kept_answers.iter().position(|(id, _)| id == run)?;
        kept_answers.remove(i).map(|(_, answer)| answer)
    }

    /// The command for the run's tab, set once the run is prepared, and the runtime it runs on.
    pub fn set_command(&self, run: &str, frame: Vec<u8>, runtime: Option<&str>) {
        if let Some(io) = self.runs.borrow_mut().get_mut(run) {
            io.command = Some(frame);
            io.runtime = runtime.map(str::to_owned);
        }
    }

    /// The run of an MCP request, if it is still in hand.
    pub fn run_of_request(&self, request_key: &str) -> Option<String> {
        self.runs.borrow().iter().find(|(_, io)| io.request_key == request_key).map(|(id, _)| id.clone())
    }

    /// The capsule of a run_js / run_py call: built before by this instance for the same spec
    /// and key, or built now.
    pub fn capsule(&self, spec: CapsuleSpec, signer: &Signer) -> std::result::Result<Capsule, CapsuleError> {
        self.capsules.borrow_mut().build(spec, signer)
    }

    /// Whether this instance already stored `hash` in R2.
    pub fn stored(&self, hash: &str) -> bool {
        self.stored.borrow().contains(hash)
    }

    pub fn mark_stored(&self, hash: &str) {
        let mut stored = self.stored.borrow_mut();
        if stored.len() >= STORED_KEPT {
            stored.clear(); // forgetting only costs a redundant R2 write
        }
        stored.insert(hash.to_owned());
    }

    /// Run `run` waits for its tab to build its deps layer.
    pub fn start_build(&self, run: &str, build: PendingBuild) {
        self.builds.borrow_mut().insert(run.to_owned(), build);
    }

    /// What `f` makes of run `run`'s build, if it is still being built.
    pub fn with_build<T>(&self, run: &str, f: impl FnOnce(&mut PendingBuild) -> T) -> Option<T> {
        self.builds.borrow_mut().get_mut(run).map(f)
    }

    /// Ends run `run`'s build (it was finalized).
    pub fn end_build(&self, run: &str) {
        self.builds.borrow_mut().remove(run);
    }

    /// Notes an MCP client (its `clientInfo`) as seen at `now_ms`.
    pub fn saw_client(&self, info: &Value, now_ms: u64) {
        let field = |name: &str| info[name].as_str().unwrap_or("").chars().take(CLIENT_FIELD_MAX).collect::<String>();
        let (name, version) = (field("name"), field("version"));
        let mut clients = self.clients.borrow_mut();
        clients.retain(|c| c["name"] != name.as_str() || c["version"] != version.as_str());
        clients.push_front(json!({ "name": name, "version": version, "lastSeenMs": now_ms }));
        clients.truncate(CLIENTS_KEPT);
    }

    /// The clients seen recently, newest first.
    pub fn clients(&self) -> Value {
        Value::from(Vec::from(self.clients.borrow().clone()))
    }

    /// What is known of the protocol era of upstream `key` (name and URL).
    pub fn upstream_era(&self, key: &str) -> Known {
        self.upstream_eras.borrow().get(key).cloned().unwrap_or_default()
    }

    pub fn learn_upstream_era(&self, key: &str, known: Known) {
        self.upstream_eras.borrow_mut().insert(key.to_owned(), known);
    }

    /// The `/mcps` tree, if it was listed less than `ttl_ms` before `now_ms`.
    pub fn mcps_tree(&self, now_ms: u64, ttl_ms: u64) -> Option<Value> {
        let tree = self.mcps_tree.borrow();
        tree.as_ref().filter(|(at, _)| now_ms.saturating_sub(*at) < ttl_ms).map(|(_, tree)| tree.clone())
    }

    pub fn keep_mcps_tree(&self, now_ms: u64, tree: Value) {
        *self.mcps_tree.borrow_mut() = Some((now_ms, tree));
    }
}

/// Ticks the machine (and heartbeats the tabs) while `alive`, every `TICK_MS` or at the
/// machine's next deadline if sooner, yielding `keepalive` after each tick if given. Every
/// open response stream (a call's, a resumed one, a tab's) carries one, so deadlines keep
/// running as long as anyone is connected; none is needed when no one is.
pub fn ticker(
    shared: Rc<Shared>,
    alive: impl Fn(&Shared) -> bool + 'static,
    keepalive: Option<&'static str>,
) -> impl Stream<Item = Result<Vec<u8>>> {
    let alive = Rc::new(alive);
    futures::stream::unfold((), move |()| {
        let (shared, alive) = (shared.clone(), alive.clone());
        async move {
            let now = now_ms();
            let wake = shared.next_wake().unwrap_or(u64::MAX).min(now + TICK_MS);
            let _ = sleep(wake.saturating_sub(now).max(1)).await;
            if !alive(&shared) {
                return None;
            }
            shared.tick();
            Some((keepalive.map(|frame| Ok(frame.as_bytes().to_vec())), ()))
        }
    })
    .filter_map(future::ready)
}
