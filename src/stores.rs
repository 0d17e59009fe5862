//! The Worker's stores besides a relay session's SQLite, as small traits the core decides over:
//! R2 ([`Blobs`]: capsules, layers, build records) and KV ([`Records`]: a tenant's upstream
//! servers), with what is kept in each under the keys of [`crate::keys`]. The Worker implements
//! them over its bindings (`durable/src/platform/`), the native tests in memory
//! (`tests/support`). An implementation logs the cause of each failure it returns: what the
//! core makes of a [`StorageError`] is a 503 that names only the store.

use std::collections::HashMap;

use futures::future;

use crate::capsule::{Capsule, FsLayer, Manifest};
use crate::error::{ErrorName, HttpError};
use crate::keys;
use crate::packages::BuildRecord;
use crate::policy::Policy;
use crate::retention::LAYER_REFRESH_MS;
use crate::upstream::Upstream;

/// Why storage failed: its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageError(pub String);

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the store says of an object without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub size: u64,
    /// When it was last stored (a put renews it), milliseconds since the epoch.
    pub uploaded_ms: u64,
}

/// Object storage (R2).
#[allow(async_fn_in_trait)] // the Worker runs on one thread: no caller needs these futures to be Send
pub trait Blobs {
    /// The object's bytes; `None` when there is none.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
    /// The object's size and time of storing; `None` when there is none.
    async fn head(&self, key: &str) -> Result<Option<Head>, StorageError>;
    /// Stores `bytes` under `key`, naming `layers` (R2 custom metadata
    /// `retention::LAYERS_META`, which the retention sweep lists) and, for a deps layer, the
    /// tenant that uploaded it (`retention::UPLOADER_META`). Given `sha256` (hex), the store
    /// refuses bytes of another digest.
    async fn put(&self, key: &str, bytes: Vec<u8>, sha256: Option<&str>, meta: Meta<'_>) -> Result<(), StorageError>;
    /// A page of the objects under `prefix`, in key order, from `cursor` (the last page's).
    async fn list(&self, prefix: &str, cursor: Option<String>) -> Result<Listing, StorageError>;
    /// Deletes the objects `keys` (at most a page's); a key with no object is no error.
    async fn delete(&self, keys: Vec<String>) -> Result<(), StorageError>;
}

/// The custom metadata of a put (R2's): the layers an object names, the tenant that uploaded it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Meta<'a> {
    pub layers: &'a [&'a str],
    pub uploader: Option<&'a str>,
}

impl<'a> Meta<'a> {
    pub fn naming(layers: &'a [&'a str]) -> Self {
        Meta { layers, uploader: None }
    }
}

/// A page of a [`Blobs::list`]: each object's key and when it was stored, the layers each
/// names (R2 custom metadata `retention::LAYERS_META`, by key, for those that have it), the
/// tenant that uploaded each deps layer (`retention::UPLOADER_META`, by key), each one's size
/// (by key), and where the next page starts, if there is one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub objects: Vec<(String, u64)>,
    pub layers: HashMap<String, String>,
    pub uploaders: HashMap<String, String>,
    pub sizes: HashMap<String, u64>,
    pub next: Option<String>,
}

/// A key-value store (KV), as the relay session reads it.
#[allow(async_fn_in_trait)] // as for `Blobs`
pub trait Records {
    /// The value under `key`; `None` when there is none.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
}

/// Stores a built capsule: its layers once by hash, at once rather than one after another (a
/// new capsule's command waits for all of them), and its manifest, naming every layer of it
/// (an uploaded deps layer too: the retention sweep keeps what a standing capsule names).
pub async fn store_capsule(
    blobs: &impl Blobs,
    tenant_id: &str,
    capsule: &Capsule,
    now_ms: u64,
) -> Result<(), StorageError> {
    let layers =
        capsule.layers.iter().map(|(layer, bytes)| put_layer(blobs, &layer.sha256, bytes.to_vec(), None, now_ms));
    let manifest_key = keys::manifest(tenant_id, &capsule.hash);
    let named: Vec<&str> = capsule.manifest.fs_layers.iter().map(|layer| layer.sha256.as_str()).collect();
    let manifest = blobs.put(&manifest_key, capsule.manifest_json.clone(), None, Meta::naming(&named));
    let (layers, manifest) = future::join(future::try_join_all(layers), manifest).await;
    layers?;
    manifest
}

/// The bytes a capsule stores for its tenant, as `quota`'s `storedBytes` counts them: its
/// capsule.json and the layers it carries (its code layer; a deps layer was charged at its
/// upload, `PUT /capsule/upload`).
pub fn capsule_bytes(capsule: &Capsule) -> u64 {
    let layers: usize = capsule.layers.iter().map(|(_, bytes)| bytes.len()).sum();
    (capsule.manifest_json.len() + layers) as u64
}

/// Stores `bytes` as the layer of `sha256` (hex) unless it is there already and was stored
/// less than [`LAYER_REFRESH_MS`] before `now_ms` (content-addressed: stored once is stored;
/// an older one is stored again so that a sweep under way, which may have listed the capsules
/// before this one, does not take it as unnamed); the store refuses bytes of another digest.
/// A deps layer records the tenant that uploaded it (`uploader`), which pays for it while
/// nothing names it (`retention::UPLOADER_META`); one there already keeps its own.
pub async fn put_layer(
    blobs: &impl Blobs,
    sha256: &str,
    bytes: Vec<u8>,
    uploader: Option<&str>,
    now_ms: u64,
) -> Result<(), StorageError> {
    let key = keys::layer(sha256);
    let recent = |head: Head| now_ms.saturating_sub(head.uploaded_ms) < LAYER_REFRESH_MS;
    if !blobs.head(&key).await?.is_some_and(recent) {
        blobs.put(&key, bytes, Some(sha256), Meta { layers: &[], uploader }).await?;
    }
    Ok(())
}

/// The policy of capsule `hash` of the tenant (a run token names both), from its capsule.json.
pub async fn capsule_policy(blobs: &impl Blobs, tenant_id: &str, hash: &str) -> Result<Policy, HttpError> {
    let Some(bytes) =
        blobs.get(&keys::manifest(tenant_id, hash)).await.map_err(|_| HttpError::storage_unavailable("R2"))?
    else {
        let message = format!("the run token names capsule {hash} that this tenant does not have");
        return Err(HttpError::new(ErrorName::NotFound, message));
    };
    // We wrote this manifest: one that does not parse is our fault (500), not the storage's.
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| HttpError::new(ErrorName::Internal, format!("capsule {hash}'s stored manifest: {e}")))?;
    Ok(manifest.policy)
}

/// The most capsule policies a [`PolicyCache`] keeps before it starts over.
const POLICY_CACHE_MAX: usize = 256;

/// Parsed policies by tenant and capsule hash. A capsule never changes, so an entry never goes
/// stale; the map is emptied when full rather than tracking use.
#[derive(Debug, Default)]
pub struct PolicyCache(HashMap<String, Policy>);

impl PolicyCache {
    pub fn get(&self, tenant_id: &str, hash: &str) -> Option<Policy> {
        self.0.get(&keys::manifest(tenant_id, hash)).cloned()
    }

    pub fn insert(&mut self, tenant_id: &str, hash: &str, policy: Policy) {
        if self.0.len() >= POLICY_CACHE_MAX {
            self.0.clear();
        }
        self.0.insert(keys::manifest(tenant_id, hash), policy);
    }
}

/// The tenant's build of request `key`, if it may be reused at `now_ms` and its layer is stored
/// with the size recorded. Any failure to read it just means building again.
pub async fn reusable_build(blobs: &impl Blobs, tenant_id: &str, key: &str, now_ms: u64) -> Option<BuildRecord> {
    let bytes = blobs.get(&keys::build_record(tenant_id, key)).await.ok()??;
    let record: BuildRecord = serde_json::from_slice(&bytes).ok()?;
    let layer = blobs.head(&keys::layer(&record.layer.sha256)).await.ok()??;
    (record.reusable(now_ms) && layer.size == record.layer.size).then_some(record)
}

/// Records the tenant's finished build of request `key`, for the next identical request (or
/// records it again, so that R2 shows the retention sweep it is in use), naming its layer.
pub async fn record_build(
    blobs: &impl Blobs,
    tenant_id: &str,
    key: &str,
    record: &BuildRecord,
) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec(record).expect("a build record serializes");
    blobs.put(&keys::build_record(tenant_id, key), bytes, None, Meta::naming(&[&record.layer.sha256])).await
}

/// An uploaded deps layer's bytes, if they are stored with the size its claim was held to
/// (within the 20 MiB limit), else the refusal to answer with.
pub async fn stored_layer(blobs: &impl Blobs, layer: &FsLayer) -> Result<Vec<u8>, HttpError> {
    let bytes = blobs.get(&keys::layer(&layer.sha256)).await.map_err(|_| HttpError::storage_unavailable("R2"))?;
    bytes.filter(|bytes| bytes.len() as u64 == layer.size).ok_or_else(|| {
        let message = format!("layer deps ({}) is not in storage; upload it again under a new grant", layer.sha256);
        HttpError::new(ErrorName::LayerNotUploaded, message)
    })
}

/// The tenant's upstream MCP servers (none when it has not set any).
pub async fn upstreams(records: &impl Records, tenant_id: &str) -> Result<Vec<Upstream>, HttpError> {
    let Some(bytes) =
        records.get(&keys::upstreams(tenant_id)).await.map_err(|_| HttpError::storage_unavailable("KV"))?
    else {
        return Ok(Vec::new());
    };
    // We wrote the record: one that does not parse is our fault (500), not KV's.
    serde_json::from_slice(&bytes)
        .map_err(|e| HttpError::new(ErrorName::Internal, format!("the tenant's stored upstream servers: {e}")))
}
