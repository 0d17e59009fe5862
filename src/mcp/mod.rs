//! The MCP server core: JSON-RPC 2.0 and MCP messages, Streamable HTTP framing, tool
//! schemas. Pure: no workers-rs types, no I/O, no clock, no randomness; the Session Durable
//! Object feeds it one HTTP request at a time and acts on the [`Outcome`].
//!
//! # How the Durable Object drives it
//!
//! ```text
//! Worker: auth, CORS, Origin ─▶ DO: handle(&HttpRequest, &mut store, &Context) ─▶ Outcome
//!   Reply(resp)                      send resp as is (JSON body, or empty 202/204/4xx)
//!   OpenStream { session_id, .. }   legacy GET: open an SSE stream (SSE_HEADERS), send
//!                                    SSE_KEEPALIVE now and then, until the client leaves;
//!                                    with last_event_id, resume that request's stream
//!   Call(call)                       run the tool; answer with tool_result / tool_error /
//!                                    data_result, as one JSON body or, when call.stream,
//!                                    as SSE events (sse_event) preceded by
//!                                    progress_notification / log_notifications
//!   Cancel { request_id, .. }        cancel that run if it is ours, answer 202
//! ```
//!
//! For a 2026-07-28 call, a client closing the response stream cancels the run
//! (streamable-http "Cancellation") and SSE events carry no id (no resumability). For a
//! legacy call a disconnection is not a cancellation (2025-11-25 transports "Sending
//! Messages"): its stream opens with a priming event id, and a client that lost it resumes
//! with `GET` + `Last-Event-ID`. Legacy clients cancel with `notifications/cancelled` (a
//! stateless one is ignored: a bare request id cannot say whose request it names).
//!
//! Both protocol eras share the one endpoint, told apart per request ([`era::detect`]):
//! 2026-07-28 is stateless (versions, capabilities and mirrored headers on every request);
//! 2025-03-26 to 2025-11-25 open a session with `initialize`, kept in a [`SessionStore`].
//! Neither kind of MCP session chooses the executor: the relay session (tenant + name) does.
//!
//! HTTP statuses: 413 / 415 / 406 for the transport rules of a POST; 400 for a message
//! refused before its method ran (parse, envelope, a JSON-RPC response from the client,
//! 2026-07-28 `_meta` and header checks, unsupported version, missing legacy session); 202
//! for a notification; 404 for an unknown method (2026-07-28) or an ended legacy session; 405
//! for GET/DELETE without a legacy session; 200 for every answer of a method that ran,
//! JSON-RPC errors included (unknown tool, unknown resource). A tool's own failure, bad
//! arguments included, is a result with `isError`.
//!
//! Files: `http` (headers, content negotiation, SSE), `jsonrpc` (envelopes, codes), `era`
//! (versions, era detection, 2026-07-28 request checks), `server` (routing, legacy
//! sessions), `methods` (one function per MCP method), `tools` (tool definitions),
//! `schema` (the JSON Schema subset that validates tool arguments), `results` (answers to
//! tool calls and notifications), `content` (server info, instructions, prompt, resource).

mod content;
pub mod era;
pub mod http;
pub mod jsonrpc;
mod methods;
mod results;
mod schema;
mod server;
mod tools;

use serde_json::Value;

pub use era::{Era, SUPPORTED_VERSIONS};
pub use http::{sse_event, sse_frame, wants_sse, SSE_HEADERS, SSE_KEEPALIVE};
pub use results::{
    data_result, log_notifications, progress_notification, tool_error, tool_error_to, tool_result, LogLevel,
    ToolResult, OUTPUT_BUDGET,
};
pub use server::handle;
pub use tools::Tool;

/// Largest POST body accepted (413 above it). The Worker checks it too, before buffering.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// One HTTP request to `/mcp`, as the Worker forwarded it.
#[derive(Debug, Clone, Default)]
pub struct HttpRequest {
    pub method: String,
    /// Header names lower-case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What to send back. `body: None` means an empty body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

impl HttpResponse {
    /// A JSON body with its content type.
    pub fn json(status: u16, body: Value) -> Self {
        let headers = vec![("content-type".into(), "application/json".into())];
        HttpResponse { status, headers, body: Some(body) }
    }

    /// An empty body.
    pub fn empty(status: u16) -> Self {
        HttpResponse { status, headers: Vec::new(), body: None }
    }

    /// 202 with no body: a notification was accepted.
    pub fn accepted() -> Self {
        HttpResponse::empty(202)
    }

    fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// The state of one legacy-era MCP session (`Mcp-Session-Id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStatus {
    Unknown,
    Active { protocol_version: String },
    Ended,
}

/// Where legacy-era MCP sessions live: SQLite in the Durable Object, a map in tests.
pub trait SessionStore {
    fn create(&mut self, id: &str, protocol_version: &str, now_ms: u64);
    fn status(&self, id: &str) -> SessionStatus;
    /// Ends a session that `status` has just called active (so `end` need not look it up).
    fn end(&mut self, id: &str);
}

/// The relay session as the `relay://session` resource and the prompt describe it.
#[derive(Debug, Clone, Default)]
pub struct RelayView {
    /// The relay session's name (`default` unless the client asked for another).
    pub session: String,
    /// Ids of the browser tabs attached as executors.
    pub tab_ids: Vec<String>,
    /// Runs waiting behind the current one.
    pub queue_depth: usize,
    /// Recent runs, newest first, as the Durable Object records them.
    pub recent_runs: Value,
}

/// What `handle` needs from its caller besides the request.
pub struct Context<'a> {
    pub now_ms: u64,
    /// Mints a legacy `Mcp-Session-Id`: secure random, visible ASCII.
    pub new_session_id: &'a dyn Fn() -> String,
    pub relay: RelayView,
    /// The executor page a person opens to attach a tab.
    pub page_url: String,
    /// The effective limits, quoted to agents in the prompt.
    pub limits_json: Value,
}

/// What the Durable Object does with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Answer now.
    Reply(HttpResponse),
    /// Legacy `GET /mcp` on a live session: open a server-to-client SSE stream, or resume the
    /// one whose last event the client saw was `last_event_id`. (Only the legacy era has
    /// this stream, so no era travels with it.)
    OpenStream { session_id: String, last_event_id: Option<String> },
    /// `tools/call` of a known tool with arguments valid against its input schema.
    Call(ToolCall),
    /// Legacy `notifications/cancelled`: cancel that request's run if it is running, answer
    /// 202. (`session_id` is always set; it stays an `Option` for the Durable Object's key.)
    Cancel { request_id: Value, session_id: Option<String> },
}

/// A validated tool call for the Durable Object to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The JSON-RPC request id the answer must carry.
    pub id: Value,
    pub tool: Tool,
    /// The arguments object, valid against `tool`'s input schema.
    pub arguments: Value,
    /// `params._meta.progressToken`: send `notifications/progress` with it while running.
    pub progress_token: Option<Value>,
    /// The client accepts `text/event-stream`: the answer may be an SSE stream.
    pub stream: bool,
    pub era: Era,
    /// 2026-07-28 `_meta["io.modelcontextprotocol/logLevel"]`; always `None` in legacy.
    pub log_level: Option<LogLevel>,
    /// The legacy `Mcp-Session-Id`, if any.
    pub session_id: Option<String>,
}
