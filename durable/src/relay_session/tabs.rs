//! The tabs attached as executors: their command sockets (`/events`: the Worker holds each
//! tab's SSE stream and writes on it what the DO sends on the socket), the NDJSON
//! backchannel their results come back on (`POST /result`, or batches on a results socket,
//! `/results`), and their leases (`/lease`: a lease socket the runtime answers, or a `POST`).
//! All feed the run machine.

use super::leases::{socket_tags, EVENTS_TAG, EXPIRY_TAG, LEASE_TAG};
use super::shared::{Shared, TabNote};
use crate::platform::http::{error, json};
use crate::platform::{now_ms, random};
use relay_core::auth::{LEASE_PROTOCOL, RESULTS_PROTOCOL};
use relay_core::error::{ErrorName, HttpError};
use relay_core::protocol::{not_attached, Caller, TabCommand, TAB_HEADER};
use relay_core::relay_session::Tabs;
use relay_core::run::backchannel::{parse_batch, parse_socket_batch, socket_reply, MAX_BATCH_BYTES};
use relay_core::run::lease::TAB_LEASE_MS;
use relay_core::run::machine::{Input, Output};
use relay_core::run::readiness::Readiness;
use serde_json::Value;
use worker::{Response, Result, State, WebSocket, WebSocketIncomingMessage, WebSocketPair};

/// `GET /session/:id/events`: a tab attaches, through the Worker, which holds its SSE stream
/// (`edge/session.rs` `events`). Its command socket is the runtime's (hibernatable, tagged
/// `events` and the tab), so it keeps no DO awake: each frame sent on it is one SSE event,
/// `hello` (its tab id, and how long its lease lasts unrenewed) first, then the other
/// `TabCommand`s. Nothing ticks for it: deadlines are the DO's alarm's. A page attaching anew
/// names the id it had (`previous`): the contexts it still holds are this tab's now (those the
/// book had not dropped with the old id already: a closed stream can be seen first).
pub fn attach(shared: &Shared, state: &State, caller: &Caller, previous: Option<&str>) -> Result<Response> {
    let tab = format!("tab_{}", hex::encode(random::<6>()));
    let hello = TabCommand::Hello { tab_id: tab.clone(), session: caller.session.clone(), lease_ms: TAB_LEASE_MS };
    let pair = WebSocketPair::new()?;
    state.accept_websocket_with_tags(&pair.server, &[EVENTS_TAG, tab.as_str()]);
    pair.server.send_with_str(String::from_utf8_lossy(&hello.frame()))?;
    // The edge runs in hand, so the page lists them too.
    for ran in shared.edge_run_frames() {
        pair.server.send_with_str(String::from_utf8_lossy(&ran))?;
    }
    shared.platform.roster.add_tab(&tab, pair.server);
    if let Some(previous) = previous {
        shared.tab_came_back(previous, &tab);
    }
    shared.feed(Input::TabAttached { tab });
    Response::from_websocket(pair.client)
}

/// A new instance of the DO (it slept, hibernated, with tabs attached; or it was evicted): the
/// tabs whose command sockets the runtime kept are attached again, in the order they attached,
/// with what each said of its runtimes (their sockets' notes) and its results socket, if their
/// lease sockets pinged within the lease; the others went while the DO slept (attaching them
/// would lease them afresh): their sockets are closed, so a page still there attaches anew.
/// Contexts whose tab did not come back are then lost.
pub fn reattach(shared: &Shared, state: &State) {
    let pinged: std::collections::HashMap<String, u64> = shared.platform.roster.seen().into_iter().collect();
    let now = now_ms();
    let mut back = Vec::new();
    for socket in state.get_websockets_with_tag(EVENTS_TAG) {
        let tags = state.get_tags(&socket);
        let Some(tab) = socket_tags(&tags).0.map(str::to_owned) else { continue };
        if pinged.get(&tab).is_some_and(|&at| now.saturating_sub(at) < TAB_LEASE_MS) {
            let note = socket.deserialize_attachment::<TabNote>().ok().flatten();
            back.push((note.as_ref().map_or(0, |n| n.attached_ms), tab, socket, note.and_then(|n| n.readiness)));
        } else {
            let _ = socket.close(Some(4410), Some("this tab's lease lapsed: attach again"));
        }
    }
    back.sort_by_key(|(attached_ms, ..)| *attached_ms);
    let mut tabs = Vec::with_capacity(back.len());
    for (_, tab, socket, readiness) in back {
        shared.platform.roster.add_tab_back(&tab, socket, readiness);
        tabs.push(tab);
    }
    shared.take_tabs_back(tabs);
    for socket in state.get_websockets() {
        let tags = state.get_tags(&socket);
        let (tab, _) = socket_tags(&tags);
        let results = !tags.iter().any(|t| t == LEASE_TAG || t == EVENTS_TAG);
        if let Some(tab) = tab.filter(|tab| results && shared.platform.roster.has_tab(tab)) {
            shared.platform.roster.set_socket(tab, socket.clone());
        }
    }
}

/// A command socket closed or failed (the Worker's end: the tab's stream ended): its tab is
/// gone, unless it already has a newer one. The runtime does not always report this; the
/// tab's lease is what always tells.
pub fn stream_closed(shared: &Shared, state: &State, socket: &WebSocket) {
    if let (Some(tab), _) = socket_tags(&state.get_tags(socket)) {
        if shared.platform.roster.forget_stream(tab, socket) {
            shared.feed(Input::TabGone { tab: tab.to_owned() });
        }
    }
}

/// `POST /session/:id/detach`: the tab named in `x-relay-tab` is going away (its page is
/// closing or reloading), so the next run goes to another tab at once rather than after a
/// heartbeat finds its stream closed. A run it was executing ends as a lost tab's does.
pub fn detach(shared: &Shared, tab: Option<String>) -> Result<Response> {
    if let Some(tab) = attached(shared, tab) {
        shared.platform.roster.drop_tab(&tab);
        shared.feed(Input::TabGone { tab });
    }
    Ok(Response::empty()?.with_status(204))
}

/// `POST /session/:id/lease`: the tab named in `x-relay-tab` renews its lease, as its lease
/// worker does when its lease socket cannot open.
pub fn renew(shared: &Shared, tab: Option<String>) -> Result<Response> {
    let Some(tab) = attached(shared, tab) else { return Ok(error(not_attached(TAB_HEADER))) };
    shared.feed(Input::TabSeen { tab, at_ms: now_ms() });
    Ok(Response::empty()?.with_status(204))
}

/// `tab`, if it is attached.
fn attached(shared: &Shared, tab: Option<String>) -> Option<String> {
    tab.filter(|tab| shared.platform.roster.has_tab(tab))
}

/// `POST /session/:id/ready`: what the tab named in `x-relay-tab` says of its runtimes
/// (`run::readiness`), shown in `relay://session` and told to a run that waits for one.
pub fn ready(shared: &Shared, tab: Option<String>, report: &[u8]) -> Result<Response> {
    let readiness = match Readiness::parse(report) {
        Ok(readiness) => readiness,
        Err(why) => return Ok(error(HttpError::new(ErrorName::ValidationError, why))),
    };
    let Some(tab) = attached(shared, tab) else { return Ok(error(not_attached(TAB_HEADER))) };
    shared.platform.roster.set_readiness(&tab, readiness);
    Ok(Response::empty()?.with_status(204))
}

/// `POST /session/:id/result`: applies a batch of the tab's events to their runs, each event on
/// its own (see `run::machine` for the verdicts: 200, 404 or 409 listing what was refused).
pub fn result(shared: &Shared, tab: Option<String>, batch: &[u8]) -> Response {
    let (status, body) = apply(shared, tab, batch);
    json(status, &body)
}

/// `/results`: the tab's results socket (the Worker checked its token). The socket is kept by
/// the runtime (hibernatable), tagged with its tab and its token's expiry; each message is a
/// batch, answered on the socket (`socket_batch`). The DO also sends the tab a copy of each
/// run's command on it (`Roster::copy_to_socket`).
pub fn open_results(shared: &Shared, state: &State, tab: String, token_expiry_s: u64) -> Result<Response> {
    let Some((tab, server, response)) = open_socket(shared, state, tab, token_expiry_s, &[], RESULTS_PROTOCOL)? else {
        return Ok(error(not_attached("?tab=")));
    };
    shared.platform.roster.set_socket(&tab, server);
    Ok(response)
}

/// `GET /lease`: the tab's lease socket (the Worker checked its token), kept by the runtime and
/// tagged `lease`, with its tab and its token's expiry. The runtime answers its pings itself
/// (`leases.rs`); opening it renews the lease at once.
pub fn open_lease(shared: &Shared, state: &State, tab: String, token_expiry_s: u64) -> Result<Response> {
    let Some((tab, _, response)) = open_socket(shared, state, tab, token_expiry_s, &[LEASE_TAG], LEASE_PROTOCOL)?
    else {
        return Ok(error(not_attached("?tab=")));
    };
    shared.feed(Input::TabSeen { tab, at_ms: now_ms() });
    Ok(response)
}

/// Accepts a hibernatable socket for `tab` if it is attached (None if not), tagged with
/// `tags`, its tab and its token's expiry, answering with `protocol`. Returns the tab, the DO's
/// end of the socket and the response that opens it.
fn open_socket(
    shared: &Shared,
    state: &State,
    tab: String,
    token_expiry_s: u64,
    tags: &[&str],
    protocol: &str,
) -> Result<Option<(String, WebSocket, Response)>> {
    let Some(tab) = attached(shared, Some(tab)) else { return Ok(None) };
    let expiry = format!("{EXPIRY_TAG}{token_expiry_s}");
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
            let refusal = HttpError::new(ErrorName::ValidationError, why);
            return ws.send_with_str(socket_reply(0, refusal.status(), &refusal.body()));
        }
    };
    if batch.len() > MAX_BATCH_BYTES {
        let message = format!("a result batch is over {MAX_BATCH_BYTES} bytes, on the socket as by POST; send its events in smaller batches");
        let refusal = HttpError::new(ErrorName::PayloadTooLarge, message);
        return ws.send_with_str(socket_reply(id, refusal.status(), &refusal.body()));
    }
    let tags = state.get_tags(ws);
    let (tab, expiry) = socket_tags(&tags);
    if now_ms() / 1000 >= expiry {
        let message =
            "this socket's attach token expired: POST the batch with the current token, and reopen the socket with it";
        let refusal = HttpError::new(ErrorName::Unauthorized, message);
        ws.send_with_str(socket_reply(id, refusal.status(), &refusal.body()))?;
        return ws.close(Some(4401), Some("attach token expired"));
    }
    let (status, body) = apply(shared, tab.map(str::to_owned), batch.as_bytes());
    ws.send_with_str(socket_reply(id, status, &body))
}

/// Applies one batch from `tab`: the status and body of its answer.
fn apply(shared: &Shared, tab: Option<String>, batch: &[u8]) -> (u16, Value) {
    let events = match parse_batch(batch) {
        Ok(events) => events,
        Err(why) => return parts(HttpError::new(ErrorName::ValidationError, format!("result batch: {why}"))),
    };
    let answers = shared.feed(Input::Heard { tab, events });
    match answers.into_iter().find_map(|o| if let Output::Reply(reply) = o { Some(reply) } else { None }) {
        Some(reply) => (reply.status(), reply.to_json()),
        None => parts(HttpError::new(ErrorName::Internal, "the run machine did not answer the batch")),
    }
}

/// A refusal's status and body, for an answer that is either a response or a socket reply.
fn parts(refusal: HttpError) -> (u16, Value) {
    (refusal.status(), refusal.body())
}
