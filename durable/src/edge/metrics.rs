//! `GET /admin/metrics?tenant=<id>` (guarded by `ADMIN_TOKEN`): a tenant's metrics in the
//! Prometheus text format, merged from each of its relay sessions. A relay session's DO keeps
//! its own (`store::metrics`) and registers itself in KV (`relay-session:<tenant>:<name>`, see
//! `object.rs`) the first time it serves a request, so the tenant's sessions can be listed.

use super::http::{json, named, storage_unavailable};
use super::mcp::{session_stub, to_session};
use super::public_origin;
use super::tenants::{admin_refusal, by_id};
use relay_core::auth::session_name_ok;
use relay_core::error::ErrorName;
use relay_core::forward::Caller;
use relay_core::metrics::Snapshot;
use worker::{Env, Headers, Request, Response, Result};

/// The KV key a relay session registers under.
pub fn session_key(tenant_id: &str, session: &str) -> String {
    format!("relay-session:{tenant_id}:{session}")
}

pub async fn tenant(req: Request, env: &Env) -> Result<Response> {
    if let Some(refusal) = admin_refusal(&req, env)? {
        return Ok(refusal);
    }
    let url = req.url()?;
    let Some(tenant_id) = url.query_pairs().find(|(k, _)| k == "tenant").map(|(_, v)| v.into_owned()) else {
        return Ok(named(ErrorName::ValidationError, "which tenant: GET /admin/metrics?tenant=<id>"));
    };
    if !session_name_ok(&tenant_id) {
        return Ok(named(ErrorName::ValidationError, "tenant: not a tenant id"));
    }
    let sessions = match sessions(env, &tenant_id).await {
        Ok(sessions) => sessions,
        Err(e) => return Ok(storage_unavailable("KV", &e)),
    };
    let tenant = by_id(env, &tenant_id).await?;
    let mut merged = Snapshot::default();
    for session in sessions {
        let caller = Caller { tenant: tenant.clone(), session: session.clone(), origin: public_origin(env, &url)? };
        let mut answer = session_stub(env, &tenant_id, &session)?
            .fetch_with_request(to_session(&req, &caller, "/metrics", None)?)
            .await?;
        merged.merge(&answer.json::<Snapshot>().await?);
    }
    if req.headers().get("accept")?.is_some_and(|a| a.contains("application/json")) {
        return Ok(json(200, &serde_json::to_value(&merged)?));
    }
    let headers = Headers::new();
    headers.set("content-type", "text/plain; version=0.0.4; charset=utf-8")?;
    Ok(Response::ok(merged.prometheus(&tenant_id))?.with_headers(headers))
}

/// The names of the tenant's relay sessions that have served a request.
async fn sessions(env: &Env, tenant_id: &str) -> std::result::Result<Vec<String>, worker::kv::KvError> {
    let prefix = session_key(tenant_id, "");
    let kv = env.kv("KV_CONFIG").map_err(|e| worker::kv::KvError::InvalidKvStore(e.to_string()))?;
    let mut names = Vec::new();
    let mut cursor = None;
    loop {
        let mut list = kv.list().prefix(prefix.clone());
        if let Some(cursor) = cursor.take() {
            list = list.cursor(cursor);
        }
        let page = list.execute().await?;
        names.extend(page.keys.into_iter().filter_map(|k| k.name.strip_prefix(&prefix).map(str::to_owned)));
        if page.list_complete {
            return Ok(names);
        }
        cursor = page.cursor;
    }
}
