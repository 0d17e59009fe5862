//! Retention: what the scheduled cleanup (a Cron Trigger, `durable/src/edge/retention.rs`)
//! deletes, and its account. Today it deletes `/out` files (R2 `files/<tenant>/<run>/<path>`)
//! once no download URL of theirs can still work, plus a grace: a run signs its files' URLs
//! when it ends ([`crate::files::download_url`]), at most [`RUN_END_AFTER_UPLOAD_S`] after
//! it uploaded them, and a URL lasts [`DOWNLOAD_URL_TTL_S`]. Nothing else refers to an `/out`
//! file. Capsules, layers and workspace bodies are not swept: they are referenced from relay
//! sessions (a relay session's memory of capsules it stored, its workspace index), which this
//! cleanup cannot see (README "Operating").

use std::collections::BTreeMap;

use serde::Serialize;

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
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
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
        self.scanned += 1;
        match out_file_tenant(r2_key) {
            Some(tenant) if out_file_expired(uploaded_ms, now_ms) => {
                self.deleted += 1;
                *self.deleted_by_tenant.entry(tenant.to_owned()).or_default() += 1;
                true
            }
            _ => {
                self.kept += 1;
                false
            }
        }
    }

    /// The sweep's log line: `{"kind":"retention", "asOfMs", ...counts, "durationMs"}` (as of the
    /// trigger's scheduled time).
    pub fn log_line(&self, as_of_ms: u64, duration_ms: u64) -> String {
        let mut line = serde_json::json!({
            "kind": "retention", "what": "out files", "asOfMs": as_of_ms, "durationMs": duration_ms
        });
        if let (Some(line), Ok(serde_json::Value::Object(counts))) = (line.as_object_mut(), serde_json::to_value(self))
        {
            line.extend(counts);
        }
        line.to_string()
    }
}
