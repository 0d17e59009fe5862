//! Tenants: the holders of API keys. `KV_CONFIG` maps `tenant:<sha256 hex of key>` to a
//! [`Tenant`] (how a key finds its tenant) and `tenant-id:<id>` to the same record (how a tab,
//! whose token names only the tenant id, finds it); the key itself is never stored.

use crate::capsule::jws::b64url;
use crate::packages::PackageSources;
use crate::policy::Policy;
use crate::quota::Quotas;
use crate::retention::RetentionSettings;
use crate::run::contexts::ContextSettings;
use crate::run::executor::{EdgeBudget, Executor};
use crate::workspace::WorkspaceSettings;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Prefix that makes a relay-edge key recognisable in a config file or a leak scanner.
const KEY_PREFIX: &str = "rk_";

/// A tenant record as stored in KV.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub defaults: TenantDefaults,
}

/// What a tenant's runs get unless a client narrows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TenantDefaults {
    pub policy: Policy,
    pub queue: QueueSettings,
    /// Browser origins (scheme://host[:port]) besides the Worker's own that may call `/mcp`.
    pub allowed_origins: Vec<String>,
    /// The largest file a run may leave in `/out` (bytes); `PUT /files/...` refuses bigger ones.
    pub out_file_max_bytes: u64,
    /// Where builds of `npm` / `pip` dependencies get packages.
    pub packages: PackageSources,
    /// Each relay session's workspace: its cap.
    pub workspace: WorkspaceSettings,
    /// Which executors take its runs (`tab`, `tab-or-edge`, `edge`); a call may narrow it.
    pub executor: Executor,
    /// The edge budget its operator grants; none: its runs go to tabs only, whatever `executor` says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeBudget>,
    /// Each relay session's contexts (`run_js`/`run_py` with `context`): how many, how long idle.
    pub contexts: ContextSettings,
    /// How long its capsules and build records stay unused before the retention sweep deletes them.
    pub retention: RetentionSettings,
    /// What the tenant may use across its relay sessions (`relay_core::quota`).
    pub quotas: Quotas,
}

/// [`TenantDefaults::out_file_max_bytes`] unless the tenant sets it: 10 MiB.
pub const OUT_FILE_MAX_BYTES: u64 = 10 * 1024 * 1024;

impl Default for TenantDefaults {
    fn default() -> Self {
        TenantDefaults {
            policy: Policy::default(),
            queue: QueueSettings::default(),
            allowed_origins: Vec::new(),
            out_file_max_bytes: OUT_FILE_MAX_BYTES,
            packages: PackageSources::default(),
            workspace: WorkspaceSettings::default(),
            executor: Executor::Tab,
            edge: None,
            contexts: ContextSettings::default(),
            retention: RetentionSettings::default(),
            quotas: Quotas::default(),
        }
    }
}

/// The run queue of each of the tenant's relay sessions: by default 100 runs may wait, none
/// longer than 5 minutes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueSettings {
    /// More runs than this waiting answers 429.
    pub max_queued: u32,
    /// A run waiting longer than this is cancelled.
    pub max_wait_ms: u64,
    /// How long a call waits for a tab to attach before NoExecutorAttached.
    pub attach_wait_ms: u64,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings { max_queued: 100, max_wait_ms: 300_000, attach_wait_ms: 5_000 }
    }
}

impl Tenant {
    /// Whether a browser `Origin` may call `/mcp` for this tenant. A trailing `/` is ignored on
    /// both sides: a configured `https://app.example.com/` must still admit the browser's origin.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        self.defaults.allowed_origins.iter().any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }
}

/// Why a presented key was refused before any lookup.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiKeyError {
    Missing,
    Malformed,
}

impl std::fmt::Display for ApiKeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiKeyError::Missing => f.write_str("missing API key: send `Authorization: Bearer <key>`"),
            ApiKeyError::Malformed => {
                f.write_str("malformed API key: relay-edge keys look like `rk_` followed by 43 characters")
            }
        }
    }
}

/// Lowercase hex sha256 of a key: the only form in which keys are stored or logged.
pub fn key_hash(api_key: &str) -> String {
    hex::encode(Sha256::digest(api_key.as_bytes()))
}

/// Checks a presented key's shape, so garbage never reaches KV.
pub fn check_key_shape(api_key: &str) -> Result<(), ApiKeyError> {
    let body = api_key.strip_prefix(KEY_PREFIX).ok_or(ApiKeyError::Malformed)?;
    let ok = body.len() == 43 && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then_some(()).ok_or(ApiKeyError::Malformed)
}

/// A new API key from 32 random bytes.
pub fn mint_api_key(random: &[u8; 32]) -> String {
    format!("{KEY_PREFIX}{}", b64url(random))
}

/// What [`session_name_ok`] admits, quoted in refusals (tenant ids follow the same rule).
pub const SESSION_NAME_RULE: &str = "1 to 64 of A-Z a-z 0-9 - _";

/// Relay session names: short, URL-safe, so they can sit in a path and a DO name.
pub fn session_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
