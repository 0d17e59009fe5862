//! A tenant's API keys and their states (KV `tenant-keys:<id>`, `crate::keys::tenant_keys`):
//! which keys a tenant has, each by a public id and its sha256 (never the key), and whether
//! each is admitted now. Rotating mints a new key and gives every key that was active a grace
//! (`graceSeconds`, default [`ROTATION_GRACE_DEFAULT_S`]) after which it is refused; revoking
//! refuses a key at once. A tenant made before key rings has none stored: its keys are
//! "unlisted" ([`LEGACY_KEY_ID`]), admitted until a rotation or a revocation says otherwise.
//! The answers that list keys ([`KeyView`]) hold no hash.

use serde::{Deserialize, Serialize};

/// How long a rotated key keeps working unless the rotation says otherwise: one day.
pub const ROTATION_GRACE_DEFAULT_S: u64 = 24 * 3600;
/// The longest grace a rotation may give: 30 days.
pub const ROTATION_GRACE_MAX_S: u64 = 30 * 24 * 3600;
/// The id under which a tenant's keys from before key rings are listed and revoked.
pub const LEGACY_KEY_ID: &str = "legacy";

/// Where a key stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum KeyState {
    Active,
    /// Rotated: admitted until `untilMs`, refused from then on.
    Retiring {
        #[serde(rename = "untilMs")]
        until_ms: u64,
    },
    Revoked {
        #[serde(rename = "atMs")]
        at_ms: u64,
    },
}

/// One key of a tenant, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyEntry {
    /// Public: what an operator names the key by (`k_` and 16 hex digits).
    pub id: String,
    /// The key's sha256 (`super::key_hash`): how a presented key finds its entry.
    pub hash: String,
    pub created_at_ms: u64,
    #[serde(flatten)]
    pub state: KeyState,
}

/// A tenant's keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyRing {
    pub keys: Vec<KeyEntry>,
    /// The state of keys made before the ring (none for a tenant created with one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlisted: Option<KeyState>,
}

/// Why a key the tenant has is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRefused {
    Revoked,
    Retired {
        at_ms: u64,
    },
    /// A key record without an entry in a ring that lists every key: not the tenant's any more.
    Unknown,
}

impl std::fmt::Display for KeyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyRefused::Revoked => f.write_str("this API key was revoked: ask the relay's operator for a new one"),
            KeyRefused::Retired { at_ms } => write!(
                f,
                "this API key was rotated and its grace ended at {at_ms} ms since the epoch: use the tenant's new key"
            ),
            KeyRefused::Unknown => f.write_str("unknown API key"),
        }
    }
}

/// A key as an admin answer shows it: no hash.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub id: String,
    /// `active`, `retiring` (admitted until `retiresAtMs`), `retired` (its grace is over) or `revoked`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retires_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
}

impl KeyState {
    fn admits(self, now_ms: u64) -> Result<(), KeyRefused> {
        match self {
            KeyState::Active => Ok(()),
            KeyState::Retiring { until_ms } if now_ms < until_ms => Ok(()),
            KeyState::Retiring { until_ms } => Err(KeyRefused::Retired { at_ms: until_ms }),
            KeyState::Revoked { .. } => Err(KeyRefused::Revoked),
        }
    }

    /// Rotated at `now_ms` with a grace: an active key retires at the grace's end; a retiring
    /// one keeps the sooner of its end and that.
    fn rotated(self, until_ms: u64) -> KeyState {
        match self {
            KeyState::Active => KeyState::Retiring { until_ms },
            KeyState::Retiring { until_ms: was } => KeyState::Retiring { until_ms: was.min(until_ms) },
            revoked => revoked,
        }
    }

    /// Revoked at `now_ms`, unless it was already (it keeps its first time).
    fn revoked(self, now_ms: u64) -> KeyState {
        match self {
            KeyState::Revoked { .. } => self,
            _ => KeyState::Revoked { at_ms: now_ms },
        }
    }

    fn view(self, id: &str, created_at_ms: Option<u64>, now_ms: u64) -> KeyView {
        let (state, retires_at_ms, revoked_at_ms) = match self {
            KeyState::Active => ("active", None, None),
            KeyState::Retiring { until_ms } if now_ms < until_ms => ("retiring", Some(until_ms), None),
            KeyState::Retiring { until_ms } => ("retired", Some(until_ms), None),
            KeyState::Revoked { at_ms } => ("revoked", None, Some(at_ms)),
        };
        KeyView { id: id.to_owned(), state, created_at_ms, retires_at_ms, revoked_at_ms }
    }
}

impl KeyRing {
    /// The ring of a new tenant: its one key.
    pub fn new(first: KeyEntry) -> KeyRing {
        KeyRing { keys: vec![first], unlisted: None }
    }

    /// The ring of a tenant made before rings were stored: its keys unlisted and active.
    pub fn legacy() -> KeyRing {
        KeyRing { keys: Vec::new(), unlisted: Some(KeyState::Active) }
    }

    /// The ring with `entry`'s key active: a tenant created again with a key (`POST
    /// /admin/tenants` naming its id) keeps its other keys as they were, and a key it had is
    /// active again under its old id.
    pub fn admit(mut self, entry: KeyEntry) -> KeyRing {
        match self.keys.iter_mut().find(|k| k.hash == entry.hash) {
            Some(known) => known.state = KeyState::Active,
            None => self.keys.push(entry),
        }
        self
    }

    /// Whether the key whose sha256 is `hash` is admitted at `now_ms`.
    pub fn admits(&self, hash: &str, now_ms: u64) -> Result<(), KeyRefused> {
        match self.keys.iter().find(|k| k.hash == hash) {
            Some(entry) => entry.state.admits(now_ms),
            None => self.unlisted.ok_or(KeyRefused::Unknown)?.admits(now_ms),
        }
    }

    /// Adds `new` and retires every other key `grace_ms` after `now_ms`.
    pub fn rotate(&mut self, new: KeyEntry, now_ms: u64, grace_ms: u64) {
        let until_ms = now_ms.saturating_add(grace_ms);
        for key in &mut self.keys {
            key.state = key.state.rotated(until_ms);
        }
        self.unlisted = self.unlisted.map(|state| state.rotated(until_ms));
        self.keys.push(new);
    }

    /// Revokes key `id` at `now_ms` (again is no error: it stays revoked since the first time).
    pub fn revoke(&mut self, id: &str, now_ms: u64) -> Result<(), String> {
        if let Some(key) = self.keys.iter_mut().find(|k| k.id == id) {
            key.state = key.state.revoked(now_ms);
            return Ok(());
        }
        match (&mut self.unlisted, id == LEGACY_KEY_ID) {
            (Some(state), true) => {
                *state = state.revoked(now_ms);
                Ok(())
            }
            _ => Err(format!("the tenant has no key {id:?}: GET /admin/tenants/<id>/keys lists its keys")),
        }
    }

    /// Revokes every key at `now_ms` (a tenant being deleted).
    pub fn revoke_all(&mut self, now_ms: u64) {
        for key in &mut self.keys {
            key.state = key.state.revoked(now_ms);
        }
        self.unlisted = self.unlisted.map(|state| state.revoked(now_ms));
    }

    /// The keys as an admin sees them, oldest first, the unlisted ones first of all.
    pub fn view(&self, now_ms: u64) -> Vec<KeyView> {
        let unlisted = self.unlisted.map(|state| state.view(LEGACY_KEY_ID, None, now_ms));
        unlisted
            .into_iter()
            .chain(self.keys.iter().map(|k| k.state.view(&k.id, Some(k.created_at_ms), now_ms)))
            .collect()
    }

    /// The sha256 of every listed key (whose KV records a deletion removes).
    pub fn hashes(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.hash.as_str())
    }

    /// Whether keys from before the ring may exist (their KV records are found only by a scan).
    pub fn has_unlisted(&self) -> bool {
        self.unlisted.is_some()
    }
}

/// A rotation's body: `{}` or `{"graceSeconds": n}` (0 to [`ROTATION_GRACE_MAX_S`]; no other
/// field) -> the grace in ms. An empty body is `{}`.
pub fn rotation_grace_ms(body: &[u8]) -> Result<u64, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Rotation {
        grace_seconds: Option<u64>,
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ROTATION_GRACE_DEFAULT_S * 1000);
    }
    let rotation: Rotation = serde_json::from_slice(body)
        .map_err(|e| format!("a rotation's body is {{\"graceSeconds\": 0 to {ROTATION_GRACE_MAX_S}}} or empty: {e}"))?;
    let grace = rotation.grace_seconds.unwrap_or(ROTATION_GRACE_DEFAULT_S);
    if grace > ROTATION_GRACE_MAX_S {
        return Err(format!("graceSeconds is {grace}, at most {ROTATION_GRACE_MAX_S} (30 days)"));
    }
    Ok(grace * 1000)
}

/// A key's public id from 8 random bytes.
pub fn key_id(random: &[u8; 8]) -> String {
    format!("k_{}", hex::encode(random))
}
