//! `GET /admin/metrics?tenant=<id>` (guarded by `ADMIN_TOKEN`): a tenant's metrics in the
//! Prometheus text format, merged from each of its relay sessions. A relay session's DO keeps
//! its own (`Store::metrics`) and registers itself in KV (`keys::relay_session`, see
//! `object.rs`) the first time it serves a request, so the tenant's sessions can be listed.
//! The text format adds the tenant's quotas and usage from its ledger (`relay_quota_*`).

use super::tenants::{admin_refusal, by_id};
use crate::platform::bindings::public_origin;
use crate::platform::http::{error, json, refuse, storage_unavailable};
use crate::platform::kv::relay_sessions;
use crate::platform::{ledger, stub};
use relay_core::auth::session_name_ok;
use relay_core::error::ErrorName;
use relay_core::metrics::{quota_gauges, Snapshot};
use relay_core::protocol::{Caller, SessionRequest};
use worker::{Env, Headers, Request, Response, Result};

pub async fn tenant(req: Request, env: &Env) -> Result<Response> {
    if let Some(refusal) = admin_refusal(&req, env)? {
        return Ok(refusal);
    }
    let url = req.url()?;
    let Some(tenant_id) = url.query_pairs().find(|(k, _)| k == "tenant").map(|(_, v)| v.into_owned()) else {
        return Ok(refuse(ErrorName::ValidationError, "which tenant: GET /admin/metrics?tenant=<id>"));
    };
    if !session_name_ok(&tenant_id) {
        return Ok(refuse(ErrorName::ValidationError, "tenant: not a tenant id"));
    }
    let sessions = match relay_sessions(env, &tenant_id).await {
        Ok(sessions) => sessions,
        Err(e) => return Ok(storage_unavailable("KV", &e)),
    };
    let Some(tenant) = by_id(env, &tenant_id).await? else {
        return Ok(refuse(
            ErrorName::NotFound,
            format!("there is no tenant {tenant_id:?}; GET /admin/tenants lists them"),
        ));
    };
    let mut merged = Snapshot::default();
    for session in sessions {
        let caller = Caller { tenant: tenant.clone(), session: session.clone(), origin: public_origin(env, &url)? };
        let mut answer = stub::send(env, &caller, SessionRequest::Metrics).await?;
        merged.merge(&answer.json::<Snapshot>().await?);
    }
    if req.headers().get("accept")?.is_some_and(|a| a.contains("application/json")) {
        return Ok(json(200, &serde_json::to_value(&merged)?));
    }
    let usage = match ledger::usage(env, &tenant).await? {
        Ok(usage) => usage,
        Err(unavailable) => return Ok(error(unavailable)),
    };
    let headers = Headers::new();
    headers.set("content-type", "text/plain; version=0.0.4; charset=utf-8")?;
    let text = merged.prometheus(&tenant_id) + &quota_gauges(&tenant_id, &usage);
    Ok(Response::ok(text)?.with_headers(headers))
}
