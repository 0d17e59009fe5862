//! `/mcp` inside the Session DO: feeds the request to the pure MCP core and acts on its
//! [`Dispatch`]: replies as they are, legacy GET streams accepted (the Worker holds them), tool
//! calls run, cancels.

use super::runs;
use super::shared::Shared;
use crate::platform::http::{self, sse_headers};
use crate::platform::{ledger, now_ms, random};
use relay_core::mcp::{self, Context, Dispatch, HttpRequest, HttpResponse, RelayView};
use relay_core::protocol::{Caller, HOLD_STREAM_HEADER};
use relay_core::relay_session::{McpSessions, Platform, Tabs};
use relay_core::run::machine::{Cancel, Input};
use serde_json::Value;
use std::rc::Rc;
use worker::{Headers, Response, Result};

pub async fn handle(shared: Rc<Shared>, request: HttpRequest, caller: Caller) -> Result<Response> {
    // Lapsed leases and passed deadlines are acted on first, so what `relay://session` and the
    // prompt say of the tabs is current even when no stream is open to tick the machine.
    shared.feed(Input::Tick);
    let usage = match mcp::reads_usage(&request) {
        true => match ledger::usage(&shared.platform.env, &caller.tenant).await? {
            Ok(usage) => usage,
            Err(unavailable) => return Ok(http::error(unavailable)),
        },
        false => Value::Null,
    };
    let new_session_id = || format!("mcp_{}", hex::encode(random::<16>()));
    let cx = Context {
        now_ms: now_ms(),
        new_session_id: &new_session_id,
        relay: RelayView { usage, ..relay_view(&shared, &caller) },
        audit_records: &|n| shared.persisted("audit", shared.store().audit_records(n)).unwrap_or_default(),
        workspace: &|| shared.workspace_listing(),
        page_url: caller.page_url(),
        limits_json: serde_json::to_value(&caller.tenant.defaults.policy.limits)?,
        client_seen: &|info| shared.caches.saw_client(info, now_ms()),
        task: &|task_id| shared.task(task_id),
    };
    let mut sessions = McpSessions { sql: shared.platform.sql(), now_ms: now_ms(), failed: None };
    let dispatch = mcp::handle(&request, &mut sessions, &cx);
    if let Some(e) = sessions.failed {
        shared.persisted::<()>("mcp_sessions", Err(e));
    }
    match dispatch {
        Dispatch::Reply(reply) => Ok(http::to_response(reply)),
        Dispatch::OpenStream { session_id, last_event_id: Some(event_id) } => {
            runs::resume(shared, &session_id, &event_id)
        }
        Dispatch::OpenStream { .. } => held_stream(),
        Dispatch::Call(call) => runs::respond(shared, caller, call).await,
        Dispatch::CancelRun { run_id, reply } => {
            shared.feed(Input::Cancel { run: run_id, why: Cancel::ByClient });
            Ok(http::to_response(reply))
        }
        Dispatch::Cancel { request_id, session_id } => {
            shared.cancel_request(session_id.as_deref(), &request_id);
            Ok(http::to_response(HttpResponse::accepted()))
        }
    }
}

/// What `relay://session` shows: tabs, queue, recent runs.
fn relay_view(shared: &Shared, caller: &Caller) -> RelayView {
    let (tab_ids, queue_depth) = shared.view();
    // The newest tab gets the next run.
    let next_tab = tab_ids.last().and_then(|tab| shared.platform.roster.readiness(tab));
    RelayView {
        next_tab,
        session: caller.session.clone(),
        tab_ids,
        queue_depth,
        recent_runs: shared.store().recent_runs(10),
        clients: shared.caches.clients(),
        contexts: shared.contexts_view(&caller.tenant.defaults.contexts),
        usage: Value::Null,
    }
}

/// The legacy server-to-client stream, accepted: the Worker holds it (`edge/mcp.rs`). We send
/// nothing unprompted on it, so a DO that held it would stay awake for its keep-alives alone.
fn held_stream() -> Result<Response> {
    let headers: Headers = sse_headers();
    headers.set(HOLD_STREAM_HEADER, "1")?;
    Ok(Response::empty()?.with_headers(headers))
}
