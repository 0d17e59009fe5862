//! KV (`KV_CONFIG`) records the relay session and the Worker both read: a tenant's upstream
//! MCP servers, and the relay sessions listed under their tenant (keys: `relay_core::keys`).

use super::bindings::kv;
use super::http::storage_unavailable;
use relay_core::keys;
use relay_core::upstream::Upstream;
use worker::kv::KvError;
use worker::{Env, Response, Result};

/// The tenant's upstream servers (none when it has not set any), or the 503 when KV fails.
pub async fn upstreams(env: &Env, tenant_id: &str) -> Result<std::result::Result<Vec<Upstream>, Response>> {
    match kv(env)?.get(&keys::upstreams(tenant_id)).json::<Vec<Upstream>>().await {
        Ok(upstreams) => Ok(Ok(upstreams.unwrap_or_default())),
        // We wrote the record: one that does not parse is our fault (500), not KV's.
        Err(KvError::Serialization(e)) => Err(e.into()),
        Err(e) => Ok(Err(storage_unavailable("KV", &e))),
    }
}

/// Stores the tenant's upstream servers; the 503 when KV fails.
pub async fn save_upstreams(env: &Env, tenant_id: &str, upstreams: &[Upstream]) -> Result<Option<Response>> {
    match kv(env)?.put(&keys::upstreams(tenant_id), upstreams)?.execute().await {
        Ok(()) => Ok(None),
        Err(e) => Ok(Some(storage_unavailable("KV", &e))),
    }
}

/// Lists relay session `session` under its tenant, so the tenant's metrics can find it.
pub async fn register_relay_session(env: &Env, tenant_id: &str, session: &str) -> Result<()> {
    kv(env)?.put(&keys::relay_session(tenant_id, session), "")?.execute().await.map_err(worker::Error::from)
}

/// The names of the tenant's relay sessions that have served a request.
pub async fn relay_sessions(env: &Env, tenant_id: &str) -> std::result::Result<Vec<String>, KvError> {
    let prefix = keys::relay_session(tenant_id, "");
    let kv = kv(env).map_err(|e| KvError::InvalidKvStore(e.to_string()))?;
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
