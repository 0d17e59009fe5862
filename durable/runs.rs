//! A run from `tools/call` to result: build and sign the capsule, take the run's place in line,
//! store the capsule, then forward what the run machine reports to the client as it comes and
//! answer with the result. The driver is a future owned by the response: if the client goes
//! away (its stream is dropped), a guard cancels the run, which is how closing the response
//! cancels a request.

use super::shared::{Shared, Signal};
use super::store;
use crate::auth::tenant::hex;
use crate::auth::AttachClaims;
use crate::capsule::jws::Signer;
use crate::capsule::{self, Capsule};
use crate::edge::capsules::{signer, store as store_capsule};
use crate::edge::{http, now_ms, random, sleep};
use crate::forward::Caller;
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::{self, ErrorName, LogLevel, ToolCall, ToolResult};
use crate::run::args::capsule_spec;
use crate::run::backchannel::{EventBody, RunError};
use crate::run::session::{Cancel, Input, Outcome, Output};
use futures::channel::mpsc::{self, UnboundedReceiver, UnboundedSender};
use futures::{future, FutureExt, StreamExt};
use serde_json::{json, Value};
use std::rc::Rc;
use worker::{Response, Result};

/// How often the driver ticks the machine (heartbeats to tabs) and sends its SSE client a
/// keep-alive while the run is in flight. A client that went away is noticed when a
/// keep-alive cannot be written, so this bounds how long a run outlives its caller.
const TICK_MS: u64 = 2_000;
/// JSON-RPC server error for a full queue (the HTTP status, 429, says the rest). Outside
/// -32000..-32019, which 2026-07-28 asks new implementations not to use.
const QUEUE_FULL: i64 = -32050;

type Frames = UnboundedSender<Result<Vec<u8>>>;

/// An admitted run and what its driver needs.
struct Admitted {
    run: String,
    capsule: Capsule,
    signals: UnboundedReceiver<Signal>,
    /// Held from admission on, so a response dropped before its driver ever ran still ends the run.
    end: EndRun,
}

/// Answers a `tools/call` of `run_js` / `run_py`.
pub async fn respond(shared: Rc<Shared>, caller: Caller, call: ToolCall) -> Result<Response> {
    let admitted = match admit(&shared, &caller, &call)? {
        Ok(admitted) => admitted,
        Err(response) => return Ok(response),
    };
    if !call.stream {
        let (_, answer) = drive(shared, admitted, &call, &caller, None).await;
        return Ok(http::json(200, &answer));
    }
    let (frames, body) = mpsc::unbounded();
    let driver = async move {
        let (answer_it, answer) = drive(shared, admitted, &call, &caller, Some(&frames)).await;
        // A request the client cancelled gets no answer (2025-11-25 cancellation: SHOULD NOT).
        if answer_it {
            let _ = frames.unbounded_send(Ok(mcp::sse_event(&answer, None).into_bytes()));
        }
    };
    // The body is the frames, merged with the driver (which yields nothing) so that polling the
    // body drives the run and dropping the body drops the driver.
    let driver = driver.into_stream().filter_map(|_| future::ready(None));
    let stream = futures::stream::select(body, driver);
    Ok(Response::from_stream(stream)?.with_headers(http::sse_headers()))
}

/// Builds and signs the capsule and takes the run's place in line, before anything awaits, so
/// runs keep the order their calls reached this relay session. An error is the response to send.
fn admit(shared: &Rc<Shared>, caller: &Caller, call: &ToolCall) -> Result<std::result::Result<Admitted, Response>> {
    let tool_error = |name, message: &str| Ok(Err(http::json(200, &mcp::tool_error(call, name, message))));
    let language = call.tool.name();
    let spec = match capsule_spec(language, &call.arguments, &caller.tenant.defaults.policy) {
        Ok(spec) => spec,
        Err(e) => return tool_error(e.name, &e.message),
    };
    let (timeout_ms, output_cap) = (spec.policy.limits.timeout_ms, spec.policy.limits.stdout_bytes);
    let capsule = match capsule::build_capsule(spec, &signer(&shared.env)?) {
        Ok(capsule) => capsule,
        Err(e) => return tool_error(ErrorName::ValidationError, &e.to_string()),
    };
    let run = format!("r_{}", hex(&random::<8>()));
    let (signals_tx, signals) = mpsc::unbounded();
    shared.add_run(&run, signals_tx, request_key(call.session_id.as_deref(), &call.id));
    let admission = shared.feed(caller, Input::Admit { run: run.clone(), timeout_ms, output_cap });
    if let Some(Output::Refused { max, .. }) = admission.first() {
        shared.remove_run(&run);
        let message =
            format!("queue full: {max} run(s) already waiting in relay session '{}'; retry later", caller.session);
        let reply = RpcError::failed(QUEUE_FULL, message).with_status(429).into_response(Some(&call.id));
        return Ok(Err(http::with_header(super::mcp::to_response(reply), "retry-after", "5")));
    }
    store::audit_queued(&shared.storage.sql(), &run, language, &capsule.hash, now_ms());
    let end = EndRun { shared: shared.clone(), caller: caller.clone(), run: run.clone() };
    Ok(Ok(Admitted { run, capsule, signals, end }))
}

/// Stores the capsule in R2 (once per hash and DO instance) and tells the machine the run is
/// ready to be sent; a failed store ends the run.
async fn prepare(shared: &Shared, caller: &Caller, run: &str, capsule: &Capsule) {
    if !shared.stored(&capsule.hash) {
        let stored = match shared.env.bucket("R2_CAPSULES") {
            Ok(bucket) => store_capsule(&bucket, &caller.tenant.id, capsule).await,
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            worker::console_error!("storing capsule {}: {e}", capsule.hash);
            let why = Cancel::Unprepared("its capsule could not be stored; retry the call".into());
            shared.feed(caller, Input::Cancel { run: run.to_owned(), why });
            return;
        }
        shared.mark_stored(&capsule.hash);
    }
    match signer(&shared.env) {
        Ok(signer) => {
            shared.set_capsule_event(run, capsule_event(&signer, caller, run, capsule));
            shared.feed(caller, Input::Ready { run: run.to_owned() });
        }
        Err(e) => {
            let why = Cancel::Unprepared(e.to_string());
            shared.feed(caller, Input::Cancel { run: run.to_owned(), why });
        }
    }
}

/// The `capsule` command for the tab, with a token (sent as `Authorization: Bearer`) that only
/// reads this tenant's capsule files.
fn capsule_event(signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule) -> Vec<u8> {
    let claims = AttachClaims::new(&caller.tenant.id, &caller.session, now_ms() / 1000, format!("cap_{run}"));
    let token = claims.sign_for_capsule_files(signer);
    let size: u64 =
        capsule.layers.iter().map(|(layer, _)| layer.size).sum::<u64>() + capsule.manifest_json.len() as u64;
    let data = json!({
        "runId": run,
        "hash": capsule.hash,
        "language": capsule.manifest.language,
        "size": size,
        "manifestUrl": format!("/capsules/{}/capsule.json", capsule.hash),
        "token": token,
    });
    mcp::sse_frame("capsule", &data, None).into_bytes()
}

/// Identifies an MCP request across eras: legacy session id (if any) and JSON-RPC id.
pub fn request_key(session_id: Option<&str>, id: &Value) -> String {
    format!("{}/{id}", session_id.unwrap_or("-"))
}

/// `notifications/cancelled`: cancels the run of that request, if there is one; its request
/// then gets no answer.
pub fn cancel_request(shared: &Shared, caller: &Caller, session_id: Option<&str>, request_id: &Value) {
    if let Some(run) = shared.run_of_request(&request_key(session_id, request_id)) {
        shared.feed(caller, Input::Cancel { run, why: Cancel::ByClient });
    }
}

/// Ends the run when its driver is done or dropped: a response dropped before the run ended
/// (the client went away) cancels the run.
struct EndRun {
    shared: Rc<Shared>,
    caller: Caller,
    run: String,
}

impl Drop for EndRun {
    fn drop(&mut self) {
        let cancel = Input::Cancel { run: self.run.clone(), why: Cancel::ClientGone };
        self.shared.feed(&self.caller, cancel);
        self.shared.remove_run(&self.run);
    }
}

/// Prepares the run, then forwards what it reports until it ends; returns whether to answer
/// and the JSON-RPC response.
async fn drive(
    shared: Rc<Shared>,
    run: Admitted,
    call: &ToolCall,
    caller: &Caller,
    frames: Option<&Frames>,
) -> (bool, Value) {
    let Admitted { run, capsule, mut signals, end } = run;
    prepare(&shared, caller, &run, &capsule).await;
    let mut steps = 0.0;
    let finished = loop {
        let now = now_ms();
        let wake = shared.next_wake().unwrap_or(u64::MAX).min(now + TICK_MS);
        match future::select(signals.next(), sleep(wake.saturating_sub(now).max(1))).await {
            future::Either::Left((Some(Signal::Forward(body)), _)) => forward(frames, call, &body, &mut steps),
            future::Either::Left((Some(Signal::Finished { outcome, answer }), _)) => break Some((outcome, answer)),
            future::Either::Left((None, _)) => break None,
            future::Either::Right(_) => {
                shared.tick(caller);
                if let Some(frames) = frames {
                    let _ = frames.unbounded_send(Ok(mcp::SSE_KEEPALIVE.as_bytes().to_vec()));
                }
            }
        }
    };
    drop(end);
    match finished {
        Some((outcome, answer)) => (answer, conclude(call, caller, outcome)),
        None => (true, mcp::tool_error(call, ErrorName::Internal, "the run was lost")),
    }
}

/// Streams one event to the client, as the era and the request's options allow. Phases become
/// progress notifications numbered by `steps`, which only grows (the spec requires it).
fn forward(frames: Option<&Frames>, call: &ToolCall, body: &EventBody, steps: &mut f64) {
    let Some(frames) = frames else { return };
    let message = match body {
        EventBody::Stdout { data } => mcp::log_notification(call, LogLevel::Info, "stdout", json!(data)),
        EventBody::Stderr { data } => mcp::log_notification(call, LogLevel::Warning, "stderr", json!(data)),
        EventBody::Progress { phase, runtime_id } => call.progress_token.as_ref().map(|token| {
            *steps += 1.0;
            let message = match runtime_id {
                Some(runtime) => format!("{phase} ({runtime})"),
                None => phase.clone(),
            };
            mcp::progress_notification(token, *steps, None, Some(&message))
        }),
        EventBody::Exit { .. } | EventBody::Error(_) => None,
    };
    if let Some(message) = message {
        let _ = frames.unbounded_send(Ok(mcp::sse_event(&message, None).into_bytes()));
    }
}

/// The JSON-RPC response for a run that ended.
fn conclude(call: &ToolCall, caller: &Caller, outcome: Outcome) -> Value {
    let Outcome { exit, stdout, stderr } = outcome;
    let result = ToolResult {
        exit_code: exit.exit_code,
        stdout,
        stderr,
        wall_ms: exit.usage.wall_ms,
        mem_peak_mb: exit.usage.mem_peak_mb,
        files: Vec::new(),
        error: exit.error.as_ref().map(|e| named_error(e, caller)),
    };
    mcp::tool_result(call, result)
}

/// The seed's error name of a run's error; NoExecutorAttached says which page to open.
fn named_error(error: &RunError, caller: &Caller) -> (ErrorName, String) {
    match ErrorName::ALL.into_iter().find(|n| n.as_str() == error.name) {
        Some(ErrorName::NoExecutorAttached) => (ErrorName::NoExecutorAttached, caller.no_executor_message()),
        Some(name) => (name, error.message.clone()),
        None => (ErrorName::Internal, format!("{}: {}", error.name, error.message)),
    }
}
