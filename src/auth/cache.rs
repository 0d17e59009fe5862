//! Tenant records kept in a Worker isolate for [`TENANT_CACHE_MS`], so that every request
//! does not pay a KV read (and their key rings, `keyring`, likewise): keyed by their KV key (`tenant:<sha256 of the key>` or
//! `tenant-id:<id>`), never by an API key itself. A tenant whose record changes or goes away is
//! seen so within that time.

use std::collections::HashMap;

use super::Tenant;

/// How long a tenant record read from KV is used without reading it again.
pub const TENANT_CACHE_MS: u64 = 10_000;
/// Most records kept; when full, the cache starts over (a miss only costs a KV read).
pub const TENANT_CACHE_MAX: usize = 1_000;

/// Records of type `T` (a tenant, its key ring) by their KV key.
#[derive(Debug)]
pub struct RecordCache<T> {
    entries: HashMap<String, (u64, T)>,
}

/// Tenant records by `tenant:<hash>` or `tenant-id:<id>`.
pub type TenantCache = RecordCache<Tenant>;

impl<T> Default for RecordCache<T> {
    fn default() -> Self {
        RecordCache { entries: HashMap::new() }
    }
}

impl<T: Clone> RecordCache<T> {
    /// The record under `kv_key`, if it was read less than [`TENANT_CACHE_MS`] before `now_ms`.
    pub fn get(&self, kv_key: &str, now_ms: u64) -> Option<T> {
        let (read_at, record) = self.entries.get(kv_key)?;
        (now_ms.saturating_sub(*read_at) < TENANT_CACHE_MS).then(|| record.clone())
    }

    pub fn put(&mut self, kv_key: &str, record: T, now_ms: u64) {
        if self.entries.len() >= TENANT_CACHE_MAX {
            self.entries.clear();
        }
        self.entries.insert(kv_key.to_owned(), (now_ms, record));
    }

    /// Drops the record under `kv_key` (its tenant was deleted here: this isolate sees it at once).
    pub fn forget(&mut self, kv_key: &str) {
        self.entries.remove(kv_key);
    }
}
