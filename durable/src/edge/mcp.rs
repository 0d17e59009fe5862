//! `/mcp`: Origin validation, tenant auth and relay session routing; the MCP protocol itself is
//! answered by the relay session's Durable Object (see `durable/mcp.rs`), but for the few
//! requests whose answer needs none of its state, which the Worker answers with the same core
//! (`mcp::answer_stateless`), one hop sooner.
//!
//! A request belongs to the tenant's `default` relay session unless it names another with
//! `?session=NAME`. The DO is found by `<tenantId>/<name>`, and the tenant comes from the key,
//! so no id a client sends can reach another tenant's DO.

use super::http::{own_origin, read_capped, unauthorized};
use super::oauth;
use super::tenants::authenticate;
use super::Who;
use crate::platform::bindings::{self, public_origin, PUBLIC_URL, RELAY_ALLOW_LOCALHOST};
use crate::platform::http::{error, refuse, sse_headers, to_response};
use crate::platform::{ledger, now_ms, sleep, stub};
use futures::{future, StreamExt};
use relay_core::auth::{bearer, check_key_shape, session_name_ok, Tenant, SESSION_NAME_RULE};
use relay_core::error::ErrorName;
use relay_core::mcp::{self, Context, HttpRequest, HttpResponse, RelayView, MAX_BODY_BYTES};
use relay_core::protocol::{Caller, SessionRequest, CALLER_HEADER, HOLD_STREAM_HEADER};
use relay_core::quota::{Admitted, Charge, LedgerAnswer};
use std::cell::RefCell;
use worker::{Env, Method, Request, Response, Result};

/// How often a quiet legacy GET stream gets a keep-alive comment.
const KEEPALIVE_MS: u64 = 15_000;

pub async fn forward(mut req: Request, env: &Env, who: &Who) -> Result<Response> {
    let url = req.url()?;
    let origin = req.headers().get("origin")?;
    let (tenant, granted_session) = match credential(&req, env, &url).await? {
        Ok(found) => found,
        // A foreign browser Origin is refused before auth is even discussed (DNS rebinding).
        Err(_) if !own_page(origin.as_deref(), &url, env)? => return Ok(bad_origin()),
        Err(response) => return Ok(response),
    };
    if let Some(origin) = origin.as_deref() {
        if !own_page(Some(origin), &url, env)? && !tenant.origin_allowed(origin) {
            return Ok(bad_origin());
        }
    }
    let asked = url.query_pairs().find(|(k, _)| k == "session").map(|(_, v)| v.into_owned());
    let session = match (granted_session, asked) {
        (Some(granted), Some(asked)) if granted != asked => {
            let message =
                format!("this access token is for relay session {granted:?}; authorize again to use {asked:?}");
            return Ok(refuse(ErrorName::Forbidden, message));
        }
        (Some(granted), _) => granted,
        (None, asked) => asked.unwrap_or_else(|| "default".into()),
    };
    if !session_name_ok(&session) {
        return Ok(refuse(ErrorName::ValidationError, format!("session: {SESSION_NAME_RULE}")));
    }
    who.is(&tenant.id, &session);
    // Only a POST carries a message; GET and DELETE are forwarded without a body.
    let body = if req.method() == Method::Post {
        match read_capped(&mut req, MAX_BODY_BYTES).await? {
            Ok(body) => body,
            Err(too_large) => return Ok(too_large),
        }
    } else {
        Vec::new()
    };
    let caller = Caller { tenant, session, origin: public_origin(env, &url)? };
    let request = HttpRequest {
        method: req.method().to_string(),
        headers: req.headers().entries().filter(|(name, _)| name != CALLER_HEADER).collect(),
        body,
    };
    let request = match answer_here(request, &caller)? {
        Ok(reply) => return Ok(to_response(reply)),
        Err(request) => request,
    };
    if let Some(refused) = admit(env, &caller, &request).await? {
        return Ok(refused);
    }
    let answer = stub::send(env, &caller, SessionRequest::Mcp(request)).await?;
    if answer.headers().has(HOLD_STREAM_HEADER)? {
        return held_stream();
    }
    Ok(answer)
}

/// A legacy client's standalone GET stream, accepted by its relay session's DO and held here
/// (`HOLD_STREAM_HEADER`): a keep-alive comment every `KEEPALIVE_MS` until the client leaves,
/// and no timer in the DO, which can sleep meanwhile (docs/COST.md).
fn held_stream() -> Result<Response> {
    let keepalive = || Ok::<_, worker::Error>(mcp::SSE_KEEPALIVE.as_bytes().to_vec());
    let first = futures::stream::once(future::ready(keepalive()));
    let ticks = futures::stream::unfold((), move |()| async move {
        let _ = sleep(KEEPALIVE_MS).await;
        Some((keepalive(), ()))
    });
    Ok(Response::from_stream(first.chain(ticks))?.with_headers(sse_headers()))
}

/// Charges the tenant's ledger for `request` before it reaches its relay session (a
/// `tools/call` is a call; anything else admits the relay session: `mcp::admission`), so a
/// relay session the `relaySessions` quota refuses is never created, nor listed under its
/// tenant; an admission this isolate saw within a minute is not asked again (`quota::Admitted`).
/// The answer to send instead when a quota or the ledger refuses it.
async fn admit(env: &Env, caller: &Caller, request: &HttpRequest) -> Result<Option<Response>> {
    let (charge, id) = mcp::admission(request, &caller.session);
    let (tenant, session, now) = (&caller.tenant.id, &caller.session, now_ms());
    if matches!(charge, Charge::Admit { .. }) && ADMITTED.with_borrow(|seen| seen.fresh(tenant, session, now)) {
        return Ok(None);
    }
    Ok(match ledger::charge(env, &caller.tenant, charge).await? {
        Ok(LedgerAnswer::Refused { refusal }) => Some(to_response(mcp::quota_exceeded(&id, &refusal))),
        Ok(_) => {
            ADMITTED.with_borrow_mut(|seen| seen.remember(tenant, session, now));
            None
        }
        Err(unavailable) => Some(error(unavailable)),
    })
}

thread_local! {
    /// The relay sessions this isolate saw admitted lately: their other requests skip the hop.
    static ADMITTED: RefCell<Admitted> = RefCell::default();
}

/// The answer to a request the Worker can give without the relay session's DO (the core's
/// `answer_stateless`: 2026-07-28 `tools/list`, `server/discover` and the like), or the
/// request back, untouched, for the DO.
fn answer_here(request: HttpRequest, caller: &Caller) -> Result<std::result::Result<HttpResponse, HttpRequest>> {
    let cx = Context {
        now_ms: now_ms(),
        new_session_id: &|| String::new(),
        relay: RelayView { session: caller.session.clone(), ..RelayView::default() },
        audit_records: &|_| Vec::new(),
        workspace: &|| serde_json::Value::Null,
        page_url: caller.page_url(),
        limits_json: serde_json::to_value(&caller.tenant.defaults.policy.limits)?,
        client_seen: &|_| {},
        task: &|_| None,
    };
    Ok(mcp::answer_stateless(&request, &cx).ok_or(request))
}

/// The tenant a request's bearer credential stands for: an API key (any relay session), or an
/// OAuth access token issued for this `/mcp` (its grant's relay session only).
async fn credential(
    req: &Request,
    env: &Env,
    url: &url::Url,
) -> Result<std::result::Result<(Tenant, Option<String>), Response>> {
    let header = req.headers().get("authorization")?;
    match bearer(header.as_deref()) {
        Some(token) if check_key_shape(token).is_err() => {
            let origin = public_origin(env, url)?;
            Ok(oauth::access(env, token, &origin)
                .await?
                .map(|(t, s)| (t, Some(s)))
                .map_err(|why| unauthorized(&origin, &why)))
        }
        _ => Ok(authenticate(req, env).await?.map(|tenant| (tenant, None))),
    }
}

fn bad_origin() -> Response {
    refuse(ErrorName::Forbidden, "this Origin may not call /mcp; a tenant can allow it in its allowedOrigins")
}

/// Whether the request has no browser Origin, or the Worker's own page's, which every tenant
/// accepts (`relay_core::protocol::own_page_origin`: the public origin; in dev,
/// `RELAY_ALLOW_LOCALHOST=1`, loopback pages too).
fn own_page(origin: Option<&str>, url: &url::Url, env: &Env) -> Result<bool> {
    let Some(origin) = origin else { return Ok(true) };
    let dev = bindings::var(env, RELAY_ALLOW_LOCALHOST).is_some_and(|v| v == "1");
    relay_core::protocol::own_page_origin(origin, bindings::var(env, PUBLIC_URL).as_deref(), &own_origin(url), dev)
        .map_err(worker::Error::RustError)
}
