//! R2 (`R2_CAPSULES`) as the relay session and the Worker use it: capsules and their layers
//! (content-addressed, written once), a capsule's policy, a tenant's build records (keys:
//! `relay_core::keys`).

use super::bindings::bucket;
use super::http::{refuse, storage_unavailable};
use super::now_ms;
use futures::future;
use relay_core::capsule::{Capsule, FsLayer, Manifest};
use relay_core::error::ErrorName;
use relay_core::keys;
use relay_core::packages::BuildRecord;
use relay_core::policy::Policy;
use std::cell::RefCell;
use std::collections::HashMap;
use worker::{Bucket, Env, Response, Result};

/// Parsed policies by tenant and capsule hash. A capsule never changes, so an entry never goes
/// stale; the map is emptied when full rather than tracking use.
const POLICY_CACHE_MAX: usize = 256;

thread_local! {
    static POLICIES: RefCell<HashMap<String, Policy>> = RefCell::new(HashMap::new());
}

/// Stores a built capsule: layers once by hash (R2 checks each body's sha256), then the manifest.
pub async fn store_capsule(bucket: &Bucket, tenant_id: &str, capsule: &Capsule) -> Result<()> {
    // At once, not one after another: a new capsule's command waits for all of them.
    let layers = future::try_join_all(capsule.layers.iter().map(|(layer, bytes)| store_layer(bucket, layer, bytes)));
    let manifest = bucket.put(keys::manifest(tenant_id, &capsule.hash), capsule.manifest_json.clone()).execute();
    let (layers, manifest) = future::join(layers, manifest).await;
    layers?;
    manifest?;
    Ok(())
}

/// Stores a layer zip under its sha256 unless it is there already.
async fn store_layer(bucket: &Bucket, layer: &FsLayer, bytes: &[u8]) -> Result<()> {
    put_layer(bucket, &layer.sha256, bytes.to_vec()).await
}

/// Stores `bytes` as the layer of `sha256` (hex) unless it is there already; R2 refuses bytes of
/// another digest.
pub async fn put_layer(bucket: &Bucket, sha256: &str, bytes: Vec<u8>) -> Result<()> {
    let key = keys::layer(sha256);
    if bucket.head(&key).await?.is_none() {
        let digest = hex::decode(sha256).map_err(|e| worker::Error::RustError(format!("layer hash: {e}")))?;
        bucket.put(&key, bytes).sha256(digest).execute().await?;
    }
    Ok(())
}

/// The policy of capsule `hash` of the tenant (a run token names both): from the isolate's
/// cache, else from its capsule.json in R2.
pub async fn capsule_policy(env: &Env, tenant_id: &str, hash: &str) -> Result<std::result::Result<Policy, Response>> {
    let key = keys::manifest(tenant_id, hash);
    if let Some(policy) = POLICIES.with(|cache| cache.borrow().get(&key).cloned()) {
        return Ok(Ok(policy));
    }
    let object = match bucket(env)?.get(&key).execute().await {
        Ok(Some(object)) => object,
        Ok(None) => {
            let message = format!("the run token names capsule {hash} that this tenant does not have");
            return Ok(Err(refuse(ErrorName::NotFound, message)));
        }
        Err(e) => return Ok(Err(storage_unavailable("R2", &e))),
    };
    let bytes = match object.body().expect("get has a body").bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return Ok(Err(storage_unavailable("R2", &e))),
    };
    // We wrote this manifest: one that does not parse is our fault (500), not the storage's.
    let policy = serde_json::from_slice::<Manifest>(&bytes)?.policy;
    POLICIES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= POLICY_CACHE_MAX {
            cache.clear();
        }
        cache.insert(key, policy.clone());
    });
    Ok(Ok(policy))
}

/// The tenant's build of request `key`, if it may be reused now and its layer is stored. Any
/// failure to read it just means building again.
pub async fn reusable_build(bucket: &Bucket, tenant_id: &str, key: &str) -> Option<BuildRecord> {
    let object = bucket.get(keys::build_record(tenant_id, key)).execute().await.ok()??;
    let bytes = object.body()?.bytes().await.ok()?;
    let record: BuildRecord = serde_json::from_slice(&bytes).ok()?;
    let head = bucket.head(keys::layer(&record.layer.sha256)).await.ok()??;
    (record.reusable(now_ms()) && head.size() == record.layer.size).then_some(record)
}

/// Records the tenant's finished build of request `key`.
pub async fn record_build(bucket: &Bucket, tenant_id: &str, key: &str, record: &BuildRecord) -> Result<()> {
    bucket.put(keys::build_record(tenant_id, key), serde_json::to_vec(record)?).execute().await?;
    Ok(())
}

/// The uploaded deps layer's bytes, read from R2 within the size its claim was held to (the
/// 20 MiB limit), or the answer to give instead.
pub async fn stored_layer(bucket: &Bucket, layer: &FsLayer) -> std::result::Result<Vec<u8>, Response> {
    let missing = || {
        let message = format!("layer deps ({}) is not in storage; upload it again under a new grant", layer.sha256);
        refuse(ErrorName::LayerNotUploaded, message)
    };
    let object = match bucket.get(keys::layer(&layer.sha256)).execute().await {
        Ok(Some(object)) if object.size() == layer.size => object,
        Ok(_) => return Err(missing()),
        Err(e) => return Err(storage_unavailable("R2", &e)),
    };
    match object.body() {
        Some(body) => body.bytes().await.map_err(|e| storage_unavailable("R2", &e)),
        None => Err(missing()),
    }
}
