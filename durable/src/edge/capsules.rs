//! Capsules at the edge: the public key set, building and storing a capsule in R2, verifying
//! one, and serving its files to the tenant that owns it.
//!
//! R2 layout (`relay_core::keys`): `capsules/<tenantId>/<hash>/capsule.json` (the signed
//! manifest) and `layers/<sha256>` (layer zips, shared: content-addressed, written once). A capsule file is
//! served only to its tenant, proven by `Authorization: Bearer` with the capsule-files token
//! that came with the capsule, or with the tenant's API key.

use super::http::{internal, read_capped};
use super::tenants::{authenticate, authenticated_body};
use crate::platform::bindings::bucket;
use crate::platform::http::{error, json, refuse, storage_unavailable, with_header};
use crate::platform::r2::store_capsule;
use crate::platform::signer::{key_set, signer, token_keys};
use relay_core::auth::{bearer, check_key_shape, AttachClaims};
use relay_core::capsule;
use relay_core::capsule::address::{self, CapsuleFile, MANIFEST_FILE};
use relay_core::error::{ErrorName, HttpError};
use relay_core::keys;
use relay_core::range::{self, RangeAnswer};
use relay_core::run::args::capsule_spec;
use serde_json::{json, Value};
use worker::{Bucket, Env, Headers, Range, Request, Response, Result};

/// Body limit of `POST /capsules`: a run's arguments (the code layer itself is capped at 2 MiB).
const CREATE_BODY_MAX: usize = 4 * 1024 * 1024;
/// Body limit of `POST /capsules/verify`: one capsule.json.
const VERIFY_BODY_MAX: usize = 256 * 1024;

/// `GET /.well-known/relay-keys.json`.
pub fn jwks(env: &Env) -> Result<Response> {
    Ok(with_header(json(200, &key_set(env)?.to_jwks()), "cache-control", "public, max-age=300"))
}

/// `POST /capsules`: build, sign and store a capsule from run_js/run_py-shaped arguments plus
/// `language`. Returns its hash and manifest; the executor page fetches the same files.
pub async fn create(mut req: Request, env: &Env) -> Result<Response> {
    let (tenant, body) = match authenticated_body(&mut req, env, CREATE_BODY_MAX).await? {
        Ok(found) => found,
        Err(response) => return Ok(response),
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return Ok(refuse(ErrorName::ValidationError, "body: expected a JSON object"));
    };
    let language = body.get("language").and_then(Value::as_str).unwrap_or_default();
    let spec = match capsule_spec(language, &body, &tenant.defaults.policy) {
        Ok(_) if ["npm", "pip"].iter().any(|k| body.get(k).is_some_and(|v| !v.is_null())) => {
            let message = "npm / pip: POST /capsules does not build dependencies; call run_js or run_py through /mcp";
            return Ok(refuse(ErrorName::ValidationError, message));
        }
        Ok(spec) => spec,
        Err(e) => return Ok(refuse(e.name, e.message)),
    };
    let capsule = match capsule::build_capsule(spec, &signer(env)?) {
        Ok(capsule) => capsule,
        Err(e) => return Ok(error(HttpError::from(e))),
    };
    if let Err(refused) = store_capsule(env, &tenant, &capsule).await {
        return Ok(refused);
    }
    let manifest: Value = serde_json::from_slice(&capsule.manifest_json)?;
    Ok(json(
        201,
        &json!({ "hash": capsule.hash, "manifest": manifest, "manifestUrl": format!("/capsules/{}/{MANIFEST_FILE}", capsule.hash) }),
    ))
}

/// `POST /capsules/verify`: checks a capsule.json against this Worker's keys.
pub async fn verify(mut req: Request, env: &Env) -> Result<Response> {
    let body = match read_capped(&mut req, VERIFY_BODY_MAX).await? {
        Ok(body) => body,
        Err(too_large) => return Ok(too_large),
    };
    Ok(match capsule::verify_manifest(&body, &key_set(env)?) {
        Ok(manifest) => match capsule::capsule_hash(&manifest) {
            Ok(hash) => json(200, &json!({ "valid": true, "hash": hash })),
            Err(e) => refuse(ErrorName::ValidationError, e.to_string()),
        },
        Err(e) => refuse(ErrorName::ValidationError, e.to_string()),
    })
}

/// `GET /capsules/:hash/:file`: the manifest or one of its layers, for the owning tenant only.
/// Both path parts are checked for shape before anything is looked up.
pub async fn fetch(req: &Request, env: &Env, hash: &str, file: &str) -> Result<Response> {
    let file = match address::check_hash(hash).and_then(|()| address::parse_file(file)) {
        Ok(file) => file,
        Err(rule) => return Ok(refuse(ErrorName::ValidationError, rule)),
    };
    let tenant_id = match owner(req, env).await? {
        Ok(id) => id,
        Err(response) => return Ok(response),
    };
    let bucket = bucket(env)?;
    Ok(serve(req, &bucket, &tenant_id, hash, file).await.unwrap_or_else(|e| storage_unavailable("R2", &e)))
}

/// Reads the file from R2; every error it returns is R2's.
async fn serve(req: &Request, bucket: &Bucket, tenant_id: &str, hash: &str, file: CapsuleFile<'_>) -> Result<Response> {
    let Some(manifest) = bucket.get(keys::manifest(tenant_id, hash)).execute().await? else {
        return Ok(refuse(ErrorName::NotFound, format!("no capsule {hash} for this tenant")));
    };
    let manifest_bytes = manifest.body().expect("get has a body").bytes().await?;
    let path = match file {
        CapsuleFile::Manifest => return Ok(immutable(Response::from_bytes(manifest_bytes)?, hash, "application/json")),
        CapsuleFile::Layer(path) => path,
    };
    // We wrote this manifest: one that does not parse is our fault, not the storage's.
    let manifest: capsule::Manifest = match serde_json::from_slice(&manifest_bytes) {
        Ok(manifest) => manifest,
        Err(e) => return Ok(internal(e.into())),
    };
    let Some(layer) = manifest.fs_layers.iter().find(|l| l.path == path) else {
        return Ok(refuse(
            ErrorName::NotFound,
            format!("capsule {hash} has no file {path}; its manifest lists its layers"),
        ));
    };
    serve_layer(req, bucket, &layer.sha256).await
}

async fn serve_layer(req: &Request, bucket: &Bucket, sha256: &str) -> Result<Response> {
    let key = keys::layer(sha256);
    let Some(head) = bucket.head(&key).await? else {
        return Ok(refuse(ErrorName::NotFound, format!("layer {sha256} is missing")));
    };
    if req.headers().get("if-none-match")?.is_some_and(|tag| tag.trim_matches('"') == sha256) {
        return Ok(immutable(Response::empty()?.with_status(304), sha256, "application/zip"));
    }
    let size = head.size();
    let (get, status, content_range) = match range::answer(req.headers().get("range")?.as_deref(), size) {
        RangeAnswer::Whole => (bucket.get(&key), 200, None),
        RangeAnswer::Partial { start, len } => (
            bucket.get(&key).range(Range::OffsetWithLength { offset: start, length: len }),
            206,
            Some(format!("bytes {start}-{}/{size}", start + len - 1)),
        ),
        RangeAnswer::Unsatisfiable => {
            let response = refuse(ErrorName::RangeNotSatisfiable, format!("layer is {size} bytes"));
            return Ok(with_header(response, "content-range", &format!("bytes */{size}")));
        }
    };
    // Layers are never deleted, but a missing one is a 404, not a panic.
    let Some(object) = get.execute().await? else {
        return Ok(refuse(ErrorName::NotFound, format!("layer {sha256} is missing")));
    };
    let body = object.body().expect("get has a body").stream()?;
    let response = immutable(Response::from_stream(body)?.with_status(status), sha256, "application/zip");
    Ok(match content_range {
        Some(range) => with_header(response, "content-range", &range),
        None => response,
    })
}

/// Content-addressed files never change: cache forever, validate by hash.
fn immutable(response: Response, sha256: &str, content_type: &str) -> Response {
    let headers = Headers::new();
    let _ = headers.set("content-type", content_type);
    let _ = headers.set("etag", &format!("\"{sha256}\""));
    let _ = headers.set("cache-control", "private, max-age=31536000, immutable");
    let _ = headers.set("accept-ranges", "bytes");
    response.with_headers(headers)
}

/// The tenant a capsule request speaks for: the bearer is an API key (`rk_...`) or else a
/// capsule-files token.
async fn owner(req: &Request, env: &Env) -> Result<std::result::Result<String, Response>> {
    let header = req.headers().get("authorization")?;
    match bearer(header.as_deref()) {
        Some(token) if check_key_shape(token).is_err() => {
            Ok(match AttachClaims::verify_capsule_files(token, &token_keys(env)?, crate::platform::now_ms() / 1000) {
                Ok(claims) => Ok(claims.sub),
                Err(e) => Err(refuse(ErrorName::Unauthorized, e.to_string())),
            })
        }
        _ => Ok(authenticate(req, env).await?.map(|tenant| tenant.id)),
    }
}
