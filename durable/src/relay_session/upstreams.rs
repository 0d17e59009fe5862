//! The relay session's side of the tenant's upstream MCP servers (core `upstream`):
//!
//! - `/mcps-rpc`: a call from code in one of this session's runs, while the run runs. It is
//!   checked against the tenant's servers and the run's `policy.mcps`, made with the server's
//!   sealed headers opened only here, and audited either way (an `upstream_call` record with
//!   the result's size and hash, or a `policy_denial`).
//! - `/mcps`: the `/mcps` tree (each tool's schema, a `.d.ts` per server) that a tab writes
//!   into its workspace, listed from the servers and kept for [`TREE_TTL_MS`].
//!
//! What each server's protocol era turned out to be (and its legacy session) is kept in
//! [`Shared`], so only the first call probes.

use super::shared::Shared;
use crate::platform::http::{json, refuse};
use crate::platform::kv::upstreams as load;
use crate::platform::r2::capsule_policy;
use crate::platform::signer::sealing_key;
use crate::platform::{now_ms, sleep};
use futures::future::{select, Either};
use futures::StreamExt;
use relay_core::audit::Scope;
use relay_core::error::ErrorName;
use relay_core::protocol::Caller;
use relay_core::upstream::client::{Exchange, Next, Post, Received};
use relay_core::upstream::redact::Redactor;
use relay_core::upstream::tree::{self, Listing};
use relay_core::upstream::{authorize, RpcCall, Upstream};
use serde_json::{json, Value};
use std::pin::pin;
use std::rc::Rc;
use worker::{AbortController, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Response, Result};

/// How long a call to an upstream may take at most (the run's own timeout may be shorter).
const CALL_TIMEOUT_MS: u64 = 30_000;
/// How long listing one server's tools may take.
const LIST_TIMEOUT_MS: u64 = 10_000;
/// Largest answer read from an upstream while listing its tools.
const LIST_BODY_MAX: u64 = 4 * 1024 * 1024;
/// Most pages of `tools/list` read from one server.
const LIST_PAGES_MAX: usize = 10;
/// How long a listed `/mcps` tree is served before the servers are listed again.
pub const TREE_TTL_MS: u64 = 60_000;
/// Most POSTs one exchange makes (a legacy server's handshake, a reopened session).
const ROUND_TRIPS_MAX: usize = 6;

/// A call of run `run` (capsule `cap`; the Worker checked the run token that names both).
pub async fn call(shared: Rc<Shared>, caller: &Caller, run: String, cap: &str, body: &[u8]) -> Result<Response> {
    if !shared.has_run(&run) {
        let message = format!("run {run} has ended: code can call upstream MCP servers only while its run runs");
        return Ok(refuse(ErrorName::Conflict, message));
    }
    let call = match RpcCall::parse(body) {
        Ok(call) => call,
        Err(e) => return Ok(refuse(ErrorName::ValidationError, e)),
    };
    let tenant = &caller.tenant.id;
    let (upstreams, policy) = match (load(&shared.env, tenant).await?, capsule_policy(&shared.env, tenant, cap).await?)
    {
        (Ok(upstreams), Ok(policy)) => (upstreams, policy),
        (Err(response), _) | (_, Err(response)) => return Ok(response),
    };
    let scope = Scope { ts_ms: now_ms(), tenant: tenant.clone(), relay_session: caller.session.clone(), run_id: run };
    let store = shared.store();
    let upstream = match authorize(&upstreams, policy.mcps.as_deref(), &call) {
        Ok(upstream) => upstream,
        Err(refusal) => {
            let name = refusal.name.as_str();
            shared.persisted("metrics", store.update_metrics(|m| m.observe_denial("mcps-rpc")));
            let record = scope.policy_denial("mcps-rpc", &call.target(), name, &refusal.message);
            shared.audited("an upstream call's refusal", store.append_record(record).map(Some));
            return Ok(refuse(refusal.name, refusal.message));
        }
    };
    let params = Value::Object(call.params.clone());
    let limits =
        Limits { timeout_ms: policy.limits.timeout_ms.min(CALL_TIMEOUT_MS), body_max: policy.network.max_body_bytes };
    let arguments = json!({ "name": call.tool, "arguments": params });
    let result = exchange(&shared, caller, upstream, "tools/call", arguments, limits).await;
    let duration_ms = now_ms().saturating_sub(scope.ts_ms);
    let outcome = if result.is_ok() { "ok" } else { ErrorName::UpstreamFailed.as_str() };
    shared.persisted("metrics", store.update_metrics(|m| m.observe_upstream_call(&call.mcp, outcome)));
    match result {
        Ok(result) => {
            let body = serde_json::to_vec(&result)?;
            let record = scope.upstream_call(&call.target(), &params, duration_ms, Ok(&body));
            shared.audited("an upstream call", store.append_record(record).map(Some));
            let headers = Headers::new();
            headers.set("content-type", "application/json")?;
            Ok(Response::from_bytes(body)?.with_headers(headers))
        }
        Err(why) => {
            let failed = ErrorName::UpstreamFailed;
            let record = scope.upstream_call(&call.target(), &params, duration_ms, Err(failed.as_str()));
            shared.audited("an upstream call", store.append_record(record).map(Some));
            let message = format!("upstream MCP server {:?}, tool {:?}: {why}", call.mcp, call.tool);
            Ok(refuse(failed, message))
        }
    }
}

/// The `/mcps` tree: `{files: [{path, text}], listedAt}`, the tree of every server's tools.
pub async fn tree(shared: Rc<Shared>, caller: &Caller) -> Result<Response> {
    if let Some(tree) = shared.mcps_tree(now_ms(), TREE_TTL_MS) {
        return Ok(json(200, &tree));
    }
    let upstreams = match load(&shared.env, &caller.tenant.id).await? {
        Ok(upstreams) => upstreams,
        Err(response) => return Ok(response),
    };
    let mut listed = Vec::new();
    for upstream in &upstreams {
        let tools = list_tools(&shared, caller, upstream).await.map(|tools| allowed(upstream, tools));
        listed.push((upstream.name.as_str(), tools));
    }
    let listings: Vec<Listing> = listed
        .iter()
        .map(|(server, tools)| Listing { server, tools: tools.as_deref().map_err(Clone::clone) })
        .collect();
    let files: Vec<Value> =
        tree::files(&listings).into_iter().map(|(path, text)| json!({ "path": path, "text": text })).collect();
    let tree = json!({ "files": files, "listedAt": now_ms() });
    shared.keep_mcps_tree(now_ms(), tree.clone());
    Ok(json(200, &tree))
}

/// The server's tools, every page of them.
async fn list_tools(shared: &Shared, caller: &Caller, upstream: &Upstream) -> std::result::Result<Vec<Value>, String> {
    let limits = Limits { timeout_ms: LIST_TIMEOUT_MS, body_max: LIST_BODY_MAX };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..LIST_PAGES_MAX {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = exchange(shared, caller, upstream, "tools/list", params, limits).await?;
        tools.extend(page["tools"].as_array().cloned().unwrap_or_default());
        cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// The tools the tenant lets code call (the server's record may name only some).
fn allowed(upstream: &Upstream, tools: Vec<Value>) -> Vec<Value> {
    match &upstream.tools {
        None => tools,
        Some(names) => {
            tools.into_iter().filter(|t| t["name"].as_str().is_some_and(|n| names.iter().any(|a| a == n))).collect()
        }
    }
}

#[derive(Clone, Copy)]
struct Limits {
    timeout_ms: u64,
    body_max: u64,
}

/// One MCP request to `upstream`, in whatever era it speaks (what was learned is kept).
async fn exchange(
    shared: &Shared,
    caller: &Caller,
    upstream: &Upstream,
    method: &str,
    params: Value,
    limits: Limits,
) -> std::result::Result<Value, String> {
    let headers = upstream.open_headers(&caller.tenant.id, &sealing_key(&shared.env).map_err(|e| e.to_string())?)?;
    // The exchange redacts every answer; this redacts what the Worker says of a failed POST
    // (a redirect's Location, a fetch error), which can quote the upstream too.
    let redactor = Redactor::of(&headers);
    let era_key = format!("{}\n{}", upstream.name, upstream.url);
    let mut exchange = Exchange::new(method, params, shared.upstream_era(&era_key), redactor.clone());
    let deadline = now_ms() + limits.timeout_ms;
    for _ in 0..ROUND_TRIPS_MAX {
        let remaining = deadline.saturating_sub(now_ms());
        let answer = post(&upstream.url, &headers, exchange.post(), remaining, limits.body_max)
            .await
            .map_err(|why| redactor.text(&why))?;
        let next = exchange.answer(&answer);
        shared.learn_upstream_era(&era_key, exchange.known().clone());
        if let Next::Done(result) = next {
            return result;
        }
    }
    Err(format!("it needed more than {ROUND_TRIPS_MAX} requests to answer one"))
}

/// One POST to the upstream, given up after `timeout_ms`, its body read up to `body_max`.
async fn post(
    url: &str,
    headers: &[(String, String)],
    post: Post,
    timeout_ms: u64,
    body_max: u64,
) -> std::result::Result<Received, String> {
    let controller = AbortController::default();
    let signal = controller.signal();
    let work = async {
        let request = outbound(url, headers, &post).map_err(|e| e.to_string())?;
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
