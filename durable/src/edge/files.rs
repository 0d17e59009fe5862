//! A run's `/out` files (the rules are the core's `files` module): `PUT /files/<run>/out/...`
//! with the run's token stores one in R2 and answers its signed download URL;
//! `GET /files/<tenant>/<run>/out/...?exp=&sig=` serves it to whoever holds that URL until it
//! expires. Downloads are served so that no file can act on this origin: `nosniff`, and
//! `content-security-policy: sandbox` (an HTML or SVG file gets an opaque origin and no scripts),
//! and no other page can frame one.

use super::capsules::{signer, token_keys};
use super::egress::run_claims;
use super::http::{error, json, read_capped, storage_unavailable};
use super::tenants::by_id;
use super::{now_ms, Who};
use relay_core::auth::session_name_ok;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::files::{self, PathError, MAX_FILES_PER_RUN};
use serde_json::json;
use worker::{Bucket, Env, Headers, HttpMetadata, Request, Response, Result};

/// `PUT /files/<run>/<path...>`: stores a file of the token's run, under its tenant.
pub async fn put(mut req: Request, env: &Env, run: &str, encoded_path: &[&str], who: &Who) -> Result<Response> {
    let claims = match run_claims(&req, env)? {
        Ok(claims) => claims,
        Err(response) => return Ok(response),
    };
    who.is(&claims.sub, &claims.sid);
    if claims.run != run {
        let message = format!("the run token is for run {}; it publishes that run's files only", claims.run);
        return Ok(error(403, "PolicyDenied", message));
    }
    let path = match files::out_path(encoded_path) {
        Ok(path) => path,
        Err(refusal) => return Ok(path_refused(&refusal)),
    };
    let max = by_id(env, &claims.sub).await?.defaults.out_file_max_bytes;
    let Ok(body) = read_capped(&mut req, usize::try_from(max).unwrap_or(usize::MAX)).await? else {
        let message = format!("{path} is larger than the tenant's outFileMaxBytes ({max} bytes); write a smaller file");
        return Ok(error(413, "OutputLimitExceeded", message));
    };
    let bucket = env.bucket("R2_CAPSULES")?;
    let (size, sha256) = (body.len(), sha256_hex(&body));
    match store(&bucket, &claims.sub, run, &path, body, &sha256).await {
        Ok(Some(refusal)) => Ok(refusal),
        Ok(None) => {
            let link = files::download_url(&signer(env)?, &claims.sub, run, &path, now_ms() / 1000);
            let answer =
                json!({ "path": path, "size": size, "sha256": sha256, "url": link.url, "expiresAt": link.expires_at });
            Ok(json(201, &answer))
        }
        Err(e) => Ok(storage_unavailable("R2", &e)),
    }
}

/// Stores the file unless it would be the run's file number [`MAX_FILES_PER_RUN`] + 1 (writing
/// a path again replaces it and counts once). Two uploads racing past the count may both land:
/// the cap bounds a run's storage, it is not a quota to the byte.
async fn store(
    bucket: &Bucket,
    tenant: &str,
    run: &str,
    path: &str,
    body: Vec<u8>,
    sha256: &str,
) -> Result<Option<Response>> {
    let key = files::object_key(tenant, run, path);
    if bucket.head(&key).await?.is_none() {
        let prefix = files::object_key(tenant, run, "");
        let listed = bucket.list().prefix(prefix).limit(MAX_FILES_PER_RUN as u32).execute().await?;
        if listed.objects().len() >= MAX_FILES_PER_RUN {
            let message = format!("{path}: a run publishes at most {MAX_FILES_PER_RUN} files from /out; write fewer, larger files (an archive)");
            return Ok(Some(error(413, "OutputLimitExceeded", message)));
        }
    }
    let sha256 = hex::decode(sha256).expect("hex of a digest");
    let metadata = HttpMetadata { content_type: Some(files::content_type(path).into()), ..Default::default() };
    bucket.put(key, body).sha256(sha256).http_metadata(metadata).execute().await?;
    Ok(None)
}

fn path_refused(refusal: &PathError) -> Response {
    match refusal {
        PathError::Malformed(_) => error(400, "ValidationError", refusal.to_string()),
        PathError::OutsideOut(_) => error(403, "PolicyDenied", refusal.to_string()),
    }
}

/// `GET /files/<tenant>/<run>/<path...>?exp=&sig=`: the file, if the URL's signature and expiry
/// hold. The signature is checked before anything else, so an unsigned URL learns nothing.
pub async fn get(req: &Request, env: &Env, tenant: &str, run: &str, encoded_path: &[&str]) -> Result<Response> {
    let url = req.url()?;
    let query = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    let (Some(exp), Some(sig)) = (query("exp").and_then(|e| e.parse::<u64>().ok()), query("sig")) else {
        let message = "a download URL needs `exp` and `sig`: use the URL exactly as the run's result gave it";
        return Ok(error(403, "Forbidden", message));
    };
    if let Err(why) = files::verify_download(&token_keys(env)?, url.path(), exp, &sig, now_ms() / 1000) {
        return Ok(error(403, "Forbidden", why));
    }
    if !session_name_ok(tenant) || !session_name_ok(run) {
        return Ok(error(400, "ValidationError", "tenant and run ids: 1 to 64 of A-Z a-z 0-9 - _"));
    }
    let path = match files::out_path(encoded_path) {
        Ok(path) => path,
        Err(refusal) => return Ok(path_refused(&refusal)),
    };
    let bucket = env.bucket("R2_CAPSULES")?;
    let object = match bucket.get(files::object_key(tenant, run, &path)).execute().await {
        Ok(Some(object)) => object,
        Ok(None) => return Ok(error(404, "NotFound", format!("run {run} has no file {path}"))),
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
