//! Tenant auth against `KV_CONFIG` (records cached in the isolate for
//! `auth::cache::TENANT_CACHE_MS`), and `POST /admin/tenants` (guarded by the `ADMIN_TOKEN`
//! secret) that creates a tenant and its API key.

use super::http::{error, json, named, own_origin, read_capped, storage_unavailable, unauthorized, with_header};
use super::now_ms;
use relay_core::auth::cache::TenantCache;
use relay_core::auth::{self, bearer, check_key_shape, mint_api_key, Tenant, TenantDefaults, SESSION_NAME_RULE};
use relay_core::error::ErrorName;
use serde::Deserialize;
use serde_json::json;
use std::cell::RefCell;
use worker::kv::{KvError, KvStore};
use worker::{Env, Request, Response, Result};

/// Body limit of `POST /admin/tenants`: a name and the tenant's defaults.
const ADMIN_BODY_MAX: usize = 64 * 1024;

/// The tenant whose key the request carries, or the answer to send instead: 401, or 503 when
/// KV fails.
pub async fn authenticate(req: &Request, env: &Env) -> Result<std::result::Result<Tenant, Response>> {
    let origin = own_origin(&req.url()?);
    let unauthorized = |message: &str| unauthorized(&origin, message);
    let header = req.headers().get("authorization")?;
    let Some(key) = bearer(header.as_deref()) else {
        return Ok(Err(unauthorized(&auth::ApiKeyError::Missing.to_string())));
    };
    if let Err(e) = check_key_shape(key) {
        return Ok(Err(unauthorized(&e.to_string())));
    }
    match cached(env, &Tenant::kv_key(key)).await {
        Ok(tenant) => Ok(tenant.ok_or_else(|| unauthorized("unknown API key"))),
        // We wrote the record: one that does not parse is our fault (500), not KV's.
        Err(KvError::Serialization(e)) => Err(e.into()),
        Err(e) => Ok(Err(storage_unavailable("KV", &e))),
    }
}

thread_local! {
    static TENANTS: RefCell<TenantCache> = RefCell::new(TenantCache::default());
}

/// The tenant record under `kv_key`: from this isolate's cache (`auth::cache`), else from KV.
/// An unknown key is not cached, so a tenant just created works at once.
async fn cached(env: &Env, kv_key: &str) -> std::result::Result<Option<Tenant>, KvError> {
    if let Some(tenant) = TENANTS.with(|cache| cache.borrow().get(kv_key, now_ms())) {
        return Ok(Some(tenant));
    }
    let tenant =
        env.kv("KV_CONFIG").map_err(|e| KvError::InvalidKvStore(e.to_string()))?.get(kv_key).json::<Tenant>().await?;
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

/// The record of the tenant with id `id` (a tab's token names only the id). A tenant created
/// before records were kept by id gets the default settings.
pub async fn by_id(env: &Env, id: &str) -> Result<Tenant> {
    let stored = cached(env, &Tenant::kv_id_key(id)).await?;
    Ok(stored.unwrap_or_else(|| Tenant { id: id.to_owned(), name: id.to_owned(), defaults: Default::default() }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewTenant {
    name: String,
    /// Lets the dev script re-seed the same tenant and key idempotently.
    id: Option<String>,
    key: Option<String>,
    #[serde(default)]
    defaults: TenantDefaults,
}

/// `POST /admin/tenants`: `{name, defaults?}` -> `{tenant, key}`. The key is shown only here.
pub async fn create(mut req: Request, env: &Env) -> Result<Response> {
    if let Some(refusal) = admin_refusal(&req, env)? {
        return Ok(refusal);
    }
    let body = match read_capped(&mut req, ADMIN_BODY_MAX).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    let body: NewTenant = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => return Ok(named(ErrorName::ValidationError, format!("tenant: {e}"))),
    };
    let key = body.key.unwrap_or_else(|| mint_api_key(&super::random()));
    if let Err(e) = check_key_shape(&key) {
        return Ok(named(ErrorName::ValidationError, e.to_string()));
    }
    let id = body.id.unwrap_or_else(|| format!("t_{}", hex::encode(super::random::<8>())));
    if !auth::session_name_ok(&id) {
        return Ok(named(ErrorName::ValidationError, format!("tenant id: {SESSION_NAME_RULE}")));
    }
    if let Err(why) = body.defaults.packages.validate() {
        return Ok(named(ErrorName::ValidationError, format!("defaults.{why}")));
    }
    let tenant = Tenant { id, name: body.name, defaults: body.defaults };
    if let Err(e) = save(&env.kv("KV_CONFIG")?, &key, &tenant).await {
        return Ok(storage_unavailable("KV", &e));
    }
    Ok(json(201, &json!({ "tenant": tenant, "key": key })))
}

/// Stores the tenant under its key's hash and under its id (how a tab's token finds it).
async fn save(kv: &KvStore, key: &str, tenant: &Tenant) -> std::result::Result<(), KvError> {
    kv.put(&Tenant::kv_id_key(&tenant.id), tenant)?.execute().await?;
    kv.put(&Tenant::kv_key(key), tenant)?.execute().await
}

/// The answer to an admin request that does not carry the `ADMIN_TOKEN` secret (404 when
/// the secret is not set at all: the admin routes are then off), or `None` when it does.
pub fn admin_refusal(req: &Request, env: &Env) -> Result<Option<Response>> {
    let Ok(admin) = env.secret("ADMIN_TOKEN") else {
        return Ok(Some(error(404, "NotFound", "admin endpoints are off: set the ADMIN_TOKEN secret")));
    };
    let presented = bearer(req.headers().get("authorization")?.as_deref()).unwrap_or_default().to_owned();
    if !constant_time_eq(presented.as_bytes(), admin.to_string().as_bytes()) {
        let message = "admin endpoints need `Authorization: Bearer <ADMIN_TOKEN>`";
        return Ok(Some(with_header(
            error(401, "Unauthorized", message),
            "www-authenticate",
            "Bearer realm=\"relay-edge-admin\"",
        )));
    }
    Ok(None)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
