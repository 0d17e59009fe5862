//! A tenant's upstream MCP servers (core `upstream`): the admin routes that add, list and
//! remove them, and `POST /mcps-rpc`, through which code in a run calls their tools. The call
//! itself is made by the run's relay session DO, which keeps the audit chain and what it has
//! learned of each server's protocol era; this side authenticates the run and forwards.
//!
//! - `PUT /admin/tenants/<id>/upstreams/<name>` `{url, headers?, tools?}`: header values are
//!   sealed before they are stored and are never shown again;
//! - `GET /admin/tenants/<id>/upstreams`: the servers, header names only;
//! - `DELETE /admin/tenants/<id>/upstreams/<name>`.

use super::egress::to_run_session;
use super::http::read_capped;
use super::tenants::{admin_refusal, stored};
use super::Who;
use crate::platform::http::{json, refuse};
use crate::platform::kv::{save_upstreams, upstreams as load};
use crate::platform::random;
use crate::platform::signer::sealing_key;
use relay_core::error::ErrorName;
use relay_core::protocol::SessionRequest;
use relay_core::upstream::{Upstream, UpstreamSpec, MAX_UPSTREAMS};
use serde_json::json;
use worker::{Env, Request, Response, Result};

/// Body limit of `PUT .../upstreams/<name>` and of `POST /mcps-rpc`.
const BODY_MAX: usize = 1024 * 1024;

/// The answer to an admin request that may not go on: no admin token (`admin_refusal`), or a
/// tenant that does not exist (404 naming it: a server stored for no tenant would serve none).
async fn admin_check(req: &Request, env: &Env, tenant_id: &str) -> Result<Option<Response>> {
    if let Some(refusal) = admin_refusal(req, env)? {
        return Ok(Some(refusal));
    }
    Ok(stored(env, tenant_id).await?.err())
}

/// `PUT /admin/tenants/<id>/upstreams/<name>`: adds or replaces the server.
pub async fn put(mut req: Request, env: &Env, tenant_id: &str, name: &str) -> Result<Response> {
    if let Some(refusal) = admin_check(&req, env, tenant_id).await? {
        return Ok(refusal);
    }
    let body = match read_capped(&mut req, BODY_MAX).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    let spec = match serde_json::from_slice::<UpstreamSpec>(&body).map_err(|e| e.to_string()) {
        Ok(spec) => spec,
        Err(e) => return Ok(refuse(ErrorName::ValidationError, format!("upstream server: {e}"))),
    };
    if let Err(e) = spec.validate(name) {
        return Ok(refuse(ErrorName::ValidationError, e));
    }
    let mut upstreams = match load(env, tenant_id).await? {
        Ok(upstreams) => upstreams,
        Err(response) => return Ok(response),
    };
    upstreams.retain(|u| u.name != name);
    if upstreams.len() >= MAX_UPSTREAMS {
        let message = format!(
            "tenant {tenant_id} has {MAX_UPSTREAMS} upstream servers already, the most it may have: remove one first"
        );
        return Ok(refuse(ErrorName::ValidationError, message));
    }
    let upstream = spec.seal(name, tenant_id, &sealing_key(env)?, random::<12>);
    let view = upstream.view();
    upstreams.push(upstream);
    if let Some(unavailable) = save_upstreams(env, tenant_id, &upstreams).await? {
        return Ok(unavailable);
    }
    Ok(json(200, &view))
}

/// `GET /admin/tenants/<id>/upstreams`.
pub async fn list(req: Request, env: &Env, tenant_id: &str) -> Result<Response> {
    if let Some(refusal) = admin_check(&req, env, tenant_id).await? {
        return Ok(refusal);
    }
    match load(env, tenant_id).await? {
        Ok(upstreams) => {
            Ok(json(200, &json!({ "upstreams": upstreams.iter().map(Upstream::view).collect::<Vec<_>>() })))
        }
        Err(response) => Ok(response),
    }
}

/// `DELETE /admin/tenants/<id>/upstreams/<name>`.
pub async fn remove(req: Request, env: &Env, tenant_id: &str, name: &str) -> Result<Response> {
    if let Some(refusal) = admin_check(&req, env, tenant_id).await? {
        return Ok(refusal);
    }
    let mut upstreams = match load(env, tenant_id).await? {
        Ok(upstreams) => upstreams,
        Err(response) => return Ok(response),
    };
    let before = upstreams.len();
    upstreams.retain(|u| u.name != name);
    if upstreams.len() == before {
        return Ok(refuse(ErrorName::NotFound, format!("tenant {tenant_id} has no upstream server {name:?}")));
    }
    if let Some(unavailable) = save_upstreams(env, tenant_id, &upstreams).await? {
        return Ok(unavailable);
    }
    Ok(json(200, &json!({ "removed": name })))
}

/// `POST /mcps-rpc` with the run's token: forwarded to the run's relay session DO, which
/// checks the call against the tenant's servers and the run's policy and makes it.
pub async fn rpc(req: Request, env: &Env, who: &Who) -> Result<Response> {
    to_run_session(req, env, who, BODY_MAX, |claims, call| SessionRequest::McpsRpc {
        run: claims.run.clone(),
        cap: claims.cap.clone(),
        call,
    })
    .await
}
