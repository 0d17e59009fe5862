//! The Session DO's state, and the one place its run machine (`run::session`) is fed: every
//! input goes through [`Shared::feed`], which performs the machine's outputs (commands written
//! to tabs, output and results handed to the runs' drivers, the audit) and returns the answers
//! meant for the caller. Nothing here decides anything about a run.

use super::store;
use crate::edge::now_ms;
use crate::forward::Caller;
use crate::mcp::sse_frame;
use crate::run::backchannel::EventBody;
use crate::run::session::{Command, Input, Outcome, Output, Session};
use futures::channel::mpsc::UnboundedSender;
use serde_json::json;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use worker::{Env, Result, Storage};

/// Capsule hashes remembered as stored in R2 before the set starts over.
const STORED_KEPT: usize = 10_000;

/// What a run's driver (the response to its `tools/call`) is told.
pub enum Signal {
    /// Output or progress to stream to the client.
    Forward(EventBody),
    /// The run ended; `answer` is false when the client cancelled the request.
    Finished { outcome: Outcome, answer: bool },
}

/// What the DO keeps of a run besides the machine's view of it.
struct RunIo {
    signals: UnboundedSender<Signal>,
    /// The `capsule` command for a tab, once the capsule is stored.
    capsule_event: Option<Vec<u8>>,
    /// Identifies the MCP request, for `notifications/cancelled`.
    request_key: String,
}

/// State shared by the DO and the streams it returns (which outlive a `&self`). Never borrow
/// one of its cells across an `.await`: other requests interleave there.
pub struct Shared {
    pub env: Env,
    pub storage: Storage,
    machine: RefCell<Option<Session>>,
    tabs: RefCell<HashMap<String, UnboundedSender<Result<Vec<u8>>>>>,
    runs: RefCell<HashMap<String, RunIo>>,
    /// Capsules this instance has stored in R2 (content-addressed: stored once is stored).
    stored: RefCell<HashSet<String>>,
}

impl Shared {
    pub fn new(env: Env, storage: Storage) -> Self {
        Shared {
            env,
            storage,
            machine: RefCell::default(),
            tabs: RefCell::default(),
            runs: RefCell::default(),
            stored: RefCell::default(),
        }
    }

    /// Applies `input` to the run machine (made with the caller's tenant settings the first
    /// time), performs its outputs, and returns those meant for the caller: `Admitted`,
    /// `Refused`, `Reply`. A tab found dead while writing to it is fed back as `TabGone`.
    pub fn feed(&self, caller: &Caller, input: Input) -> Vec<Output> {
        let mut inputs = VecDeque::from([input]);
        let mut answers = Vec::new();
        while let Some(input) = inputs.pop_front() {
            let outputs = {
                let mut machine = self.machine.borrow_mut();
                let machine = machine.get_or_insert_with(|| Session::new(caller.tenant.defaults.queue.clone()));
                machine.handle(now_ms(), input)
            };
            for output in outputs {
                match output {
                    Output::Send { tab, command } => {
                        if !self.write(&tab, self.command_frame(&command)) {
                            inputs.push_back(Input::TabGone { tab });
                        }
                    }
                    Output::DropTab { tab } => {
                        self.tabs.borrow_mut().remove(&tab);
                    }
                    Output::Forward { run, body } => self.signal(&run, Signal::Forward(body)),
                    Output::Finish { run, outcome, answer } => {
                        store::audit_finished(
                            &self.storage.sql(),
                            &run,
                            &outcome.exit,
                            &outcome.stdout,
                            &outcome.stderr,
                            now_ms(),
                        );
                        self.signal(&run, Signal::Finished { outcome, answer });
                    }
                    answer => answers.push(answer),
                }
            }
        }
        answers
    }

    /// Heartbeats every tab (a failed write is how a closed tab is noticed), then lets the
    /// machine check its deadlines.
    pub fn tick(&self, caller: &Caller) {
        let ids: Vec<String> = self.tabs.borrow().keys().cloned().collect();
        for tab in ids {
            if !self.write(&tab, b": heartbeat\n\n".to_vec()) {
                self.feed(caller, Input::TabGone { tab });
            }
        }
        self.feed(caller, Input::Tick);
    }

    /// When the machine next needs a tick.
    pub fn next_wake(&self) -> Option<u64> {
        self.machine.borrow().as_ref().and_then(Session::next_wake)
    }

    /// Attached tabs and the number of runs waiting, for `relay://session`.
    pub fn view(&self) -> (Vec<String>, usize) {
        self.machine.borrow().as_ref().map_or((Vec::new(), 0), |m| (m.tabs().to_vec(), m.queue_depth()))
    }

    pub fn add_tab(&self, tab: &str, sender: UnboundedSender<Result<Vec<u8>>>) {
        self.tabs.borrow_mut().insert(tab.to_owned(), sender);
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
                self.runs.borrow().get(run).and_then(|io| io.capsule_event.clone()).unwrap_or_default()
            }
            Command::Cancel { run } => sse_frame("cancel", &json!({ "runId": run }), None).into_bytes(),
        }
    }

    /// Registers a run's driver before the run is admitted.
    pub fn add_run(&self, run: &str, signals: UnboundedSender<Signal>, request_key: String) {
        self.runs.borrow_mut().insert(run.to_owned(), RunIo { signals, capsule_event: None, request_key });
    }

    pub fn remove_run(&self, run: &str) {
        self.runs.borrow_mut().remove(run);
    }

    /// The `capsule` command for the run's tab, set once its capsule is stored.
    pub fn set_capsule_event(&self, run: &str, frame: Vec<u8>) {
        if let Some(io) = self.runs.borrow_mut().get_mut(run) {
            io.capsule_event = Some(frame);
        }
    }

    /// The run of an MCP request, if it is still in hand.
    pub fn run_of_request(&self, request_key: &str) -> Option<String> {
        self.runs.borrow().iter().find(|(_, io)| io.request_key == request_key).map(|(id, _)| id.clone())
    }

    fn signal(&self, run: &str, signal: Signal) {
        if let Some(io) = self.runs.borrow().get(run) {
            let _ = io.signals.unbounded_send(signal);
        }
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
}
