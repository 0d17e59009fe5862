//! KV (`KV_CONFIG`) records the relay session and the Worker both read: a tenant's upstream
//! MCP servers, and the relay sessions listed under their tenant (keys: `relay_core::keys`).
//! [`Kv`] is the core's `Records` over it.

use super::bindings::kv;
use super::http::{error, storage_unavailable};
use relay_core::keys;
use relay_core::stores::{self, Records, StorageError};
use relay_core::upstream::Upstream;
use worker::kv::KvError;
use worker::{Env, Response, Result};

/// The Worker's KV namespace. A failure is logged here, with its cause.
pub struct Kv(pub Env);

impl Records for Kv {
    async fn get(&self, key: &str) -> std::result::Result<Option<Vec<u8>>, StorageError> {
        let failed = |e: &dyn std::fmt::Display| {
            worker::console_error!("KV failed: {e}");
            StorageError(e.to_string())
        };
        let store = kv(&self.0).map_err(|e| failed(&e))?;
        store.get(key).bytes().await.map_err(|e| failed(&e))
    }
}

/// The tenant's upstream servers (none when it has not set any), or the refusal to answer with.
pub async fn upstreams(env: &Env, tenant_id: &str) -> Result<std::result::Result<Vec<Upstream>, Response>> {
    Ok(stores::upstreams(&Kv(env.clone()), tenant_id).await.map_err(error))
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
    Ok(list(env, &prefix).await?.into_iter().filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned)).collect())
}

/// Every KV key starting with `prefix`, page by page.
pub async fn list(env: &Env, prefix: &str) -> std::result::Result<Vec<String>, KvError> {
    let kv = kv(env).map_err(|e| KvError::InvalidKvStore(e.to_string()))?;
    let mut names = Vec::new();
    let mut cursor = None;
    loop {
        let mut list = kv.list().prefix(prefix.to_owned());
        if let Some(cursor) = cursor.take() {
            list = list.cursor(cursor);
        }
        let page = list.execute().await?;
        names.extend(page.keys.into_iter().map(|k| k.name));
        if page.list_complete {
            return Ok(names);
        }
        cursor = page.cursor;
    }
}
