//! Response helpers shared by the handlers: JSON bodies, the error shape, CORS, health, and
//! the answers every handler may need: a body over its route's limit, late or cut off, storage
//! that failed.

use super::sleep;
use futures::{future, StreamExt};
use relay_core::body;
use relay_core::error::ErrorName;
use relay_core::mcp::HttpResponse;
use serde_json::{json, Value};
use worker::{ByteStream, Env, Headers, Request, Response};

/// Headers a browser page may send to `/mcp` and the capsule routes (which any origin may
/// call: see [`with_cors`]).
const ALLOW_HEADERS: &str = "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, Range";
/// Headers a browser page may read back.
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, ETag, Content-Range, Retry-After";

/// A JSON response with `status`.
pub fn json(status: u16, body: &Value) -> Response {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    Response::from_bytes(serde_json::to_vec(body).unwrap_or_default())
        .expect("byte body")
        .with_status(status)
        .with_headers(headers)
}

/// The one error shape of the non-MCP routes: `{"error": {"name", "message"}}`.
pub fn error(status: u16, name: &str, message: impl Into<String>) -> Response {
    json(status, &error_body(name, message))
}

/// The body of an error answer: `{"error": {"name", "message"}}` (also what a results socket
/// replies with).
pub fn error_body(name: &str, message: impl Into<String>) -> Value {
    json!({ "error": { "name": name, "message": message.into() } })
}

/// An error of the error model (docs/ARCHITECTURE.md "Errors"), with the status its name has:
/// ValidationError 400, PolicyDenied 403, Timeout 408, OutputLimitExceeded 413, ...
pub fn named(name: ErrorName, message: impl Into<String>) -> Response {
    let (status, body) = named_parts(name, message);
    json(status, &body)
}

/// `named`'s status and body, for an answer that is no HTTP response (a results socket's).
pub fn named_parts(name: ErrorName, message: impl Into<String>) -> (u16, Value) {
    (name.http_status(), error_body(name.as_str(), message))
}

pub fn not_found(path: &str) -> Response {
    error(404, "NotFound", format!("no route for {path}: see GET /healthz and the README for the endpoints"))
}

/// Turns an unexpected failure into a logged 500 instead of a runtime error page.
pub fn internal(err: worker::Error) -> Response {
    worker::console_error!("internal error: {err}");
    named(ErrorName::Internal, "internal error; the Worker's log has the details")
}

/// A storage (R2 or KV) failure: logged with its cause (never a secret: keys are stored and
/// named by hash), and answered 503 with `retry-after`, because it passes; a bare 500 would
/// tell the caller that retrying is pointless.
pub fn storage_unavailable(store: &str, err: &dyn std::fmt::Display) -> Response {
    worker::console_error!("{store} failed: {err}");
    let message = format!("{store} storage did not answer; retry in {RETRY_AFTER_S} seconds");
    with_header(error(503, "StorageUnavailable", message), "retry-after", RETRY_AFTER_S)
}

/// Seconds a caller waits before retrying after a storage failure.
const RETRY_AFTER_S: &str = "5";

/// A request's body, or the answer to send instead: 413 once it is over `limit` bytes, 408
/// when it does not arrive by its deadline (`relay_core::body`), 499 when the client went away
/// before it did. A declared Content-Length is checked first, and a streamed body is read chunk
/// by chunk, so an oversized body is refused without ever being buffered whole.
pub async fn read_capped(req: &mut Request, limit: usize) -> worker::Result<Result<Vec<u8>, Response>> {
    let declared = req.headers().get("content-length")?.and_then(|l| l.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Ok(Err(too_large(limit)));
    }
    let Ok(chunks) = req.stream() else {
        return Ok(Ok(Vec::new())); // no body at all
    };
    let deadline = body::deadline_ms(declared, limit as u64);
    match future::select(Box::pin(read_chunks(chunks, limit)), sleep(deadline)).await {
        future::Either::Left((read, _)) => Ok(read),
        future::Either::Right(_) => Ok(Err(error(408, "RequestTimeout", body::too_slow_message(deadline)))),
    }
}

async fn read_chunks(mut chunks: ByteStream, limit: usize) -> Result<Vec<u8>, Response> {
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        // Only the client writes a request body: a read that fails means its connection ended
        // (workerd says "Network connection lost."). That is the client's doing, not a fault
        // here, and is answered (to no one) and logged as what it is.
        let Ok(chunk) = chunk else {
            return Err(named(ErrorName::Cancelled, "the client went away before its request body arrived whole"));
        };
        body.extend_from_slice(&chunk);
        if body.len() > limit {
            return Err(too_large(limit));
        }
    }
    Ok(body)
}

fn too_large(limit: usize) -> Response {
    let message = format!("request body is over this route's limit of {limit} bytes; send a smaller one (README lists each route's limit)");
    error(413, "PayloadTooLarge", message)
}

/// `response` with one more header.
/// A 401 that says where to get a token (MCP authorization: `WWW-Authenticate` names the
/// protected resource metadata, so a client can find the OAuth authorization server).
pub fn unauthorized(origin: &str, message: &str) -> Response {
    let challenge = relay_core::oauth::www_authenticate(origin, Some("invalid_token"));
    with_header(error(401, "Unauthorized", message), "www-authenticate", &challenge)
}

pub fn with_header(response: Response, name: &str, value: &str) -> Response {
    let headers = response.headers().clone();
    let _ = headers.set(name, value);
    response.with_headers(headers)
}

/// The answer to a CORS preflight.
pub fn preflight() -> Response {
    let headers = Headers::new();
    let _ = headers.set("access-control-allow-methods", "GET, POST, DELETE, OPTIONS");
    let _ = headers.set("access-control-allow-headers", ALLOW_HEADERS);
    let _ = headers.set("access-control-max-age", "86400");
    Response::empty().expect("empty body").with_status(204).with_headers(headers)
}

/// Adds `Access-Control-Allow-Origin: *` and the exposed headers. Safe with `*` because auth is
/// a bearer key, never a cookie or other ambient credential.
pub fn with_cors(response: Response) -> Response {
    let headers = response.headers().clone();
    let _ = headers.set("access-control-allow-origin", "*");
    let _ = headers.set("access-control-expose-headers", EXPOSE_HEADERS);
    response.with_headers(headers)
}

/// `GET /healthz`: name, version, and which bindings and secrets are present.
pub fn healthz(env: &Env) -> worker::Result<Response> {
    let version = env.var("RELAY_VERSION").map(|v| v.to_string()).unwrap_or_default();
    let bindings = json!({
        "SESSIONS": env.durable_object("SESSIONS").is_ok(),
        "R2_CAPSULES": env.bucket("R2_CAPSULES").is_ok(),
        "KV_CONFIG": env.kv("KV_CONFIG").is_ok(),
        "ASSETS": env.assets("ASSETS").is_ok(),
    });
    let secrets = json!({
        "CAPSULE_SIGNING_KEY": env.secret("CAPSULE_SIGNING_KEY").is_ok(),
        "ADMIN_TOKEN": env.secret("ADMIN_TOKEN").is_ok(),
    });
    Ok(json(200, &json!({ "name": "relay-edge", "version": version, "bindings": bindings, "secrets": secrets })))
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

/// `GET /sandbox.html`, the frame guest code runs under (public/sandbox/frame.js), from the
/// static assets with a policy of its own: `sandbox allow-scripts` gives it an opaque origin
/// even when a page frames it without the `sandbox` attribute, and `frame-ancestors 'self'`
/// lets only this relay's own pages frame it (every other page refuses framing: `_headers`).
/// Its inline policy (no network, no eval) stays.
pub async fn sandbox_frame(req: &Request, env: &Env) -> worker::Result<Response> {
    // The assets answer `/sandbox.html` with a redirect to `/sandbox`, which this Worker also
    // serves: ask them for the page itself.
    let mut url = req.url()?;
    url.set_path("/sandbox");
    let response = env.assets("ASSETS")?.fetch(url.as_str(), None).await?;
    let response = with_header(response, "content-security-policy", "sandbox allow-scripts; frame-ancestors 'self'");
    // `_headers` gives every asset `X-Frame-Options: DENY`; this one says what its policy says.
    Ok(with_header(response, "x-frame-options", "SAMEORIGIN"))
}

/// The headers of every SSE response (`mcp::SSE_HEADERS`).
pub fn sse_headers() -> Headers {
    let headers = Headers::new();
    for (name, value) in relay_core::mcp::SSE_HEADERS {
        let _ = headers.set(name, value);
    }
    headers
}

/// The origin (`scheme://host[:port]`) this Worker was reached at.
pub fn own_origin(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}
