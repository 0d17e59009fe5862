//! The admin routes of a tenant's whole life (guarded by `ADMIN_TOKEN`, like `tenants.rs`):
//! list tenants, list, rotate and revoke a tenant's keys, export its audit chains, and delete
//! it with all its data. The rules are the core's (`auth::keyring`, `auth::lifecycle`); this is
//! their I/O over KV, R2 and the relay sessions' DOs.

use super::http::read_capped;
use super::tenants::{admin_refusal, forget, new_key, ring, save_ring, stored, stored_ring};
use crate::platform::bindings::{kv, public_origin};
use crate::platform::http::{json, refuse, storage_unavailable};
use crate::platform::kv::{list as kv_list, relay_sessions};
use crate::platform::{ledger, now_ms, r2, stub};
use relay_core::auth::keyring::{rotation_grace_ms, KeyRing, KeyView};
use relay_core::auth::lifecycle::{self, Deleted};
use relay_core::auth::{session_name_ok, Tenant, SESSION_NAME_RULE};
use relay_core::error::ErrorName;
use relay_core::keys;
use relay_core::oauth::{CodeRecord, Grant, TokenRecord};
use relay_core::protocol::{Caller, SessionRequest};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::collections::HashSet;
use worker::kv::{KvError, KvStore};
use worker::{Env, Request, Response, Result};

/// Tenants a page of `GET /admin/tenants` lists (each costs two KV reads).
const LIST_PAGE: u64 = 50;
/// Body limit of a rotation (`{"graceSeconds"}`).
const ROTATE_BODY_MAX: usize = 4 * 1024;

type Answer<T> = std::result::Result<T, Response>;

/// `GET /admin/tenants[?cursor=]`: `{tenants: [{id, name, keys}], cursor?}`, 50 a page; the
/// keys by their public ids and states, never a key or its hash.
pub async fn list(req: Request, env: &Env) -> Result<Response> {
    if let Some(refusal) = admin_refusal(&req, env)? {
        return Ok(refusal);
    }
    let cursor = req.url()?.query_pairs().find(|(k, _)| k == "cursor").map(|(_, v)| v.into_owned());
    let kv = kv(env)?;
    let mut page = kv.list().prefix(keys::tenant_by_id("")).limit(LIST_PAGE);
    if let Some(cursor) = cursor {
        page = page.cursor(cursor);
    }
    let page = match page.execute().await {
        Ok(page) => page,
        Err(e) => return Ok(storage_unavailable("KV", &e)),
    };
    let mut tenants = Vec::new();
    for name in page.keys.iter().map(|k| &k.name) {
        let tenant = match kv.get(name).json::<Tenant>().await {
            Ok(Some(tenant)) => tenant,
            Ok(None) => continue,
            Err(e) => return Ok(storage_unavailable("KV", &e)),
        };
        let keys = match ring(env, &tenant.id).await {
            Ok(ring) => ring.view(now_ms()),
            Err(e) => return Ok(storage_unavailable("KV", &e)),
        };
        tenants.push(json!({ "id": tenant.id, "name": tenant.name, "keys": keys }));
    }
    let cursor = (!page.list_complete).then_some(page.cursor).flatten();
    Ok(json(200, &json!({ "tenants": tenants, "cursor": cursor })))
}

/// The tenant `id` names (its record as stored) and its key ring, read past the cache; or the
/// refusal: 401 without the admin token, 400 for an id no tenant can have, 404, 503.
async fn tenant_and_ring(req: &Request, env: &Env, id: &str) -> Result<Answer<(Tenant, KeyRing)>> {
    if let Some(refusal) = admin_refusal(req, env)? {
        return Ok(Err(refusal));
    }
    if !session_name_ok(id) {
        return Ok(Err(refuse(ErrorName::ValidationError, format!("a tenant id is {SESSION_NAME_RULE}"))));
    }
    let tenant = match stored(env, id).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(Err(refusal)),
    };
    Ok(match stored_ring(&kv(env)?, id).await {
        Ok(ring) => Ok((tenant, ring)),
        Err(KvError::Serialization(e)) => return Err(e.into()),
        Err(e) => Err(storage_unavailable("KV", &e)),
    })
}

fn keys_answer(status: u16, keys: Vec<KeyView>, extra: Value) -> Response {
    let mut body = json!({ "keys": keys });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    json(status, &body)
}

/// `GET /admin/tenants/<id>/keys`: `{keys: [{id, state, createdAtMs?, retiresAtMs?, revokedAtMs?}]}`.
pub async fn keys(req: Request, env: &Env, id: &str) -> Result<Response> {
    Ok(match tenant_and_ring(&req, env, id).await? {
        Ok((_, ring)) => keys_answer(200, ring.view(now_ms()), Value::Null),
        Err(refusal) => refusal,
    })
}

/// `POST /admin/tenants/<id>/keys` with `{}` or `{"graceSeconds": n}`: a new key, shown once;
/// every key that was active keeps working for the grace (default one day), then is refused.
/// -> 201 `{key, keyId, keys}`.
pub async fn rotate(mut req: Request, env: &Env, id: &str) -> Result<Response> {
    let (tenant, mut ring) = match tenant_and_ring(&req, env, id).await? {
        Ok(found) => found,
        Err(refusal) => return Ok(refusal),
    };
    let body = match read_capped(&mut req, ROTATE_BODY_MAX).await? {
        Ok(body) => body,
        Err(refusal) => return Ok(refusal),
    };
    let grace_ms = match rotation_grace_ms(&body) {
        Ok(grace_ms) => grace_ms,
        Err(why) => return Ok(refuse(ErrorName::ValidationError, why)),
    };
    let kv = kv(env)?;
    let (entry, key) = match new_key(&kv, &tenant).await {
        Ok(made) => made,
        Err(e) => return Ok(storage_unavailable("KV", &e)),
    };
    let key_id = entry.id.clone();
    ring.rotate(entry, now_ms(), grace_ms);
    if let Err(e) = save_ring(&kv, id, &ring).await {
        return Ok(storage_unavailable("KV", &e));
    }
    Ok(keys_answer(201, ring.view(now_ms()), json!({ "key": key, "keyId": key_id })))
}

/// `DELETE /admin/tenants/<id>/keys/<keyId>`: that key is refused from now on (in other
/// isolates within `auth::cache::TENANT_CACHE_MS`) -> `{keys}`.
pub async fn revoke(req: Request, env: &Env, id: &str, key_id: &str) -> Result<Response> {
    let (_, mut ring) = match tenant_and_ring(&req, env, id).await? {
        Ok(found) => found,
        Err(refusal) => return Ok(refusal),
    };
    if let Err(why) = ring.revoke(key_id, now_ms()) {
        return Ok(refuse(ErrorName::NotFound, why));
    }
    if let Err(e) = save_ring(&kv(env)?, id, &ring).await {
        return Ok(storage_unavailable("KV", &e));
    }
    Ok(keys_answer(200, ring.view(now_ms()), Value::Null))
}

/// `GET /admin/tenants/<id>/audit`: `{tenant, relaySessions: [{session, head, records}]}`,
/// each relay session's whole chain (oldest first; `relay-capsule audit-verify` checks one).
pub async fn audit(req: Request, env: &Env, id: &str) -> Result<Response> {
    let (tenant, _) = match tenant_and_ring(&req, env, id).await? {
        Ok(found) => found,
        Err(refusal) => return Ok(refusal),
    };
    let origin = public_origin(env, &req.url()?)?;
    let sessions = match relay_sessions(env, id).await {
        Ok(sessions) => sessions,
        Err(e) => return Ok(storage_unavailable("KV", &e)),
    };
    let mut chains = Vec::new();
    for session in sessions {
        let caller = Caller { tenant: tenant.clone(), session: session.clone(), origin: origin.clone() };
        let mut answer = stub::send(env, &caller, SessionRequest::Audit).await?;
        if answer.status_code() != 200 {
            return Ok(answer);
        }
        let mut chain = answer.json::<Value>().await?;
        chain["session"] = json!(session);
        chains.push(chain);
    }
    Ok(json(200, &json!({ "tenant": id, "relaySessions": chains })))
}

/// `DELETE /admin/tenants/<id>`: the tenant and all its data (`auth::lifecycle`) ->
/// `{deleted: {<kind>: count}}`. Its keys are revoked first, so it cannot act meanwhile, and
/// its record goes last: a deletion cut short (a store failing) can be sent again.
pub async fn delete(req: Request, env: &Env, id: &str) -> Result<Response> {
    let (tenant, mut ring) = match tenant_and_ring(&req, env, id).await? {
        Ok(found) => found,
        Err(refusal) => return Ok(refusal),
    };
    let kv = kv(env)?;
    ring.revoke_all(now_ms());
    if let Err(e) = save_ring(&kv, id, &ring).await {
        return Ok(storage_unavailable("KV", &e));
    }
    let mut deleted = Deleted::default();
    let origin = public_origin(env, &req.url()?)?;
    let steps = async {
        erase_relay_sessions(env, &kv, &tenant, &origin, &mut deleted).await?;
        match ledger::erase(env, id).await? {
            Ok(had) => deleted.add("ledger", u64::from(had)),
            Err(status) => return Err(Step::Store("the tenant's ledger", format!("it answered {status}"))),
        }
        delete_oauth(env, &kv, id, &mut deleted).await?;
        for (kind, prefix) in keys::tenant_prefixes(id) {
            let count = r2::delete_prefix(env, &prefix).await.map_err(|e| Step::Store("R2", e.to_string()))?;
            deleted.add(kind, count);
        }
        delete_records(env, &kv, id, &ring, &mut deleted).await
    };
    match steps.await {
        Ok(()) => {
            forget(id);
            Ok(json(200, &json!({ "tenant": id, "deleted": deleted })))
        }
        Err(Step::Store(store, why)) => Ok(refuse(
            ErrorName::StorageUnavailable,
            format!("deleting tenant {id:?}: {store} failed ({why}); send the DELETE again to finish"),
        )),
        Err(Step::Failed(e)) => Err(e),
    }
}

/// Why a step of a deletion stopped: a store that failed (503, send it again), or another error.
enum Step {
    Store(&'static str, String),
    Failed(worker::Error),
}

impl From<KvError> for Step {
    fn from(e: KvError) -> Self {
        Step::Store("KV", e.to_string())
    }
}

impl From<worker::Error> for Step {
    fn from(e: worker::Error) -> Self {
        Step::Failed(e)
    }
}

/// Erases each of the tenant's relay sessions' storage, then its listing.
async fn erase_relay_sessions(
    env: &Env,
    kv: &KvStore,
    tenant: &Tenant,
    origin: &str,
    deleted: &mut Deleted,
) -> std::result::Result<(), Step> {
    for session in relay_sessions(env, &tenant.id).await? {
        let caller = Caller { tenant: tenant.clone(), session: session.clone(), origin: origin.to_owned() };
        let answer = stub::send(env, &caller, SessionRequest::Erase).await?;
        // 404: erased before, by a deletion cut short.
        if !matches!(answer.status_code(), 200 | 404) {
            return Err(Step::Store(
                "a relay session's storage",
                format!("{session} answered {}", answer.status_code()),
            ));
        }
        kv.delete(&keys::relay_session(&tenant.id, &session)).await?;
        deleted.add("relaySessions", 1);
    }
    Ok(())
}

/// Deletes the tenant's OAuth grants, and the tokens and codes of those grants.
async fn delete_oauth(env: &Env, kv: &KvStore, id: &str, deleted: &mut Deleted) -> std::result::Result<(), Step> {
    let mut grants = HashSet::new();
    for key in kv_list(env, keys::OAUTH_GRANT_PREFIX).await? {
        if let Some(grant) = read::<Grant>(kv, &key).await?.filter(|g| g.tenant == id) {
            grants.insert(grant.grant_id);
            kv.delete(&key).await?;
            deleted.add("oauthGrants", 1);
        }
    }
    for key in kv_list(env, keys::OAUTH_TOKEN_PREFIX).await? {
        if read::<TokenRecord>(kv, &key).await?.is_some_and(|t| grants.contains(&t.grant_id)) {
            kv.delete(&key).await?;
            deleted.add("oauthTokens", 1);
        }
    }
    for key in kv_list(env, keys::OAUTH_CODE_PREFIX).await? {
        if read::<CodeRecord>(kv, &key).await?.is_some_and(|c| grants.contains(&c.grant_id)) {
            kv.delete(&key).await?;
            deleted.add("oauthCodes", 1);
        }
    }
    Ok(())
}

/// A KV record, or none when it is missing or not of that type (another kind's record).
async fn read<T: DeserializeOwned>(kv: &KvStore, key: &str) -> std::result::Result<Option<T>, KvError> {
    match kv.get(key).json::<T>().await {
        Err(KvError::Serialization(_)) => Ok(None),
        other => other,
    }
}

/// Deletes the tenant's KV records: its keys' (those from before its ring found by a scan of
/// every key record), its upstream servers, its ring and, last, its record.
async fn delete_records(
    env: &Env,
    kv: &KvStore,
    id: &str,
    ring: &KeyRing,
    deleted: &mut Deleted,
) -> std::result::Result<(), Step> {
    if ring.has_unlisted() {
        for key in kv_list(env, &lifecycle::key_record_prefix()).await? {
            let record = read::<Tenant>(kv, &key).await?;
            if record.is_some_and(|t| lifecycle::unlisted_key_is_its(ring, &t.id, id, &key)) {
                kv.delete(&key).await?;
                deleted.add("keys", 1);
            }
        }
    }
    let upstreams = read::<Vec<Value>>(kv, &keys::upstreams(id)).await?.map_or(0, |u| u.len() as u64);
    for (kind, key) in lifecycle::kv_keys(id, ring) {
        kv.delete(&key).await?;
        deleted.add(kind, if kind == "upstreams" { upstreams } else { 1 });
    }
    Ok(())
}
