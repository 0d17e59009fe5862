//! The hop from the Worker to a relay session's Durable Object, typed: the Worker [`send`]s a
//! `SessionRequest` with its `Caller`, the DO [`receive`]s the same two back. The wire form is
//! the core's (`protocol::Envelope`); only here does it meet `worker::Request`.

use super::bindings::SESSIONS;
use relay_core::error::HttpError;
use relay_core::protocol::{object_name, Caller, Envelope, SessionRequest, CALLER_HEADER};
use worker::{Env, Headers, Method, Request, RequestInit, Response, Result};

/// Sends `request` to the relay session `caller` names, as `caller`.
pub async fn send(env: &Env, caller: &Caller, request: SessionRequest) -> Result<Response> {
    let Envelope { method, path, headers, body } = request.encode();
    let inner = Headers::new();
    for (name, value) in &headers {
        if name != CALLER_HEADER && name != "content-length" {
            inner.set(name, value)?;
        }
    }
    inner.set(CALLER_HEADER, &caller.encode())?;
    let mut init = RequestInit::new();
    init.with_method(Method::from(method)).with_headers(inner);
    if !body.is_empty() {
        init.with_body(Some(worker::js_sys::Uint8Array::from(body.as_slice()).into()));
    }
    let request = Request::new_with_init(&format!("https://session{path}"), &init)?;
    let name = object_name(&caller.tenant.id, &caller.session);
    env.durable_object(SESSIONS)?.id_from_name(&name)?.get_stub()?.fetch_with_request(request).await
}

/// The caller and the request a relay session's DO received, or why they cannot be read.
pub async fn receive(mut req: Request) -> Result<std::result::Result<(Caller, SessionRequest), HttpError>> {
    let header = req.headers().get(CALLER_HEADER)?.unwrap_or_default();
    let caller = Caller::decode(&header).map_err(worker::Error::RustError)?;
    let url = req.url()?;
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let headers = req.headers().entries().filter(|(name, _)| name != CALLER_HEADER).collect();
    let body = match req.method() {
        Method::Get | Method::Head => Vec::new(),
        _ => req.bytes().await?,
    };
    let envelope = Envelope { method: req.method().to_string(), path, headers, body };
    Ok(SessionRequest::decode(envelope).map(|request| (caller, request)))
}
