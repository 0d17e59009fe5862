//! A run's `/out` files (the rules are the core's `files` module): `PUT /files/<run>/out/...`
//! with the run's token stores one in R2 (its run's count of files kept by the relay session,
//! `relay_session::out_files`) and answers its signed, absolute download URL;
//! `GET /files/<tenant>/<run>/out/...?exp=&sig=` (and `HEAD`) serves it to whoever holds that
//! URL until it expires. Downloads are served so that no file can act on this origin:
//! `nosniff`, and `content-security-policy: sandbox` (an HTML or SVG file gets an opaque origin
//! and no scripts), and no other page can frame one.

use super::http::read_capped;
use super::tenants::token_tenant;
use super::Who;
use crate::platform::bindings::{bucket, public_origin};
use crate::platform::http::{json, refuse, storage_unavailable};
use crate::platform::run_token::run_claims;
use crate::platform::signer::{signer, token_keys};
use crate::platform::{ledger, now_ms, stub};
use relay_core::auth::session_name_ok;
use relay_core::auth::Tenant;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::error::ErrorName;
use relay_core::files::{self, PathError};
use relay_core::keys;
use relay_core::protocol::{Caller, SessionRequest, TAB_HEADER};
use serde_json::json;
use worker::{Bucket, Env, Headers, HttpMetadata, Method, Request, Response, Result};

/// `PUT /files/<run>/<path...>`: stores a file of the token's run, under its tenant, and
/// answers its absolute download URL. A refusal that did not read the body cancels it: workerd
/// (under `wrangler dev`, seen here) sends no answer until its request's body has been read or
/// cancelled, so a client past the cap would otherwise send the whole body to learn it is refused.
pub async fn put(mut req: Request, env: &Env, run: &str, encoded_path: &[&str], who: &Who) -> Result<Response> {
    let answer = publish(&mut req, env, run, encoded_path, who).await;
    // Dropping the body's stream cancels it; `stream` fails, harmlessly, for a body already read.
    drop(req.stream());
    answer
}

async fn publish(req: &mut Request, env: &Env, run: &str, encoded_path: &[&str], who: &Who) -> Result<Response> {
    let claims = match run_claims(req, env)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    who.is(&claims.sub, &claims.sid);
    if claims.run != run {
        let message = format!("the run token is for run {}; it publishes that run's files only", claims.run);
        return Ok(refuse(ErrorName::PolicyDenied, message));
    }
    let path = match files::out_path(encoded_path) {
        Ok(path) => path,
        Err(refusal) => return Ok(path_refused(&refusal)),
    };
    let tenant = match token_tenant(env, &claims.sub).await? {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(refusal),
    };
    let max = tenant.defaults.out_file_max_bytes;
    let bucket = bucket(env)?;
    let caller = Caller { tenant, session: claims.sid.clone(), origin: public_origin(env, &req.url()?)? };
    // The slot first: a run past its files' cap is refused before its body is read.
    let tab = req.headers().get(TAB_HEADER)?;
    let reserve = SessionRequest::ReserveOutFile { run: run.to_owned(), path: path.clone(), tab };
    let mut reserved = stub::send(env, &caller, reserve).await?;
    if reserved.status_code() != 200 {
        return Ok(reserved);
    }
    let taken = reserved.json::<serde_json::Value>().await?["slot"] == "take";
    let stored = receive(req, env, &bucket, &caller.tenant, run, &path, max).await;
    if taken && !matches!(stored, Ok(Ok(_))) {
        release(env, &caller, run, &path).await;
    }
    let (size, sha256) = match stored? {
        Ok(stored) => stored,
        Err(refusal) => return Ok(refusal),
    };
    let link = files::download_url(&signer(env)?, &caller.origin, &claims.sub, run, &path, now_ms() / 1000);
    let answer = json!({ "path": path, "size": size, "sha256": sha256, "url": link.url, "expiresAt": link.expires_at });
    Ok(json(201, &answer))
}

/// Reads the body (up to `max` bytes) and stores it as the run's file `path`, its bytes
/// charged to the tenant's `storedBytes` first: its size and sha256, or the answer to send
/// instead (413, 408, 429, 503).
async fn receive(
    req: &mut Request,
    env: &Env,
    bucket: &Bucket,
    tenant: &Tenant,
    run: &str,
    path: &str,
    max: u64,
) -> Result<std::result::Result<(usize, String), Response>> {
    let body = match read_capped(req, usize::try_from(max).unwrap_or(usize::MAX)).await? {
        Ok(body) => body,
        Err(refused) if refused.status_code() == ErrorName::PayloadTooLarge.http_status() => {
            let message =
                format!("{path} is larger than the tenant's outFileMaxBytes ({max} bytes); write a smaller file");
            return Ok(Err(refuse(ErrorName::OutputLimitExceeded, message)));
        }
        Err(refused) => return Ok(Err(refused)),
    };
    let (size, sha256) = (body.len(), sha256_hex(&body));
    let digest = hex::decode(&sha256).expect("hex of a digest");
    let metadata = HttpMetadata { content_type: Some(files::content_type(path).into()), ..Default::default() };
    let put = bucket.put(keys::out_file(&tenant.id, run, path), body).sha256(digest).http_metadata(metadata);
    let put = async { put.execute().await.map_err(|e| storage_unavailable("R2", &e)) };
    Ok(ledger::charged_put(env, tenant, size as u64, put).await.map(|_| (size, sha256)))
}

/// Gives back a slot whose file was not stored. A release that fails is logged, not answered:
/// the upload's own refusal is what its client needs, and the slot stays counted (the run may
/// publish one file fewer), which is the safe side of the cap.
async fn release(env: &Env, caller: &Caller, run: &str, path: &str) {
    let release = SessionRequest::ReleaseOutFile { run: run.to_owned(), path: path.to_owned() };
    match stub::send(env, caller, release).await {
        Ok(released) if released.status_code() == 200 => {}
        Ok(refused) => worker::console_error!("releasing the slot of {path} of run {run}: {}", refused.status_code()),
        Err(e) => worker::console_error!("releasing the slot of {path} of run {run}: {e}"),
    }
}

fn path_refused(refusal: &PathError) -> Response {
    match refusal {
        PathError::Malformed(_) => refuse(ErrorName::ValidationError, refusal.to_string()),
        PathError::OutsideOut(_) => refuse(ErrorName::PolicyDenied, refusal.to_string()),
    }
}

/// `GET /files/<tenant>/<run>/<path...>?exp=&sig=`: the file, if the URL's signature and expiry
/// hold. The signature is checked before anything else, so an unsigned URL learns nothing.
/// `HEAD` answers the same status and headers (with the file's `content-length`), no body.
pub async fn get(req: &Request, env: &Env, tenant: &str, run: &str, encoded_path: &[&str]) -> Result<Response> {
    let url = req.url()?;
    let query = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    let (Some(exp), Some(sig)) = (query("exp").and_then(|e| e.parse::<u64>().ok()), query("sig")) else {
        let message = "a download URL needs `exp` and `sig`: use the URL exactly as the run's result gave it";
        return Ok(refuse(ErrorName::Forbidden, message));
    };
    if let Err(why) = files::verify_download(&token_keys(env)?, url.path(), exp, &sig, now_ms() / 1000) {
        return Ok(refuse(ErrorName::Forbidden, why));
    }
    if !session_name_ok(tenant) || !session_name_ok(run) {
        return Ok(refuse(ErrorName::ValidationError, "tenant and run ids: 1 to 64 of A-Z a-z 0-9 - _"));
    }
    let path = match files::out_path(encoded_path) {
        Ok(path) => path,
        Err(refusal) => return Ok(path_refused(&refusal)),
    };
    let bucket = bucket(env)?;
    let key = keys::out_file(tenant, run, &path);
    let missing = || refuse(ErrorName::NotFound, format!("run {run} has no file {path}"));
    if req.method() == Method::Head {
        return Ok(match bucket.head(&key).await {
            Ok(Some(object)) => {
                let headers = download_headers(&path);
                let _ = headers.set("content-length", &object.size().to_string());
                Response::empty()?.with_headers(headers)
            }
            Ok(None) => missing(),
            Err(e) => storage_unavailable("R2", &e),
        });
    }
    let object = match bucket.get(&key).execute().await {
        Ok(Some(object)) => object,
        Ok(None) => return Ok(missing()),
        Err(e) => return Ok(storage_unavailable("R2", &e)),
    };
    let body = object.body().expect("get has a body").stream()?;
    Ok(Response::from_stream(body)?.with_headers(download_headers(&path)))
}

/// Headers that keep a downloaded file inert on this origin.
fn download_headers(path: &str) -> Headers {
    let headers = Headers::new();
    let _ = headers.set("content-type", files::content_type(path));
    let _ = headers.set("x-content-type-options", "nosniff");
    let _ = headers.set("content-security-policy", "sandbox; frame-ancestors 'none'");
    let _ = headers.set("x-frame-options", "DENY");
    let _ = headers.set("cache-control", "private");
    headers
}
