//! `/mcp`: Origin validation, tenant auth and relay session routing; the MCP protocol itself is
//! answered by the relay session's Durable Object (see `durable/mcp.rs`).
//!
//! A request belongs to the tenant's `default` relay session unless it names another with
//! `?session=NAME`. The DO is found by `<tenantId>/<name>`, and the tenant comes from the key,
//! so no id a client sends can reach another tenant's DO.

use super::http::{error, own_origin};
use super::tenants::authenticate;
use crate::auth::{session_name_ok, Tenant};
use crate::mcp::MAX_BODY_BYTES;
use worker::{Env, Headers, Method, Request, RequestInit, Response, Result};

pub async fn forward(mut req: Request, env: &Env) -> Result<Response> {
    let url = req.url()?;
    let origin = req.headers().get("origin")?;
    let tenant = match authenticate(&req, env).await? {
        Ok(tenant) => tenant,
        // A foreign browser Origin is refused before auth is even discussed (DNS rebinding).
        Err(_) if origin.as_deref().is_some_and(|o| !static_origin_ok(o, &url, env)) => return Ok(bad_origin()),
        Err(response) => return Ok(response),
    };
    if let Some(origin) = origin.as_deref() {
        if !static_origin_ok(origin, &url, env) && !tenant.origin_allowed(origin) {
            return Ok(bad_origin());
        }
    }
    let session = url.query_pairs().find(|(k, _)| k == "session").map(|(_, v)| v.into_owned());
    let session = session.unwrap_or_else(|| "default".into());
    if !session_name_ok(&session) {
        return Ok(error(400, "ValidationError", "session: 1 to 64 of A-Z a-z 0-9 - _"));
    }
    let length = req.headers().get("content-length")?.and_then(|l| l.parse::<usize>().ok()).unwrap_or(0);
    if length > MAX_BODY_BYTES {
        return Ok(too_large());
    }
    let body = if req.method() == Method::Post { req.bytes().await? } else { Vec::new() };
    if body.len() > MAX_BODY_BYTES {
        return Ok(too_large());
    }
    let inner = to_session(&req, &tenant, &session, &own_origin(&url), "/mcp", Some(body))?;
    session_stub(env, &tenant.id, &session)?.fetch_with_request(inner).await
}

fn too_large() -> Response {
    error(413, "PayloadTooLarge", format!("request body is over the limit of {MAX_BODY_BYTES} bytes"))
}

fn bad_origin() -> Response {
    error(403, "Forbidden", "this Origin may not call /mcp; a tenant can allow it in its allowedOrigins")
}

/// The Worker's own origin, and localhost origins when `RELAY_ALLOW_LOCALHOST` is set (dev).
fn static_origin_ok(origin: &str, url: &url::Url, env: &Env) -> bool {
    if origin.trim_end_matches('/') == own_origin(url) {
        return true;
    }
    let dev = env.var("RELAY_ALLOW_LOCALHOST").is_ok_and(|v| v.to_string() == "1");
    dev && url::Url::parse(origin)
        .is_ok_and(|o| o.scheme() == "http" && matches!(o.host_str(), Some("localhost" | "127.0.0.1" | "[::1]")))
}

/// The stub of a tenant's relay session DO.
pub fn session_stub(env: &Env, tenant_id: &str, session: &str) -> Result<worker::Stub> {
    env.durable_object("SESSIONS")?.id_from_name(&format!("{tenant_id}/{session}"))?.get_stub()
}

/// The request the DO sees: the original method, headers and body, plus who is calling.
pub fn to_session(
    req: &Request,
    tenant: &Tenant,
    session: &str,
    origin: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<Request> {
    let headers = Headers::new();
    for (name, value) in req.headers().entries() {
        if !name.starts_with("x-relay-") {
            headers.set(&name, &value)?;
        }
    }
    headers.set("x-relay-tenant", &serde_json::to_string(tenant)?)?;
    headers.set("x-relay-session", session)?;
    headers.set("x-relay-origin", origin)?;
    let mut init = RequestInit::new();
    init.with_method(req.method()).with_headers(headers);
    if let Some(body) = body.filter(|b| !b.is_empty()) {
        init.with_body(Some(worker::js_sys::Uint8Array::from(body.as_slice()).into()));
    }
    Request::new_with_init(&format!("https://session{path}"), &init)
}
