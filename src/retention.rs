//! Retention: what the scheduled cleanup (a Cron Trigger, `durable/src/edge/retention.rs`)
//! deletes, and its account.
//!
//! - `/out` files (R2 `files/<tenant>/<run>/<path>`) go once no download URL of theirs can still
//!   work, plus a grace: a run signs its files' URLs when it ends ([`crate::files::download_url`]),
//!   at most [`RUN_END_AFTER_UPLOAD_S`] after it uploaded them, and a URL lasts
//!   [`DOWNLOAD_URL_TTL_S`]. Nothing else refers to an `/out` file.
//! - Capsules (`capsules/<tenant>/<hash>/capsule.json`) and build records
//!   (`builds/<tenant>/<key>.json`) go once R2 says they were last stored more than the tenant's
//!   [`RetentionSettings::unused_days`] ago. "Last used" is made visible in R2 itself: a relay
//!   session stores again a capsule (or puts again a build record it reuses) whose storing it
//!   remembers from more than [`STORED_REFRESH_MS`] ago, and a put renews R2's `uploaded`. So a
//!   capsule a run uses, from its queueing to its end, was stored less than [`IN_USE_MAX_MS`]
//!   before, which is under the shortest setting: no sweep deletes it.
//! - Layers (`layers/<sha256>`, shared by every tenant) go once no capsule or build record left
//!   standing names them (R2 custom metadata [`LAYERS_META`], listed with them; one stored
//!   before it had that metadata is read for them) and they were
//!   stored more than [`LAYER_GRACE_MS`] ago (a build's layer is uploaded before the finalize
//!   whose capsule names it); storing a layer renews one older than [`LAYER_REFRESH_MS`].
//! - Workspace bodies (`workspace/<tenant>/<session>/<sha256>`, and the rows of the relay
//!   session's `workspace_bodies`) are swept by their own relay session when the cron asks it
//!   (`relay_session::body_sweep`): a body no index row names goes once both its upload and its
//!   row's last storing are [`BODY_GRACE_MS`] old ([`body_expired`]), so a body uploaded
//!   before the commit that names it is never lost.

pub mod sweep;

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::capsule::address::{check_hash, MANIFEST_FILE};
use crate::files::DOWNLOAD_URL_TTL_S;
use crate::policy::MAX_TIMEOUT_MS;
use crate::run::machine::LOAD_BUDGET_MS;

/// The latest a run ends after uploading a file: its deadline is its load budget, its timeout
/// (at most [`MAX_TIMEOUT_MS`]) and 10 s more.
pub const RUN_END_AFTER_UPLOAD_S: u64 = (LOAD_BUDGET_MS + MAX_TIMEOUT_MS) / 1000 + 10;
/// How long an `/out` file stays after its last URL can have expired: one hour, for clocks that
/// disagree and a download under way.
pub const OUT_GRACE_S: u64 = 3600;
/// The R2 prefix of every `/out` file (`crate::keys::out_file`).
pub const OUT_PREFIX: &str = "files/";

/// One day, in milliseconds.
pub const DAY_MS: u64 = 86_400_000;
/// A relay session stores again a capsule (puts again a build record) it remembers storing
/// more than this long ago: what keeps R2's `uploaded` of a capsule in use recent.
pub const STORED_REFRESH_MS: u64 = 3_600_000;
/// The oldest a capsule's last storing can be while a run uses it: the relay session's memory
/// ([`STORED_REFRESH_MS`]), the run's wait in the queue (at most [`MAX_TIMEOUT_MS`], the bound
/// of `queue.maxWaitMs`) and the run itself, its egress requests reading the capsule's policy
/// included ([`RUN_END_AFTER_UPLOAD_S`]).
pub const IN_USE_MAX_MS: u64 = STORED_REFRESH_MS + MAX_TIMEOUT_MS + RUN_END_AFTER_UPLOAD_S * 1000;
/// The fewest and most days a tenant may keep an unused capsule (`retention.unusedDays`).
pub const MIN_UNUSED_DAYS: u32 = 1;
pub const MAX_UNUSED_DAYS: u32 = 3650;
/// [`RetentionSettings::unused_days`] unless the tenant sets it.
pub const DEFAULT_UNUSED_DAYS: u32 = 7;
const _: () = assert!(IN_USE_MAX_MS < MIN_UNUSED_DAYS as u64 * DAY_MS, "a capsule in use could be swept");
/// An unreferenced layer younger than this stays: a build's layer is uploaded before the
/// finalize that names it in a capsule and a build record, within its run.
pub const LAYER_GRACE_MS: u64 = DAY_MS;
/// Storing a layer that is there already stores it again when it is older than this, so a
/// capsule made during a sweep never names a layer that sweep deletes.
pub const LAYER_REFRESH_MS: u64 = LAYER_GRACE_MS / 2;
/// The R2 custom metadata of a capsule.json or a build record: the sha256s of the layers it
/// names, comma-separated (the sweep lists it with the key, rather than reading each object).
pub const LAYERS_META: &str = "layers";
/// The R2 custom metadata of a deps layer: the tenant that uploaded it (`PUT /capsule/upload`).
/// Its `storedBytes` counts the layer while no capsule or build record names it and the sweep
/// keeps it ([`LAYER_GRACE_MS`]): a build that never finalizes still pays for its upload.
pub const UPLOADER_META: &str = "uploader";
/// The R2 prefixes of capsules, build records and layers (`crate::keys`).
pub const CAPSULE_PREFIX: &str = "capsules/";
pub const BUILD_PREFIX: &str = "builds/";
pub const LAYER_PREFIX: &str = "layers/";
/// The R2 prefix of every workspace body (`crate::keys::workspace_body`).
pub const WORKSPACE_PREFIX: &str = "workspace/";

/// How long a workspace body no file names stays after it was last stored: a run's longest
/// life (a tab uploads a run's bodies before the commit at its end) and an hour more.
pub const BODY_GRACE_MS: u64 = RUN_END_AFTER_UPLOAD_S * 1000 + OUT_GRACE_S * 1000;

/// What a relay session knows of one workspace body when its sweep judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyFacts {
    /// A file of the index names it.
    pub named: bool,
    /// A store of it is under way (its upload sent, its row not yet written).
    pub uploading: bool,
    /// When R2 says it was stored (`None`: it is not in R2, it is inline or elsewhere).
    pub uploaded_ms: Option<u64>,
    /// When its row was last stored (`None`: there is no row).
    pub row_stored_ms: Option<u64>,
}

/// Whether a relay session may delete a workspace body at `as_of_ms`: nothing names it, no
/// store of it is under way, and every time it was stored is [`BODY_GRACE_MS`] old.
pub fn body_expired(facts: BodyFacts, as_of_ms: u64) -> bool {
    let old = |at: Option<u64>| at.is_none_or(|at| as_of_ms.saturating_sub(at) >= BODY_GRACE_MS);
    let anywhere = facts.uploaded_ms.is_some() || facts.row_stored_ms.is_some();
    !facts.named && !facts.uploading && anywhere && old(facts.uploaded_ms) && old(facts.row_stored_ms)
}

/// The tenant's retention settings (`defaults.retention`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Days after which a capsule or build record nobody stored again is deleted.
    pub unused_days: u32,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        RetentionSettings { unused_days: DEFAULT_UNUSED_DAYS }
    }
}

/// The value of [`LAYERS_META`] for `layers`.
pub fn layers_meta<'a>(layers: impl IntoIterator<Item = &'a str>) -> String {
    layers.into_iter().collect::<Vec<_>>().join(",")
}

/// The layers a [`LAYERS_META`] value names; `None` when any of them is no sha256.
pub fn layers_named(meta: &str) -> Option<Vec<&str>> {
    meta.split(',').filter(|sha| !sha.is_empty()).map(|sha| check_hash(sha).ok().map(|()| sha)).collect()
}

/// The tenant owning a capsule.json (`capsules/<tenant>/<64 hex>/capsule.json`) or a build
/// record (`builds/<tenant>/<key>.json`), if the key has that shape.
pub fn stored_owner(r2_key: &str) -> Option<&str> {
    if let Some(rest) = r2_key.strip_prefix(CAPSULE_PREFIX) {
        let mut parts = rest.split('/');
        let (tenant, hash, file) = (parts.next()?, parts.next()?, parts.next()?);
        let shaped = parts.next().is_none() && check_hash(hash).is_ok() && file == MANIFEST_FILE;
        return (shaped && !tenant.is_empty()).then_some(tenant);
    }
    let (tenant, key) = r2_key.strip_prefix(BUILD_PREFIX)?.split_once('/')?;
    let key = key.strip_suffix(".json")?;
    (!tenant.is_empty() && !key.is_empty() && !key.contains('/')).then_some(tenant)
}

/// Whether something last stored at `stored_ms` is unused for `days` at `now_ms`.
pub fn unused(stored_ms: u64, now_ms: u64, days: u32) -> bool {
    now_ms.saturating_sub(stored_ms) >= u64::from(days) * DAY_MS
}

/// Whether the `/out` file uploaded at `uploaded_ms` may be deleted at `now_ms`.
pub fn out_file_expired(uploaded_ms: u64, now_ms: u64) -> bool {
    let last_url_ends_s = uploaded_ms / 1000 + RUN_END_AFTER_UPLOAD_S + DOWNLOAD_URL_TTL_S;
    now_ms / 1000 >= last_url_ends_s + OUT_GRACE_S
}

/// The tenant an `/out` file's R2 key names (`files/<tenant>/<run>/<path>`), if it is one.
pub fn out_file_tenant(r2_key: &str) -> Option<&str> {
    let mut parts = r2_key.strip_prefix(OUT_PREFIX)?.splitn(3, '/');
    let (tenant, run, path) = (parts.next()?, parts.next()?, parts.next()?);
    (!tenant.is_empty() && !run.is_empty() && !path.is_empty()).then_some(tenant)
}

/// What a sweep saw and did: objects looked at, deleted (in all and by tenant), kept.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sweep {
    pub scanned: u64,
    pub deleted: u64,
    pub kept: u64,
    pub deleted_by_tenant: BTreeMap<String, u64>,
}

impl Sweep {
    /// Judges one listed object: `true` when it is to be deleted (and counts it so). A key
    /// that is no `/out` file's shape is kept.
    pub fn judge(&mut self, r2_key: &str, uploaded_ms: u64, now_ms: u64) -> bool {
        let tenant = out_file_tenant(r2_key);
        self.count(tenant.filter(|_| out_file_expired(uploaded_ms, now_ms)))
    }

    /// Counts one object looked at: deleted (`Some(tenant)`, whose it was) or kept (`None`).
    /// Whether it is deleted.
    pub fn count(&mut self, deleted_of: Option<&str>) -> bool {
        self.scanned += 1;
        match deleted_of {
            Some(tenant) => {
                self.deleted += 1;
                *self.deleted_by_tenant.entry(tenant.to_owned()).or_default() += 1;
                true
            }
            None => {
                self.kept += 1;
                false
            }
        }
    }

    /// Takes back the deletion of one object of `tenant` counted by [`Sweep::count`]: it is
    /// kept after all (stored again since it was listed).
    pub fn spare(&mut self, tenant: &str) {
        self.deleted = self.deleted.saturating_sub(1);
        self.kept += 1;
        if let Some(n) = self.deleted_by_tenant.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.deleted_by_tenant.remove(tenant);
            }
        }
    }

    /// Adds the counts of `other` (a relay session's sweep of its bodies) to these.
    pub fn merge(&mut self, other: &Sweep) {
        self.scanned += other.scanned;
        self.deleted += other.deleted;
        self.kept += other.kept;
        for (tenant, n) in &other.deleted_by_tenant {
            *self.deleted_by_tenant.entry(tenant.clone()).or_default() += n;
        }
    }

    /// The sweep's log line: `{"kind":"retention", "what", "asOfMs", ...counts, "durationMs"}`
    /// (as of the trigger's scheduled time).
    pub fn log_line(&self, what: &str, as_of_ms: u64, duration_ms: u64) -> String {
        let mut line = serde_json::json!({
            "kind": "retention", "what": what, "asOfMs": as_of_ms, "durationMs": duration_ms
        });
        if let (Some(line), Ok(serde_json::Value::Object(counts))) = (line.as_object_mut(), serde_json::to_value(self))
        {
            line.extend(counts);
        }
        line.to_string()
    }
}

/// The sweep of capsules, build records and layers: capsules and build records are judged
/// first (each with its tenant's setting), and the layers those left standing name are
/// gathered; layers are judged after, against them.
#[derive(Debug, Default)]
pub struct StoredSweep {
    pub capsules: Sweep,
    pub builds: Sweep,
    pub layers: Sweep,
    /// Layers named by a capsule or build record left standing.
    named: HashSet<String>,
    /// Capsules and build records left standing whose layers are not known (no
    /// [`LAYERS_META`], and their bytes could not be read for them: `sweep::sweep_stored`).
    unnamed: u64,
}

impl StoredSweep {
    /// Judges a capsule.json or build record listed under `r2_key`, stored last at `stored_ms`
    /// with [`LAYERS_META`] `meta`, its tenant keeping unused ones `days`: `true` when it is to
    /// be deleted. A key of another shape is kept (and its layers unknown).
    pub fn judge_stored(&mut self, r2_key: &str, stored_ms: u64, meta: Option<&str>, days: u32, now_ms: u64) -> bool {
        let owner = stored_owner(r2_key);
        let account = if r2_key.starts_with(BUILD_PREFIX) { &mut self.builds } else { &mut self.capsules };
        if account.count(owner.filter(|_| unused(stored_ms, now_ms, days))) {
            return true;
        }
        self.name(meta);
        false
    }

    /// Takes back the deletion of `r2_key` (a capsule.json, build record or layer) that
    /// [`StoredSweep::judge_stored`] or [`StoredSweep::judge_layer`] counted: it was stored
    /// again after it was listed, so it stands, naming the layers of `meta`.
    pub fn spare(&mut self, r2_key: &str, meta: Option<&str>) {
        if r2_key.starts_with(LAYER_PREFIX) {
            return self.layers.spare("layers");
        }
        let account = if r2_key.starts_with(BUILD_PREFIX) { &mut self.builds } else { &mut self.capsules };
        account.spare(stored_owner(r2_key).unwrap_or_default());
        self.name(meta);
    }

    /// Gathers the layers a standing capsule or build record names (`meta`: its
    /// [`LAYERS_META`]); one that names none known is counted [`StoredSweep::unnamed`].
    fn name(&mut self, meta: Option<&str>) {
        match meta.and_then(layers_named) {
            Some(layers) => self.named.extend(layers.into_iter().map(str::to_owned)),
            None => self.unnamed += 1,
        }
    }

    /// How many capsules and build records left standing do not say which layers they name:
    /// while there are any, no layer is deleted.
    pub fn unnamed(&self) -> u64 {
        self.unnamed
    }

    /// Judges a layer listed under `r2_key`, stored last at `stored_ms`: `true` when it is to
    /// be deleted (a layer belongs to no tenant: it is counted under `"layers"`). Nothing is
    /// deleted while a standing capsule or build record does not name its layers.
    pub fn judge_layer(&mut self, r2_key: &str, stored_ms: u64, now_ms: u64) -> bool {
        let sha = r2_key.strip_prefix(LAYER_PREFIX).filter(|sha| check_hash(sha).is_ok());
        let orphan = sha.is_some_and(|sha| !self.named.contains(sha))
            && self.unnamed == 0
            && now_ms.saturating_sub(stored_ms) >= LAYER_GRACE_MS;
        self.layers.count(orphan.then_some("layers"))
    }
}
