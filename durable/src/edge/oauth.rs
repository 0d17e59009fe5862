//! OAuth 2.1 for hosted MCP clients (rules in `relay_core::oauth`): discovery documents,
//! dynamic client registration, the authorization endpoint and its consent page
//! (`authorize.html`, where the person proves they hold the tenant with its API key and picks
//! the relay session), the token and revocation endpoints, and checking an access token on
//! `/mcp`. Clients, codes, grants and tokens live in `KV_CONFIG` under `oauth:` keys; codes and
//! tokens only as their sha256, each with a KV expiry. (KV is eventually consistent across
//! locations: a code exchanged at two places within seconds could pass both single-use checks,
//! as with `@cloudflare/workers-oauth-provider`, which stores them the same way.)

use super::http::{json, own_origin, read_capped, storage_unavailable, with_header};
use super::random;
use super::tenants::{authenticate, by_id};
use relay_core::auth::{session_name_ok, Tenant, SESSION_NAME_RULE};
use relay_core::oauth::records::{is_metadata_url, SingleUse};
use relay_core::oauth::{
    self, authorization_server_metadata, protected_resource_metadata, resource_id, AuthRequest, Client, CodeRecord,
    Grant, OAuthError, Registration, TokenKind, TokenRecord, TokenRequest,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use worker::kv::KvStore;
use worker::{Env, Fetch, Request, Response, Result};

/// Largest body of the OAuth endpoints, and of a client metadata document.
const BODY_MAX: usize = 64 * 1024;

fn now_s() -> u64 {
    super::now_ms() / 1000
}

fn origin(req: &Request) -> Result<String> {
    Ok(own_origin(&req.url()?))
}

fn oauth_error(e: &OAuthError) -> Response {
    with_header(json(e.status, &e.to_json()), "cache-control", "no-store")
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`.
pub fn resource_metadata(req: &Request) -> Result<Response> {
    Ok(json(200, &protected_resource_metadata(&origin(req)?)))
}

/// `GET /.well-known/oauth-authorization-server`.
pub fn server_metadata(req: &Request) -> Result<Response> {
    Ok(json(200, &authorization_server_metadata(&origin(req)?)))
}

async fn get<T: DeserializeOwned>(kv: &KvStore, key: &str) -> Result<Option<T>> {
    kv.get(key).json::<T>().await.map_err(|e| worker::Error::RustError(format!("KV {key}: {e}")))
}

async fn put<T: Serialize>(kv: &KvStore, key: &str, value: &T, ttl_s: u64) -> Result<()> {
    // KV refuses expirations under a minute.
    let put = kv.put(key, value)?.expiration_ttl(ttl_s.max(60));
    put.execute().await.map_err(|e| worker::Error::RustError(format!("KV {key}: {e}")))
}

fn kv(env: &Env) -> Result<KvStore> {
    env.kv("KV_CONFIG")
}

/// `POST /oauth/register` (RFC 7591): a public client, PKCE only.
pub async fn register(mut req: Request, env: &Env) -> Result<Response> {
    let body = match read_capped(&mut req, BODY_MAX).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    let registration: Registration = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return Ok(oauth_error(&OAuthError::new("invalid_client_metadata", e.to_string()))),
    };
    let client = match registration.into_client(&oauth::mint("rc_", &random())) {
        Ok(client) => client,
        Err(e) => return Ok(oauth_error(&e)),
    };
    if let Err(e) = kv(env)?.put(&format!("oauth:client:{}", client.client_id), &client)?.execute().await {
        return Ok(storage_unavailable("KV", &e));
    }
    Ok(json(
        201,
        &json!({
            "client_id": client.client_id, "client_id_issued_at": now_s(), "client_name": client.client_name,
            "redirect_uris": client.redirect_uris, "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        }),
    ))
}

/// The client `client_id` names: registered here, or described by its metadata document.
async fn client(env: &Env, client_id: &str) -> Result<std::result::Result<Client, OAuthError>> {
    let dev = env.var("RELAY_ALLOW_LOCALHOST").is_ok_and(|v| v.to_string() == "1");
    if is_metadata_url(client_id, dev) {
        return metadata_document(client_id).await;
    }
    Ok(get::<Client>(&kv(env)?, &format!("oauth:client:{client_id}"))
        .await?
        .ok_or_else(|| OAuthError::new("invalid_client", format!("unknown client_id {client_id}: register it first"))))
}

async fn metadata_document(url: &str) -> Result<std::result::Result<Client, OAuthError>> {
    let failed =
        |why: String| Ok(Err(OAuthError::new("invalid_client", format!("client metadata document {url}: {why}"))));
    let mut answer = match Fetch::Url(url.parse()?).send().await {
        Ok(answer) if answer.status_code() == 200 => answer,
        Ok(answer) => return failed(format!("answered HTTP {}", answer.status_code())),
        Err(e) => return failed(e.to_string()),
    };
    let bytes = answer.bytes().await?;
    if bytes.len() > BODY_MAX {
        return failed(format!("larger than {BODY_MAX} bytes"));
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(document) => Ok(Client::from_metadata_document(url, &document)),
        Err(e) => failed(e.to_string()),
    }
}

/// `GET /oauth/authorize`: checks the request, then shows the consent page with it. Until the
/// redirect URI is known to be the client's, an error is shown here, never sent there.
pub async fn authorize(req: Request, env: &Env) -> Result<Response> {
    let url = req.url()?;
    let params: Map<String, Value> =
        url.query_pairs().map(|(k, v)| (k.into_owned(), Value::String(v.into_owned()))).collect();
    let request: AuthRequest = match serde_json::from_value(Value::Object(params)) {
        Ok(request) => request,
        Err(e) => return Ok(oauth_error(&OAuthError::new("invalid_request", e.to_string()))),
    };
    let client = match client(env, &request.client_id).await? {
        Ok(client) => client,
        Err(e) => return Ok(oauth_error(&e)),
    };
    match request.check(&client, &resource_id(&origin(&req)?)) {
        Ok(()) => Response::redirect(url.join(&format!("/authorize?{}", url.query().unwrap_or("")))?),
        Err((false, e)) => Ok(oauth_error(&e)),
        Err((true, e)) => {
            Response::redirect(request.redirect(&[("error", e.error), ("error_description", &e.description)]).parse()?)
        }
    }
}

/// The consent page's POST: the authorization request, the relay session, and whether the
/// person approved; the tenant's API key in `Authorization`.
#[derive(Deserialize)]
struct Consent {
    request: AuthRequest,
    session: String,
    approve: bool,
}

/// `POST /oauth/authorize` from the consent page: `{redirect}`, where to send the browser.
pub async fn consent(mut req: Request, env: &Env) -> Result<Response> {
    let tenant = match authenticate(&req, env).await? {
        Ok(tenant) => tenant,
        Err(response) => return Ok(response),
    };
    let body = match read_capped(&mut req, BODY_MAX).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    let Consent { request, session, approve } = match serde_json::from_slice(&body) {
        Ok(consent) => consent,
        Err(e) => return Ok(oauth_error(&OAuthError::new("invalid_request", e.to_string()))),
    };
    if !session_name_ok(&session) {
        return Ok(oauth_error(&OAuthError::new("invalid_request", format!("session: {SESSION_NAME_RULE}"))));
    }
    let client = match client(env, &request.client_id).await? {
        Ok(client) => client,
        Err(e) => return Ok(oauth_error(&e)),
    };
    let origin = origin(&req)?;
    let resource = resource_id(&origin);
    if let Err((_, e)) = request.check(&client, &resource) {
        return Ok(oauth_error(&e));
    }
    if !approve {
        return Ok(json(200, &json!({ "redirect": request.redirect(&[("error", "access_denied")]) })));
    }
    let code = grant(env, &tenant, &session, &request, &resource).await?;
    Ok(json(200, &json!({ "redirect": request.redirect(&[("code", &code), ("iss", &origin)]) })))
}

/// Stores a grant and its authorization code; returns the code.
async fn grant(env: &Env, tenant: &Tenant, session: &str, request: &AuthRequest, resource: &str) -> Result<String> {
    let kv = kv(env)?;
    let grant = Grant {
        grant_id: oauth::mint("rg_", &random()),
        tenant: tenant.id.clone(),
        session: session.to_owned(),
        client_id: request.client_id.clone(),
        resource: resource.to_owned(),
    };
    put(&kv, &grant_key(&grant.grant_id), &grant, oauth::REFRESH_TTL_S).await?;
    let code = oauth::mint("rac_", &random());
    let record = CodeRecord {
        grant_id: grant.grant_id,
        client_id: request.client_id.clone(),
        redirect_uri: request.redirect_uri.clone(),
        code_challenge: request.code_challenge.clone().unwrap_or_default(),
        resource: resource.to_owned(),
        exp: now_s() + oauth::CODE_TTL_S,
        used: false,
    };
    put(&kv, &code_key(&code), &record, oauth::CODE_TTL_S).await?;
    Ok(code)
}

fn grant_key(grant_id: &str) -> String {
    format!("oauth:grant:{grant_id}")
}

fn code_key(code: &str) -> String {
    format!("oauth:code:{}", oauth::token_hash(code))
}

fn token_key(token: &str) -> String {
    format!("oauth:token:{}", oauth::token_hash(token))
}

/// The form fields of a token or revocation request.
async fn form<T: DeserializeOwned>(req: &mut Request) -> Result<std::result::Result<T, Response>> {
    let body = match read_capped(req, BODY_MAX).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(Err(too_large)),
    };
    let fields: Map<String, Value> =
        url::form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), Value::String(v.into_owned()))).collect();
    Ok(serde_json::from_value(Value::Object(fields))
        .map_err(|e| oauth_error(&OAuthError::new("invalid_request", format!("form: {e}")))))
}

/// `POST /oauth/token`: `authorization_code` (with the PKCE verifier) or `refresh_token`
/// (rotated: the old one stops working, and presenting it again revokes the grant).
pub async fn token(mut req: Request, env: &Env) -> Result<Response> {
    let request: TokenRequest = match form(&mut req).await? {
        Ok(request) => request,
        Err(response) => return Ok(response),
    };
    let resource = resource_id(&origin(&req)?);
    let kv = kv(env)?;
    let grant_id = match request.grant_type.as_str() {
        "authorization_code" => exchange_code(&kv, &request, &resource).await?,
        "refresh_token" => exchange_refresh(&kv, &request, &resource).await?,
        other => {
            Err(OAuthError::new("unsupported_grant_type", format!("{other}: authorization_code or refresh_token")))
        }
    };
    let grant_id = match grant_id {
        Ok(grant_id) => grant_id,
        Err(e) => return Ok(oauth_error(&e)),
    };
    let Some(grant) = get::<Grant>(&kv, &grant_key(&grant_id)).await? else {
        return Ok(oauth_error(&OAuthError::new("invalid_grant", "the grant was revoked: authorize again")));
    };
    let (access, refresh) = (oauth::mint("rat_", &random()), oauth::mint("rrt_", &random()));
    let record = |kind, ttl| TokenRecord {
        kind,
        grant_id: grant.grant_id.clone(),
        client_id: grant.client_id.clone(),
        resource: grant.resource.clone(),
        exp: now_s() + ttl,
        rotated: false,
    };
    put(&kv, &token_key(&access), &record(TokenKind::Access, oauth::ACCESS_TTL_S), oauth::ACCESS_TTL_S).await?;
    put(&kv, &token_key(&refresh), &record(TokenKind::Refresh, oauth::REFRESH_TTL_S), oauth::REFRESH_TTL_S).await?;
    Ok(with_header(json(200, &oauth::token_response(&access, &refresh, oauth::SCOPE)), "cache-control", "no-store"))
}

/// Checks and spends an authorization code.
async fn exchange_code(
    kv: &KvStore,
    request: &TokenRequest,
    resource: &str,
) -> Result<std::result::Result<String, OAuthError>> {
    let key = code_key(request.code.as_deref().unwrap_or(""));
    spend::<CodeRecord>(kv, &key, "unknown or expired authorization code", |code| {
        request.check_code(code, resource, now_s())
    })
    .await
}

/// Checks and rotates a refresh token.
async fn exchange_refresh(
    kv: &KvStore,
    request: &TokenRequest,
    resource: &str,
) -> Result<std::result::Result<String, OAuthError>> {
    let key = token_key(request.refresh_token.as_deref().unwrap_or(""));
    let unknown = "unknown, expired or revoked refresh token";
    spend::<TokenRecord>(kv, &key, unknown, |token| request.check_refresh(token, resource, now_s())).await
}

/// Spends the single-use code or refresh token stored under `key` if `check` passes; returns
/// its grant. One presented after it was spent revokes its grant.
async fn spend<T: SingleUse + Serialize + DeserializeOwned>(
    kv: &KvStore,
    key: &str,
    unknown: &str,
    check: impl FnOnce(&T) -> std::result::Result<(), OAuthError>,
) -> Result<std::result::Result<String, OAuthError>> {
    let Some(mut record) = get::<T>(kv, key).await? else {
        return Ok(Err(OAuthError::new("invalid_grant", unknown)));
    };
    if let Err(e) = check(&record) {
        if record.spent() {
            kv.delete(&grant_key(record.grant_id())).await?;
        }
        return Ok(Err(e));
    }
    record.spend();
    put(kv, key, &record, record.exp().saturating_sub(now_s())).await?;
    Ok(Ok(record.grant_id().to_owned()))
}

#[derive(Deserialize)]
struct Revocation {
    token: String,
}

/// `POST /oauth/revoke` (RFC 7009): an access token stops working; a refresh token takes its
/// whole grant with it. Always 200, known token or not.
pub async fn revoke(mut req: Request, env: &Env) -> Result<Response> {
    let Revocation { token } = match form(&mut req).await? {
        Ok(revocation) => revocation,
        Err(response) => return Ok(response),
    };
    let kv = kv(env)?;
    if let Some(record) = get::<TokenRecord>(&kv, &token_key(&token)).await? {
        if record.kind == TokenKind::Refresh {
            kv.delete(&grant_key(&record.grant_id)).await?;
        }
        kv.delete(&token_key(&token)).await?;
    }
    Ok(json(200, &json!({})))
}

/// The tenant and relay session an access token stands for at this origin's `/mcp`, or why not.
pub async fn access(env: &Env, token: &str, origin: &str) -> Result<std::result::Result<(Tenant, String), String>> {
    let kv = kv(env)?;
    let Some(record) = get::<TokenRecord>(&kv, &token_key(token)).await? else {
        return Ok(Err("unknown, expired or revoked access token".into()));
    };
    if let Err(why) = record.check_access(&resource_id(origin), now_s()) {
        return Ok(Err(why));
    }
    let Some(grant) = get::<Grant>(&kv, &grant_key(&record.grant_id)).await? else {
        return Ok(Err("the grant behind this token was revoked: authorize again".into()));
    };
    Ok(Ok((by_id(env, &grant.tenant).await?, grant.session)))
}
