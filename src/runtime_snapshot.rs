//! Pyodide's memory snapshot for the edge executor's Python (`durable/js/edge-pyodide.mjs`),
//! kept in R2 under [`PREFIX`], no tenant's: its key, its seal, and when the retention sweep
//! deletes one.
//!
//! - **Key**: `runtime-snapshots/<runtime id>/<sha256 hex of what shaped it>` ([`current_key`]):
//!   the edge runner's text (Pyodide's patched JS, the bootstrap imports) and, with their
//!   integrity in runtimes.json, the runtime's files the edge loads ([`EDGE_FILES`]; the tab's
//!   runner is not one). Both come from the page's static assets, so the Worker knows the
//!   current key without making a snapshot.
//! - **Seal**: a snapshot is Python heap state the edge restores into an isolate, so code in
//!   effect, and whoever can write the bucket can write a sha256 beside it. R2 keeps its MAC in
//!   the custom metadata [`MAC_META`]: HMAC-SHA256 of its key and its bytes' sha256
//!   ([`Seal::mac`]), under a key derived from the Worker's signing key with a label of its
//!   own ([`Seal::of`]), which never leaves the Worker's Rust. A missing or wrong MAC means the
//!   snapshot is made again.
//! - **Sweep**: each change of the runner or of Pyodide leaves the previous snapshot (~30 MiB)
//!   behind. One whose key is not the current one goes once the current one has been in R2 for
//!   [`STALE_GRACE_MS`] (isolates on the old code, during a rollout, may still read theirs) and
//!   it has too (one an old isolate made again lately stays its day). Keys of any other shape
//!   are never deleted ([`stale`]).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::capsule::address::check_hash;
use crate::capsule::jws::{b64url, b64url_decode, Signer};
use crate::retention::{Sweep, DAY_MS};

/// The R2 prefix of every snapshot.
pub const PREFIX: &str = "runtime-snapshots/";
/// The runtime (in runtimes.json, by the start of its id) whose snapshot the edge keeps.
pub const RUNTIME: &str = "pyodide@";
/// The page's asset that runs Python at the edge, snapshot maker included.
pub const RUNNER_ASSET: &str = "edge/runner-pyodide.mjs";
/// The runtime's files (runtimes.json names) the edge loads, so the ones that shape its
/// snapshot: edge-pyodide.mjs's `FILES`.
pub const EDGE_FILES: [&str; 4] = ["pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", "policy.wasm"];
/// The R2 custom metadata that holds a snapshot's MAC (base64url).
pub const MAC_META: &str = "hmac";
/// How long a snapshot that is not the current one stays after the current one was stored.
pub const STALE_GRACE_MS: u64 = DAY_MS;

/// The HKDF label of the snapshot seal's key: no other purpose derives a key with it.
const SEAL_INFO: &[u8] = b"relay-edge runtime snapshot seal v1";

/// The current snapshot's key: of the runtime in `runtimes_json` (the page's runtimes.json)
/// whose id starts with [`RUNTIME`], shaped by `runner` (the text of [`RUNNER_ASSET`]). `Err`
/// says what is wrong with the page's build and that rebuilding it mends it.
pub fn current_key(runtimes_json: &str, runner: &[u8]) -> Result<String, String> {
    let rebuild = |what: String| format!("{what}: rebuild the page (bash scripts/build.sh) and deploy again");
    let runtimes: serde_json::Value =
        serde_json::from_str(runtimes_json).map_err(|e| rebuild(format!("runtimes.json is not JSON ({e})")))?;
    let mut listed = runtimes.as_object().into_iter().flatten().filter(|(id, _)| id.starts_with(RUNTIME));
    let (id, runtime) = listed.next().ok_or_else(|| rebuild(format!("runtimes.json lists no {RUNTIME} runtime")))?;
    // Two would leave which one the edge loads (the first in the file's order) to the reader.
    if let Some((other, _)) = listed.next() {
        return Err(rebuild(format!("runtimes.json lists two {RUNTIME} runtimes, {id} and {other}")));
    }
    if !is_runtime_id(id) {
        return Err(rebuild(format!("runtimes.json's runtime id {id:?} cannot be one segment of an R2 key")));
    }
    let files = runtime["files"].as_object().ok_or_else(|| rebuild(format!("runtimes.json lists no files of {id}")))?;
    let mut shape = Sha256::new();
    shape.update(runner);
    for name in EDGE_FILES {
        let integrity = files.get(name).and_then(|file| file["integrity"].as_str());
        let integrity = integrity.ok_or_else(|| rebuild(format!("{id}'s {name} is not listed with its integrity")))?;
        shape.update(format!("\n{name} {integrity}"));
    }
    Ok(format!("{PREFIX}{id}/{}", hex::encode(shape.finalize())))
}

/// Whether `id` can stand as one segment of a snapshot's key: visible ASCII, no `/`, not `.`
/// or `..`, at most 64 bytes.
fn is_runtime_id(id: &str) -> bool {
    let visible = id.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\');
    !id.is_empty() && id.len() <= 64 && visible && id != "." && id != ".."
}

/// Whether `r2_key` has a snapshot's shape: [`PREFIX`], a runtime id, a sha256 in hex.
pub fn is_snapshot_key(r2_key: &str) -> bool {
    let Some((id, shape)) = r2_key.strip_prefix(PREFIX).and_then(|rest| rest.split_once('/')) else {
        return false;
    };
    is_runtime_id(id) && check_hash(shape).is_ok()
}

/// The key that seals snapshots, from the Worker's signing key.
pub struct Seal(Hmac<Sha256>);

impl Seal {
    pub fn of(signer: &Signer) -> Self {
        Seal(Hmac::new_from_slice(&signer.derive_key(SEAL_INFO)).expect("HMAC takes a key of any length"))
    }

    /// The MAC (base64url) of the snapshot stored under `r2_key` whose bytes' sha256 (hex) is
    /// `sha256`: the key is sealed too, so a snapshot moved to another key is refused.
    pub fn mac(&self, r2_key: &str, sha256: &str) -> String {
        b64url(&self.keyed(r2_key, sha256).finalize().into_bytes())
    }

    /// Whether `mac` is [`Seal::mac`] of `r2_key` and `sha256`, compared in constant time.
    pub fn verify(&self, r2_key: &str, sha256: &str, mac: &str) -> bool {
        b64url_decode(mac).is_some_and(|mac| self.keyed(r2_key, sha256).verify_slice(&mac).is_ok())
    }

    fn keyed(&self, r2_key: &str, sha256: &str) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        // A key never holds a newline (`is_snapshot_key`), so the message reads one way only.
        mac.update(format!("{r2_key}\n{sha256}").as_bytes());
        mac
    }
}

/// The snapshots to delete as of `now_ms`, of `listed` (`(key, uploaded_ms)`: a listing of
/// [`PREFIX`]) when `current` is the current key, and the sweep's account. None goes until the
/// current one has been stored for [`STALE_GRACE_MS`]; then each other key of a snapshot's
/// shape stored that long ago. The current key and keys of other shapes always stay.
pub fn stale(listed: &[(String, u64)], current: &str, now_ms: u64) -> (Vec<String>, Sweep) {
    let old = |uploaded_ms: u64| now_ms.saturating_sub(uploaded_ms) >= STALE_GRACE_MS;
    let settled = listed.iter().any(|(key, uploaded_ms)| key == current && old(*uploaded_ms));
    let mut sweep = Sweep { scanned: listed.len() as u64, ..Sweep::default() };
    let doomed: Vec<String> = listed
        .iter()
        .filter(|(key, uploaded_ms)| settled && key != current && is_snapshot_key(key) && old(*uploaded_ms))
        .map(|(key, _)| key.clone())
        .collect();
    sweep.deleted = doomed.len() as u64;
    sweep.kept = sweep.scanned - sweep.deleted;
    (doomed, sweep)
}
