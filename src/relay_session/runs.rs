//! A `tools/call` to its answer: the call's [`Work`] (a file tool's arguments checked, answered
//! from the workspace at once by [`RelaySession::answer_file`]; or a run's [`Job`], a capsule
//! built and signed or a packaged run), a run's admission with its audit row, its preparation
//! (the capsule stored, or its build started), and what the run machine reports delivered as it
//! comes ([`Answer`]: on the request's SSE stream, or as one JSON body).
//!
//! A 2026-07-28 client that declared the tasks extension gets a task for `run_js`/`run_py`
//! instead ([`start_task`]): the answer is the task handle, sent once the task is stored, and
//! the run's end is written into the task, which `tasks/get` reads.
//!
//! A legacy client's disconnection is not a cancellation (2025-11-25 transports "Sending
//! Messages"): the run goes on, and the client resumes with `GET` + `Last-Event-ID`
//! ([`RelaySession::resume`]), getting the rest of the output and the answer, or, after a
//! restart of the relay, the error the audit recorded.

use std::cell::Cell;
use std::rc::Rc;

use futures::channel::oneshot;
use serde_json::{json, Value};

use super::builds::{unprepared, Packaged};
use super::desk::{Delivery, Frames, Unadmitted};
use super::store::{Ended, Queued};
use super::upstreams::TREE_TTL_MS;
use super::{Platform, RelaySession, StorageError};
use crate::audit;
use crate::capsule::jws::Signer;
use crate::capsule::{Capsule, Language};
use crate::error::ErrorName;
use crate::files::download_url;
use crate::mcp::jsonrpc::{RpcError, INVALID_REQUEST};
use crate::mcp::tasks::{TaskRecord, TaskStatus};
use crate::mcp::{self, Era, HttpResponse, LogLevel, Tool, ToolCall, ToolResult};
use crate::packages::request::DepsRequest;
use crate::protocol::{Caller, CapsuleCommand, ContextOrder, TabCommand};
use crate::quota::{run_lease, Charge, LedgerAnswer};
use crate::run::args::{capsule_spec, deps_request};
use crate::run::backchannel::{EventBody, Exit, OutFile, RunError, Usage};
use crate::run::contexts::{ask_of, Ask};
use crate::run::executor::Executor;
use crate::run::file_op::{file_op, FileOp};
use crate::run::machine::{run_life_ms, Cancel, Input, Outcome};
use crate::stores;
use crate::upstream::seal::SealingKey;
use crate::workspace::Refusal;

/// What a `tools/call` asks for: a file tool, which the relay session answers from its
/// workspace at once, or a run, which waits in line for a tab.
pub enum Work {
    File(FileOp),
    Run(Job),
}

/// What a run executes: a capsule (`run_js`, `run_py`), or one whose deps layer comes from a
/// build.
pub enum Job {
    /// `charged_ms`: when the run's admission charged the capsule's bytes to the tenant's
    /// `storedBytes` ([`Job::charge`]), if it did; its store takes the charge.
    Capsule {
        capsule: Box<Capsule>,
        signer: Box<Signer>,
        charged_ms: Cell<Option<u64>>,
    },
    Packaged(Box<Packaged>),
}

impl Work {
    /// The work of `call`: a file tool's arguments checked, or a run's capsule built and signed
    /// by `signer` (remembered in the caches: a repeated call is not zipped or signed again).
    /// `Ok(Err(answer))`: the tool error to answer with.
    pub fn of<P: Platform, E>(
        session: &RelaySession<P>,
        caller: &Caller,
        call: &ToolCall,
        signer: impl FnOnce() -> Result<Signer, E>,
    ) -> Result<Result<Work, Value>, E> {
        let tool_error = |name, message: &str| mcp::tool_error(call, name, message);
        let policy = &caller.tenant.defaults.policy;
        if !matches!(call.tool, Tool::RunJs | Tool::RunPy) {
            return Ok(file_op(call.tool.name(), &call.arguments, &policy.filesystem)
                .map(Work::File)
                .map_err(|e| tool_error(e.name, &e.message)));
        }
        if let Err(why) = context_ask(call).map(|_| ()).and_then(|()| executor_of(call, caller).map(|_| ())) {
            return Ok(Err(tool_error(ErrorName::ValidationError, &why)));
        }
        let signer = signer()?;
        let asked = capsule_spec(call.tool.name(), &call.arguments, policy)
            .and_then(|spec| Ok((spec, deps_request(call.tool.name(), &call.arguments)?)));
        let (spec, request) = match asked {
            Ok(asked) => asked,
            Err(e) => return Ok(Err(tool_error(e.name, &e.message))),
        };
        if let Some(request) = request {
            let key = request.key(spec.language, &caller.tenant.defaults.packages);
            return Ok(Ok(Work::Run(Job::Packaged(Box::new(Packaged { spec, request, key, signer })))));
        }
        Ok(session
            .caches
            .capsule(spec, &signer)
            .map(|capsule| {
                Work::Run(Job::Capsule {
                    capsule: Box::new(capsule),
                    signer: Box::new(signer),
                    charged_ms: Cell::default(),
                })
            })
            .map_err(|e| tool_error(ErrorName::ValidationError, &e.to_string())))
    }
}

impl Job {
    /// The bytes the run's capsule will store for its tenant (`stores::capsule_bytes`): none
    /// when `session` stored it lately, or when a build makes it (charged then).
    pub fn stored_bytes<P: Platform>(&self, session: &RelaySession<P>) -> u64 {
        match self {
            Job::Capsule { capsule, .. } if !session.caches.stored(&capsule.hash, session.now_ms()) => {
                stores::capsule_bytes(capsule)
            }
            _ => 0,
        }
    }

    /// What run `run`'s admission charges its tenant's ledger, in one hop
    /// (`quota::Charge::Run`): a slot of its runs in flight, leased for the longest the run may
    /// take (`run_life_ms`, which the run machine enforces), and the bytes its capsule will
    /// store ([`Job::stored_bytes`]); with the `tools/call` itself when `with_call` (the Worker
    /// left its charge to this hop: `mcp::Admission::ToSession`).
    pub fn admission<P: Platform>(
        &self,
        session: &RelaySession<P>,
        caller: &Caller,
        run: &str,
        now_ms: u64,
        with_call: bool,
    ) -> Charge {
        let defaults = &caller.tenant.defaults;
        let life_ms = run_life_ms(&defaults.queue, defaults.policy.limits.timeout_ms);
        let call = with_call.then(|| caller.session.clone());
        Charge::Run { lease: run_lease(run, now_ms, life_ms), stored_bytes: self.stored_bytes(session), call }
    }

    /// The ledger `answered` `charge`, the admission sent at `charged_ms`: a capsule's bytes
    /// charged are noted, so that storing it charges nothing more (and a put that fails, or a
    /// preparation that never runs, gives them back).
    pub fn admitted(&self, charge: &Charge, answered: &LedgerAnswer, charged_ms: u64) {
        let charged = matches!(charge, Charge::Run { stored_bytes, .. } if *stored_bytes > 0);
        if let (Job::Capsule { charged_ms: at, .. }, LedgerAnswer::Charged { .. }, true) = (self, answered, charged) {
            at.set(Some(charged_ms));
        }
    }

    /// Gives back what the run's admission charged for its capsule, if its run never got to
    /// store it (it was not admitted).
    pub fn uncharge<P: Platform>(&self, session: &RelaySession<P>, tenant: &str) {
        if let Job::Capsule { capsule, charged_ms, .. } = self {
            if let Some(at) = charged_ms.take() {
                session.platform.store_failed(tenant, stores::capsule_bytes(capsule), at);
            }
        }
    }

    /// The runtime the run needs in the tab.
    pub fn runtime(&self) -> &str {
        match self {
            Job::Capsule { capsule, .. } => &capsule.manifest.runtime.id,
            Job::Packaged(job) => job.spec.language.runtime_id(),
        }
    }

    /// What the audit names the run by: its capsule.
    fn audit_name(&self) -> String {
        match self {
            Job::Capsule { capsule, .. } => capsule.hash.clone(),
            // Until the build names the capsule (`Store::audit_capsule`).
            Job::Packaged(job) => format!("build:{}", job.key),
        }
    }

    /// `(timeout, output cap)` the run machine holds the run to.
    fn limits(&self) -> (u64, u64) {
        match self {
            Job::Capsule { capsule, .. } => {
                let limits = &capsule.manifest.policy.limits;
                (limits.timeout_ms, limits.stdout_bytes)
            }
            Job::Packaged(job) => (job.spec.policy.limits.timeout_ms, job.spec.policy.limits.stdout_bytes),
        }
    }
}

/// The context a run's call names, if any (its arguments checked: see `run::contexts`).
fn context_ask(call: &ToolCall) -> Result<Option<Ask>, String> {
    call.arguments.as_object().map_or(Ok(None), ask_of)
}

/// What a run's answer is made of: the call, who made it, the run and its job.
#[derive(Clone)]
pub struct Call {
    pub tool_call: ToolCall,
    pub caller: Caller,
    pub run: String,
    pub job: Rc<Job>,
}

impl Call {
    /// The notifications one event becomes, as the era and the request's options allow.
    /// Phases become progress notifications numbered by `steps`, which only grows (the spec
    /// requires it).
    pub fn notifications(&self, body: &EventBody, steps: &mut f64) -> Vec<Value> {
        let call = &self.tool_call;
        match body {
            EventBody::Stdout { data } => mcp::log_notifications(call, LogLevel::Info, "stdout", data),
            EventBody::Stderr { data } => mcp::log_notifications(call, LogLevel::Warning, "stderr", data),
            EventBody::Progress { phase, runtime_id, detail } => {
                Vec::from_iter(call.progress_token.as_ref().map(|token| {
                    *steps += 1.0;
                    let message = match runtime_id.as_ref().or(detail.as_ref()) {
                        Some(about) => format!("{phase} ({about})"),
                        None => phase.clone(),
                    };
                    mcp::progress_notification(token, *steps, None, Some(&message))
                }))
            }
            EventBody::Exit { .. } | EventBody::Error(_) | EventBody::Denied { .. } => Vec::new(),
        }
    }

    /// The JSON-RPC response for the run, which ended at `now_ms` as `outcome` says.
    pub fn conclude(&self, outcome: Outcome, now_ms: u64) -> Value {
        let Call { tool_call: call, caller, run, job } = self;
        let Outcome { exit, stdout, stderr, context, executor, .. } = outcome;
        let signer = match job.as_ref() {
            Job::Capsule { signer, .. } => &**signer,
            Job::Packaged(job) => &job.signer,
        };
        let now_s = now_ms / 1000;
        let files = exit.files.iter().map(|file| listed_file(file, signer, caller, run, now_s)).collect();
        let images = exit.files.iter().filter_map(|f| f.image.as_ref()).map(|i| (i.mime_type.clone(), i.data.clone()));
        let result = ToolResult {
            exit_code: exit.exit_code,
            stdout,
            stderr,
            wall_ms: exit.usage.wall_ms,
            mem_peak_mb: exit.usage.mem_peak_mb,
            fetches: exit.usage.fetches,
            denied: exit.usage.denied,
            file_errors: exit.usage.file_errors,
            context_runs: exit.usage.context_runs.unwrap_or(0),
            files,
            images: images.collect(),
            error: exit
                .error
                .as_ref()
                .map(|e| named_error(e, caller, call.tool == Tool::RunPy && names_pip_packages(&call.arguments))),
            context,
            displays: exit.displays.clone(),
            run: run.clone(),
            executor,
        };
        mcp::tool_result(call, result)
    }

    /// The 429 of a call refused because `max` runs already wait.
    pub fn queue_full(&self, max: u32) -> HttpResponse {
        mcp::queue_full(&self.tool_call.id, max, &self.caller.session)
    }
}

/// A file of `/out` as the result lists it: with a signed, absolute download URL (on the
/// caller's public origin) once it was uploaded, else why it was not stored, if the Worker said.
fn listed_file(file: &OutFile, signer: &Signer, caller: &Caller, run: &str, now_s: u64) -> Value {
    let mut listed = json!({ "path": file.path, "size": file.size, "sha256": file.sha256 });
    if let Some(error) = file.error.as_ref().filter(|_| !file.uploaded) {
        listed["error"] = json!({ "name": error.name, "message": error.message });
    }
    if file.uploaded {
        let download = download_url(signer, &caller.origin, &caller.tenant.id, run, &file.path, now_s);
        listed["url"] = json!(download.url);
        listed["expiresAt"] = json!(download.expires_at);
    }
    listed
}

/// Where the run of `call` may execute: the tenant's `defaults.executor` (as `tab` without an
/// edge budget) narrowed by the call's `executor` argument. A run in a context, and Python with
/// pip packages, go to a tab.
pub fn executor_of(call: &ToolCall, caller: &Caller) -> Result<Executor, String> {
    let defaults = &caller.tenant.defaults;
    let asked = call.arguments.get("executor").and_then(Value::as_str).and_then(Executor::parse);
    let executor = defaults.executor.for_call(defaults.edge.is_some(), asked)?;
    // A context lives in a tab's runner worker: a run in one goes to a tab.
    let in_context = call.arguments.get("context").is_some_and(|context| !context.is_null());
    let packages = call.tool == Tool::RunPy && names_pip_packages(&call.arguments);
    match executor {
        Executor::Edge if in_context => Err(CONTEXT_NEEDS_A_TAB.into()),
        Executor::Edge if packages => Err(PYTHON_PACKAGES_NEED_A_TAB.into()),
        _ if in_context || packages => Ok(Executor::Tab),
        executor => Ok(executor),
    }
}

/// Whether a run_py call's `pip` lists a package (an invalid one is refused on its own later).
fn names_pip_packages(arguments: &Value) -> bool {
    arguments
        .as_object()
        .is_some_and(|arguments| matches!(DepsRequest::from_arguments(Language::Py, arguments), Ok(Some(_))))
}

/// Why a run in a context never runs at the edge.
const CONTEXT_NEEDS_A_TAB: &str =
    "a context lives in a browser tab: a run in one cannot go to the edge executor (leave out context, or executor)";

/// Why Python with pip packages never runs at the edge: a compiled module (.so) is compiled to
/// wasm when it is imported, which a dynamic Worker refuses (docs/ARCHITECTURE.md "The edge
/// executor").
const PYTHON_PACKAGES_NEED_A_TAB: &str = "Python with pip packages needs a browser tab: a package's compiled \
     modules (.so) are WebAssembly compiled as they load, which the edge executor's sandbox refuses; Python \
     without pip runs at the edge";

/// The error name of a run's error; NoExecutorAttached says which page to open (and, for
/// Python with packages where the tenant runs code at the edge, why they need a tab).
fn named_error(error: &RunError, caller: &Caller, packaged_python: bool) -> (ErrorName, String) {
    match tool_error_name(&error.name) {
        Some(ErrorName::NoExecutorAttached) if packaged_python && caller.tenant.defaults.edge.is_some() => {
            (ErrorName::NoExecutorAttached, format!("{PYTHON_PACKAGES_NEED_A_TAB}; {}", caller.no_executor_message()))
        }
        Some(ErrorName::NoExecutorAttached) => (ErrorName::NoExecutorAttached, caller.no_executor_message()),
        Some(name) => (name, error.message.clone()),
        None => (ErrorName::Internal, format!("{}: {}", error.name, error.message)),
    }
}

/// The name a tab reported, if it is one a tool result may carry.
fn tool_error_name(name: &str) -> Option<ErrorName> {
    ErrorName::from_name(name).filter(|name| name.in_tool_results())
}

/// A run's answer on its way to the client: on the stream it reads, or as the one JSON body
/// its request waits for.
pub struct Answer<F> {
    call: Call,
    /// Progress notifications are numbered; the number only grows (the spec requires it).
    steps: f64,
    /// The stream the client reads, if it is there (a legacy client may have lost it).
    frames: Option<F>,
    /// For a request answered with one JSON body: where that body goes.
    body: Option<oneshot::Sender<Value>>,
}

impl<F: Frames> Answer<F> {
    /// An answer streamed on `frames`.
    pub fn streamed(call: Call, frames: F) -> Self {
        Answer { call, steps: 0.0, frames: Some(frames), body: None }
    }

    /// An answer sent as one JSON body, which the returned receiver gets.
    pub fn body(call: Call) -> (Self, oneshot::Receiver<Value>) {
        let (body, answer) = oneshot::channel();
        (Answer { call, steps: 0.0, frames: None, body: Some(body) }, answer)
    }
}

impl<F: Frames> Delivery<F> for Answer<F> {
    fn forward(&mut self, event: &EventBody) {
        let Some(frames) = &self.frames else { return };
        for message in self.call.notifications(event, &mut self.steps) {
            if !frames.send(mcp::sse_event(&message, None).into_bytes()) {
                self.frames = None; // the client left; a legacy one may come back
                return;
            }
        }
    }

    fn finish(&mut self, outcome: Outcome, answer: bool, now_ms: u64) -> Option<Value> {
        let response = self.call.conclude(outcome, now_ms);
        if let Some(body) = self.body.take() {
            let _ = body.send(response);
            return None;
        }
        // A request the client cancelled gets no answer (2025-11-25 cancellation: SHOULD NOT).
        // Dropping the stream ends it either way.
        let frames = self.frames.take().filter(|_| answer)?;
        frames.send(mcp::sse_event(&response, None).into_bytes());
        // A send into a stream whose client already left can still succeed: a legacy answer
        // is kept for a client that resumes, whatever the send said.
        (self.call.tool_call.era == Era::Legacy).then_some(response)
    }

    fn resume(&mut self, session: &str, frames: F) -> bool {
        let call = &self.call.tool_call;
        let ours = call.era == Era::Legacy && call.session_id.as_deref() == Some(session);
        if ours && self.body.is_none() {
            self.frames = Some(frames);
        }
        self.frames.is_some() && ours
    }
}

/// A file tool's call as the relay session answers it: the call, who made it, the run its
/// audit record is kept as, and its checked arguments.
pub struct FileCall {
    pub tool_call: ToolCall,
    pub caller: Caller,
    pub run: String,
    pub op: FileOp,
}

/// The audit row of `call`, by `caller`, queued as run `run` of `audit_name`, handed to `f`.
fn with_queued<R>(call: &ToolCall, caller: &Caller, run: &str, audit_name: &str, f: impl FnOnce(&Queued) -> R) -> R {
    let args = audit::redact_args(&call.arguments);
    f(&Queued {
        run_id: run,
        tool: call.tool.name(),
        capsule_hash: audit_name,
        mcp_session: call.session_id.as_deref(),
        request_id: &call.id,
        tenant: &caller.tenant.id,
        relay_session: &caller.session,
        args: &args,
    })
}

impl<P: Platform + 'static> RelaySession<P> {
    /// Admits the run of `call` (see [`RelaySession::admit`]), its audit row naming the job
    /// and the call's redacted arguments.
    pub fn admit_call(&self, call: &Call, delivery: Box<dyn Delivery<P::Frames>>) -> Result<(), Unadmitted> {
        let Call { tool_call, caller, run, job } = call;
        let settings = &caller.tenant.defaults.contexts;
        let context =
            context_ask(tool_call).ok().flatten().map(|ask| self.claim_context(job.runtime(), &ask, settings));
        let executor = executor_of(tool_call, caller).unwrap_or_default();
        let placement = (executor, caller);
        with_queued(tool_call, caller, run, &job.audit_name(), |queued| {
            self.admit(queued, job.limits(), placement, context, delivery)
        })
    }

    /// A file tool answered by the relay session itself from its workspace, with or without a
    /// tab, never waiting in line: the JSON-RPC response. It is audited as a run named
    /// `file:<tool>` (its row first, then sealed with the workspace root before and after).
    /// Err: the storage failed (the caller answers 503 StorageUnavailable; the index is as it was).
    /// A call that reads under `/mcps` gets the tree listed from the upstream servers (`key`
    /// opens their credentials), as a tab's copy had it.
    pub async fn answer_file(&self, call: &FileCall, key: &SealingKey) -> Result<Value, StorageError> {
        let FileCall { tool_call, caller, run, op } = call;
        let started = self.now_ms();
        let audit_name = format!("file:{}", op.tool);
        with_queued(tool_call, caller, run, &audit_name, |queued| self.store().audit_queued(queued, started))?;
        let before = self.store().workspace_root().map(|(_, root)| root);
        let tenant = &caller.tenant;
        let mcps = if op.reads_mcps() { self.mcps_files(caller, key, TREE_TTL_MS).await } else { Vec::new() };
        let answer = match &before {
            Ok(_) => {
                let max_bytes = tenant.defaults.workspace.max_bytes;
                self.file_tool(caller, op.tool, &op.arguments, max_bytes, &mcps).await
            }
            Err(e) => Err(Refusal::new(ErrorName::StorageUnavailable, e.to_string())),
        };
        let after = self.store().workspace_root().map(|(_, root)| root);
        let (ended, wall_ms) = (self.now_ms(), self.now_ms().saturating_sub(started));
        let usage = Usage { wall_ms, ..Usage::default() };
        let (exit_code, error) = match &answer {
            Ok(_) => (0, None),
            Err(refusal) => {
                let error = RunError { name: refusal.name.as_str().to_owned(), message: refusal.message.clone() };
                (refusal.name.exit_code(), Some(error))
            }
        };
        let roots = self.store().audit_workspace(run, before.as_deref().ok(), after.as_deref().ok());
        self.persisted("audit", roots);
        let exit = Exit { exit_code, usage, error, files: Vec::new(), displays: Vec::new() };
        let outcome = Outcome {
            exit,
            stdout: String::new(),
            stderr: String::new(),
            by_relay: true,
            context: None,
            executor: None,
            edge_ms: 0,
        };
        self.audited("a file tool", self.store().audit_finished(run, &outcome, ended));
        match answer {
            Ok(value) => Ok(mcp::file_result(tool_call, value)),
            Err(refusal) if refusal.name == ErrorName::StorageUnavailable => Err(StorageError(refusal.message)),
            Err(refusal) => Ok(mcp::refused_tool(tool_call, &refusal)),
        }
    }

    /// `GET /mcp` with `Last-Event-ID` (legacy era): resumes the stream of run `run` on
    /// `frames`, if it belongs to MCP session `session`. A run still in flight carries on there;
    /// an ended one gets its answer (or, if no answer survived, the error the audit recorded).
    pub fn resume(&self, session: &str, run: &str, frames: P::Frames) -> Result<Resumed, StorageError> {
        if self.resume_run(run, session, frames) {
            return Ok(Resumed::Streaming);
        }
        let Some(ended) = self.store().ended_run(run, session)? else {
            let message = format!("no stream {run} to resume in this MCP session");
            return Ok(Resumed::Refused(
                RpcError::rejected(INVALID_REQUEST, message).with_status(404).into_response(None),
            ));
        };
        Ok(Resumed::Answer(self.take_kept_answer(run).unwrap_or_else(|| answer_from_audit(&ended))))
    }
}

/// What a client resuming a legacy stream gets.
#[derive(Debug)]
pub enum Resumed {
    /// The run is in flight: its output and answer go to the resumed stream.
    Streaming,
    /// The run ended: its answer, the only frame of the resumed stream.
    Answer(Value),
    /// There is no such stream in that MCP session.
    Refused(HttpResponse),
}

/// The answer to a legacy request whose run ended while no one held its stream and whose
/// answer is gone (the relay restarted): what the audit says, as a tool error.
fn answer_from_audit(ended: &Ended) -> Value {
    let id: Value = serde_json::from_str(&ended.request_id).unwrap_or(Value::Null);
    let name = ended.error_name.as_deref().and_then(tool_error_name);
    let (name, message) = match (name, &ended.error_message) {
        (Some(name), Some(message)) => (name, message.clone()),
        _ => (
            ErrorName::Internal,
            format!(
                "the run ended with exit code {} but its answer was lost with the connection, and the relay keeps no output (only its hash); run the tool again",
                ended.exit_code.unwrap_or(1)
            ),
        ),
    };
    mcp::tool_error_to(&id, Era::Legacy, name, &message)
}

/// Makes the run's command for the tab and tells the machine the run is ready to be sent. A
/// capsule is first stored in R2 (once per hash and instance), a packaged run's build reused
/// or started; a failure ends the run.
pub async fn prepare<P: Platform + 'static>(session: &Rc<RelaySession<P>>, caller: &Caller, run: &str, job: &Job) {
    let mut preparing = Preparing { session: session.clone(), run: run.to_owned(), done: false };
    let command = match job {
        Job::Capsule { capsule, signer, charged_ms } => {
            let stored = session.store_capsule(caller, capsule, charged_ms.take()).await.map_err(unprepared);
            stored.map(|()| session.capsule_command(signer, caller, run, capsule))
        }
        Job::Packaged(job) => session.prepare_packaged(caller, run, job).await,
    };
    let command = match command {
        Ok(command) => command,
        Err(why) => return preparing.fail(why),
    };
    session.set_command(run, command, job.runtime());
    preparing.done = true;
    session.feed(Input::Ready { run: run.to_owned() });
}

impl<P: Platform> RelaySession<P> {
    /// The `capsule` command for run `run`, signed now.
    /// A run in a context carries its order (`run::contexts`).
    pub fn capsule_command(&self, signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule) -> TabCommand {
        let mut command = CapsuleCommand::new(signer, caller, run, capsule, self.now_ms() / 1000);
        command.context = self.context_of(run).map(|claim| ContextOrder {
            name: claim.key.1,
            fresh: claim.fresh,
            idle_ms: caller.tenant.defaults.contexts.idle_ms,
        });
        TabCommand::Capsule(command)
    }
}

/// A run being prepared. If its preparation is dropped half way (its request went away while
/// the capsule was being stored), the run is ended: it would never be ready, and would hold up
/// the runs behind it until the queue's limit.
struct Preparing<P: Platform + 'static> {
    session: Rc<RelaySession<P>>,
    run: String,
    done: bool,
}

impl<P: Platform + 'static> Preparing<P> {
    fn fail(&mut self, why: Cancel) {
        self.done = true;
        self.session.feed(Input::Cancel { run: self.run.clone(), why });
    }
}

impl<P: Platform + 'static> Drop for Preparing<P> {
    fn drop(&mut self) {
        if !self.done {
            self.fail(Cancel::Unprepared(
                "its request went away while its capsule was being stored; retry the call".into(),
            ));
        }
    }
}

impl<P: Platform> RelaySession<P> {
    /// The `/mcps` tree's files (none when the tenant's servers cannot be read: a search of the
    /// whole workspace still answers).
    pub(super) async fn mcps_files(
        &self,
        caller: &Caller,
        key: &SealingKey,
        max_age_ms: u64,
    ) -> Vec<(String, Vec<u8>)> {
        let Some(tree) = self.mcps_tree_within(caller, key, max_age_ms).await.ok() else { return Vec::new() };
        let files = tree["files"].as_array().cloned().unwrap_or_default();
        let file = |f: &Value| Some((f["path"].as_str()?.to_owned(), f["text"].as_str()?.as_bytes().to_vec()));
        files.iter().filter_map(file).collect()
    }
}

/// Cancels a run whose client stopped waiting for it (a 2026-07-28 stream closed, a JSON
/// request dropped) when dropped; a no-op once the run has ended.
pub struct CancelOnDrop<P: Platform + 'static> {
    pub session: Rc<RelaySession<P>>,
    pub run: String,
}

impl<P: Platform + 'static> Drop for CancelOnDrop<P> {
    fn drop(&mut self) {
        self.session.feed(Input::Cancel { run: self.run.clone(), why: Cancel::ClientGone });
    }
}

/// A task's run: the task is stored before its handle (a CreateTaskResult) is returned, so a
/// `tasks/get` for it always finds it; the run then goes on with no request open, and its end
/// is written into the task.
pub async fn start_task<P: Platform + 'static>(session: &Rc<RelaySession<P>>, call: Call) -> Result<Value, Unadmitted> {
    let task = TaskRecord::working(&session.random_id::<16>("task_"), &call.run, session.now_ms());
    // Stored first: the run may end within its admission (no tab, no attach wait), and its end
    // is written over this. (A refused admission leaves a task no one was told of; it expires.)
    session.store().save_task(&task).map_err(Unadmitted::Storage)?;
    let delivery = TaskAnswer { call: call.clone(), task: task.clone(), session: session.clone() };
    session.admit_call(&call, Box::new(delivery))?;
    prepare(session, &call.caller, &call.run, &call.job).await;
    Ok(mcp::task_created(&call.tool_call, &task))
}

/// Where a task's run ends: in its task, as what the request would have answered.
struct TaskAnswer<P: Platform + 'static> {
    call: Call,
    task: TaskRecord,
    session: Rc<RelaySession<P>>,
}

impl<P: Platform + 'static> Delivery<P::Frames> for TaskAnswer<P> {
    fn forward(&mut self, _: &EventBody) {}

    fn finish(&mut self, outcome: Outcome, answer: bool, now_ms: u64) -> Option<Value> {
        let cancelled = !answer || outcome.exit.error.as_ref().is_some_and(|e| e.name == ErrorName::Cancelled.as_str());
        let response = self.call.conclude(outcome, now_ms);
        let saved = self.session.store().save_task(&self.task.ended(&response, cancelled, now_ms));
        self.session.persisted("tasks", saved);
        None
    }

    fn resume(&mut self, _: &str, _: P::Frames) -> bool {
        false
    }
}

impl<P: Platform> RelaySession<P> {
    /// Task `task_id` as `tasks/get` shows it: a working one with its run's progress. A poll
    /// also ticks the run machine, so deadlines run while no stream is open (a task holds no
    /// request). A working task whose run this instance no longer has was cut off by a
    /// restart: it failed.
    pub fn task(&self, task_id: &str) -> Option<TaskRecord> {
        self.tick();
        let task = self.persisted("tasks", self.store().task(task_id, self.now_ms()))??;
        if task.status != TaskStatus::Working {
            return Some(task);
        }
        let run = task.run_id.clone();
        let progress = self.progress(&run, |on_tab, stdout, stderr| task.clone().in_progress(on_tab, stdout, stderr));
        progress.or_else(|| {
            let lost = json!({ "error": { "code": -32603, "message": "the relay restarted while the run was in flight; call the tool again" } });
            let failed = task.ended(&lost, false, self.now_ms());
            self.persisted("tasks", self.store().save_task(&failed));
            Some(failed)
        })
    }
}

/// Gives back what a run's admission charged for its capsule, if its preparation never took
/// the charge, when dropped: a streamed answer runs `prepare` only as its body is polled, and
/// a body dropped first (the client gone at once) would keep the charge until the next
/// measurement. A no-op once [`prepare`] ran.
pub struct UnchargeOnDrop<P: Platform + 'static> {
    pub session: Rc<RelaySession<P>>,
    pub call: Call,
}

impl<P: Platform + 'static> Drop for UnchargeOnDrop<P> {
    fn drop(&mut self) {
        self.call.job.uncharge(&self.session, &self.call.caller.tenant.id);
    }
}
