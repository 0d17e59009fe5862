//! OAuth 2.1 for hosted MCP clients (rules in `relay_core::oauth`): discovery documents,
//! dynamic client registration (rate-limited per address by the `OAUTH_REGISTER` binding, kept
//! a day unless a person allows the client something), client ID metadata documents (fetched
//! under `oauth::document`'s rules), the authorization endpoint and its consent page
//! (`authorize.html`, where the person proves they hold the tenant with its API key and picks
//! the relay session; `GET /oauth/consent` tells it what to show), the token and revocation
//! endpoints, and checking an access token on `/mcp`. Clients, codes, grants and tokens live in
//! `KV_CONFIG` under `oauth:` keys; codes and tokens only as their sha256, each with a KV
//! expiry. (KV is eventually consistent across locations: a code exchanged at two places
//! within seconds could pass both single-use checks, as with `@cloudflare/workers-oauth-provider`,
//! which stores them the same way.)

use super::http::read_capped;
use super::tenants::{authenticate, by_id};
use crate::platform::bindings::{kv, public_origin, var, OAUTH_REGISTER, RELAY_ALLOW_LOCALHOST};
use crate::platform::http::{json, storage_unavailable, with_header};
use crate::platform::{now_ms, random, sleep};
use futures::future::{select, Either};
use futures::StreamExt;
use relay_core::auth::{session_name_ok, Tenant, SESSION_NAME_RULE};
use relay_core::keys;
use relay_core::oauth::document::{
    client_from_fetch, document_url, names_document, DOCUMENT_DEADLINE_MS, DOCUMENT_MAX_BYTES,
};
use relay_core::oauth::records::SingleUse;
use relay_core::oauth::{
    self, authorization_server_metadata, protected_resource_metadata, resource_id, AuthRequest, Client, CodeRecord,
    ConsentView, Grant, OAuthError, Registration, TokenKind, TokenRecord, TokenRequest,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::pin::pin;
use worker::kv::KvStore;
use worker::{AbortController, Env, Fetch, Request, RequestInit, RequestRedirect, Response, Result, Url};

/// Largest body of the token, revocation and consent requests.
const BODY_MAX: usize = 64 * 1024;

fn now_s() -> u64 {
    now_ms() / 1000
}

/// The origin this server is reached at, as issuer and resource (`PUBLIC_URL` when set).
fn origin(req: &Request, env: &Env) -> Result<String> {
    public_origin(env, &req.url()?)
}

fn oauth_error(e: &OAuthError) -> Response {
    with_header(json(e.status, &e.to_json()), "cache-control", "no-store")
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`.
pub fn resource_metadata(req: &Request, env: &Env) -> Result<Response> {
    Ok(json(200, &protected_resource_metadata(&origin(req, env)?)))
}

/// `GET /.well-known/oauth-authorization-server`.
pub fn server_metadata(req: &Request, env: &Env) -> Result<Response> {
    Ok(json(200, &authorization_server_metadata(&origin(req, env)?)))
}

async fn get<T: DeserializeOwned>(kv: &KvStore, key: &str) -> Result<Option<T>> {
    kv.get(key).json::<T>().await.map_err(|e| worker::Error::RustError(format!("KV {key}: {e}")))
}

async fn put<T: Serialize>(kv: &KvStore, key: &str, value: &T, ttl_s: u64) -> Result<()> {
    // KV refuses expirations under a minute.
    let put = kv.put(key, value)?.expiration_ttl(ttl_s.max(60));
    put.execute().await.map_err(|e| worker::Error::RustError(format!("KV {key}: {e}")))
}

/// `POST /oauth/register` (RFC 7591): a public client, PKCE only, kept
/// [`oauth::UNUSED_CLIENT_TTL_S`] unless a person allows it something.
pub async fn register(mut req: Request, env: &Env) -> Result<Response> {
    if let Some(refusal) = registration_limited(&req, env).await? {
        return Ok(refusal);
    }
    let body = match read_capped(&mut req, oauth::REGISTRATION_MAX_BYTES).await? {
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
    if let Err(e) = put(&kv(env)?, &keys::oauth_client(&client.client_id), &client, oauth::UNUSED_CLIENT_TTL_S).await {
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

/// The 429 for an address that registered too often: the `OAUTH_REGISTER` binding counts per
/// `CF-Connecting-IP` (wrangler.toml: 10 a minute), per Cloudflare location and approximately,
/// as Cloudflare's rate limiting does. KV has no atomic counter to do better with.
async fn registration_limited(req: &Request, env: &Env) -> Result<Option<Response>> {
    let address = req.headers().get("cf-connecting-ip")?.unwrap_or_default();
    if env.rate_limiter(OAUTH_REGISTER)?.limit(format!("register:{address}")).await?.success {
        return Ok(None);
    }
    let why = "too many client registrations from your address this minute: wait a minute, then register once \
               and keep the client_id";
    let refusal = OAuthError::new("temporarily_unavailable", why).with_status(429);
    Ok(Some(with_header(oauth_error(&refusal), "retry-after", "60")))
}

/// The client `client_id` names: registered here, or described by its metadata document.
async fn client(env: &Env, client_id: &str) -> Result<std::result::Result<Client, OAuthError>> {
    if names_document(client_id) {
        let dev = var(env, RELAY_ALLOW_LOCALHOST).is_some_and(|v| v == "1");
        let url = match document_url(client_id, dev) {
            Ok(url) => url,
            Err(e) => return Ok(Err(e)),
        };
        let fetched = fetch_document(url).await;
        return Ok(client_from_fetch(client_id, fetched.as_deref().map_err(String::clone)).map_err(
            |(refused, why)| {
                worker::console_log!("client metadata document refused: {why:?}");
                refused
            },
        ));
    }
    Ok(get::<Client>(&kv(env)?, &keys::oauth_client(client_id))
        .await?
        .ok_or_else(|| OAuthError::new("invalid_client", format!("unknown client_id {client_id}: register it first"))))
}

/// One GET of a metadata document: no redirect followed, [`DOCUMENT_DEADLINE_MS`] for the
/// answer and its body together, the body read as it comes and dropped past
/// [`DOCUMENT_MAX_BYTES`]. A failure aborts the fetch and says what happened (for the log).
async fn fetch_document(url: Url) -> std::result::Result<Vec<u8>, String> {
    let controller = AbortController::default();
    let signal = controller.signal();
    let work = async {
        let mut init = RequestInit::new();
        init.with_redirect(RequestRedirect::Manual);
        let request = Request::new_with_init(url.as_str(), &init).map_err(|e| e.to_string())?;
        let mut answer =
            Fetch::Request(request).send_with_signal(&signal).await.map_err(|e| format!("no answer: {e}"))?;
        if answer.status_code() != 200 {
            return Err(format!("HTTP {} (redirects are not followed)", answer.status_code()));
        }
        let mut body = Vec::new();
        let mut chunks = answer.stream().map_err(|e| e.to_string())?;
        while let Some(chunk) = chunks.next().await {
            body.extend_from_slice(&chunk.map_err(|e| format!("the body broke off: {e}"))?);
            if body.len() > DOCUMENT_MAX_BYTES {
                return Err(format!("more than {DOCUMENT_MAX_BYTES} bytes"));
            }
        }
        Ok(body)
    };
    let fetched = match select(pin!(work), pin!(sleep(DOCUMENT_DEADLINE_MS))).await {
        Either::Left((fetched, _)) => fetched,
        Either::Right(_) => Err(format!("no whole answer within {DOCUMENT_DEADLINE_MS} ms")),
    };
    if fetched.is_err() {
        controller.abort(); // so no connection stays open reading what was refused
    }
    fetched
}

/// The authorization request in a URL's query.
fn query_request(url: &Url) -> std::result::Result<AuthRequest, OAuthError> {
    let params: Map<String, Value> =
        url.query_pairs().map(|(k, v)| (k.into_owned(), Value::String(v.into_owned()))).collect();
    serde_json::from_value(Value::Object(params)).map_err(|e| OAuthError::new("invalid_request", e.to_string()))
}

/// An authorization request checked against its client: the client, or the error with the
/// request when the error may be sent to its redirect URI (`AuthRequest::check`).
type Checked = std::result::Result<Client, (Option<AuthRequest>, OAuthError)>;

/// Loads `request`'s client (registered, or from its metadata document) and checks the request
/// against it: what `/oauth/authorize`, `/oauth/consent` and the consent's POST each do first.
async fn check(env: &Env, request: &AuthRequest, resource: &str) -> Result<Checked> {
    let client = match client(env, &request.client_id).await? {
        Ok(client) => client,
        Err(e) => return Ok(Err((None, e))),
    };
    Ok(match request.check(&client, resource) {
        Ok(()) => Ok(client),
        Err((send, e)) => Err((send.then(|| request.clone()), e)),
    })
}

/// `GET /oauth/authorize`: checks the request, then shows the consent page with it. Until the
/// redirect URI is known to be the client's, an error is shown here, never sent there.
pub async fn authorize(req: Request, env: &Env) -> Result<Response> {
    let url = req.url()?;
    let request = match query_request(&url) {
        Ok(request) => request,
        Err(e) => return Ok(oauth_error(&e)),
    };
    let origin = origin(&req, env)?;
    match check(env, &request, &resource_id(&origin)).await? {
        Ok(_) => Response::redirect(Url::parse(&origin)?.join(&format!("/authorize?{}", url.query().unwrap_or("")))?),
        Err((None, e)) => Ok(oauth_error(&e)),
        Err((Some(request), e)) => {
            Response::redirect(request.redirect(&[("error", e.error), ("error_description", &e.description)]).parse()?)
        }
    }
}

/// `GET /oauth/consent?<the authorization request>`: what the consent page shows, as the
/// server checked it (`ConsentView`: the client's name and its source, where the code goes),
/// or the error to show instead.
pub async fn consent_view(req: Request, env: &Env) -> Result<Response> {
    let request = match query_request(&req.url()?) {
        Ok(request) => request,
        Err(e) => return Ok(oauth_error(&e)),
    };
    let client = match check(env, &request, &resource_id(&origin(&req, env)?)).await? {
        Ok(client) => client,
        Err((_, e)) => return Ok(oauth_error(&e)),
    };
    let Some(view) = ConsentView::new(&client, &request) else {
        return Ok(oauth_error(&OAuthError::new("invalid_request", "the redirect_uri does not parse")));
    };
    let body = serde_json::to_value(view).map_err(|e| worker::Error::RustError(e.to_string()))?;
    Ok(with_header(json(200, &body), "cache-control", "no-store"))
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
    let origin = origin(&req, env)?;
    let resource = resource_id(&origin);
    let client = match check(env, &request, &resource).await? {
        Ok(client) => client,
        Err((_, e)) => return Ok(oauth_error(&e)),
    };
    if !approve {
        return Ok(json(200, &json!({ "redirect": request.redirect(&[("error", "access_denied")]) })));
    }
    let code = grant(env, &tenant, &session, &request, &resource).await?;
    if !names_document(&client.client_id) {
        // Allowed once, a registered client is kept past its grant (`CLIENT_TTL_S`).
        put(&kv(env)?, &keys::oauth_client(&client.client_id), &client, oauth::CLIENT_TTL_S).await?;
    }
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
    put(&kv, &keys::oauth_grant(&grant.grant_id), &grant, oauth::REFRESH_TTL_S).await?;
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
    put(&kv, &keys::oauth_code(&code), &record, oauth::CODE_TTL_S).await?;
    Ok(code)
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
    let resource = resource_id(&origin(&req, env)?);
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
    let Some(grant) = get::<Grant>(&kv, &keys::oauth_grant(&grant_id)).await? else {
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
    put(&kv, &keys::oauth_token(&access), &record(TokenKind::Access, oauth::ACCESS_TTL_S), oauth::ACCESS_TTL_S).await?;
    put(&kv, &keys::oauth_token(&refresh), &record(TokenKind::Refresh, oauth::REFRESH_TTL_S), oauth::REFRESH_TTL_S)
        .await?;
    Ok(with_header(json(200, &oauth::token_response(&access, &refresh, oauth::SCOPE)), "cache-control", "no-store"))
}

/// Checks and spends an authorization code.
async fn exchange_code(
    kv: &KvStore,
    request: &TokenRequest,
    resource: &str,
) -> Result<std::result::Result<String, OAuthError>> {
    let key = keys::oauth_code(request.code.as_deref().unwrap_or(""));
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
    let key = keys::oauth_token(request.refresh_token.as_deref().unwrap_or(""));
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
            kv.delete(&keys::oauth_grant(record.grant_id())).await?;
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
    if let Some(record) = get::<TokenRecord>(&kv, &keys::oauth_token(&token)).await? {
        if record.kind == TokenKind::Refresh {
            kv.delete(&keys::oauth_grant(&record.grant_id)).await?;
        }
        kv.delete(&keys::oauth_token(&token)).await?;
    }
    Ok(json(200, &json!({})))
}

/// The tenant and relay session an access token stands for at this origin's `/mcp`, or why not.
pub async fn access(env: &Env, token: &str, origin: &str) -> Result<std::result::Result<(Tenant, String), String>> {
    let kv = kv(env)?;
    let Some(record) = get::<TokenRecord>(&kv, &keys::oauth_token(token)).await? else {
        return Ok(Err("unknown, expired or revoked access token".into()));
    };
    if let Err(why) = record.check_access(&resource_id(origin), now_s()) {
        return Ok(Err(why));
    }
    let Some(grant) = get::<Grant>(&kv, &keys::oauth_grant(&record.grant_id)).await? else {
        return Ok(Err("the grant behind this token was revoked: authorize again".into()));
    };
    match by_id(env, &grant.tenant).await? {
        Some(tenant) => Ok(Ok((tenant, grant.session))),
        None => Ok(Err("the tenant behind this token was deleted by its operator".into())),
    }
}
