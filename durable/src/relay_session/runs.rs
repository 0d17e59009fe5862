//! A run from `tools/call` to result: build and sign the capsule (or check the file tool's
//! arguments), take the run's place in line, store the capsule, and deliver what the run
//! machine reports ([`Answer`]) as it comes: on the request's SSE stream, or as one JSON body.
//!
//! A 2026-07-28 client that declared the tasks extension gets a task for `run_js`/`run_py`
//! instead ([`TaskAnswer`]): the answer is the task handle, sent once the task is stored, and
//! the run's end is written into the task, which `tasks/get` reads (see `mcp.rs`).
//!
//! Closing a 2026-07-28 stream cancels its run (streamable-http "Cancellation"). A legacy
//! client's disconnection is not a cancellation (2025-11-25 transports "Sending Messages"): its
//! stream opens with a priming event whose id is the run id, the run goes on, and the client
//! resumes with `GET` + `Last-Event-ID` ([`resume`]), getting the rest of the output and the
//! answer, or, after a restart of the relay, the error the audit recorded.

use super::builds::{self, Packaged};
use super::commands::{capsule_frame, store_new};
use super::shared::{ticker, Delivery, Frames, Shared};
use super::store::{self, Ended, Queued};
use crate::edge::capsules::signer;
use crate::edge::{http, now_ms, random};
use futures::channel::{mpsc, oneshot};
use futures::stream::PollNext;
use futures::{future, FutureExt, Stream, StreamExt};
use relay_core::audit;
use relay_core::capsule::jws::Signer;
use relay_core::capsule::Capsule;
use relay_core::error::ErrorName;
use relay_core::files::download_url;
use relay_core::forward::Caller;
use relay_core::mcp::jsonrpc::{RpcError, INVALID_REQUEST};
use relay_core::mcp::tasks::TaskRecord;
use relay_core::mcp::{self, Era, LogLevel, Tool, ToolCall, ToolResult};
use relay_core::run::args::{capsule_spec, deps_request};
use relay_core::run::backchannel::{EventBody, OutFile, RunError};
use relay_core::run::file_op::{file_op, FileOp, FILE_OP_TIMEOUT_MS};
use relay_core::run::session::{Cancel, Input, Outcome, Output};
use serde_json::{json, Value};
use std::rc::Rc;
use worker::{Response, Result, SqlStorage};

/// How long a legacy client that lost its stream waits before resuming it (the SSE `retry`).
const RESUME_RETRY_MS: u64 = 5_000;

/// A run's answer on its way to the client.
struct Answer {
    call: ToolCall,
    caller: Caller,
    run: String,
    job: Rc<Job>,
    /// Progress notifications are numbered; the number only grows (the spec requires it).
    steps: f64,
    /// The stream the client reads, if it is there (a legacy client may have lost it).
    frames: Option<Frames>,
    /// For a request answered with one JSON body: where that body goes.
    body: Option<oneshot::Sender<Value>>,
}

impl Delivery for Answer {
    fn forward(&mut self, event: &EventBody) {
        let Some(frames) = &self.frames else { return };
        for message in notifications(&self.call, event, &mut self.steps) {
            if frames.unbounded_send(Ok(mcp::sse_event(&message, None).into_bytes())).is_err() {
                self.frames = None; // the client left; a legacy one may come back
                return;
            }
        }
    }

    fn finish(&mut self, outcome: Outcome, answer: bool) -> Option<Value> {
        let response = conclude(self, outcome);
        if let Some(body) = self.body.take() {
            let _ = body.send(response);
            return None;
        }
        // A request the client cancelled gets no answer (2025-11-25 cancellation: SHOULD NOT).
        // Dropping the sender ends the stream either way.
        let frames = self.frames.take().filter(|_| answer)?;
        let _ = frames.unbounded_send(Ok(mcp::sse_event(&response, None).into_bytes()));
        // A send into a stream whose client already left can still succeed: a legacy answer
        // is kept for a client that resumes, whatever the send said.
        (self.call.era == Era::Legacy).then_some(response)
    }

    fn resume(&mut self, session: &str, frames: Frames) -> bool {
        let ours = self.call.era == Era::Legacy && self.call.session_id.as_deref() == Some(session);
        if ours && self.body.is_none() {
            self.frames = Some(frames);
        }
        self.frames.is_some() && ours
    }
}

impl Answer {
    fn new(call: &ToolCall, caller: &Caller, run: &str, job: &Rc<Job>, frames: Option<Frames>) -> Self {
        let (call, caller, run, job) = (call.clone(), caller.clone(), run.to_owned(), job.clone());
        Answer { call, caller, run, job, steps: 0.0, frames, body: None }
    }
}

/// What a run executes: a capsule (`run_js`, `run_py`), one whose deps layer comes from a
/// build, or a file tool on the tab's workspace.
enum Job {
    Capsule { capsule: Box<Capsule>, signer: Signer },
    Packaged(Box<Packaged>),
    File(FileOp),
}

impl Job {
    /// The runtime the run needs in the tab (none for a file tool).
    fn runtime(&self) -> Option<&str> {
        match self {
            Job::Capsule { capsule, .. } => Some(&capsule.manifest.runtime.id),
            Job::Packaged(job) => Some(job.spec.language.runtime_id()),
            Job::File(_) => None,
        }
    }

    /// What the audit names the run by: its capsule, or the file tool.
    fn audit_name(&self) -> String {
        match self {
            Job::Capsule { capsule, .. } => capsule.hash.clone(),
            // Until the build names the capsule (`store::audit_capsule`).
            Job::Packaged(job) => format!("build:{}", job.key),
            Job::File(op) => format!("file:{}", op.tool),
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
            Job::File(_) => (FILE_OP_TIMEOUT_MS, 0),
        }
    }
}

/// Answers a `tools/call`: every tool runs in line on the relay session's tab.
pub async fn respond(shared: Rc<Shared>, caller: Caller, call: ToolCall) -> Result<Response> {
    // A full queue refuses at once, as cheaply as any answer of this DO: before the capsule
    // is built and signed, and before an audit row is written (and deleted again), since an
    // answer is held until the storage writes before it are durable.
    if let Some(max) = shared.queue_full() {
        return Ok(queue_full(&call, &caller, max));
    }
    let job = match build(&shared, &caller, &call)? {
        Ok(job) => Rc::new(job),
        Err(response) => return Ok(response),
    };
    let run = format!("r_{}", hex::encode(random::<8>()));
    if call.task {
        return respond_with_task(shared, caller, call, run, job).await;
    }
    if !call.stream {
        let (body, answer) = oneshot::channel();
        let delivery = Answer { body: Some(body), ..Answer::new(&call, &caller, &run, &job, None) };
        if let Err(response) = admit(&shared, &call, &caller, &run, &job, delivery) {
            return Ok(response);
        }
        // The client waits for this body: if it goes away, the run is cancelled.
        let _cancel = CancelOnDrop { shared: shared.clone(), run: run.clone() };
        prepare(&shared, &caller, &run, &job).await;
        let alive = run.clone();
        let ticking = ticker(shared.clone(), move |s| s.has_run(&alive), None).for_each(|_| future::ready(()));
        let answer = match future::select(answer, Box::pin(ticking)).await {
            future::Either::Left((answer, _)) => answer.ok(),
            future::Either::Right((_, answer)) => answer.await.ok(),
        };
        let answer = answer.unwrap_or_else(|| mcp::tool_error(&call, ErrorName::Internal, "the run was lost"));
        return Ok(http::json(200, &answer));
    }
    let (frames, body) = mpsc::unbounded();
    if call.era == Era::Legacy {
        let priming = format!("id: {run}\nretry: {RESUME_RETRY_MS}\ndata: \n\n");
        let _ = frames.unbounded_send(Ok(priming.into_bytes()));
    }
    let modern = call.era == Era::Modern;
    if let Err(response) =
        admit(&shared, &call, &caller, &run, &job, Answer::new(&call, &caller, &run, &job, Some(frames)))
    {
        return Ok(response);
    }
    let cancel = modern.then(|| CancelOnDrop { shared: shared.clone(), run: run.clone() });
    let preparing = {
        let (shared, run) = (shared.clone(), run.clone());
        async move { prepare(&shared, &caller, &run, &job).await }.into_stream().filter_map(|()| future::ready(None))
    };
    // The body is the answer's frames merged with the ticker and the preparation (which yield
    // no frames of their own but keep-alives): polling the body drives all of them, and
    // dropping it drops them and, for a 2026-07-28 call, cancels the run.
    let stream = run_stream(shared, run, body, preparing).map(move |frame| {
        let _ = &cancel;
        frame
    });
    Ok(Response::from_stream(stream)?.with_headers(http::sse_headers()))
}

/// A task's run: the task is stored before its handle (a CreateTaskResult) is answered, so a
/// `tasks/get` for it always finds it; the run then goes on with no request open, and its end
/// is written into the task.
async fn respond_with_task(
    shared: Rc<Shared>,
    caller: Caller,
    call: ToolCall,
    run: String,
    job: Rc<Job>,
) -> Result<Response> {
    let task = TaskRecord::working(&format!("task_{}", hex::encode(random::<16>())), &run, now_ms());
    let sql = shared.storage.sql();
    let delivery =
        TaskAnswer { answer: Answer::new(&call, &caller, &run, &job, None), task: task.clone(), sql: sql.clone() };
    // Stored first: the run may end within its admission (no tab, no attach wait), and its end
    // is written over this. (A refused admission leaves a task no one was told of; it expires.)
    store::save_task(&sql, &task);
    if let Err(response) = admit(&shared, &call, &caller, &run, &job, delivery) {
        return Ok(response);
    }
    prepare(&shared, &caller, &run, &job).await;
    Ok(http::json(200, &mcp::task_created(&call, &task)))
}

/// Where a task's run ends: in its task, as what the request would have answered.
struct TaskAnswer {
    answer: Answer,
    task: TaskRecord,
    sql: SqlStorage,
}

impl Delivery for TaskAnswer {
    fn forward(&mut self, _: &EventBody) {}

    fn finish(&mut self, outcome: Outcome, answer: bool) -> Option<Value> {
        let cancelled = !answer || outcome.exit.error.as_ref().is_some_and(|e| e.name == ErrorName::Cancelled.as_str());
        let response = conclude(&self.answer, outcome);
        store::save_task(&self.sql, &self.task.ended(&response, cancelled, now_ms()));
        None
    }

    fn resume(&mut self, _: &str, _: Frames) -> bool {
        false
    }
}

/// A run's answer frames, merged with a ticker that keeps the machine's deadlines running (and
/// the client's connection alive) while the run lasts, and with `driven` (work the stream
/// drives). The stream ends with the answer frames: their sender is dropped once the answer is
/// sent, and the response closes right after it, in both eras (2025-11-25 and 2026-07-28
/// transports: after the JSON-RPC response the server closes the SSE stream), never at the
/// ticker's next wake. The answer frames go first whenever both are ready, so nothing follows
/// the result.
fn run_stream(
    shared: Rc<Shared>,
    run: String,
    body: mpsc::UnboundedReceiver<Result<Vec<u8>>>,
    driven: impl Stream<Item = Result<Vec<u8>>>,
) -> impl Stream<Item = Result<Vec<u8>>> {
    let ticking = ticker(shared, move |s| s.has_run(&run), Some(mcp::SSE_KEEPALIVE));
    let answer = body.map(Some).chain(futures::stream::once(future::ready(None)));
    let others = futures::stream::select(ticking, driven).map(Some);
    futures::stream::select_with_strategy(answer, others, |_: &mut ()| PollNext::Left)
        .take_while(|frame| future::ready(frame.is_some()))
        .filter_map(future::ready)
}

/// `GET /mcp` with `Last-Event-ID` (legacy era): resumes the stream of run `event_id`, if it
/// belongs to MCP session `session`. A run still in flight carries on on the new stream; an
/// ended one gets its answer (or, if no answer survived, the error the audit recorded).
pub fn resume(shared: Rc<Shared>, session: &str, event_id: &str) -> Result<Response> {
    let (frames, body) = mpsc::unbounded();
    if shared.resume(event_id, session, frames.clone()) {
        let stream = run_stream(shared, event_id.to_owned(), body, futures::stream::empty());
        return Ok(Response::from_stream(stream)?.with_headers(http::sse_headers()));
    }
    let Some(ended) = store::ended_run(&shared.storage.sql(), event_id, session) else {
        let message = format!("no stream {event_id} to resume in this MCP session");
        let reply = RpcError::rejected(INVALID_REQUEST, message).with_status(404).into_response(None);
        return Ok(http::to_response(reply));
    };
    let answer = shared.take_kept_answer(event_id).unwrap_or_else(|| answer_from_audit(&ended));
    let _ = frames.unbounded_send(Ok(mcp::sse_event(&answer, None).into_bytes()));
    drop(frames);
    Ok(Response::from_stream(body)?.with_headers(http::sse_headers()))
}

/// The answer to a legacy request whose run ended while no one held its stream and whose
/// answer is gone (the relay restarted): what the audit says, as a tool error.
fn answer_from_audit(ended: &Ended) -> Value {
    let id: Value = serde_json::from_str(&ended.request_id).unwrap_or(Value::Null);
    let name = ended.error_name.as_deref().and_then(ErrorName::from_name);
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

/// Checks the arguments and builds the run's job (a capsule is signed here); an error is the
/// tool error to answer with.
fn build(shared: &Shared, caller: &Caller, call: &ToolCall) -> Result<std::result::Result<Job, Response>> {
    let tool_error = |name, message: &str| http::json(200, &mcp::tool_error(call, name, message));
    let policy = &caller.tenant.defaults.policy;
    if !matches!(call.tool, Tool::RunJs | Tool::RunPy) {
        return Ok(file_op(call.tool.name(), &call.arguments, &policy.filesystem)
            .map(Job::File)
            .map_err(|e| tool_error(e.name, &e.message)));
    }
    let signer = signer(&shared.env)?;
    let asked = capsule_spec(call.tool.name(), &call.arguments, policy)
        .and_then(|spec| Ok((spec, deps_request(call.tool.name(), &call.arguments)?)));
    let (spec, request) = match asked {
        Ok(asked) => asked,
        Err(e) => return Ok(Err(tool_error(e.name, &e.message))),
    };
    if let Some(request) = request {
        let key = request.key(spec.language, &caller.tenant.defaults.packages);
        return Ok(Ok(Job::Packaged(Box::new(Packaged { spec, request, key, signer }))));
    }
    Ok(shared
        .capsule(spec, &signer)
        .map(|capsule| Job::Capsule { capsule: Box::new(capsule), signer })
        .map_err(|e| tool_error(ErrorName::ValidationError, &e.to_string())))
}

/// Takes the run's place in line, before anything awaits, so runs keep the order their calls
/// reached this relay session; a full queue is the 429 to send.
fn admit(
    shared: &Shared,
    call: &ToolCall,
    caller: &Caller,
    run: &str,
    job: &Job,
    delivery: impl Delivery + 'static,
) -> std::result::Result<(), Response> {
    let (timeout_ms, output_cap) = job.limits();
    let sql = shared.storage.sql();
    let audit_name = job.audit_name();
    let queued = Queued {
        run_id: run,
        tool: call.tool.name(),
        capsule_hash: &audit_name,
        mcp_session: call.session_id.as_deref(),
        request_id: &call.id,
        tenant: &caller.tenant.id,
        relay_session: &caller.session,
        args: &audit::redact_args(&call.arguments),
    };
    // The audit row comes first: the machine may end the run within this very input (no tab
    // and no attach wait), and its end updates the row.
    store::audit_queued(&sql, &queued, now_ms());
    shared.add_run(run, Box::new(delivery), request_key(call.session_id.as_deref(), &call.id));
    let admission = shared.feed(Input::Admit { run: run.to_owned(), timeout_ms, output_cap });
    if let Some(Output::Refused { max, .. }) = admission.first() {
        shared.remove_run(run);
        store::forget_run(&sql, run);
        return Err(queue_full(call, caller, *max));
    }
    Ok(())
}

/// The 429 of a call refused because `max` runs already wait.
fn queue_full(call: &ToolCall, caller: &Caller, max: u32) -> Response {
    http::to_response(mcp::queue_full(&call.id, max, &caller.session))
}

/// Makes the run's command for the tab and tells the machine the run is ready to be sent. A
/// capsule is first stored in R2 (once per hash and DO instance), a packaged run's reused or
/// its build started; a failure ends the run.
async fn prepare(shared: &Rc<Shared>, caller: &Caller, run: &str, job: &Job) {
    let mut preparing = Preparing { shared: shared.clone(), run: run.to_owned(), done: false };
    let event = match job {
        Job::File(op) => Ok(mcp::sse_frame("file", &op.command(run), None).into_bytes()),
        Job::Capsule { capsule, signer } => {
            store_new(shared, caller, capsule).await.map(|()| capsule_frame(signer, caller, run, capsule))
        }
        Job::Packaged(job) => builds::prepare(shared, caller, run, job).await,
    };
    let event = match event {
        Ok(event) => event,
        Err(why) => return preparing.fail(why),
    };
    shared.set_command(run, event, job.runtime());
    preparing.done = true;
    shared.feed(Input::Ready { run: run.to_owned() });
}

/// A run being prepared. If its preparation is dropped half way (its request went away while
/// the capsule was being stored), the run is ended: it would never be ready, and would hold up
/// the runs behind it until the queue's limit.
struct Preparing {
    shared: Rc<Shared>,
    run: String,
    done: bool,
}

impl Preparing {
    fn fail(&mut self, why: String) {
        self.done = true;
        self.shared.feed(Input::Cancel { run: self.run.clone(), why: Cancel::Unprepared(why) });
    }
}

impl Drop for Preparing {
    fn drop(&mut self) {
        if !self.done {
            self.fail("its request went away while its capsule was being stored; retry the call".into());
        }
    }
}

/// Identifies an MCP request across eras: legacy session id (if any) and JSON-RPC id.
pub fn request_key(session_id: Option<&str>, id: &Value) -> String {
    format!("{}/{id}", session_id.unwrap_or("-"))
}

/// `notifications/cancelled`: cancels the run of that request, if there is one; its request
/// then gets no answer.
pub fn cancel_request(shared: &Shared, session_id: Option<&str>, request_id: &Value) {
    if let Some(run) = shared.run_of_request(&request_key(session_id, request_id)) {
        shared.feed(Input::Cancel { run, why: Cancel::ByClient });
    }
}

/// Cancels a run whose client stopped waiting for it (a 2026-07-28 stream closed, a JSON
/// request dropped); a no-op once the run has ended.
struct CancelOnDrop {
    shared: Rc<Shared>,
    run: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.shared.feed(Input::Cancel { run: self.run.clone(), why: Cancel::ClientGone });
    }
}

/// The notifications one event becomes, as the era and the request's options allow. Phases
/// become progress notifications numbered by `steps`.
fn notifications(call: &ToolCall, body: &EventBody, steps: &mut f64) -> Vec<Value> {
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

/// The JSON-RPC response for a run that ended.
fn conclude(answer: &Answer, outcome: Outcome) -> Value {
    let Answer { call, caller, run, job, .. } = answer;
    let Outcome { exit, stdout, stderr, .. } = outcome;
    let signer = match job.as_ref() {
        Job::Capsule { signer, .. } => signer,
        Job::Packaged(job) => &job.signer,
        Job::File(_) => {
            return match (exit.error, exit.value) {
                (None, Some(value)) => mcp::file_result(call, value),
                (Some(error), _) => {
                    let (name, message) = named_error(&error, caller);
                    mcp::tool_error(call, name, &message)
                }
                (None, None) => {
                    mcp::tool_error(call, ErrorName::Internal, "the tab answered without a result; retry the call")
                }
            };
        }
    };
    let now_s = now_ms() / 1000;
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
        files,
        images: images.collect(),
        error: exit.error.as_ref().map(|e| named_error(e, caller)),
    };
    mcp::tool_result(call, result)
}

/// A file of `/out` as the result lists it: with a signed, absolute download URL (on the
/// caller's public origin) once it was uploaded.
fn listed_file(file: &OutFile, signer: &Signer, caller: &Caller, run: &str, now_s: u64) -> Value {
    let mut listed = json!({ "path": file.path, "size": file.size, "sha256": file.sha256 });
    if file.uploaded {
        let download = download_url(signer, &caller.origin, &caller.tenant.id, run, &file.path, now_s);
        listed["url"] = json!(download.url);
        listed["expiresAt"] = json!(download.expires_at);
    }
    listed
}

/// The error name of a run's error; NoExecutorAttached says which page to open.
fn named_error(error: &RunError, caller: &Caller) -> (ErrorName, String) {
    match ErrorName::from_name(&error.name) {
        Some(ErrorName::NoExecutorAttached) => (ErrorName::NoExecutorAttached, caller.no_executor_message()),
        Some(name) => (name, error.message.clone()),
        None => (ErrorName::Internal, format!("{}: {}", error.name, error.message)),
    }
}
