//! One POST to a tenant's upstream MCP server, as the core's exchange asks for it
//! (`relay_core::upstream::client`): `redirect: manual` (a redirect is refused, naming where it
//! led), a deadline that aborts the fetch, the body read chunk by chunk up to a cap.

use super::sleep;
use futures::future::{select, Either};
use futures::StreamExt;
use relay_core::upstream::client::{Post, Received};
use std::pin::pin;
use worker::{AbortController, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Response, Result};

/// One POST to the upstream at `url`, given up after `timeout_ms`, its body read up to `body_max`.
pub async fn post(
    url: &str,
    headers: &[(String, String)],
    post: &Post,
    timeout_ms: u64,
    body_max: u64,
) -> std::result::Result<Received, String> {
    let controller = AbortController::default();
    let signal = controller.signal();
    let work = async {
        let request = outbound(url, headers, post).map_err(|e| e.to_string())?;
        let mut response =
            Fetch::Request(request).send_with_signal(&signal).await.map_err(|e| format!("no answer: {e}"))?;
        let status = response.status_code();
        if (300..400).contains(&status) {
            let location = response.headers().get("location").ok().flatten().unwrap_or_default();
            return Err(format!(
                "it redirected (HTTP {status}) to {location:?}: set the server's url to its final endpoint"
            ));
        }
        let headers: Vec<(String, String)> = response.headers().entries().collect();
        let body = read_body(&mut response, body_max).await?;
        Ok(Received { status, headers, body })
    };
    let (work, timer) = (pin!(work), pin!(sleep(timeout_ms)));
    match select(work, timer).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => {
            controller.abort();
            Err(format!("no answer within {timeout_ms} ms"))
        }
    }
}

fn outbound(url: &str, headers: &[(String, String)], post: &Post) -> Result<Request> {
    let all = Headers::new();
    // The tenant's headers cannot name the protocol's (the admin route refuses them).
    for (name, value) in headers.iter().chain(&post.headers) {
        all.set(name, value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(all)
        .with_redirect(RequestRedirect::Manual)
        .with_body(Some(worker::js_sys::Uint8Array::from(post.body.as_slice()).into()));
    Request::new_with_init(url, &init)
}

async fn read_body(response: &mut Response, max: u64) -> std::result::Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut stream = response.stream().map_err(|e| e.to_string())?;
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk.map_err(|_| "its answer broke off".to_owned())?);
        if body.len() as u64 > max {
            return Err(format!("its answer is larger than {max} bytes (network.maxBodyBytes of the run's policy)"));
        }
    }
    Ok(body)
}
