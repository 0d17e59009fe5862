//! The MCP server core: JSON-RPC 2.0 and MCP messages, Streamable HTTP framing, tool
//! schemas. Pure: no workers-rs types, no I/O, no clock, no randomness; the Session Durable
//! Object feeds it one HTTP request at a time and acts on the [`Dispatch`].
//!
//! # How the Durable Object drives it
//!
//! ```text
//! Worker: auth, CORS, Origin ─▶ DO: handle(&HttpRequest, &mut store, &Context) ─▶ Dispatch
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
//! Files, each importing only those listed before it: `http` (requests, responses, headers,
//! content negotiation, SSE), `schema` (the JSON Schema subset that validates tool
//! arguments), `logging` (log levels), `context` (what the caller supplies), `jsonrpc`
//! (envelopes, codes), `era` (versions, era detection, 2026-07-28 request checks), `tools`
//! (tool definitions, validated calls), `content` (server info, instructions, prompt,
//! resource), `results` (the shape of every result, answers to tool calls, notifications),
//! `methods` (one function per MCP method), `server` (routing, legacy sessions). This file
//! only names what the others export.

mod content;
mod context;
pub mod display;
pub mod era;
pub mod http;
pub mod jsonrpc;
mod ledger;
mod logging;
mod methods;
mod results;
mod schema;
mod server;
pub mod tasks;
mod tools;

pub use content::server_info;
pub use context::{Context, RelayView};
pub use era::{Era, SUPPORTED_VERSIONS};
pub use http::{sse_event, sse_frame, wants_sse, HttpRequest, HttpResponse, SSE_HEADERS, SSE_KEEPALIVE};
pub use ledger::{admission, reads_usage, Admission};
pub use logging::LogLevel;
pub use results::{
    data_result, file_result, log_notifications, progress_notification, queue_full, quota_exceeded, refused_tool,
    task_created, tool_error, tool_error_to, tool_result, ToolResult, OUTPUT_BUDGET, QUEUE_FULL_RETRY_AFTER_S,
};
pub use server::{answer_stateless, handle, Dispatch, SessionStatus, SessionStore, MAX_BODY_BYTES};
pub use tools::{Tool, ToolCall};
