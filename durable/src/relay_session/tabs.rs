//! The tabs attached as executors: their SSE command streams (`/events`), the NDJSON
//! backchannel their results come back on (`POST /result`, or batches on a results socket,
//! `/results`), and their leases (`/lease`: a lease socket the runtime answers, or a `POST`).
//! All feed the run machine.

use super::leases::{socket_tags, EXPIRY_TAG, LEASE_TAG};
use super::shared::{ticker, Shared};
use crate::edge::http::{error_body, json, named, named_parts, sse_headers};
use crate::edge::{now_ms, random};
use futures::channel::mpsc;
use relay_core::auth::{LEASE_PROTOCOL, RESULTS_PROTOCOL};
use relay_core::error::ErrorName;
use relay_core::forward::{Caller, TAB_HEADER, TOKEN_EXPIRY_HEADER};
use relay_core::mcp::sse_frame;
use relay_core::run::backchannel::{parse_batch, parse_socket_batch, socket_reply, MAX_BATCH_BYTES};
use relay_core::run::lease::TAB_LEASE_MS;
use relay_core::run::readiness::Readiness;
use relay_core::run::session::{Input, Output};
use serde_json::{json, Value};
use std::rc::Rc;
use worker::{Request, Response, Result, State, WebSocket, WebSocketIncomingMessage, WebSocketPair};

/// `GET /session/:id/events`: a tab attaches. Its stream carries `hello` (its tab id, and how
/// long its lease lasts unrenewed), then `capsule`, `cancel` and `shutdown` commands, and
/// heartbeat comments.
pub fn attach(shared: Rc<Shared>, caller: &Caller) -> Result<Response> {
    let (tx, rx) = mpsc::unbounded();
    let tab = format!("tab_{}", hex::encode(random::<6>()));
    let hello = json!({ "tabId": tab, "session": caller.session, "leaseMs": TAB_LEASE_MS });
    let _ = tx.unbounded_send(Ok(b"retry: 2000\n\n".to_vec()));
    let _ = tx.unbounded_send(Ok(sse_frame("hello", &hello, None).into_bytes()));
    shared.add_tab(&tab, tx);
    shared.feed(Input::TabAttached { tab: tab.clone() });
    // The tab's stream ticks too: heartbeats find a closed tab even while no run is in flight.
    let ticking = ticker(shared, move |s| s.has_tab(&tab), None);
    Ok(Response::from_stream(futures::stream::select(rx, ticking))?.with_headers(sse_headers()))
}

/// `POST /session/:id/detach`: the tab named in `x-relay-tab` is going away (its page is
/// closing or reloading), so the next run goes to another tab at once rather than after a
/// heartbeat finds its stream closed. A run it was executing ends as a lost tab's does.
pub fn detach(shared: Rc<Shared>, req: &Request) -> Result<Response> {
    if let Some(tab) = attached_tab(&shared, req)? {
        shared.drop_tab(&tab);
        shared.feed(Input::TabGone { tab });
    }
    Ok(Response::empty()?.with_status(204))
}

/// `POST /session/:id/lease`: the tab named in `x-relay-tab` renews its lease, as its lease
/// worker does when its lease socket cannot open.
pub fn renew(shared: Rc<Shared>, req: &Request) -> Result<Response> {
    let Some(tab) = attached_tab(&shared, req)? else { return Ok(not_attached(TAB_HEADER)) };
    shared.feed(Input::TabSeen { tab, at_ms: now_ms() });
    Ok(Response::empty()?.with_status(204))
}

/// The attached tab `x-relay-tab` names.
fn attached_tab(shared: &Shared, req: &Request) -> Result<Option<String>> {
    Ok(req.headers().get(TAB_HEADER)?.filter(|tab| shared.has_tab(tab)))
}

/// The refusal of a request whose `field` names no tab attached (or one no longer attached).
fn not_attached(field: &str) -> Response {
    let message = format!(
        "{field} must name a tab attached to this relay session (the tabId of its hello); a tab that was dropped attaches again"
    );
    named(ErrorName::ValidationError, message)
}

/// `POST /session/:id/ready`: what the tab named in `x-relay-tab` says of its runtimes
/// (`run::readiness`), shown in `relay://session` and told to a run that waits for one.
pub async fn ready(shared: Rc<Shared>, mut req: Request) -> Result<Response> {
    let readiness = match Readiness::parse(&req.bytes().await?) {
        Ok(readiness) => readiness,
        Err(why) => return Ok(named(ErrorName::ValidationError, why)),
    };
    let Some(tab) = attached_tab(&shared, &req)? else { return Ok(not_attached(TAB_HEADER)) };
    shared.set_readiness(&tab, readiness);
    Ok(Response::empty()?.with_status(204))
}

/// `POST /session/:id/result`: applies a batch of the tab's events to their runs, each event on
/// its own (see `run::session` for the verdicts: 200, 404 or 409 listing what was refused).
pub async fn result(shared: Rc<Shared>, mut req: Request) -> Result<Response> {
    let tab = req.headers().get(TAB_HEADER)?;
    let (status, body) = apply(&shared, tab, &req.bytes().await?);
    Ok(json(status, &body))
}

/// `/results`: the tab's results socket (the Worker checked its token). The socket is kept by
/// the runtime (hibernatable), tagged with its tab and its token's expiry; each message is a
/// batch, answered on the socket (`socket_batch`). The DO also sends the tab a copy of each
/// run's command on it (`Shared::copy_to_socket`).
pub fn open_results(shared: &Shared, state: &State, req: &Request) -> Result<Response> {
    let Some((tab, server, response)) = open_socket(shared, state, req, &[], RESULTS_PROTOCOL)? else {
        return Ok(not_attached("?tab="));
    };
    shared.set_socket(&tab, server);
    Ok(response)
}

/// `GET /lease`: the tab's lease socket (the Worker checked its token), kept by the runtime and
/// tagged `lease`, with its tab and its token's expiry. The runtime answers its pings itself
/// (`leases.rs`); opening it renews the lease at once.
pub fn open_lease(shared: &Shared, state: &State, req: &Request) -> Result<Response> {
    let Some((tab, _, response)) = open_socket(shared, state, req, &[LEASE_TAG], LEASE_PROTOCOL)? else {
        return Ok(not_attached("?tab="));
    };
    shared.feed(Input::TabSeen { tab, at_ms: now_ms() });
    Ok(response)
}

/// Accepts a hibernatable socket for the attached tab `x-relay-tab` names (None if it names
/// none), tagged with `tags`, its tab and its token's expiry, answering with `protocol`.
/// Returns the tab, the DO's end of the socket and the response that opens it.
fn open_socket(
    shared: &Shared,
    state: &State,
    req: &Request,
    tags: &[&str],
    protocol: &str,
) -> Result<Option<(String, WebSocket, Response)>> {
    let Some(tab) = attached_tab(shared, req)? else { return Ok(None) };
    let expiry = format!("{EXPIRY_TAG}{}", req.headers().get(TOKEN_EXPIRY_HEADER)?.unwrap_or_default());
    let pair = WebSocketPair::new()?;
    let all_tags: Vec<&str> = tags.iter().copied().chain([tab.as_str(), expiry.as_str()]).collect();
    state.accept_websocket_with_tags(&pair.server, &all_tags);
    let headers = worker::Headers::new();
    headers.set("sec-websocket-protocol", protocol)?;
    let response = Response::from_websocket(pair.client)?.with_headers(headers);
    Ok(Some((tab, pair.server, response)))
}

/// A message on a lease socket that is not a `ping` (which the runtime answers without us): it
/// takes nothing else.
pub fn lease_message(ws: &WebSocket) -> Result<()> {
    ws.close(Some(4400), Some("a lease socket takes only `ping`"))
}

/// One message on a results socket: `<id>\n<batch>`, applied as `POST /result` applies it and
/// answered with `socket_reply`; a batch over `MAX_BATCH_BYTES` is refused 413, as the POST is.
/// Past its token's expiry the socket takes nothing more: it is answered 401 and closed, and
/// the tab posts the batch again with its current token.
pub fn socket_batch(shared: &Shared, state: &State, ws: &WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
    let text = match message {
        WebSocketIncomingMessage::String(text) => text,
        WebSocketIncomingMessage::Binary(_) => String::new(),
    };
    let (id, batch) = match parse_socket_batch(&text) {
        Ok(parsed) => parsed,
        Err(why) => {
            let (status, body) = named_parts(ErrorName::ValidationError, why);
            return ws.send_with_str(socket_reply(0, status, &body));
        }
    };
    if batch.len() > MAX_BATCH_BYTES {
        let message = format!("a result batch is over {MAX_BATCH_BYTES} bytes, on the socket as by POST; send its events in smaller batches");
        return ws.send_with_str(socket_reply(id, 413, &error_body("PayloadTooLarge", message)));
    }
    let tags = state.get_tags(ws);
    let (tab, expiry) = socket_tags(&tags);
    if now_ms() / 1000 >= expiry {
        let message =
            "this socket's attach token expired: POST the batch with the current token, and reopen the socket with it";
        ws.send_with_str(socket_reply(id, 401, &error_body("Unauthorized", message)))?;
        return ws.close(Some(4401), Some("attach token expired"));
    }
    let (status, body) = apply(shared, tab.map(str::to_owned), batch.as_bytes());
    ws.send_with_str(socket_reply(id, status, &body))
}

/// Applies one batch from `tab`: the status and body of its answer.
fn apply(shared: &Shared, tab: Option<String>, batch: &[u8]) -> (u16, Value) {
    let events = match parse_batch(batch) {
        Ok(events) => events,
        Err(why) => return named_parts(ErrorName::ValidationError, format!("result batch: {why}")),
    };
    let answers = shared.feed(Input::Heard { tab, events });
    match answers.into_iter().find_map(|o| if let Output::Reply(reply) = o { Some(reply) } else { None }) {
        Some(reply) => (reply.status(), reply.to_json()),
        None => named_parts(ErrorName::Internal, "the run machine did not answer the batch"),
    }
}
