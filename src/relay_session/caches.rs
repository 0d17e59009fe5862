//! What one relay session's instance remembers to answer sooner: capsules it built and stored,
//! the capsule policies it read, each upstream server's protocol era, the `/mcps` tree, the MCP
//! clients it saw. Forgetting any of it costs time or a line of `relay://session`, never a
//! different decision.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

use crate::capsule::jws::Signer;
use crate::capsule::{Capsule, CapsuleError, CapsuleMemo, CapsuleSpec};
use crate::policy::Policy;
use crate::retention::STORED_REFRESH_MS;
use crate::stores::PolicyCache;
use crate::upstream::client::Known;

/// MCP clients remembered for `relay://session` (the page lists them).
pub const CLIENTS_KEPT: usize = 10;
/// Longest client name or version kept.
pub const CLIENT_FIELD_MAX: usize = 100;
/// Capsule hashes remembered as stored in R2 before the set starts over.
pub const STORED_KEPT: usize = 10_000;

#[derive(Default)]
pub struct Caches {
    /// Capsules (and build records) this instance has stored in R2, and when: stored once is
    /// stored (content-addressed), but stored again past `retention::STORED_REFRESH_MS`, so
    /// that R2 shows the retention sweep it is in use.
    stored: RefCell<HashMap<String, u64>>,
    /// Capsules this instance has built, by what they were built from.
    capsules: RefCell<CapsuleMemo>,
    /// Capsule policies read from R2, by tenant and hash.
    policies: RefCell<PolicyCache>,
    /// What each upstream MCP server's protocol era turned out to be, by name and URL.
    upstream_eras: RefCell<HashMap<String, Known>>,
    /// The `/mcps` tree last listed, and when.
    mcps_tree: RefCell<Option<(u64, Value)>>,
    /// MCP clients seen recently (`{name, version, lastSeenMs}`), newest first.
    clients: RefCell<VecDeque<Value>>,
}

impl Caches {
    /// The capsule of a run_js / run_py call: built before by this instance for the same spec
    /// and key, or built now.
    pub fn capsule(&self, spec: CapsuleSpec, signer: &Signer) -> Result<Capsule, CapsuleError> {
        self.capsules.borrow_mut().build(spec, signer)
    }

    /// Whether this instance stored `key` (a capsule's hash, a build record's key) in R2
    /// less than [`STORED_REFRESH_MS`] before `now_ms`.
    pub fn stored(&self, key: &str, now_ms: u64) -> bool {
        self.stored.borrow().get(key).is_some_and(|&at| now_ms.saturating_sub(at) < STORED_REFRESH_MS)
    }

    pub fn mark_stored(&self, key: &str, now_ms: u64) {
        let mut stored = self.stored.borrow_mut();
        if stored.len() >= STORED_KEPT {
            stored.clear(); // forgetting only costs a redundant R2 write
        }
        stored.insert(key.to_owned(), now_ms);
    }

    /// Forgets that `key` is stored: it was found missing in R2 (swept meanwhile).
    pub fn forget_stored(&self, key: &str) {
        self.stored.borrow_mut().remove(key);
    }

    /// The policy of tenant `tenant_id`'s capsule `hash`, if this instance read it before.
    pub fn policy(&self, tenant_id: &str, hash: &str) -> Option<Policy> {
        self.policies.borrow().get(tenant_id, hash)
    }

    pub fn keep_policy(&self, tenant_id: &str, hash: &str, policy: Policy) {
        self.policies.borrow_mut().insert(tenant_id, hash, policy);
    }

    /// Notes an MCP client (its `clientInfo`) as seen at `now_ms`.
    pub fn saw_client(&self, info: &Value, now_ms: u64) {
        let field = |name: &str| info[name].as_str().unwrap_or("").chars().take(CLIENT_FIELD_MAX).collect::<String>();
        let (name, version) = (field("name"), field("version"));
        let mut clients = self.clients.borrow_mut();
        clients.retain(|c| c["name"] != name.as_str() || c["version"] != version.as_str());
        clients.push_front(json!({ "name": name, "version": version, "lastSeenMs": now_ms }));
        clients.truncate(CLIENTS_KEPT);
    }

    /// The clients seen recently, newest first.
    pub fn clients(&self) -> Value {
        Value::from(Vec::from(self.clients.borrow().clone()))
    }

    /// The clients seen, as an earlier instance kept them (`kept`): shown, not decided on.
    pub fn set_clients(&self, clients: VecDeque<Value>) {
        *self.clients.borrow_mut() = clients;
    }

    pub fn seen_clients(&self) -> VecDeque<Value> {
        self.clients.borrow().clone()
    }

    /// What is known of the protocol era of upstream `key` (name and URL).
    pub fn upstream_era(&self, key: &str) -> Known {
        self.upstream_eras.borrow().get(key).cloned().unwrap_or_default()
    }

    pub fn learn_upstream_era(&self, key: &str, known: Known) {
        self.upstream_eras.borrow_mut().insert(key.to_owned(), known);
    }

    /// The `/mcps` tree, if it was listed less than `ttl_ms` before `now_ms`.
    pub fn mcps_tree(&self, now_ms: u64, ttl_ms: u64) -> Option<Value> {
        let tree = self.mcps_tree.borrow();
        tree.as_ref().filter(|(at, _)| now_ms.saturating_sub(*at) < ttl_ms).map(|(_, tree)| tree.clone())
    }

    pub fn keep_mcps_tree(&self, now_ms: u64, tree: Value) {
        *self.mcps_tree.borrow_mut() = Some((now_ms, tree));
    }
}
