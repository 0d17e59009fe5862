//! The end of a tenant's life: what counts as its data, and the account of a deletion.
//!
//! A tenant's data is: its records in KV (by id, its key ring, each key's record, its upstream
//! servers, its relay sessions' listing: [`kv_keys`], `keys::relay_session(id, "")`), its OAuth grants (a
//! grant names its tenant) with the codes and tokens of those grants, everything in R2 under
//! its own prefixes (`keys::tenant_prefixes`: capsules, build records, `/out` files, workspace bodies),
//! the storage of each of its relay sessions (their Durable Objects' SQLite: runs, audit,
//! workspace index), and its ledger of quotas (`crate::quota`, its own Durable Object). Layers (`layers/<sha256>`) are not its own: they are shared by hash among
//! every tenant whose capsules hold the same bytes, so a deletion leaves them (retention removes
//! a layer nothing references).

use std::collections::BTreeMap;

use serde::Serialize;

use super::keyring::KeyRing;
use crate::keys;

/// The kinds a deletion counts. It revokes every key before anything goes, so the tenant cannot
/// act meanwhile; deletes its relay sessions' storage, its OAuth records and its R2 objects;
/// then its KV records, its record by id last, so a deletion cut short can be sent again.
pub const KINDS: [&str; 12] = [
    "keys",
    "relaySessions",
    "ledger",
    "oauthGrants",
    "oauthTokens",
    "oauthCodes",
    "capsules",
    "builds",
    "outFiles",
    "workspaceBodies",
    "upstreams",
    "tenantRecords",
];

/// KV: the tenant's own records (their kind, their key), its keys' records first. (Its relay
/// sessions' listing and OAuth records are found by prefix.)
pub fn kv_keys(tenant_id: &str, ring: &KeyRing) -> Vec<(&'static str, String)> {
    let key_records = ring.hashes().map(|hash| ("keys", keys::tenant_by_key_hash(hash)));
    key_records
        .chain([
            ("upstreams", keys::upstreams(tenant_id)),
            ("tenantRecords", keys::tenant_keys(tenant_id)),
            ("tenantRecords", keys::tenant_by_id(tenant_id)),
        ])
        .collect()
}

/// Whether a key record (`tenant:<hash>`) whose tenant is `record_tenant` is one of this tenant's
/// keys from before its ring (found by a scan, [`KeyRing::has_unlisted`]).
pub fn unlisted_key_is_its(ring: &KeyRing, record_tenant: &str, tenant_id: &str, kv_key: &str) -> bool {
    record_tenant == tenant_id && !ring.hashes().any(|hash| keys::tenant_by_key_hash(hash) == kv_key)
}

/// The prefix of every key record, for that scan.
pub fn key_record_prefix() -> String {
    keys::tenant_by_key_hash("")
}

/// What a deletion removed, counted by kind (every kind of [`KINDS`], zero included).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deleted(BTreeMap<&'static str, u64>);

impl Default for Deleted {
    fn default() -> Self {
        Deleted(KINDS.iter().map(|kind| (*kind, 0)).collect())
    }
}

impl Deleted {
    /// Counts `n` more of `kind` (one of [`KINDS`]).
    pub fn add(&mut self, kind: &'static str, n: u64) {
        debug_assert!(KINDS.contains(&kind), "{kind} is no kind of a deletion");
        *self.0.entry(kind).or_default() += n;
    }

    pub fn count(&self, kind: &str) -> u64 {
        self.0.get(kind).copied().unwrap_or(0)
    }
}
