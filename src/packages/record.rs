//! What a finished build leaves for the next identical request: its deps layer and what it
//! resolved to, kept in R2 under `builds/<tenantId>/<request key>.json`.

use crate::capsule::FsLayer;
use serde::{Deserialize, Serialize};

/// A build with version ranges in it is redone after a day, so that new releases are picked
/// up; a fully pinned one never is.
pub const RANGES_REUSED_MS: u64 = 24 * 3600 * 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildRecord {
    /// The deps layer, stored under `layers/<sha256>`.
    pub layer: FsLayer,
    /// What the request resolved to (`name@version`), for the page and the audit.
    pub resolved: Vec<String>,
    pub built_at_ms: u64,
    /// Every dependency was one exact version.
    pub pinned: bool,
}

impl BuildRecord {
    /// Whether a request with this key may reuse the layer at `now_ms` instead of building.
    pub fn reusable(&self, now_ms: u64) -> bool {
        self.pinned || now_ms.saturating_sub(self.built_at_ms) < RANGES_REUSED_MS
    }
}
