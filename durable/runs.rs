//! A run from `tools/call` to result: build and store the capsule, queue it, wait for a tab,
//! forward the tab's output to the MCP client as it arrives, and answer with the result.
//! The driver is a future owned by the response: if the client goes away (its stream is
//! dropped), a guard cancels the run, which is how closing the response cancels a request.

use super::executor::{finish, heartbeat, pump, send_to_tab, sse_frame, sse_headers};
use super::mcp::to_response;
use super::session::{Caller, RunSlot, Shared, Signal};
use super::store;
use crate::auth::tenant::hex;
use crate::auth::AttachClaims;
use crate::capsule::jws::Signer;
use crate::capsule::{self, Capsule};
use crate::edge::capsules::{signer, store as store_capsule};
use crate::edge::{http, now_ms, random, sleep};
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::{self, ErrorName, LogLevel, ToolCall, ToolResult};
use crate::run::args::capsule_spec;
use crate::run::backchannel::{EventBody, RunError, RunLog};
use crate::run::lease::Verdict;
use crate::run::queue::{Admission, RunQueue};
use futures::channel::mpsc::{self, UnboundedReceiver, UnboundedSender};
use futures::{future, FutureExt, StreamExt};
use serde_json::{json, Value};
use std::rc::Rc;
use worker::{Response, Result};

/// How often tabs get a heartbeat and SSE clients a keep-alive while a run is in flight. A
/// client that went away is noticed when a keep-alive cannot be written, so this bounds how
/// long a run outlives its caller.
const TICK_MS: u64 = 2_000;
/// What the tab may spend fetching a capsule and loading a runtime before the program starts
/// (the page gives itself the same).
const LOAD_BUDGET_MS: u64 = 120_000;
/// How long past its own timeout a silent tab gets before the DO declares the run timed out.
const TIMEOUT_GRACE_MS: u64 = 10_000;
/// JSON-RPC server error for a full queue (the HTTP status, 429, says the rest). Outside
/// -32000..-32019, which 2026-07-28 asks new implementations not to use.
const QUEUE_FULL: i64 = -32050;
/// Capsule hashes remembered as stored in R2 before the set starts over.
const STORED_KEPT: usize = 10_000;
/// Finished runs kept in memory (so late or retried batches get a clear 409).
const FINISHED_KEPT: usize = 64;

type Frames = UnboundedSender<Result<Vec<u8>>>;

/// A queued run and what its driver needs.
struct Admitted {
    run_id: String,
    signals: UnboundedReceiver<Signal>,
    timeout_ms: u64,
    attach_wait_ms: u64,
    /// Held from admission on, so a response dropped before its driver ever ran still ends the run.
    end: EndRun,
}

/// Answers a `tools/call` of `run_js` / `run_py`.
pub async fn respond(shared: Rc<Shared>, caller: Caller, call: ToolCall) -> Result<Response> {
    let admitted = match admit(&shared, &caller, &call).await? {
        Ok(admitted) => admitted,
        Err(response) => return Ok(response),
    };
    if !call.stream {
        let answer = drive(shared, admitted, &call, &caller, None).await;
        return Ok(http::json(200, &answer));
    }
    let (frames, body) = mpsc::unbounded();
    let driver = async move {
        let run_id = admitted.run_id.clone();
        let answer = drive(shared.clone(), admitted, &call, &caller, Some(&frames)).await;
        // A request the client cancelled gets no answer (2025-11-25 cancellation: SHOULD NOT).
        let withheld = shared.inner.borrow().runs.get(&run_id).is_some_and(|slot| slot.cancelled_by_client);
        if !withheld {
            let _ = frames.unbounded_send(Ok(mcp::sse_event(&answer, None).into_bytes()));
        }
    };
    // The body is the frames, merged with the driver (which yields nothing) so that polling the
    // body drives the run and dropping the body drops the driver.
    let driver = driver.into_stream().filter_map(|_| future::ready(None));
    let stream = futures::stream::select(body, driver);
    Ok(Response::from_stream(stream)?.with_headers(sse_headers()))
}

/// Builds, signs and stores the capsule and queues the run; an error is the response to send.
async fn admit(
    shared: &Rc<Shared>,
    caller: &Caller,
    call: &ToolCall,
) -> Result<std::result::Result<Admitted, Response>> {
    let language = call.tool.name();
    let spec = match capsule_spec(language, &call.arguments, &caller.tenant.defaults.policy) {
        Ok(spec) => spec,
        Err(e) => return Ok(Err(http::json(200, &mcp::tool_error(call, e.name, &e.message)))),
    };
    let timeout_ms = spec.policy.limits.timeout_ms;
    let output_cap = spec.policy.limits.stdout_bytes;
    let signer = signer(&shared.env)?;
    let capsule = match capsule::build_capsule(spec, &signer) {
        Ok(capsule) => capsule,
        Err(e) => return Ok(Err(http::json(200, &mcp::tool_error(call, ErrorName::ValidationError, &e.to_string())))),
    };
    if !shared.inner.borrow().stored.contains(&capsule.hash) {
        store_capsule(&shared.env.bucket("R2_CAPSULES")?, &caller.tenant.id, &capsule).await?;
        let stored = &mut shared.inner.borrow_mut().stored;
        if stored.len() >= STORED_KEPT {
            stored.clear(); // forgetting only costs a redundant R2 write
        }
        stored.insert(capsule.hash.clone());
    }
    let run_id = format!("r_{}", hex(&random::<8>()));
    let capsule_event = capsule_event(&signer, caller, &run_id, &capsule);
    let (signals_tx, signals) = mpsc::unbounded();
    let settings = &caller.tenant.defaults.queue;
    {
        let mut inner = shared.inner.borrow_mut();
        let queue = inner.queue.get_or_insert_with(|| RunQueue::new(settings.max_queued, settings.max_wait_ms));
        if let Admission::Full { max } = queue.admit(&run_id, now_ms()) {
            let message =
                format!("queue full: {max} run(s) already waiting in relay session '{}'; retry later", caller.session);
            let reply = RpcError::failed(QUEUE_FULL, message).with_status(429).into_response(Some(&call.id));
            return Ok(Err(http::with_header(to_response(reply), "retry-after", "5")));
        }
        let slot = RunSlot {
            log: RunLog::new(output_cap),
            signals: signals_tx,
            capsule_event,
            tab_id: None,
            lease: None,
            cancelled_by_client: false,
            request_key: request_key(call.session_id.as_deref(), &call.id),
        };
        inner.runs.insert(run_id.clone(), slot);
    }
    store::audit_queued(&shared.storage.sql(), &run_id, language, &capsule.hash, now_ms());
    let end = EndRun { shared: shared.clone(), run_id: run_id.clone() };
    Ok(Ok(Admitted { run_id, signals, timeout_ms, attach_wait_ms: settings.attach_wait_ms, end }))
}

/// The `capsule` command for the tab, with a token scoped to this tenant for fetching files.
fn capsule_event(signer: &Signer, caller: &Caller, run_id: &str, capsule: &Capsule) -> Vec<u8> {
    let claims = AttachClaims::new(&caller.tenant.id, &caller.session, now_ms() / 1000, format!("cap_{run_id}"));
    let token = claims.sign_for_capsule_files(signer);
    let size: u64 =
        capsule.layers.iter().map(|(layer, _)| layer.size).sum::<u64>() + capsule.manifest_json.len() as u64;
    let data = json!({
        "runId": run_id,
        "hash": capsule.hash,
        "language": capsule.manifest.language,
        "size": size,
        "manifestUrl": format!("/capsules/{}/capsule.json?token={token}", capsule.hash),
    });
    sse_frame("capsule", &data)
}

/// Identifies an MCP request across eras: legacy session id (if any) and JSON-RPC id.
pub fn request_key(session_id: Option<&str>, id: &Value) -> String {
    format!("{}/{id}", session_id.unwrap_or("-"))
}

/// Cancels a run wherever it is, telling its tab if it is running.
pub fn cancel(shared: &Shared, run_id: &str, name: &str, message: String, exit_code: i32) {
    let tab = {
        let mut inner = shared.inner.borrow_mut();
        let Some(slot) = inner.runs.get_mut(run_id) else { return };
        if slot.log.exit.is_some() {
            return;
        }
        slot.log.fail(name, message, exit_code);
        let _ = slot.signals.unbounded_send(Signal::Ended);
        slot.tab_id.clone()
    };
    if let Some(tab_id) = tab {
        send_to_tab(shared, &tab_id, sse_frame("cancel", &json!({ "runId": run_id })));
    }
    finish(shared, run_id);
}

/// `notifications/cancelled`: cancels the run of that request, if there is one.
pub fn cancel_request(shared: &Shared, session_id: Option<&str>, request_id: &Value) {
    let key = request_key(session_id, request_id);
    let run_id = shared.inner.borrow().runs.iter().find(|(_, s)| s.request_key == key).map(|(id, _)| id.clone());
    if let Some(run_id) = run_id {
        if let Some(slot) = shared.inner.borrow_mut().runs.get_mut(&run_id) {
            slot.cancelled_by_client = true;
        }
        cancel(shared, &run_id, "Cancelled", "the client cancelled the request".into(), 130);
    }
}

/// Ends the run when its driver is done or dropped: a response dropped before the run ended
/// (the client went away) cancels the run; either way the run is audited once.
struct EndRun {
    shared: Rc<Shared>,
    run_id: String,
}

impl Drop for EndRun {
    fn drop(&mut self) {
        cancel(&self.shared, &self.run_id, "Cancelled", "the client closed the request".into(), 130);
        record_end(&self.shared, &self.run_id);
    }
}

/// Waits for the run to end, forwarding its output; returns the JSON-RPC response.
async fn drive(shared: Rc<Shared>, run: Admitted, call: &ToolCall, caller: &Caller, frames: Option<&Frames>) -> Value {
    let Admitted { run_id, mut signals, timeout_ms, attach_wait_ms, end } = run;
    pump(&shared);
    let mut no_tab_since: Option<u64> = None;
    let mut deadline: Option<u64> = None;
    let mut steps = 0.0;
    while !ended(&shared, &run_id) {
        let now = now_ms();
        let lease_check = check_lease(&shared, &run_id, now);
        if lease_check.is_none() {
            deadline = None;
        }
        let no_tab = deadline.is_none() && shared.inner.borrow().tabs.is_empty();
        no_tab_since = if no_tab { no_tab_since.or(Some(now)) } else { None };
        if no_tab_since.is_some_and(|t| now >= t + attach_wait_ms) {
            let message = no_executor_message(caller);
            cancel(&shared, &run_id, ErrorName::NoExecutorAttached.as_str(), message, 1);
            break;
        }
        if deadline.is_some_and(|d| now >= d) {
            let message = format!("the run did not finish within its {} ms timeout; it was stopped", timeout_ms);
            cancel(&shared, &run_id, ErrorName::Timeout.as_str(), message, 124);
            break;
        }
        let wake = [Some(now + TICK_MS), no_tab_since.map(|t| t + attach_wait_ms), deadline, lease_check];
        let wait = wake.into_iter().flatten().min().unwrap_or(now + TICK_MS).saturating_sub(now).max(1);
        match future::select(signals.next(), sleep(wait)).await {
            future::Either::Left((Some(Signal::Started), _)) => {
                // The tab may first fetch the capsule and load a runtime (its own budget).
                deadline = Some(now_ms() + LOAD_BUDGET_MS + timeout_ms + TIMEOUT_GRACE_MS);
                let started = EventBody::Progress { phase: "started".into(), runtime_id: None };
                forward(frames, call, &started, &mut steps);
            }
            future::Either::Left((Some(Signal::Event(body)), _)) => {
                if matches!(&body, EventBody::Progress { phase, .. } if phase == "execute") {
                    deadline = Some(now_ms() + timeout_ms + TIMEOUT_GRACE_MS);
                }
                forward(frames, call, &body, &mut steps);
            }
            future::Either::Left((Some(Signal::Expired), _)) => {
                let message = "the run waited in the queue for over 5 minutes".into();
                cancel(&shared, &run_id, "Cancelled", message, 1);
            }
            future::Either::Left((Some(Signal::TabGone), _)) => tab_gone(&shared, &run_id),
            future::Either::Left((Some(Signal::TabAttached | Signal::Ended), _)) => {}
            future::Either::Left((None, _)) => break,
            future::Either::Right(_) => {
                heartbeat(&shared);
                pump(&shared);
                if let Some(frames) = frames {
                    let _ = frames.unbounded_send(Ok(mcp::SSE_KEEPALIVE.as_bytes().to_vec()));
                }
            }
        }
    }
    // Output that arrived in the same batch as the exit is still waiting in the channel.
    while let Ok(signal) = signals.try_recv() {
        if let Signal::Event(body) = signal {
            forward(frames, call, &body, &mut steps);
        }
    }
    let answer = conclude(&shared, &run_id, call);
    drop(end);
    answer
}

fn ended(shared: &Shared, run_id: &str) -> bool {
    shared.inner.borrow().runs.get(run_id).is_none_or(|s| s.log.exit.is_some())
}

fn tab_gone(shared: &Shared, run_id: &str) {
    let message = "the executor tab went away mid-run (closed, reloaded or offline); run the tool again".into();
    cancel(shared, run_id, ErrorName::Internal.as_str(), message, 1);
}

/// Acts on the lease of a started run: a tab that never acknowledged the capsule is dropped and
/// the run goes back to the front of the queue; a tab gone silent ends the run. Returns when to
/// look again, or `None` when the run is not (or no longer) started.
fn check_lease(shared: &Shared, run_id: &str, now: u64) -> Option<u64> {
    let (verdict, tab_id) = {
        let inner = shared.inner.borrow();
        let slot = inner.runs.get(run_id)?;
        (slot.lease?.verdict(now), slot.tab_id.clone())
    };
    match verdict {
        Verdict::Alive { check_at_ms } => return Some(check_at_ms),
        Verdict::Silent => tab_gone(shared, run_id),
        Verdict::NeverAcknowledged => {
            let mut inner = shared.inner.borrow_mut();
            inner.tabs.retain(|t| Some(&t.id) != tab_id.as_ref());
            if let Some(slot) = inner.runs.get_mut(run_id) {
                slot.lease = None;
                slot.tab_id = None;
            }
            if let Some(queue) = inner.queue.as_mut() {
                queue.requeue_front(run_id, now);
            }
        }
    }
    pump(shared);
    None
}

/// Streams one event to the client, as the era and the request's options allow. Phases become
/// progress notifications numbered by `steps`, which only grows (the spec requires it).
fn forward(frames: Option<&Frames>, call: &ToolCall, body: &EventBody, steps: &mut f64) {
    let Some(frames) = frames else { return };
    let messages = match body {
        EventBody::Stdout { data } => mcp::log_notifications(call, LogLevel::Info, "stdout", data),
        EventBody::Stderr { data } => mcp::log_notifications(call, LogLevel::Warning, "stderr", data),
        EventBody::Progress { phase, runtime_id } => Vec::from_iter(call.progress_token.as_ref().map(|token| {
            *steps += 1.0;
            let message = match runtime_id {
                Some(runtime) => format!("{phase} ({runtime})"),
                None => phase.clone(),
            };
            mcp::progress_notification(token, *steps, None, Some(&message))
        })),
        EventBody::Exit { .. } | EventBody::Error(_) => Vec::new(),
    };
    for message in messages {
        let _ = frames.unbounded_send(Ok(mcp::sse_event(&message, None).into_bytes()));
    }
}

/// The JSON-RPC response for a run that ended.
fn conclude(shared: &Shared, run_id: &str, call: &ToolCall) -> Value {
    let inner = shared.inner.borrow();
    let Some(exit) = inner.runs.get(run_id).and_then(|slot| slot.log.exit.clone().map(|exit| (slot, exit))) else {
        return mcp::tool_error(call, ErrorName::Internal, "the run was lost");
    };
    let (slot, exit) = exit;
    let result = ToolResult {
        exit_code: exit.exit_code,
        stdout: slot.log.stdout.clone(),
        stderr: slot.log.stderr.clone(),
        wall_ms: exit.usage.wall_ms,
        mem_peak_mb: exit.usage.mem_peak_mb,
        files: Vec::new(),
        error: exit.error.as_ref().map(named_error),
    };
    mcp::tool_result(call, result)
}

/// Audits a run that ended and keeps its slot a while (for late or retried batches).
fn record_end(shared: &Shared, run_id: &str) {
    let mut inner = shared.inner.borrow_mut();
    let Some(log) = inner.runs.get(run_id).map(|slot| &slot.log) else { return };
    if let Some(exit) = &log.exit {
        store::audit_finished(&shared.storage.sql(), run_id, exit, &log.stdout, &log.stderr, now_ms());
    }
    inner.finished.push_back(run_id.to_owned());
    while inner.finished.len() > FINISHED_KEPT {
        if let Some(old) = inner.finished.pop_front() {
            inner.runs.remove(&old);
        }
    }
}

/// The seed's error name of an executor error; other names (Cancelled) travel in the message.
fn named_error(error: &RunError) -> (ErrorName, String) {
    match ErrorName::ALL.into_iter().find(|n| n.as_str() == error.name) {
        Some(name) => (name, error.message.clone()),
        None => (ErrorName::Internal, format!("{}: {}", error.name, error.message)),
    }
}

/// NoExecutorAttached, saying exactly what to do.
pub fn no_executor_message(caller: &Caller) -> String {
    format!(
        "no browser tab is attached to relay session '{}' of tenant '{}': open {} in a browser, enter your API key once, keep the tab open, and call the tool again",
        caller.session, caller.tenant.name, caller.page_url()
    )
}
