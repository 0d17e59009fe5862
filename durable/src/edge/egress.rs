//! `POST /egress`: performs one of guest code's fetches for the tab, under the policy of the
//! run's capsule (the rules are the core's `egress` module). The run token names the tenant
//! and the capsule; the capsule's `policy.network` decides the URL and every redirect hop, the
//! request and response bodies' caps, and the number of redirects. The tab checks the same
//! policy first; this check is the authoritative one.
//!
//! A listed domain that resolves to a private address is not caught here: Workers have no DNS
//! API, and Cloudflare's edge does not connect to private ranges, so such a fetch fails (502).

use super::http::read_capped;
use super::tenants::token_tenant;
use super::Who;
use crate::platform::bindings::public_origin;
use crate::platform::http::{error, refuse};
use crate::platform::r2::capsule_policy;
use crate::platform::run_token::run_claims;
use crate::platform::{ledger, now_ms, stub};
use futures::StreamExt;
use relay_core::auth::RunClaims;
use relay_core::egress::{self, Fetched, Hop, Outbound};
use relay_core::error::ErrorName;
use relay_core::policy::NetworkPolicy;
use relay_core::protocol::{Caller, SessionRequest};
use relay_core::quota::Charge;
use worker::wasm_bindgen::JsCast;
use worker::{js_sys, wasm_bindgen_futures, web_sys, Context, Env, Headers, Request, Response, Result};

/// `POST /egress` with `Authorization: Bearer <run token>` and an envelope (core `egress`).
pub async fn handle(mut req: Request, env: &Env, ctx: &Context, who: &Who) -> Result<Response> {
    let claims = match run_claims(&req, env)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    who.is(&claims.sub, &claims.sid);
    let tenant = match token_tenant(env, &claims.sub).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let policy = match capsule_policy(env, &claims.sub, &claims.cap).await? {
        Ok(policy) => policy.network,
        Err(response) => return Ok(response),
    };
    let envelope = match read_capped(&mut req, egress::envelope_limit(policy.max_body_bytes)).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    let first = match egress::prepare(&envelope, &policy) {
        Ok(first) => first,
        Err(refusal) => return Ok(error(refusal)),
    };
    // The tenant's egress quotas (`relay_core::quota`): the request, its body and the most its
    // response may carry, reserved before it is sent (so fetches in parallel each see the
    // others' bytes); what the response did not use comes back after, without the guest
    // waiting for it. A ledger that misses that is logged (`ledger::send`): the tenant is then
    // charged the whole cap, never less than it used.
    let charged_ms = now_ms();
    let sent = Charge::Egress { requests: 1, bytes: envelope.len() as u64 + policy.max_body_bytes };
    if let Some(refused) = ledger::refusal(ledger::charge(env, &tenant, sent).await?) {
        return Ok(refused);
    }
    let (response, received) = perform(first, &policy).await?;
    let unused = Charge::EgressUnused { bytes: policy.max_body_bytes.saturating_sub(received), charged_ms };
    let env = env.clone();
    ctx.wait_until(async move {
        let _ = ledger::charge(&env, &tenant, unused).await;
    });
    Ok(response)
}

/// A run's request (under its run token, body at most `body_max`) forwarded to its relay
/// session's DO as `request(claims, body)`: `/mcps-rpc`, and a build's presign and finalize.
pub async fn to_run_session(
    mut req: Request,
    env: &Env,
    who: &Who,
    body_max: usize,
    request: impl FnOnce(&RunClaims, Vec<u8>) -> SessionRequest,
) -> Result<Response> {
    let claims = match run_claims(&req, env)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    who.is(&claims.sub, &claims.sid);
    let body = match read_capped(&mut req, body_max).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    let tenant = match token_tenant(env, &claims.sub).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let caller = Caller { tenant, session: claims.sid.clone(), origin: public_origin(env, &req.url()?)? };
    stub::send(env, &caller, request(&claims, body)).await
}

/// Sends `request`, following redirects hop by hop as the core decides: the answer, and the
/// bytes of the response body it carries.
async fn perform(mut request: Outbound, policy: &NetworkPolicy) -> Result<(Response, u64)> {
    let mut redirects = 0;
    loop {
        let upstream = match send(&request).await {
            Ok(upstream) => upstream,
            Err(e) => return Ok((upstream_failed(&request.url, &e), 0)),
        };
        let location = upstream.headers().get("location").ok().flatten();
        match egress::next_hop(&request, upstream.status(), location.as_deref(), redirects, policy) {
            Hop::Follow(next) => {
                cancel_body(&upstream);
                request = next;
                redirects += 1;
            }
            Hop::Deny(why) => {
                cancel_body(&upstream);
                return Ok((refuse(ErrorName::PolicyDenied, why), 0));
            }
            Hop::Done => return answer(upstream, &request.url, redirects, policy.max_body_bytes).await,
        }
    }
}

/// One request, with `redirect: manual` so that every hop comes back here to be checked.
async fn send(request: &Outbound) -> std::result::Result<web_sys::Response, worker::wasm_bindgen::JsValue> {
    let headers = web_sys::Headers::new()?;
    for (name, value) in &request.headers {
        headers.append(name, value)?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method(&request.method);
    init.set_headers(&headers);
    init.set_redirect(web_sys::RequestRedirect::Manual);
    if let Some(body) = &request.body {
        init.set_body(&js_sys::Uint8Array::from(body.as_slice()));
    }
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let answer = wasm_bindgen_futures::JsFuture::from(global.fetch_with_str_and_init(&request.url, &init)).await?;
    answer.dyn_into()
}

/// Cancels a response body nobody will read, so the upstream connection is let go.
fn cancel_body(upstream: &web_sys::Response) {
    if let Some(body) = upstream.body() {
        let _ = body.cancel();
    }
}

fn upstream_failed(url: &str, error_value: &worker::wasm_bindgen::JsValue) -> Response {
    let why = error_value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error_value.as_string())
        .unwrap_or_else(|| format!("{error_value:?}"));
    refuse(ErrorName::UpstreamFailed, egress::upstream_failed(url, &why))
}

/// The route's answer: status 200, the upstream's body (read as a stream and refused once it
/// passes `max_body_bytes`, without reading further) and its metadata in `x-relay-*` headers.
async fn answer(
    upstream: web_sys::Response,
    url: &str,
    redirects: u32,
    max_body_bytes: u64,
) -> Result<(Response, u64)> {
    let meta = Fetched {
        status: upstream.status(),
        status_text: upstream.status_text(),
        url: url.to_owned(),
        redirects,
        headers: Headers(upstream.headers()).entries().collect(),
    };
    let declared = upstream.headers().get("content-length").ok().flatten().and_then(|l| l.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max_body_bytes) {
        cancel_body(&upstream);
        return Ok((refuse(ErrorName::PolicyDenied, egress::body_too_large(url, max_body_bytes)), 0));
    }
    let mut body = Vec::new();
    if let Some(stream) = upstream.body() {
        // Dropping this stream early cancels it: the rest of the body is never read.
        let mut chunks = worker::ByteStream::from(stream);
        while let Some(chunk) = chunks.next().await {
            let Ok(chunk) = chunk else {
                let why = egress::upstream_failed(url, "the response body broke off");
                return Ok((refuse(ErrorName::UpstreamFailed, why), body.len() as u64));
            };
            body.extend_from_slice(&chunk);
            if body.len() as u64 > max_body_bytes {
                let too_large = refuse(ErrorName::PolicyDenied, egress::body_too_large(url, max_body_bytes));
                return Ok((too_large, body.len() as u64));
            }
        }
    }
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/octet-stream");
    let _ = headers.set("x-content-type-options", "nosniff");
    let _ = headers.set("cache-control", "no-store");
    for (name, value) in meta.relay_headers() {
        headers.set(name, &value)?;
    }
    let received = body.len() as u64;
    Ok((Response::from_bytes(body)?.with_headers(headers), received))
}
