//! Tenant auth against `KV_CONFIG`, and `POST /admin/tenants` (guarded by the `ADMIN_TOKEN`
//! secret) that creates a tenant and its API key.

use super::http::{error, json, with_header};
use crate::auth::tenant::hex;
use crate::auth::{self, bearer, check_key_shape, mint_api_key, Tenant, TenantDefaults};
use serde::Deserialize;
use serde_json::json;
use worker::{Env, Request, Response, Result};

/// The tenant whose key the request carries, or the 401 to send.
pub async fn authenticate(req: &Request, env: &Env) -> Result<std::result::Result<Tenant, Response>> {
    let header = req.headers().get("authorization")?;
    let Some(key) = bearer(header.as_deref()) else {
        return Ok(Err(unauthorized(&auth::ApiKeyError::Missing.to_string())));
    };
    if let Err(e) = check_key_shape(key) {
        return Ok(Err(unauthorized(&e.to_string())));
    }
    let tenant = env.kv("KV_CONFIG")?.get(&Tenant::kv_key(key)).json::<Tenant>().await?;
    Ok(tenant.ok_or_else(|| unauthorized("unknown API key")))
}

/// The record of the tenant with id `id` (a tab's token names only the id). A tenant created
/// before records were kept by id gets the default settings.
pub async fn by_id(env: &Env, id: &str) -> Result<Tenant> {
    let stored = env.kv("KV_CONFIG")?.get(&Tenant::kv_id_key(id)).json::<Tenant>().await?;
    Ok(stored.unwrap_or_else(|| Tenant { id: id.to_owned(), name: id.to_owned(), defaults: Default::default() }))
}

fn unauthorized(message: &str) -> Response {
    let challenge = "Bearer realm=\"relay-edge\", error=\"invalid_token\"";
    with_header(error(401, "Unauthorized", message), "www-authenticate", challenge)
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
    let Ok(admin) = env.secret("ADMIN_TOKEN") else {
        return Ok(error(404, "NotFound", "admin endpoints are off: set the ADMIN_TOKEN secret"));
    };
    let presented = bearer(req.headers().get("authorization")?.as_deref()).unwrap_or_default().to_owned();
    if !constant_time_eq(presented.as_bytes(), admin.to_string().as_bytes()) {
        return Ok(unauthorized("admin endpoints need `Authorization: Bearer <ADMIN_TOKEN>`"));
    }
    let body: NewTenant = match serde_json::from_slice(&req.bytes().await?) {
        Ok(body) => body,
        Err(e) => return Ok(error(400, "ValidationError", format!("tenant: {e}"))),
    };
    let key = body.key.unwrap_or_else(|| mint_api_key(&super::random()));
    if let Err(e) = check_key_shape(&key) {
        return Ok(error(400, "ValidationError", e.to_string()));
    }
    let id = body.id.unwrap_or_else(|| format!("t_{}", hex(&super::random::<8>())));
    if !auth::session_name_ok(&id) {
        return Ok(error(400, "ValidationError", "tenant id: 1 to 64 of A-Z a-z 0-9 - _"));
    }
    let tenant = Tenant { id, name: body.name, defaults: body.defaults };
    let kv = env.kv("KV_CONFIG")?;
    kv.put(&Tenant::kv_id_key(&tenant.id), &tenant)?.execute().await?;
    kv.put(&Tenant::kv_key(&key), &tenant)?.execute().await?;
    Ok(json(201, &json!({ "tenant": tenant, "key": key })))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
