//! What the Worker's handlers share besides `platform::http`: CORS, health, the answers to a
//! route that does not exist and to an unexpected failure, a 401 that says where to get a
//! token, and `read_capped` for every request body (its limit, its deadline, a client gone).

use crate::platform::bindings::{
    self, ADMIN_TOKEN, ASSETS, CAPSULE_SIGNING_KEY, KV_CONFIG, R2_CAPSULES, RELAY_VERSION, SESSIONS,
};
use crate::platform::http::{json, refuse, with_header};
use crate::platform::sleep;
use futures::{future, StreamExt};
use relay_core::body;
use relay_core::error::ErrorName;
use serde_json::{json, Value};
use std::sync::OnceLock;
use worker::{ByteStream, Env, Headers, Request, Response};

/// Headers a browser page may send to `/mcp` and the capsule routes (which any origin may
/// call: see [`with_cors`]).
const ALLOW_HEADERS: &str = "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, Range";
/// Headers a browser page may read back.
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, ETag, Content-Range, Retry-After";

pub fn not_found(path: &str) -> Response {
    refuse(ErrorName::NotFound, format!("no route for {path}: see GET /healthz and the README for the endpoints"))
}

/// Turns an unexpected failure into a logged 500 instead of a runtime error page.
pub fn internal(err: worker::Error) -> Response {
    worker::console_error!("internal error: {err}");
    refuse(ErrorName::Internal, "internal error; the Worker's log has the details")
}

/// A request's body, or the answer to send instead: 413 once it is over `limit` bytes, 408
/// when it does not arrive by its deadline (`relay_core::body`), 499 when the client went away
/// before it did. A declared Content-Length is checked first, and a streamed body is read chunk
/// by chunk, so an oversized body is refused without ever being buffered whole.
pub async fn read_capped(req: &mut Request, limit: usize) -> worker::Result<Result<Vec<u8>, Response>> {
    read_into(req, limit, Vec::new()).await
}

/// [`read_capped`] for a body of the `size` this server granted (a signed upload grant): at
/// most `body::UP_FRONT_BYTES` reserved before its bytes arrive (uploads that send headers only
/// hold little), grown as they do and ending in a buffer of the grant's size. (A client's own
/// Content-Length is not trusted to reserve memory.)
pub async fn read_granted(req: &mut Request, size: usize) -> worker::Result<Result<Vec<u8>, Response>> {
    read_into(req, size, Vec::with_capacity(size.min(body::UP_FRONT_BYTES))).await
}

async fn read_into(req: &mut Request, limit: usize, body: Vec<u8>) -> worker::Result<Result<Vec<u8>, Response>> {
    let declared = req.headers().get("content-length")?.and_then(|l| l.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Ok(Err(too_large(limit)));
    }
    let Ok(chunks) = req.stream() else {
        return Ok(Ok(Vec::new())); // no body at all
    };
    let deadline = body::deadline_ms(declared, limit as u64);
    match future::select(Box::pin(read_chunks(chunks, body, limit)), sleep(deadline)).await {
        future::Either::Left((read, _)) => Ok(read),
        future::Either::Right(_) => Ok(Err(refuse(ErrorName::RequestTimeout, body::too_slow_message(deadline)))),
    }
}

async fn read_chunks(mut chunks: ByteStream, mut body: Vec<u8>, limit: usize) -> Result<Vec<u8>, Response> {
    while let Some(chunk) = chunks.next().await {
        // Only the client writes a request body: a read that fails means its connection ended
        // (workerd says "Network connection lost."). That is the client's doing, not a fault
        // here, and is answered (to no one) and logged as what it is.
        let Ok(chunk) = chunk else {
            return Err(refuse(ErrorName::Cancelled, "the client went away before its request body arrived whole"));
        };
        body.reserve_exact(body::grown_capacity(body.len(), body.capacity(), chunk.len(), limit) - body.len());
        body.extend_from_slice(&chunk);
        if body.len() > limit {
            return Err(too_large(limit));
        }
    }
    Ok(body)
}

fn too_large(limit: usize) -> Response {
    let message = format!("request body is over this route's limit of {limit} bytes; send a smaller one (README lists each route's limit)");
    refuse(ErrorName::PayloadTooLarge, message)
}

/// A 401 that says where to get a token (MCP authorization: `WWW-Authenticate` names the
/// protected resource metadata, so a client can find the OAuth authorization server).
pub fn unauthorized(origin: &str, message: &str) -> Response {
    let challenge = relay_core::oauth::www_authenticate(origin, Some("invalid_token"));
    with_header(refuse(ErrorName::Unauthorized, message), "www-authenticate", &challenge)
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

/// `GET /healthz`: name, version, and which bindings and secrets are present. Found once per
/// isolate: a deployment's bindings are fixed for its life, and probing each is a type check
/// across wasm (0.3-0.6 ms for all of them in profiles under `wrangler dev`).
pub fn healthz(env: &Env) -> worker::Result<Response> {
    static HEALTH: OnceLock<Value> = OnceLock::new();
    Ok(json(200, HEALTH.get_or_init(|| health(env))))
}

fn health(env: &Env) -> Value {
    let version = bindings::var(env, RELAY_VERSION).unwrap_or_default();
    let bindings = json!({
        SESSIONS: env.durable_object(SESSIONS).is_ok(),
        R2_CAPSULES: env.bucket(R2_CAPSULES).is_ok(),
        KV_CONFIG: env.kv(KV_CONFIG).is_ok(),
        ASSETS: env.assets(ASSETS).is_ok(),
    });
    let secrets = json!({
        CAPSULE_SIGNING_KEY: env.secret(CAPSULE_SIGNING_KEY).is_ok(),
        ADMIN_TOKEN: env.secret(ADMIN_TOKEN).is_ok(),
    });
    json!({ "name": "relay-edge", "version": version, "bindings": bindings, "secrets": secrets })
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
    let response = env.assets(ASSETS)?.fetch(url.as_str(), None).await?;
    let response = with_header(response, "content-security-policy", "sandbox allow-scripts; frame-ancestors 'self'");
    // `_headers` gives every asset `X-Frame-Options: DENY`; this one says what its policy says.
    Ok(with_header(response, "x-frame-options", "SAMEORIGIN"))
}

/// The origin (`scheme://host[:port]`) this Worker was reached at.
pub fn own_origin(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}
