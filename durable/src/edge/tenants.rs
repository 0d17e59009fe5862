//! Tenant auth against `KV_CONFIG` (records and key rings, `auth::keyring`, cached in the isolate
//! for `auth::cache::TENANT_CACHE_MS`; a key is admitted only as its tenant's ring says), and
//! the admin routes (guarded by the `ADMIN_TOKEN` secret):
//! `POST /admin/tenants` creates a tenant and its API key, `GET`/`PATCH /admin/tenants/<id>`
//! show and change its name and defaults (the rules are `relay_core::auth::admin`).

use super::http::{read_capped, unauthorized};
use crate::platform::bindings::{kv, public_origin, ADMIN_TOKEN};
use crate::platform::http::{error, json, refuse, storage_unavailable, with_header};
use crate::platform::{ledger, now_ms, random};
use relay_core::auth::cache::{RecordCache, TenantCache};
use relay_core::auth::keyring::{key_id, KeyEntry, KeyRefused, KeyRing, KeyState};
use relay_core::auth::{self, admin, bearer, check_key_shape, mint_api_key, Tenant};
use relay_core::error::ErrorName;
use relay_core::keys;
use serde_json::json;
use std::cell::RefCell;
use worker::kv::{KvError, KvStore};
use worker::{Env, Request, Response, Result};

/// Body limit of `POST /admin/tenants` and `PATCH /admin/tenants/<id>`: a name and defaults.
const ADMIN_BODY_MAX: usize = 64 * 1024;

/// The tenant whose key the request carries, or the answer to send instead: 401, or 503 when
/// KV fails.
pub async fn authenticate(req: &Request, env: &Env) -> Result<std::result::Result<Tenant, Response>> {
    let origin = public_origin(env, &req.url()?)?;
    let unauthorized = |message: &str| unauthorized(&origin, message);
    let header = req.headers().get("authorization")?;
    let Some(key) = bearer(header.as_deref()) else {
        return Ok(Err(unauthorized(&auth::ApiKeyError::Missing.to_string())));
    };
    if let Err(e) = check_key_shape(key) {
        return Ok(Err(unauthorized(&e.to_string())));
    }
    let hash = auth::key_hash(key);
    let admitted = match current(env, &keys::tenant_by_key(key)).await {
        Ok(Some(tenant)) => admitting_ring(env, &tenant.id, &hash).await.map(|ring| (tenant, ring)),
        Ok(None) => return Ok(Err(unauthorized("unknown API key"))),
        Err(e) => Err(e),
    };
    match admitted {
        Ok((tenant, ring)) => Ok(match ring.admits(&hash, now_ms()) {
            Ok(()) => Ok(tenant),
            Err(refused) => Err(unauthorized(&refused.to_string())),
        }),
        // We wrote the record: one that does not parse is our fault (500), not KV's.
        Err(KvError::Serialization(e)) => Err(e.into()),
        Err(e) => Ok(Err(storage_unavailable("KV", &e))),
    }
}

/// The tenant a key's record names, as its record by id has it now: that is the one
/// `PATCH /admin/tenants/<id>` changes (the key's record, which it cannot find without the
/// key, only says whose the key is). A tenant created before records were kept by id has
/// only the key's.
async fn current(env: &Env, kv_key: &str) -> std::result::Result<Option<Tenant>, KvError> {
    let Some(by_key) = cached(env, kv_key).await? else { return Ok(None) };
    Ok(Some(cached(env, &keys::tenant_by_id(&by_key.id)).await?.unwrap_or(by_key)))
}

thread_local! {
    static TENANTS: RefCell<TenantCache> = RefCell::new(TenantCache::default());
    static RINGS: RefCell<RecordCache<KeyRing>> = RefCell::new(RecordCache::default());
}

/// Tenant `id`'s key ring: from this isolate's cache, else from KV; a tenant made before rings
/// has the legacy ring (its keys unlisted and active).
pub async fn ring(env: &Env, id: &str) -> std::result::Result<KeyRing, KvError> {
    let kv_key = keys::tenant_keys(id);
    if let Some(ring) = RINGS.with(|cache| cache.borrow().get(&kv_key, now_ms())) {
        return Ok(ring);
    }
    let ring = stored_ring(&kv(env).map_err(|e| KvError::InvalidKvStore(e.to_string()))?, id).await?;
    remember_ring(id, &ring);
    Ok(ring)
}

/// Tenant `id`'s key ring to judge key `hash` by: the cached one, unless it does not list the
/// key (a key made since, by a rotation in another isolate): then the stored one, as an unknown
/// key record is read again rather than cached.
async fn admitting_ring(env: &Env, id: &str, hash: &str) -> std::result::Result<KeyRing, KvError> {
    let cached = ring(env, id).await?;
    if !matches!(cached.admits(hash, now_ms()), Err(KeyRefused::Unknown)) {
        return Ok(cached);
    }
    let stored = stored_ring(&kv(env).map_err(|e| KvError::InvalidKvStore(e.to_string()))?, id).await?;
    remember_ring(id, &stored);
    Ok(stored)
}

/// Tenant `id`'s key ring as stored (the legacy ring when there is none), parsed from its text
/// as `save_ring` writes it.
pub async fn stored_ring(kv: &KvStore, id: &str) -> std::result::Result<KeyRing, KvError> {
    match kv.get(&keys::tenant_keys(id)).text().await? {
        Some(text) => serde_json::from_str(&text).map_err(KvError::Serialization),
        None => Ok(KeyRing::legacy()),
    }
}

/// Stores tenant `id`'s key ring, and uses it in this isolate at once (others within
/// `auth::cache::TENANT_CACHE_MS`).
pub async fn save_ring(kv: &KvStore, id: &str, ring: &KeyRing) -> std::result::Result<(), KvError> {
    // As JSON text: the JS-value route would write the flattened states as empty objects.
    kv.put(&keys::tenant_keys(id), serde_json::to_string(ring).map_err(KvError::Serialization)?)?.execute().await?;
    remember_ring(id, ring);
    Ok(())
}

fn remember_ring(id: &str, ring: &KeyRing) {
    RINGS.with(|cache| cache.borrow_mut().put(&keys::tenant_keys(id), ring.clone(), now_ms()));
}

/// A new key of `tenant`, its ring entry and the key itself (shown once). The key's record
/// (`tenant:<hash>`) is stored; the ring is the caller's to store.
pub async fn new_key(kv: &KvStore, tenant: &Tenant) -> std::result::Result<(KeyEntry, String), KvError> {
    let key = mint_api_key(&random());
    put(kv, &keys::tenant_by_key(&key), tenant).await?;
    Ok((key_entry(&key), key))
}

/// The ring entry of a key made now.
fn key_entry(key: &str) -> KeyEntry {
    KeyEntry { id: key_id(&random()), hash: auth::key_hash(key), created_at_ms: now_ms(), state: KeyState::Active }
}

/// The tenant record under `kv_key`: from this isolate's cache (`auth::cache`), else from KV.
/// An unknown key is not cached, so a tenant just created works at once.
async fn cached(env: &Env, kv_key: &str) -> std::result::Result<Option<Tenant>, KvError> {
    if let Some(tenant) = TENANTS.with(|cache| cache.borrow().get(kv_key, now_ms())) {
        return Ok(Some(tenant));
    }
    let tenant = kv(env).map_err(|e| KvError::InvalidKvStore(e.to_string()))?.get(kv_key).json::<Tenant>().await?;
    if let Some(tenant) = &tenant {
        TENANTS.with(|cache| cache.borrow_mut().put(kv_key, tenant.clone(), now_ms()));
    }
    Ok(tenant)
}

/// The tenant whose key the request carries and the request's body, read up to `limit`; or the
/// answer to send instead (401, 503, 413).
pub async fn authenticated_body(
    req: &mut Request,
    env: &Env,
    limit: usize,
) -> Result<std::result::Result<(Tenant, Vec<u8>), Response>> {
    let tenant = match authenticate(req, env).await? {
        Ok(tenant) => tenant,
        Err(response) => return Ok(Err(response)),
    };
    Ok(read_capped(req, limit).await?.map(|body| (tenant, body)))
}

/// The record of the tenant with id `id`, if there is one.
pub async fn by_id(env: &Env, id: &str) -> Result<Option<Tenant>> {
    Ok(cached(env, &keys::tenant_by_id(id)).await?)
}

/// The tenant a signed token names (a tab's attach token or a run's token names only its id), or
/// a 401 if it has no record: its operator deleted it after the token was signed, and a token
/// must not bring a deleted tenant's relay session back, empty.
pub async fn token_tenant(env: &Env, id: &str) -> Result<std::result::Result<Tenant, Response>> {
    Ok(by_id(env, id).await?.ok_or_else(|| {
        let why = format!(
            "tenant {id} no longer exists (its operator deleted it), so tokens signed for it are refused: ask the operator for a tenant and key"
        );
        refuse(ErrorName::Unauthorized, why)
    }))
}

/// Drops tenant `id`'s record from this isolate's cache (it was just deleted); other isolates
/// see it gone within `auth::cache::TENANT_CACHE_MS`.
pub fn forget(id: &str) {
    TENANTS.with(|cache| cache.borrow_mut().forget(&keys::tenant_by_id(id)));
}

/// `POST /admin/tenants`: `{name, defaults?}` -> `{tenant, key}`. The key is shown only here.
pub async fn create(mut req: Request, env: &Env) -> Result<Response> {
    let body = match admin_body(&mut req, env).await? {
        Ok(body) => body,
        Err(refusal) => return Ok(refusal),
    };
    let fresh_id = format!("t_{}", hex::encode(random::<8>()));
    let (tenant, key) = match admin::new_tenant(&body, fresh_id.clone()) {
        Ok(created) => created,
        Err(why) => return Ok(refuse(ErrorName::ValidationError, why)),
    };
    let key = key.unwrap_or_else(|| mint_api_key(&random()));
    if let Err(e) = check_key_shape(&key) {
        return Ok(refuse(ErrorName::ValidationError, e.to_string()));
    }
    let kv = kv(env)?;
    if let Err(e) = save_new(&kv, &key, &tenant).await {
        return Ok(storage_unavailable("KV", &e));
    }
    // An id the admin chose may be a deleted tenant's, whose ledger stays erased until then.
    if tenant.id != fresh_id {
        ledger::revive(env, &tenant.id).await?;
    }
    remember(&tenant);
    Ok(json(201, &json!({ "tenant": tenant, "key": key })))
}

/// `GET /admin/tenants/<id>`: `{tenant}` (its name and defaults; never a key).
pub async fn show(req: Request, env: &Env, id: &str) -> Result<Response> {
    if let Some(refusal) = admin_refusal(&req, env)? {
        return Ok(refusal);
    }
    Ok(match stored(env, id).await? {
        Ok(tenant) => json(200, &json!({ "tenant": tenant })),
        Err(refusal) => refusal,
    })
}

/// `GET /admin/tenants/<id>/usage`: the tenant's quotas and what it used of each, from its
/// ledger (`relay_core::quota`) -> `{tenant, usage}`, the shape `relay://usage` shows the tenant.
pub async fn usage(req: Request, env: &Env, id: &str) -> Result<Response> {
    if let Some(refusal) = admin_refusal(&req, env)? {
        return Ok(refusal);
    }
    let tenant = match stored(env, id).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    Ok(match ledger::usage(env, &tenant).await? {
        Ok(usage) => json(200, &json!({ "tenant": id, "usage": usage })),
        Err(unavailable) => error(unavailable),
    })
}

/// `PATCH /admin/tenants/<id>` with a JSON merge patch of `{name?, defaults?}`: the tenant
/// changed, validated as `POST` validates a new one -> `{tenant}`. This isolate uses the new
/// record at once; others within `auth::cache::TENANT_CACHE_MS` (and KV's own propagation).
pub async fn patch(mut req: Request, env: &Env, id: &str) -> Result<Response> {
    let body = match admin_body(&mut req, env).await? {
        Ok(body) => body,
        Err(refusal) => return Ok(refusal),
    };
    let tenant = match stored(env, id).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let tenant = match tenant.patched(&body) {
        Ok(tenant) => tenant,
        Err(why) => return Ok(refuse(ErrorName::ValidationError, why)),
    };
    if let Err(e) = put(&kv(env)?, &keys::tenant_by_id(id), &tenant).await {
        return Ok(storage_unavailable("KV", &e));
    }
    remember(&tenant);
    Ok(json(200, &json!({ "tenant": tenant })))
}

/// The record of tenant `id` as stored (read past the cache: an admin edits what is there), or
/// 404 naming it.
pub async fn stored(env: &Env, id: &str) -> Result<std::result::Result<Tenant, Response>> {
    match kv(env)?.get(&keys::tenant_by_id(id)).json::<Tenant>().await {
        Ok(Some(tenant)) => Ok(Ok(tenant)),
        Ok(None) => {
            Ok(Err(refuse(ErrorName::NotFound, format!("there is no tenant {id:?}; POST /admin/tenants creates one"))))
        }
        Err(KvError::Serialization(e)) => Err(e.into()),
        Err(e) => Ok(Err(storage_unavailable("KV", &e))),
    }
}

/// An admin request's body, or the answer to send instead (401/404 without the admin token, 413).
async fn admin_body(req: &mut Request, env: &Env) -> Result<std::result::Result<Vec<u8>, Response>> {
    if let Some(refusal) = admin_refusal(req, env)? {
        return Ok(Err(refusal));
    }
    read_capped(req, ADMIN_BODY_MAX).await
}

/// Puts `tenant` into this isolate's cache under its id, so the next request here sees it.
fn remember(tenant: &Tenant) {
    TENANTS.with(|cache| cache.borrow_mut().put(&keys::tenant_by_id(&tenant.id), tenant.clone(), now_ms()));
}

/// Stores a tenant `POST` made, its key and its key ring. A tenant made again (its id given)
/// keeps the keys it had, so none is left out of its ring (a deletion finds its keys there).
async fn save_new(kv: &KvStore, key: &str, tenant: &Tenant) -> std::result::Result<(), KvError> {
    let existed = kv.get(&keys::tenant_by_id(&tenant.id)).text().await?.is_some();
    let ring = match existed {
        true => stored_ring(kv, &tenant.id).await?.admit(key_entry(key)),
        false => KeyRing::new(key_entry(key)),
    };
    save(kv, key, tenant).await?;
    save_ring(kv, &tenant.id, &ring).await
}

/// Stores the tenant under its key's hash and under its id (how a tab's token finds it, and the
/// record `PATCH` changes).
async fn save(kv: &KvStore, key: &str, tenant: &Tenant) -> std::result::Result<(), KvError> {
    put(kv, &keys::tenant_by_id(&tenant.id), tenant).await?;
    put(kv, &keys::tenant_by_key(key), tenant).await
}

async fn put(kv: &KvStore, kv_key: &str, tenant: &Tenant) -> std::result::Result<(), KvError> {
    kv.put(kv_key, tenant)?.execute().await
}

/// The answer to an admin request that does not carry the `ADMIN_TOKEN` secret (404 when
/// the secret is not set at all: the admin routes are then off), or `None` when it does.
pub fn admin_refusal(req: &Request, env: &Env) -> Result<Option<Response>> {
    let Ok(admin) = env.secret(ADMIN_TOKEN) else {
        return Ok(Some(refuse(ErrorName::NotFound, "admin endpoints are off: set the ADMIN_TOKEN secret")));
    };
    let presented = bearer(req.headers().get("authorization")?.as_deref()).unwrap_or_default().to_owned();
    if !constant_time_eq(presented.as_bytes(), admin.to_string().as_bytes()) {
        let message = "admin endpoints need `Authorization: Bearer <ADMIN_TOKEN>`";
        return Ok(Some(with_header(
            refuse(ErrorName::Unauthorized, message),
            "www-authenticate",
            "Bearer realm=\"relay-edge-admin\"",
        )));
    }
    Ok(None)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
