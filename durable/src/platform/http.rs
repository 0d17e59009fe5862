//! Responses both the Worker and the DO give: JSON bodies, SSE headers, the MCP core's answers,
//! and [`error`], the one place an [`HttpError`] becomes a response.

use relay_core::error::{ErrorName, HttpError, STORAGE_RETRY_AFTER_S};
use relay_core::mcp::HttpResponse;
use serde_json::Value;
use worker::{Headers, Response};

/// A JSON response with `status`.
pub fn json(status: u16, body: &Value) -> Response {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    Response::from_bytes(serde_json::to_vec(body).unwrap_or_default())
        .expect("byte body")
        .with_status(status)
        .with_headers(headers)
}

/// The answer to a refused request: its status, `{"error": {"name", "message"}}`, and for a
/// refusal that passes (`StorageUnavailable`, one that names its `retry_after_s`) when to retry.
pub fn error(refusal: HttpError) -> Response {
    let response = json(refusal.status(), &refusal.body());
    match (refusal.name, refusal.retry_after_s) {
        (ErrorName::StorageUnavailable, _) => with_header(response, "retry-after", &STORAGE_RETRY_AFTER_S.to_string()),
        (_, Some(seconds)) => with_header(response, "retry-after", &seconds.to_string()),
        (_, None) => response,
    }
}

/// Shorthand for [`error`] of a name and a message.
pub fn refuse(name: ErrorName, message: impl Into<String>) -> Response {
    error(HttpError::new(name, message))
}

/// A storage (R2, KV or the DO's SQLite) failure: logged with its cause (never a secret: keys
/// are stored and named by hash), and answered 503 with `retry-after`, because it passes; a
/// bare 500 would tell the caller that retrying is pointless.
pub fn storage_unavailable(store: &str, err: &dyn std::fmt::Display) -> Response {
    worker::console_error!("{store} failed: {err}");
    error(HttpError::storage_unavailable(store))
}

/// `response` with one more header.
pub fn with_header(response: Response, name: &str, value: &str) -> Response {
    let headers = response.headers().clone();
    let _ = headers.set(name, value);
    response.with_headers(headers)
}

/// The headers of every SSE response (`mcp::SSE_HEADERS`).
pub fn sse_headers() -> Headers {
    let headers = Headers::new();
    for (name, value) in relay_core::mcp::SSE_HEADERS {
        let _ = headers.set(name, value);
    }
    headers
}

/// The MCP core's answer (`mcp::HttpResponse`) as a Worker response.
pub fn to_response(reply: HttpResponse) -> Response {
    let response = match reply.body {
        Some(body) => json(reply.status, &body),
        None => Response::empty().expect("empty body").with_status(reply.status),
    };
    let headers = response.headers().clone();
    for (name, value) in &reply.headers {
        let _ = headers.set(name, value);
    }
    response.with_headers(headers)
}
