//! R2 (`R2_CAPSULES`) as the core's `Blobs` ([`R2`]): capsules and their layers, build records
//! (keys: `relay_core::keys`; what is kept there: `relay_core::stores`). A failure is logged
//! here, with its cause, and returned as a `StorageError` (a 503 naming only the store). And
//! the Worker's own uses: storing a capsule or a layer, a capsule's policy (cached in the
//! isolate).

use super::bindings::bucket;
use super::http::error;
use super::ledger;
use relay_core::auth::Tenant;
use relay_core::capsule::Capsule;
use relay_core::error::HttpError;
use relay_core::policy::Policy;
use relay_core::retention::{layers_meta, LAYERS_META, UPLOADER_META};
use relay_core::stores::{self, Blobs, Head, Listing, Meta, PolicyCache, StorageError};
use std::cell::RefCell;
use std::collections::HashMap;
use worker::{Bucket, Env, Include, Response};

thread_local! {
    static POLICIES: RefCell<PolicyCache> = RefCell::default();
}

/// The Worker's R2 bucket.
pub struct R2(pub Env);

fn failed(e: impl std::fmt::Display) -> StorageError {
    worker::console_error!("R2 failed: {e}");
    StorageError(e.to_string())
}

impl R2 {
    fn bucket(&self) -> Result<Bucket, StorageError> {
        bucket(&self.0).map_err(failed)
    }
}

impl Blobs for R2 {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(object) = self.bucket()?.get(key).execute().await.map_err(failed)? else { return Ok(None) };
        let Some(body) = object.body() else { return Ok(None) };
        body.bytes().await.map(Some).map_err(failed)
    }

    async fn head(&self, key: &str) -> Result<Option<Head>, StorageError> {
        let object = self.bucket()?.head(key).await.map_err(failed)?;
        Ok(object.map(|object| Head { size: object.size(), uploaded_ms: object.uploaded().as_millis() }))
    }

    async fn put(&self, key: &str, bytes: Vec<u8>, sha256: Option<&str>, meta: Meta<'_>) -> Result<(), StorageError> {
        let bucket = self.bucket()?;
        let mut put = bucket.put(key, bytes);
        let mut custom = HashMap::new();
        if !meta.layers.is_empty() {
            custom.insert(LAYERS_META.to_owned(), layers_meta(meta.layers.iter().copied()));
        }
        if let Some(uploader) = meta.uploader {
            custom.insert(UPLOADER_META.to_owned(), uploader.to_owned());
        }
        if !custom.is_empty() {
            put = put.custom_metadata(custom);
        }
        if let Some(sha256) = sha256 {
            put = put.sha256(hex::decode(sha256).map_err(|e| failed(format!("layer hash {sha256}: {e}")))?);
        }
        put.execute().await.map(drop).map_err(failed)
    }

    async fn list(&self, prefix: &str, cursor: Option<String>) -> Result<Listing, StorageError> {
        let bucket = self.bucket()?;
        let mut list = bucket.list().prefix(prefix).include(vec![Include::CustomMetadata]);
        if let Some(cursor) = cursor {
            list = list.cursor(cursor);
        }
        let page = list.execute().await.map_err(failed)?;
        let (mut objects, mut layers, mut uploaders, mut sizes) =
            (Vec::new(), HashMap::new(), HashMap::new(), HashMap::new());
        for object in page.objects() {
            let mut custom = object.custom_metadata().map_err(failed)?;
            if let Some(meta) = custom.remove(LAYERS_META) {
                layers.insert(object.key(), meta);
            }
            if let Some(uploader) = custom.remove(UPLOADER_META) {
                uploaders.insert(object.key(), uploader);
            }
            sizes.insert(object.key(), object.size());
            objects.push((object.key(), object.uploaded().as_millis()));
        }
        Ok(Listing { objects, layers, uploaders, sizes, next: page.truncated().then(|| page.cursor()).flatten() })
    }

    async fn delete(&self, keys: Vec<String>) -> Result<(), StorageError> {
        self.bucket()?.delete_multiple(keys).await.map_err(failed)
    }
}

/// Stores a built capsule (`stores::store_capsule`), its bytes (`stores::capsule_bytes`)
/// charged to the tenant's `storedBytes` first; or the 429 or 503 to answer with.
pub async fn store_capsule(env: &Env, tenant: &Tenant, capsule: &Capsule) -> Result<(), Response> {
    let put = async {
        stores::store_capsule(&R2(env.clone()), &tenant.id, capsule, super::now_ms()).await.map_err(|_| unavailable())
    };
    ledger::charged_put(env, tenant, stores::capsule_bytes(capsule), put).await
}

/// Stores a layer tenant `uploader` uploaded (`stores::put_layer`), or the 503 to answer with.
pub async fn put_layer(env: &Env, sha256: &str, bytes: Vec<u8>, uploader: &str) -> Result<(), Response> {
    let stored = stores::put_layer(&R2(env.clone()), sha256, bytes, Some(uploader), super::now_ms()).await;
    stored.map_err(|_| unavailable())
}

fn unavailable() -> Response {
    error(HttpError::storage_unavailable("R2"))
}

/// The policy of capsule `hash` of the tenant (a run token names both): from the isolate's
/// cache, else from its capsule.json in R2 (`stores::capsule_policy`); else the refusal.
pub async fn capsule_policy(env: &Env, tenant_id: &str, hash: &str) -> worker::Result<Result<Policy, Response>> {
    if let Some(policy) = POLICIES.with(|cache| cache.borrow().get(tenant_id, hash)) {
        return Ok(Ok(policy));
    }
    let policy = match stores::capsule_policy(&R2(env.clone()), tenant_id, hash).await {
        Ok(policy) => policy,
        Err(refusal) => return Ok(Err(error(refusal))),
    };
    POLICIES.with(|cache| cache.borrow_mut().insert(tenant_id, hash, policy.clone()));
    Ok(Ok(policy))
}

/// Deletes every object whose key starts with `prefix`, a page (up to 1,000) at a time;
/// returns how many there were.
pub async fn delete_prefix(env: &Env, prefix: &str) -> Result<u64, StorageError> {
    let bucket = R2(env.clone()).bucket()?;
    let (mut deleted, mut first) = (0, None);
    loop {
        let page = bucket.list().prefix(prefix).execute().await.map_err(failed)?;
        let keys: Vec<String> = page.objects().iter().map(|object| object.key()).collect();
        if keys.is_empty() {
            return Ok(deleted);
        }
        // A page that starts where the last one did was not deleted: stop rather than loop.
        if first.as_ref() == keys.first() {
            return Err(failed(format!("deleting under {prefix}: {} was listed again", keys[0])));
        }
        first = keys.first().cloned();
        deleted += keys.len() as u64;
        bucket.delete_multiple(keys).await.map_err(failed)?;
    }
}
