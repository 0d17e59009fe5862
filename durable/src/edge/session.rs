//! Tabs attaching as executors: `POST /session` mints an attach token (EdDSA JWT, 5 minutes)
//! for a relay session of the caller's tenant; `/session/:id/refresh` renews it; `events`,
//! `result`, `lease` and the tab's sockets are forwarded to the session's DO once the token is
//! checked; the tab's command stream (`events`) is held here, by the Worker, over a socket to
//! the DO, so the DO can sleep while the tab is idle. The tenant is taken
//! from the token, so a session id in the path never reaches another tenant. Tokens travel in
//! `Authorization: Bearer` (a WebSocket's: in its offered subprotocols), never in URLs, which
//! access logs and trace stores keep.

use super::http::read_capped;
use super::tenants::{authenticated_body, token_tenant};
use super::Who;
use crate::platform::bindings::public_origin;
use crate::platform::http::{json, refuse, sse_headers};
use crate::platform::signer::{signer, token_keys};
use crate::platform::{ledger, now_ms, random, sleep, stub};
use futures::channel::mpsc::{self, UnboundedSender};
use futures::future::{self, Either};
use futures::StreamExt;
use relay_core::auth::{
    bearer, session_name_ok, socket_bearer, AttachClaims, LEASE_PROTOCOL, RESULTS_PROTOCOL, SESSION_NAME_RULE,
};
use relay_core::error::ErrorName;
use relay_core::protocol::{Caller, SessionRequest, TAB_HEADER};
use relay_core::quota::Charge;
use relay_core::relay_session::desk::HEARTBEAT;
use relay_core::run::backchannel::MAX_BATCH_BYTES;
use serde_json::{json, Value};
use worker::wasm_bindgen_futures::spawn_local;
use worker::{Env, Request, Response, Result, WebSocket, WebsocketEvent};

/// Body limit of `POST /session`: `{"session": NAME}` and nothing more.
const ATTACH_BODY_MAX: usize = 4 * 1024;
/// Body limit of `POST /session/:id/refresh`, which needs no body at all.
const REFRESH_BODY_MAX: usize = 4 * 1024;
/// Body limit of `POST /session/:id/ready`: a few runtimes' states.
const READY_BODY_MAX: usize = 4 * 1024;
/// How long a tab's command stream may be quiet before the Worker writes a keep-alive comment
/// on it (the page takes a stream silent for 8 s as lost, and reattaches).
const KEEPALIVE_MS: u64 = 2_000;

/// `POST /session` with the tenant's key and `{"session": NAME}` (default `default`).
pub async fn attach(mut req: Request, env: &Env, who: &Who) -> Result<Response> {
    let (tenant, body) = match authenticated_body(&mut req, env, ATTACH_BODY_MAX).await? {
        Ok(found) => found,
        Err(response) => return Ok(response),
    };
    let asked: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(&body).unwrap_or(Value::Null) };
    let Some(session) = asked.get("session").map_or(Some("default"), Value::as_str) else {
        return Ok(refuse(ErrorName::ValidationError, "body: expected {\"session\": \"<name>\"}"));
    };
    if !session_name_ok(session) {
        return Ok(refuse(ErrorName::ValidationError, format!("session: {SESSION_NAME_RULE}")));
    }
    who.is(&tenant.id, session);
    // The relay session is admitted here (`relaySessions`): its events, results and refreshes
    // ride on the token, for at most the 12 hours a refresh allows.
    let admitted = ledger::charge(env, &tenant, Charge::Admit { session: session.to_owned() }).await?;
    if let Some(refused) = ledger::refusal(admitted) {
        return Ok(refused);
    }
    issue(env, &tenant.id, session)
}

/// `POST /session/:id/refresh` with the token: a new one for the same session, before the old expires.
pub async fn refresh(mut req: Request, env: &Env, session: &str) -> Result<Response> {
    let claims = match check_token(&req, env, session)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    if let Err(too_large) = read_capped(&mut req, REFRESH_BODY_MAX).await? {
        return Ok(too_large);
    }
    match claims.refreshed(now_ms() / 1000, new_jti()) {
        Ok(claims) => grant(env, &claims),
        Err(e) => {
            Ok(refuse(ErrorName::Unauthorized, format!("{e} (refreshes end 12 hours after attaching with the key)")))
        }
    }
}

fn issue(env: &Env, tenant_id: &str, session: &str) -> Result<Response> {
    grant(env, &AttachClaims::new(tenant_id, session, now_ms() / 1000, new_jti()))
}

fn new_jti() -> String {
    format!("att_{}", hex::encode(random::<12>()))
}

/// `{sessionId, attachToken, expiresAt}`; refresh with `POST /session/<id>/refresh`.
fn grant(env: &Env, claims: &AttachClaims) -> Result<Response> {
    let token = claims.sign(&signer(env)?);
    Ok(json(200, &json!({ "sessionId": claims.sid, "attachToken": token, "expiresAt": claims.exp * 1000 })))
}

/// Checks the path's session id, then the attach token in `Authorization: Bearer` for it.
fn check_token(req: &Request, env: &Env, session: &str) -> Result<std::result::Result<AttachClaims, Response>> {
    let header = req.headers().get("authorization")?;
    let missing = "missing `Authorization: Bearer <attachToken>`: attach with POST /session first (tokens are not accepted in URLs)";
    verify(bearer(header.as_deref()), missing, env, session)
}

/// The attach token `token`, checked for `session` (`missing` says how to send one).
fn verify(
    token: Option<&str>,
    missing: &str,
    env: &Env,
    session: &str,
) -> Result<std::result::Result<AttachClaims, Response>> {
    if !session_name_ok(session) {
        let message = format!("session id in the path: {SESSION_NAME_RULE} (the sessionId POST /session returned)");
        return Ok(Err(refuse(ErrorName::ValidationError, message)));
    }
    let Some(token) = token else {
        return Ok(Err(refuse(ErrorName::Unauthorized, missing)));
    };
    Ok(AttachClaims::verify_for(token, &token_keys(env)?, session, now_ms() / 1000)
        .map_err(|e| refuse(ErrorName::Unauthorized, e.to_string())))
}

/// A tab's WebSocket to its relay session's DO.
#[derive(Clone, Copy)]
pub enum TabSocket {
    /// `GET /session/:id/results?tab=<tabId>`: the result backchannel, so a batch costs no
    /// request of its own.
    Results,
    /// `GET /session/:id/lease?tab=<tabId>`: where the tab's lease worker pings, answered by
    /// the runtime without waking the DO.
    Lease,
}

impl TabSocket {
    fn protocol(self) -> &'static str {
        match self {
            TabSocket::Results => RESULTS_PROTOCOL,
            TabSocket::Lease => LEASE_PROTOCOL,
        }
    }

    /// What a client that cannot open the socket does instead.
    fn fallback(self) -> &'static str {
        match self {
            TabSocket::Results => "POST batches to /session/:id/result",
            TabSocket::Lease => "POST /session/:id/lease to renew the lease",
        }
    }

    /// The relay session's request that opens the socket for `tab`, held to the token's expiry.
    fn request(self, tab: String, token_expiry_s: u64) -> SessionRequest {
        match self {
            TabSocket::Results => SessionRequest::ResultsSocket { tab, token_expiry_s },
            TabSocket::Lease => SessionRequest::LeaseSocket { tab, token_expiry_s },
        }
    }
}

/// A tab's socket (`TabSocket`). A browser cannot set `Authorization` on a WebSocket, so the
/// attach token comes as an offered subprotocol (`auth::socket_bearer`). The socket lives in
/// the session's DO, which holds it to the token's expiry.
pub async fn tab_socket(req: Request, env: &Env, session: &str, who: &Who, socket: TabSocket) -> Result<Response> {
    let fallback = socket.fallback();
    if !req.headers().get("upgrade")?.is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        let message = format!("this route is a WebSocket (Upgrade: websocket); without one, {fallback}");
        return Ok(refuse(ErrorName::UpgradeRequired, message));
    }
    let protocols = req.headers().get("sec-websocket-protocol")?;
    let protocol = socket.protocol();
    let missing =
        format!("offer the subprotocols `{protocol}` and `bearer.<attachToken>` (tokens are not accepted in URLs)");
    let claims = match verify(socket_bearer(protocols.as_deref(), protocol), &missing, env, session)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    let url = req.url()?;
    let Some(tab) = url.query_pairs().find_map(|(k, v)| (k == "tab").then(|| v.into_owned())) else {
        return Ok(refuse(ErrorName::ValidationError, "?tab= must name this tab (the tabId of its hello)"));
    };
    who.is(&claims.sub, session);
    let tenant = match token_tenant(env, &claims.sub).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let caller = Caller { tenant, session: session.to_owned(), origin: public_origin(env, &url)? };
    stub::send(env, &caller, socket.request(tab, claims.exp)).await
}

/// A tab's request that its relay session's DO answers (the tab named in `x-relay-tab`).
#[derive(Clone, Copy)]
pub enum TabRoute {
    /// `POST /session/:id/result`: a batch of events.
    Result,
    /// `POST /session/:id/lease`: a renewal, where the lease socket cannot open.
    RenewLease,
    /// `GET /session/:id/mcps`: the `/mcps` tree.
    Mcps,
    /// `POST /session/:id/detach`: the tab is going away.
    Detach,
    /// `POST /session/:id/ready`: what the tab says of its runtimes.
    Ready,
}

impl TabRoute {
    /// The most body the route reads (none: it reads no body).
    fn body_max(self) -> Option<usize> {
        match self {
            TabRoute::Result => Some(MAX_BATCH_BYTES),
            TabRoute::Ready => Some(READY_BODY_MAX),
            _ => None,
        }
    }

    fn request(self, tab: Option<String>, body: Vec<u8>) -> SessionRequest {
        match self {
            TabRoute::Result => SessionRequest::Result { tab, batch: body },
            TabRoute::RenewLease => SessionRequest::RenewLease { tab },
            TabRoute::Mcps => SessionRequest::McpsTree,
            TabRoute::Detach => SessionRequest::Detach { tab },
            TabRoute::Ready => SessionRequest::Ready { tab, report: body },
        }
    }
}

/// `GET /session/:id/events`: a tab attaches. The Worker holds its SSE stream, not the DO: it
/// opens a WebSocket to the relay session's DO (which accepts it hibernatable, tagged with the
/// tab), writes each frame the DO sends on it (`hello`, then the other `TabCommand`s, each
/// already an SSE event) to the tab, and writes the keep-alive comments itself. So an idle tab
/// keeps no DO awake: the DO runs only when it has something to say or to decide.
pub async fn events(req: Request, env: &Env, session: &str, who: &Who) -> Result<Response> {
    let answer =
        to_tab_session(req, env, session, who, None, |previous, _| SessionRequest::Events { previous }).await?;
    if answer.status_code() != 101 {
        return Ok(answer); // the DO's refusal, as it is
    }
    let Some(socket) = answer.websocket() else {
        return Ok(refuse(ErrorName::Internal, "the relay session answered the tab's attach with no socket; retry"));
    };
    socket.accept()?;
    let (stream, body) = mpsc::unbounded();
    let _ = stream.unbounded_send(Ok(b"retry: 2000\n\n".to_vec()));
    spawn_local(relay_frames(socket, stream));
    Ok(Response::from_stream(body)?.with_headers(sse_headers()))
}

/// Writes each frame the DO sends on `socket` to the tab's `stream`, and a keep-alive whenever
/// it has been quiet for `KEEPALIVE_MS`, until the DO closes the socket (it dropped the tab:
/// the stream ends and the page reattaches) or the tab's stream is gone (a write fails: the
/// socket is closed, so the DO hears of it). The tab's liveness stays its lease's.
async fn relay_frames(socket: WebSocket, stream: UnboundedSender<Result<Vec<u8>>>) {
    let Ok(mut events) = socket.events() else { return };
    loop {
        let frame = match future::select(events.next(), sleep(KEEPALIVE_MS)).await {
            Either::Left((Some(Ok(WebsocketEvent::Message(message))), _)) => message.text().map(String::into_bytes),
            Either::Left(_) => break, // closed, or failed
            Either::Right(_) => Some(HEARTBEAT.to_vec()),
        };
        if frame.is_some_and(|frame| stream.unbounded_send(Ok(frame)).is_err()) {
            break;
        }
    }
    drop(events);
    let _ = socket.close(Some(1000), Some("the tab's command stream ended"));
}

/// A tab's request (`TabRoute`), its token checked, forwarded to the session's DO.
pub async fn forward(req: Request, env: &Env, session: &str, route: TabRoute, who: &Who) -> Result<Response> {
    to_tab_session(req, env, session, who, route.body_max(), |tab, body| route.request(tab, body)).await
}

/// A tab's request, its attach token checked for `session` and its body read up to `body_max`
/// (none read without), forwarded to the session's DO as `request` makes it of the tab named
/// in `x-relay-tab` and the body.
pub async fn to_tab_session(
    mut req: Request,
    env: &Env,
    session: &str,
    who: &Who,
    body_max: Option<usize>,
    request: impl FnOnce(Option<String>, Vec<u8>) -> SessionRequest,
) -> Result<Response> {
    let claims = match check_token(&req, env, session)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    let body = match body_max {
        Some(cap) => match read_capped(&mut req, cap).await? {
            Ok(body) => body,
            Err(too_large) => return Ok(too_large),
        },
        None => Vec::new(),
    };
    who.is(&claims.sub, session);
    let tenant = match token_tenant(env, &claims.sub).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let caller = Caller { tenant, session: session.to_owned(), origin: public_origin(env, &req.url()?)? };
    let tab = req.headers().get(TAB_HEADER)?;
    stub::send(env, &caller, request(tab, body)).await
}
