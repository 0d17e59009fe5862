//! The Streamable HTTP endpoint: POST/GET/DELETE on `/mcp`, the transport checks every POST
//! passes (size, content type, `Accept`), legacy sessions (`initialize`, `Mcp-Session-Id`),
//! and the hand-off of each message to its method.

use serde_json::{json, Map, Value};

use super::content;
use super::context::Context;
use super::era::{self, check_modern, era_of_version, latest_legacy, unsupported_version, Era};
use super::http::{accepts, header, is_json_content, wants_sse, HttpRequest, HttpResponse};
use super::jsonrpc::{
    parse, response_envelope, Message, Rejection, RpcError, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
};
use super::methods::{dispatch, Answer, Req};
use super::results::shape_result;
use super::tools::ToolCall;

/// Largest POST body accepted (413 above it). The Worker checks it too, before buffering.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The state of one legacy-era MCP session (`Mcp-Session-Id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStatus {
    Unknown,
    Active,
    Ended,
}

/// Where legacy-era MCP sessions live: SQLite in the Durable Object, a map in tests.
pub trait SessionStore {
    fn create(&mut self, id: &str, protocol_version: &str, now_ms: u64);
    fn status(&self, id: &str) -> SessionStatus;
    /// Ends a session that `status` has just called active (so `end` need not look it up).
    fn end(&mut self, id: &str);
}

/// What the Durable Object does with a request: the MCP dispatch of one HTTP request.
#[derive(Debug, Clone, PartialEq)]
pub enum Dispatch {
    /// Answer now.
    Reply(HttpResponse),
    /// Legacy `GET /mcp` on a live session: open a server-to-client SSE stream, or resume the
    /// one whose last event the client saw was `last_event_id`. (Only the legacy era has
    /// this stream, so no era travels with it.)
    OpenStream { session_id: String, last_event_id: Option<String> },
    /// `tools/call` of a known tool with arguments valid against its input schema.
    Call(ToolCall),
    /// `tasks/cancel` of a working task: cancel its run, then send `reply` (the ack).
    CancelRun { run_id: String, reply: HttpResponse },
    /// Legacy `notifications/cancelled`: cancel that request's run if it is running, answer
    /// 202. (`session_id` is always set; it stays an `Option` for the Durable Object's key.)
    Cancel { request_id: Value, session_id: Option<String> },
}

/// Methods whose 2026-07-28 answer is the same for every relay session of a tenant: the Worker
/// answers them itself ([`answer_stateless`]), without the hop to the relay session's DO.
const STATELESS_METHODS: [&str; 5] =
    ["server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list"];

/// The answer to a request that needs no relay session state (a 2026-07-28 request of one of
/// [`STATELESS_METHODS`]), or `None`: the relay session's DO must answer it. `cx` needs only
/// the time, the page URL and the limits; the rest is never read for these methods.
pub fn answer_stateless(req: &HttpRequest, cx: &Context) -> Option<HttpResponse> {
    if !req.method.eq_ignore_ascii_case("POST") {
        return None;
    }
    let Ok(Message::Request { method, params, .. }) = parse(&req.body) else { return None };
    let modern = era::detect(Some(&method), &params, &req.headers) == Era::Modern;
    if !modern || !STATELESS_METHODS.contains(&method.as_str()) {
        return None;
    }
    match handle(req, &mut NoSessions, cx) {
        Dispatch::Reply(reply) => Some(reply),
        _ => None,
    }
}

/// The session store of a stateless answer: there are no legacy sessions in the 2026-07-28 era.
struct NoSessions;

impl SessionStore for NoSessions {
    fn create(&mut self, _: &str, _: &str, _: u64) {}
    fn status(&self, _: &str) -> SessionStatus {
        SessionStatus::Unknown
    }
    fn end(&mut self, _: &str) {}
}

/// Handles one request to `/mcp`. Never panics on any input; bad input gets a 4xx with a
/// JSON-RPC error body (or 202, for a notification, which needs no answer).
pub fn handle(req: &HttpRequest, store: &mut dyn SessionStore, cx: &Context) -> Dispatch {
    let result = match req.method.to_ascii_uppercase().as_str() {
        "POST" => post(req, store, cx),
        "GET" => get(req, &*store),
        "DELETE" => delete(req, store),
        _ => Err((None, not_allowed())),
    };
    result.unwrap_or_else(|(id, error)| {
        let response = error.into_response(id.as_ref());
        let allow = response.status == 405;
        Dispatch::Reply(if allow { response.with_header("allow", "GET, POST, DELETE") } else { response })
    })
}

fn post(req: &HttpRequest, store: &mut dyn SessionStore, cx: &Context) -> Result<Dispatch, Rejection> {
    check_post(&req.headers, req.body.len()).map_err(|e| (None, e))?;
    let message = parse(&req.body)?;
    let sender = sender(&message, &req.headers, &*store)?;
    if let Some(client) = client_info(&message) {
        (cx.client_seen)(client);
    }
    match message {
        Message::Request { id, method, params } => {
            request(req, store, cx, sender, &id, &method, &params).map_err(|e| (Some(id), e))
        }
        Message::Notification { method, params } => notification(sender, &method, &params),
        Message::Response => Err((None, unasked_response())),
    }
}

/// The `clientInfo` a request names: in its modern `_meta`, or in a legacy `initialize`.
fn client_info(message: &Message) -> Option<&Value> {
    let Message::Request { method, params, .. } = message else { return None };
    let meta = params.get("_meta").and_then(|m| m.get("io.modelcontextprotocol/clientInfo"));
    let initialize = (method == "initialize").then(|| params.get("clientInfo")).flatten();
    meta.or(initialize).filter(|info| info.is_object())
}

/// Who sent a POSTed message, as found once per request: its era, and for a legacy client
/// its live session (one store lookup).
enum Sender {
    Modern,
    /// A legacy `initialize` request: it opens a session, so it has none yet.
    Opening,
    /// A legacy client in the session of this id, which is active.
    Legacy(String),
}

/// Detects the message's era, then checks a legacy client's session: a message in a
/// session that is missing or gone is refused whatever it is, a response included.
fn sender(message: &Message, headers: &[(String, String)], store: &dyn SessionStore) -> Result<Sender, Rejection> {
    let no_params = Map::new();
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (Some(id), Some(method.as_str()), params),
        Message::Notification { method, params } => (None, Some(method.as_str()), params),
        Message::Response => (None, None, &no_params),
    };
    match era::detect(method, params, headers) {
        Era::Modern => Ok(Sender::Modern),
        Era::Legacy if id.is_some() && method == Some("initialize") => Ok(Sender::Opening),
        Era::Legacy => legacy_session(headers, store).map(Sender::Legacy).map_err(|e| (id.cloned(), e)),
    }
}

/// A JSON-RPC response from the client answers nothing: this server never sends a client a
/// request. 2026-07-28 streamable-http "Sending Messages" rule 4: "The client MUST NOT send
/// JSON-RPC responses"; 2025-11-25 transports rule 4: input the server cannot accept gets an
/// HTTP error status, and the body may be a JSON-RPC error with no `id`.
fn unasked_response() -> RpcError {
    let message = "Invalid Request: this server sent no request for this response to answer (it never sends \
        requests to clients); POST only requests and notifications";
    RpcError::rejected(INVALID_REQUEST, message)
}

/// Transport rules of every POST: a bounded body (413), `Content-Type: application/json`
/// (415), and an `Accept` listing both `application/json` and `text/event-stream` (406), as
/// "Sending Messages" requires of clients in every revision we speak (wildcards count).
fn check_post(headers: &[(String, String)], body_len: usize) -> Result<(), RpcError> {
    if body_len > MAX_BODY_BYTES {
        let message = format!("Request body over {MAX_BODY_BYTES} bytes");
        return Err(RpcError::rejected(INVALID_REQUEST, message).with_status(413));
    }
    if !is_json_content(headers) {
        let message = "Content-Type must be application/json";
        return Err(RpcError::rejected(INVALID_REQUEST, message).with_status(415));
    }
    if !accepts(headers, "application/json") || !accepts(headers, "text/event-stream") {
        let message = "Accept must list both application/json and text/event-stream";
        return Err(RpcError::rejected(INVALID_REQUEST, message).with_status(406));
    }
    Ok(())
}

fn request(
    req: &HttpRequest,
    store: &mut dyn SessionStore,
    cx: &Context,
    sender: Sender,
    id: &Value,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Dispatch, RpcError> {
    let (era, session_id, log_level) = match sender {
        Sender::Opening => return initialize(id, params, store, cx),
        Sender::Legacy(session_id) => (Era::Legacy, Some(session_id), None),
        Sender::Modern => (Era::Modern, None, check_modern(method, params, &req.headers)?),
    };
    let call =
        Req { id, method, params, era, session_id: session_id.as_deref(), stream: wants_sse(&req.headers), log_level };
    match dispatch(&call, cx)? {
        Answer::Result(result, cache) => {
            let body = response_envelope(id, shape_result(era, result, cache));
            Ok(Dispatch::Reply(HttpResponse::json(200, body)))
        }
        Answer::Call(tool_call) => Ok(Dispatch::Call(tool_call)),
        Answer::CancelRun(run_id) => {
            let ack = response_envelope(id, shape_result(era, json!({}), None));
            Ok(Dispatch::CancelRun { run_id, reply: HttpResponse::json(200, ack) })
        }
    }
}

/// Notifications need no answer: 202, after the legacy session check when the client is a
/// legacy one. A legacy `notifications/cancelled` goes to the Durable Object. A stateless one
/// is checked and then ignored: over Streamable HTTP, 2026-07-28 cancels by closing the
/// response stream ("no `notifications/cancelled` message is required or expected"), and a
/// bare request id names no one request, since every client of the relay session picks its
/// own ids (ignoring it keeps one client from cancelling another's run).
fn notification(sender: Sender, method: &str, params: &Map<String, Value>) -> Result<Dispatch, Rejection> {
    if method != "notifications/cancelled" {
        return Ok(Dispatch::Reply(HttpResponse::accepted()));
    }
    let request_id = match params.get("requestId") {
        Some(id) if id.is_string() || id.is_number() => id.clone(),
        _ => {
            let message = "notifications/cancelled needs `requestId`, a string or a number";
            return Err((None, RpcError::rejected(INVALID_PARAMS, message)));
        }
    };
    Ok(match sender {
        Sender::Legacy(session_id) => Dispatch::Cancel { request_id, session_id: Some(session_id) },
        Sender::Modern | Sender::Opening => Dispatch::Reply(HttpResponse::accepted()),
    })
}

/// Legacy `initialize`: negotiates the version, then opens a session whose id travels in
/// the `Mcp-Session-Id` response header.
fn initialize(
    id: &Value,
    params: &Map<String, Value>,
    store: &mut dyn SessionStore,
    cx: &Context,
) -> Result<Dispatch, RpcError> {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let message = "initialize needs `protocolVersion`, a string";
    let asked = asked.ok_or_else(|| RpcError::failed(INVALID_PARAMS, message))?;
    let version = negotiate(asked);
    let session_id = mint_session_id(cx)?;
    store.create(&session_id, version, cx.now_ms);
    let result = json!({
        "protocolVersion": version,
        "capabilities": content::capabilities(),
        "serverInfo": content::server_info(),
        "instructions": content::instructions(cx),
    });
    let response = HttpResponse::json(200, response_envelope(id, result));
    Ok(Dispatch::Reply(response.with_header("mcp-session-id", &session_id)))
}

/// 2025-11-25 basic/lifecycle "Version Negotiation": the client's version when we speak it,
/// else our latest. Only legacy versions are negotiable: 2026-07-28 has no `initialize`.
fn negotiate(asked: &str) -> &str {
    match era_of_version(asked) {
        Some(Era::Legacy) => asked,
        _ => latest_legacy(),
    }
}

/// A new session id, which 2025-11-25 transports "Session Management" wants to be visible
/// ASCII (0x21 to 0x7E): anything else from the minting closure is our bug, so 500.
fn mint_session_id(cx: &Context) -> Result<String, RpcError> {
    let id = (cx.new_session_id)();
    if !id.is_empty() && id.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Ok(id);
    }
    let message = "Internal error: could not mint a session id";
    Err(RpcError::failed(INTERNAL_ERROR, message).with_status(500))
}

/// The legacy session of a request (2025-11-25 transports "Session Management"): 400
/// without `Mcp-Session-Id`, 404 once unknown or ended (the client then re-initializes),
/// 400 for an `MCP-Protocol-Version` that is not a legacy version we speak.
fn legacy_session(headers: &[(String, String)], store: &dyn SessionStore) -> Result<String, RpcError> {
    let id = header(headers, "mcp-session-id").ok_or_else(|| {
        RpcError::rejected(
            INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required (send initialize first, or use protocol 2026-07-28)",
        )
    })?;
    match store.status(id) {
        SessionStatus::Active => {}
        SessionStatus::Unknown | SessionStatus::Ended => {
            let message = "Session not found: it ended or never existed; send initialize to start a new one";
            return Err(RpcError::rejected(INVALID_REQUEST, message).with_status(404));
        }
    }
    match header(headers, "mcp-protocol-version") {
        Some(v) if era_of_version(v) != Some(Era::Legacy) => Err(unsupported_version(v)),
        _ => Ok(id.to_string()),
    }
}

/// `GET /mcp`: a legacy session's server-to-client stream, or with `Last-Event-ID` the
/// resumption of a broken one (2025-11-25 transports "Resumability and Redelivery"). Without
/// a session there is no such stream: 405, as both revisions allow (2026-07-28 removed it).
fn get(req: &HttpRequest, store: &dyn SessionStore) -> Result<Dispatch, Rejection> {
    if header(&req.headers, "mcp-session-id").is_none() {
        return Err((None, not_allowed()));
    }
    if !accepts(&req.headers, "text/event-stream") {
        let message = "Accept must list text/event-stream";
        return Err((None, RpcError::rejected(INVALID_REQUEST, message).with_status(406)));
    }
    let session_id = legacy_session(&req.headers, store).map_err(|e| (None, e))?;
    let last_event_id = header(&req.headers, "last-event-id").map(str::to_owned);
    Ok(Dispatch::OpenStream { session_id, last_event_id })
}

/// `DELETE /mcp`: ends a legacy session (204); its id then gets 404. Without a session: 405.
fn delete(req: &HttpRequest, store: &mut dyn SessionStore) -> Result<Dispatch, Rejection> {
    if header(&req.headers, "mcp-session-id").is_none() {
        return Err((None, not_allowed()));
    }
    let session_id = legacy_session(&req.headers, &*store).map_err(|e| (None, e))?;
    store.end(&session_id);
    Ok(Dispatch::Reply(HttpResponse::empty(204)))
}

fn not_allowed() -> RpcError {
    let message = "Method Not Allowed: POST a JSON-RPC message (GET and DELETE need a legacy Mcp-Session-Id)";
    RpcError::rejected(INVALID_REQUEST, message).with_status(405)
}
