//! A run from `tools/call` to result, as responses: the core makes the job, admits and prepares
//! the run and delivers what the run machine reports (`relay_core::relay_session::runs`); this
//! answers on the request's SSE stream, or as one JSON body, or with a task.
//!
//! Closing a 2026-07-28 stream cancels its run (streamable-http "Cancellation"). A legacy
//! client's disconnection is not a cancellation (2025-11-25 transports "Sending Messages"): its
//! stream opens with a priming event whose id is the run id, the run goes on, and the client
//! resumes with `GET` + `Last-Event-ID` ([`resume`]).

use super::shared::{ticker, Shared, Sse};
use crate::platform::http::{self, storage_unavailable};
use crate::platform::signer::{sealing_key, signer};
use crate::platform::{ledger, now_ms};
use futures::channel::mpsc;
use futures::stream::PollNext;
use futures::{future, FutureExt, Stream, StreamExt};
use relay_core::error::{ErrorName, HttpError};
use relay_core::mcp::{self, Era, Tool, ToolCall};
use relay_core::protocol::Caller;
use relay_core::quota::{Charge, LedgerAnswer};
use relay_core::relay_session::desk::Unadmitted;
use relay_core::relay_session::runs::{
    prepare, start_task, Answer, Call, CancelOnDrop, FileCall, Job, Resumed, UnchargeOnDrop, Work,
};
use relay_core::relay_session::Platform;
use relay_core::run::file_op::FileOp;
use serde_json::Value;
use std::rc::Rc;
use worker::{Response, Result};

/// How long a legacy client that lost its stream waits before resuming it (the SSE `retry`).
const RESUME_RETRY_MS: u64 = 5_000;

/// Answers a `tools/call`: `run_js` and `run_py` run in line on the relay session's tab; `read`,
/// `write` and `search` are answered here from the relay session's workspace. `charge_call`:
/// the Worker left the call's charge to this relay session (`mcp::Admission::ToSession`).
pub async fn respond(shared: Rc<Shared>, caller: Caller, call: ToolCall, charge_call: bool) -> Result<Response> {
    let run = shared.random_id::<8>("r_");
    let job = match job_of(&shared, &caller, &call)? {
        Ok(job) => Rc::new(job),
        Err(no_run) => {
            if let Some(refused) = charge_call_alone(&shared, &caller, &call.id, charge_call).await? {
                return Ok(refused);
            }
            return match no_run {
                NoRun::Answer(answer) => Ok(answer),
                NoRun::File(op) => answer_file(&shared, FileCall { tool_call: call, caller, run, op }).await,
            };
        }
    };
    if let Some(refused) = charge(&shared, &caller, &call, &run, &job, charge_call).await? {
        return Ok(refused);
    }
    let call = Call { tool_call: call, caller, run, job };
    if call.tool_call.task {
        return Ok(match start_task(&shared, call.clone()).await {
            Ok(created) => http::json(200, &created),
            Err(unadmitted) => refused(&shared, &call, unadmitted),
        });
    }
    if !call.tool_call.stream {
        return answer_body(shared, call).await;
    }
    let (frames, body) = mpsc::unbounded();
    if call.tool_call.era == Era::Legacy {
        let priming = format!("id: {}\nretry: {RESUME_RETRY_MS}\ndata: \n\n", call.run);
        let _ = frames.unbounded_send(Ok(priming.into_bytes()));
    }
    if let Err(unadmitted) = shared.admit_call(&call, Box::new(Answer::streamed(call.clone(), Sse(frames)))) {
        return Ok(refused(&shared, &call, unadmitted));
    }
    let cancel =
        (call.tool_call.era == Era::Modern).then(|| CancelOnDrop { session: shared.clone(), run: call.run.clone() });
    // Dropped unpolled, the body never prepares the run: the capsule's charge comes back.
    let uncharge = UnchargeOnDrop { session: shared.clone(), call: call.clone() };
    let preparing = {
        let (shared, call) = (shared.clone(), call.clone());
        async move { prepare(&shared, &call.caller, &call.run, &call.job).await }
            .into_stream()
            .filter_map(|()| future::ready(None))
    };
    // The body is the answer's frames merged with the ticker and the preparation (which yield
    // no frames of their own but keep-alives): polling the body drives all of them, and
    // dropping it drops them and, for a 2026-07-28 call, cancels the run.
    let stream = run_stream(shared, call.run, body, preparing).map(move |frame| {
        let _ = (&cancel, &uncharge);
        frame
    });
    Ok(Response::from_stream(stream)?.with_headers(http::sse_headers()))
}

/// A `tools/call` that admits no run: its answer, or the file tool to answer.
enum NoRun {
    Answer(Response),
    File(FileOp),
}

/// What `call` runs, or why it runs nothing.
fn job_of(shared: &Shared, caller: &Caller, call: &ToolCall) -> Result<std::result::Result<Job, NoRun>> {
    // A full queue refuses a run at once, as cheaply as any answer of this DO: before the
    // capsule is built and signed, and before an audit row is written (and deleted again),
    // since an answer is held until the storage writes before it are durable.
    let queued = matches!(call.tool, Tool::RunJs | Tool::RunPy);
    if let Some(max) = shared.queue_full().filter(|_| queued) {
        return Ok(Err(NoRun::Answer(http::to_response(mcp::queue_full(&call.id, max, &caller.session)))));
    }
    // The capsule is built (or found built: `caches`) before the run is charged, since its
    // bytes are part of the one charge.
    Ok(match Work::of(shared, caller, call, || signer(&shared.platform.env))? {
        Ok(Work::Run(job)) => Ok(job),
        Ok(Work::File(op)) => Err(NoRun::File(op)),
        Err(tool_error) => Err(NoRun::Answer(http::json(200, &tool_error))),
    })
}

/// A file tool's answer, from the relay session's workspace.
async fn answer_file(shared: &Shared, call: FileCall) -> Result<Response> {
    let key = sealing_key(&shared.platform.env)?;
    Ok(match shared.answer_file(&call, &key).await {
        Ok(answer) => http::json(200, &answer),
        Err(e) => storage_unavailable("the relay session's workspace", &e),
    })
}

/// A call answered with one JSON body, which its client waits for: if the client goes away,
/// the run is cancelled.
async fn answer_body(shared: Rc<Shared>, call: Call) -> Result<Response> {
    let (delivery, answer) = Answer::body(call.clone());
    if let Err(unadmitted) = shared.admit_call(&call, Box::new(delivery)) {
        return Ok(refused(&shared, &call, unadmitted));
    }
    let _cancel = CancelOnDrop { session: shared.clone(), run: call.run.clone() };
    prepare(&shared, &call.caller, &call.run, &call.job).await;
    let alive = call.run.clone();
    let ticking = ticker(shared.clone(), move |s| s.has_run(&alive), None).for_each(|_| future::ready(()));
    let answer = match future::select(answer, Box::pin(ticking)).await {
        future::Either::Left((answer, _)) => answer.ok(),
        future::Either::Right((_, answer)) => answer.await.ok(),
    };
    let answer = answer.unwrap_or_else(|| mcp::tool_error(&call.tool_call, ErrorName::Internal, "the run was lost"));
    Ok(http::json(200, &answer))
}

/// Takes a slot of the tenant's runs in flight (`relay_core::quota`) for run `run`, leased for
/// the longest it may take (`run_life_ms`, which the run machine enforces), and charges the
/// bytes its capsule will store (`Job::stored_bytes`) in the same hop, and the call itself
/// when the Worker left it here (`charge_call`; else it charged it before routing it here).
/// The answer to send instead when a quota or the ledger refuses it.
async fn charge(
    shared: &Shared,
    caller: &Caller,
    call: &ToolCall,
    run: &str,
    job: &Job,
    charge_call: bool,
) -> Result<Option<Response>> {
    let charged_ms = now_ms();
    let charge = job.admission(shared, caller, run, charged_ms, charge_call);
    let answered = ledger::charge(&shared.platform.env, &caller.tenant, charge.clone()).await?;
    if let Ok(answer) = &answered {
        job.admitted(&charge, answer, charged_ms);
    }
    Ok(refusal(shared, &call.id, answered))
}

/// Charges the `tools/call` with JSON-RPC id `id` alone, when the Worker left its charge here
/// (`charge_call`) and no run's charge will take it: the answer to send instead when a quota
/// or the ledger refuses it.
pub async fn charge_call_alone(
    shared: &Shared,
    caller: &Caller,
    id: &Value,
    charge_call: bool,
) -> Result<Option<Response>> {
    if !charge_call {
        return Ok(None);
    }
    let charge = Charge::Call { session: caller.session.clone() };
    Ok(refusal(shared, id, ledger::charge(&shared.platform.env, &caller.tenant, charge).await?))
}

/// The answer to send for a call with JSON-RPC id `id` whose charge the ledger `answered`, if it
/// refused it or did not answer; the tenant's edge time today is noted from its answer.
fn refusal(shared: &Shared, id: &Value, answered: std::result::Result<LedgerAnswer, HttpError>) -> Option<Response> {
    match answered {
        Ok(LedgerAnswer::Refused { refusal }) => Some(http::to_response(mcp::quota_exceeded(id, &refusal))),
        Ok(LedgerAnswer::Charged { edge_spent_ms }) => {
            shared.edge_spent_by_tenant(edge_spent_ms);
            None
        }
        Ok(LedgerAnswer::Usage { .. }) => None,
        Err(unavailable) => Some(http::error(unavailable)),
    }
}

/// The answer to a call that was not admitted; the slot its run took, and its capsule's
/// charge, come back.
fn refused(shared: &Shared, call: &Call, unadmitted: Unadmitted) -> Response {
    shared.platform.run_ended(&call.caller.tenant.id, &call.run, 0);
    call.job.uncharge(shared, &call.caller.tenant.id);
    match unadmitted {
        Unadmitted::QueueFull(max) => http::to_response(call.queue_full(max)),
        Unadmitted::Storage(e) => storage_unavailable("the relay session's SQLite", &e),
        Unadmitted::Context(why) => {
            http::json(200, &mcp::tool_error(&call.tool_call, ErrorName::ValidationError, &why))
        }
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

/// `GET /mcp` with `Last-Event-ID` (legacy era): resumes the stream of run `event_id` of MCP
/// session `session` (`RelaySession::resume` says how).
pub fn resume(shared: Rc<Shared>, session: &str, event_id: &str) -> Result<Response> {
    let (frames, body) = mpsc::unbounded();
    let answer = match shared.resume(session, event_id, Sse(frames.clone())) {
        Ok(Resumed::Streaming) => {
            let stream = run_stream(shared, event_id.to_owned(), body, futures::stream::empty());
            return Ok(Response::from_stream(stream)?.with_headers(http::sse_headers()));
        }
        Ok(Resumed::Answer(answer)) => answer,
        Ok(Resumed::Refused(reply)) => return Ok(http::to_response(reply)),
        Err(e) => return Ok(storage_unavailable("the relay session's SQLite", &e)),
    };
    let _ = frames.unbounded_send(Ok(mcp::sse_event(&answer, None).into_bytes()));
    drop(frames);
    Ok(Response::from_stream(body)?.with_headers(http::sse_headers()))
}
