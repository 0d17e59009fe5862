//! The routes a tab uses to build a run's dependencies (`relay_core::packages`), each under the
//! run's token or an upload grant: `GET /registry?url=` fetches from one of the tenant's package
//! sources (the page's own policy lets it reach nothing but this Worker), `POST
//! /capsule/presign` and `POST /capsule/finalize` go to the relay session's DO, which holds
//! the build, and `PUT /capsule/upload` stores a layer in R2.
//!
//! An upload carries its grant as `Authorization: Bearer`, not in its URL, so that no request
//! log ever holds one. Its bytes are checked against the grant (size, then sha256) before the
//! DO spends the grant, and R2 checks the sha256 again as it stores them.

use super::egress::to_run_session;
use super::http::read_granted;
use super::tenants::token_tenant;
use super::Who;
use crate::platform::http::{json, refuse, storage_unavailable};
use crate::platform::r2::put_layer;
use crate::platform::run_token::run_claims;
use crate::platform::signer::token_keys;
use crate::platform::{ledger, now_ms, sleep, stub};
use futures::future::{select, Either};
use futures::StreamExt;
use relay_core::auth::bearer;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::error::ErrorName;
use relay_core::packages::{Admitted, UploadGrant};
use relay_core::protocol::{Caller, SessionRequest};
use serde_json::json;
use std::pin::pin;
use worker::{
    AbortController, ByteStream, Env, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Response, Result,
};

/// Body limit of presign and finalize: a few layer claims and a list of resolved packages.
const BUILD_BODY_MAX: usize = 256 * 1024;
/// Redirects `/registry` follows, each to a URL under the tenant's sources.
const REGISTRY_REDIRECTS: usize = 3;
/// How long a package source may take to start answering, and then to send each next part of
/// its body (a registry answers in well under a second; a mirror filling its cache, in a few).
const SOURCE_DEADLINE_MS: u64 = 20_000;
/// How long one `/registry` answer may take in all, redirects and body included: a source that
/// trickles (a byte every few seconds) is broken off then. A package file of the deps layer's
/// 20 MiB at 512 kbit/s arrives within it.
const ANSWER_DEADLINE_MS: u64 = 60_000;

/// `POST /capsule/presign`: to the relay session, which holds the build.
pub async fn presign(req: Request, env: &Env, who: &Who) -> Result<Response> {
    to_run_session(req, env, who, BUILD_BODY_MAX, |claims, ask| SessionRequest::BuildPresign {
        run: claims.run.clone(),
        ask,
    })
    .await
}

/// `POST /capsule/finalize`: to the relay session, which holds the build.
pub async fn finalize(req: Request, env: &Env, who: &Who) -> Result<Response> {
    to_run_session(req, env, who, BUILD_BODY_MAX, |claims, proposal| SessionRequest::BuildFinalize {
        run: claims.run.clone(),
        proposal,
    })
    .await
}

/// `PUT /capsule/upload` with `Authorization: Bearer <grant>`: stores the layer the grant
/// names, once (201 `{layer, sha256, size}`). A body of another size or digest is refused
/// (400) and nothing is stored; a spent grant is 409, an expired one 401.
pub async fn upload(mut req: Request, env: &Env, who: &Who) -> Result<Response> {
    let header = req.headers().get("authorization")?;
    let Some(token) = bearer(header.as_deref()) else {
        return Ok(refuse(
            ErrorName::Unauthorized,
            "missing `Authorization: Bearer <grant>`: POST /capsule/presign gives one per layer",
        ));
    };
    let grant = match UploadGrant::verify(token, &token_keys(env)?, now_ms() / 1000) {
        Ok(grant) => grant,
        Err(why) => return Ok(refuse(ErrorName::Unauthorized, why)),
    };
    who.is(&grant.sub, &grant.sid);
    let body = match read_granted(&mut req, grant.size as usize).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    if let Some(why) = mismatch(&grant, &body) {
        return Ok(refuse(ErrorName::ValidationError, why));
    }
    let tenant = match token_tenant(env, &grant.sub).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let caller = Caller { tenant, session: grant.sid.clone(), origin: String::new() };
    // Charged to the tenant's storedBytes before the grant is spent: a refusal leaves the grant
    // to use again once there is room.
    let spend_and_put = async {
        let spent = stub::send(env, &caller, SessionRequest::BuildSpend(grant.clone()))
            .await
            .map_err(|e| storage_unavailable("the relay session", &e))?;
        if spent.status_code() != 204 {
            return Err(spent);
        }
        put_layer(env, &grant.sha256, body, &caller.tenant.id).await
    };
    if let Err(refused) = ledger::charged_put(env, &caller.tenant, grant.size, spend_and_put).await {
        return Ok(refused);
    }
    Ok(json(201, &json!({ "layer": grant.layer, "sha256": grant.sha256, "size": grant.size })))
}

/// Why `body` is not what `grant` was given for, if it is not.
fn mismatch(grant: &UploadGrant, body: &[u8]) -> Option<String> {
    if body.len() as u64 != grant.size {
        return Some(format!(
            "layer {} is {} bytes; its grant is for {} bytes: upload the bytes you presigned",
            grant.layer,
            body.len(),
            grant.size
        ));
    }
    let digest = sha256_hex(body);
    (digest != grant.sha256).then(|| {
        format!(
            "layer {} has sha256 {digest}; its grant is for {}: upload the bytes you presigned",
            grant.layer, grant.sha256
        )
    })
}

/// `GET /registry?url=<absolute URL>` under a run token: the URL, if it lies under one of the
/// tenant's package sources (`defaults.packages`, decided on the URL as parsed, and that parsed
/// URL is what is fetched), fetched with the request's `Accept`, and its status, type and body
/// passed back. Redirects are followed only to admitted URLs. A source that does not start
/// answering within [`SOURCE_DEADLINE_MS`] is `UpstreamFailed` naming it; one that stalls that
/// long in its body, or has not sent it whole by [`ANSWER_DEADLINE_MS`], breaks the body off.
pub async fn registry(req: Request, env: &Env, who: &Who) -> Result<Response> {
    let claims = match run_claims(&req, env)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    who.is(&claims.sub, &claims.sid);
    let sources = match token_tenant(env, &claims.sub).await? {
        Ok(tenant) => tenant.defaults.packages,
        Err(refusal) => return Ok(refusal),
    };
    let mut url = req.url()?.query_pairs().find(|(k, _)| k == "url").map(|(_, v)| v.into_owned()).unwrap_or_default();
    let accept = req.headers().get("accept")?.unwrap_or_else(|| "*/*".into());
    let deadline = Deadline(now_ms() + ANSWER_DEADLINE_MS);
    for _ in 0..=REGISTRY_REDIRECTS {
        let admitted = match sources.admit(&url) {
            Ok(admitted) => admitted,
            Err(why) => return Ok(refuse(ErrorName::PolicyDenied, why)),
        };
        let (mut upstream, controller) = match from_source(&admitted, &accept, deadline).await? {
            Ok(answered) => answered,
            Err(why) => return Ok(refuse(ErrorName::UpstreamFailed, why)),
        };
        let status = upstream.status_code();
        if (300..400).contains(&status) {
            // A relative Location is resolved against the URL that answered, then checked again.
            let location = upstream.headers().get("location")?.unwrap_or_default();
            url = admitted.url.join(&location).map_or(location, String::from);
            continue;
        }
        let content_type = upstream.headers().get("content-type")?.unwrap_or_else(|| "application/octet-stream".into());
        let headers = Headers::new();
        headers.set("content-type", &content_type)?;
        let body = stall_guarded(upstream.stream()?, controller, source_name(&admitted), deadline);
        return Ok(Response::from_stream(body)?.with_status(status).with_headers(headers));
    }
    Ok(refuse(ErrorName::UpstreamFailed, format!("{url}: more than {REGISTRY_REDIRECTS} redirects")))
}

/// How a message names the source a URL is under.
fn source_name(admitted: &Admitted) -> String {
    format!("package source {} ({}) for {}", admitted.field, admitted.base, admitted.url)
}

/// When a `/registry` answer must be whole ([`ANSWER_DEADLINE_MS`] after it began).
#[derive(Clone, Copy)]
struct Deadline(u64);

impl Deadline {
    /// How long to wait for the next part: [`SOURCE_DEADLINE_MS`], or what is left of the
    /// answer's time when less; and whether that wait is the whole answer's.
    fn next_wait(self) -> (u64, bool) {
        let left = self.0.saturating_sub(now_ms());
        (left.min(SOURCE_DEADLINE_MS), left <= SOURCE_DEADLINE_MS)
    }

    /// Why a source was cut off when the whole answer's time ran out.
    fn missed(source: &str) -> String {
        format!(
            "{source} did not send its whole answer within {} s, the limit of one /registry answer; retry later, \
             or ask an admin to check the source",
            ANSWER_DEADLINE_MS / 1000
        )
    }
}

/// The source's answer to a GET of the admitted URL (with the controller that aborts its body),
/// or why there is none: no answer at all, or none within [`SOURCE_DEADLINE_MS`] or by the
/// `deadline` (then the request is aborted).
async fn from_source(
    admitted: &Admitted<'_>,
    accept: &str,
    deadline: Deadline,
) -> Result<std::result::Result<(Response, AbortController), String>> {
    let headers = Headers::new();
    headers.set("accept", accept)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers).with_redirect(RequestRedirect::Manual);
    let fetch = Fetch::Request(Request::new_with_init(admitted.url.as_str(), &init)?);
    let controller = AbortController::default();
    let signal = controller.signal();
    let sent = pin!(fetch.send_with_signal(&signal));
    let (wait, last) = deadline.next_wait();
    Ok(match select(sent, pin!(sleep(wait))).await {
        Either::Left((Ok(upstream), _)) => Ok((upstream, controller)),
        Either::Left((Err(e), _)) => Err(format!("{} did not answer: {e}", source_name(admitted))),
        Either::Right(_) if last => {
            controller.abort();
            Err(Deadline::missed(&source_name(admitted)))
        }
        Either::Right(_) => {
            controller.abort();
            Err(format!(
                "{} did not answer within {} s; retry later, or ask an admin to check the source (defaults.packages.{})",
                source_name(admitted),
                SOURCE_DEADLINE_MS / 1000,
                admitted.field
            ))
        }
    })
}

/// `body` passed on as it comes, broken off (and the fetch aborted) when the source sends
/// nothing for [`SOURCE_DEADLINE_MS`] or has not sent it all by the `deadline`: the tab sees a
/// body that failed, not one that never ends.
fn stall_guarded(
    body: ByteStream,
    controller: AbortController,
    source: String,
    deadline: Deadline,
) -> impl futures::Stream<Item = Result<Vec<u8>>> {
    futures::stream::unfold(Some((body, controller)), move |state| {
        let source = source.clone();
        async move {
            let (mut body, controller) = state?;
            let next = {
                // edge::sleep, not worker::Delay: each pull of a response stream is a new task.
                let (wait, last) = deadline.next_wait();
                let (chunk, stall) = (pin!(body.next()), pin!(sleep(wait)));
                match select(chunk, stall).await {
                    Either::Left((chunk, _)) => chunk,
                    Either::Right(_) => {
                        controller.abort();
                        let why = match last {
                            true => Deadline::missed(&source),
                            false => format!("{source} sent nothing for {} s", SOURCE_DEADLINE_MS / 1000),
                        };
                        worker::console_warn!("/registry: {why}");
                        return Some((Err(worker::Error::RustError(why)), None));
                    }
                }
            };
            next.map(|chunk| (chunk, Some((body, controller))))
        }
    })
}
