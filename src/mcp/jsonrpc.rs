//! JSON-RPC 2.0 as MCP uses it: parsing one POST body into a request, notification or
//! response; error codes; and the envelopes of results, errors and notifications.

use serde_json::{json, Map, Value};

use super::http::HttpResponse;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// 2025-11-25 server/resources "Error Handling"; 2026-07-28 replaced it with -32602.
pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
/// 2026-07-28 basic "Error Codes": MCP's reserved sub-range.
pub const HEADER_MISMATCH: i64 = -32020;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// SEP-2575: the request needs a client capability it did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// Ours: the relay session's queue is full (HTTP 429 says the rest). Outside -32000..-32019,
/// which 2026-07-28 asks new implementations not to use.
pub const QUEUE_FULL: i64 = -32050;
/// A `tools/call` refused by one of the tenant's quotas (`relay_core::quota`).
pub const QUOTA_EXCEEDED: i64 = -32051;

/// One parsed POST body.
#[derive(Debug)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response from the client (`id` and one of `result`/`error`). We never send requests,
    /// so it answers nothing and is refused (see `server::unasked_response`).
    Response,
}

/// A JSON-RPC error plus the HTTP status it travels with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub status: u16,
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    /// Refused before the method ran: HTTP 400.
    pub fn rejected(code: i64, message: impl Into<String>) -> Self {
        RpcError { status: 400, code, message: message.into(), data: None }
    }

    /// The method ran and failed: HTTP 200 carrying the error object, as for any answer.
    pub fn failed(code: i64, message: impl Into<String>) -> Self {
        RpcError { status: 200, ..RpcError::rejected(code, message) }
    }

    pub fn with_status(self, status: u16) -> Self {
        RpcError { status, ..self }
    }

    pub fn with_data(self, data: Value) -> Self {
        RpcError { data: Some(data), ..self }
    }

    /// The HTTP answer; `id` is omitted when it could not be read (2026-07-28 basic
    /// "Error Responses").
    pub fn into_response(self, id: Option<&Value>) -> HttpResponse {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = self.data {
            error["data"] = data;
        }
        let mut body = json!({ "jsonrpc": "2.0", "error": error });
        if let Some(id) = id {
            body["id"] = id.clone();
        }
        HttpResponse::json(self.status, body)
    }
}

/// A parse failure, with the request id when one could be read.
pub type Rejection = (Option<Value>, RpcError);

/// Parses one POST body. Batches are refused: 2025-06-18 removed them and later revisions
/// require "a single JSON-RPC request or notification".
pub fn parse(body: &[u8]) -> Result<Message, Rejection> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (None, RpcError::rejected(PARSE_ERROR, format!("Parse error: {e}"))))?;
    let Value::Object(mut object) = value else {
        let what = if value.is_array() {
            "JSON-RPC batches are not supported: send one message per POST"
        } else {
            "the body must be a JSON-RPC object"
        };
        return Err((None, invalid(what)));
    };
    let id = object.remove("id");
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err((readable(id), invalid("`jsonrpc` must be \"2.0\"")));
    }
    match object.remove("method") {
        Some(Value::String(method)) => with_method(id, method, object.remove("params")),
        Some(_) => Err((readable(id), invalid("`method` must be a string"))),
        None => response(id, &object),
    }
}

fn with_method(id: Option<Value>, method: String, params: Option<Value>) -> Result<Message, Rejection> {
    let params = match params {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            let e = RpcError::rejected(INVALID_PARAMS, "`params` must be an object");
            return Err((readable(id), e));
        }
    };
    match id {
        None => Ok(Message::Notification { method, params }),
        Some(id) if is_id(&id) => Ok(Message::Request { id, method, params }),
        // 2026-07-28 basic "Requests": the ID MUST be a string or integer, never null.
        Some(_) => Err((None, invalid("`id` must be a string or a number"))),
    }
}

fn response(id: Option<Value>, object: &Map<String, Value>) -> Result<Message, Rejection> {
    let one_outcome = object.contains_key("result") != object.contains_key("error");
    if one_outcome && id.is_some() {
        Ok(Message::Response)
    } else {
        Err((
            readable(id),
            invalid("a message needs a string `method`: POST a request (with an `id`) or a notification"),
        ))
    }
}

fn is_id(id: &Value) -> bool {
    id.is_string() || id.is_number()
}

fn readable(id: Option<Value>) -> Option<Value> {
    id.filter(is_id)
}

fn invalid(message: &str) -> RpcError {
    RpcError::rejected(INVALID_REQUEST, format!("Invalid Request: {message}"))
}

/// A result response envelope.
pub fn response_envelope(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A notification envelope.
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}
