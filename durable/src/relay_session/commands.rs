//! The commands a tab gets for a capsule run: `capsule` (a signed capsule to fetch and run) and
//! `build` (dependencies to build into a deps layer first), and storing a capsule in R2 before
//! its command is sent.

use super::shared::Shared;
use super::store;
use crate::edge::capsules::store as store_capsule;
use crate::edge::now_ms;
use relay_core::auth::{run_token_ttl_s, AttachClaims, RunClaims};
use relay_core::capsule::jws::Signer;
use relay_core::capsule::{inline_files, Capsule, CapsuleSpec};
use relay_core::forward::Caller;
use relay_core::mcp;
use relay_core::packages::DepsRequest;
use relay_core::run::session::LOAD_BUDGET_MS;
use serde_json::{json, Value};

/// Stores a capsule in R2 unless this instance already did (content-addressed: stored once is
/// stored); a failure is the reason to end the run with.
pub async fn store_new(shared: &Shared, caller: &Caller, capsule: &Capsule) -> Result<(), String> {
    if shared.stored(&capsule.hash) {
        return Ok(());
    }
    let started = now_ms();
    let stored = match shared.env.bucket("R2_CAPSULES") {
        Ok(bucket) => store_capsule(&bucket, &caller.tenant.id, capsule).await,
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        worker::console_error!("storing capsule {}: {e}", capsule.hash);
        return Err("its capsule could not be stored; retry the call".into());
    }
    shared.mark_stored(&capsule.hash);
    let stored_in = now_ms() - started;
    store::update_metrics(&shared.storage.sql(), |m| m.observe_build(stored_in));
    Ok(())
}

/// The `capsule` command's data for the tab, with its small files inline (`capsule::inline_files`)
/// and two tokens (sent as `Authorization: Bearer`):
/// one that only reads this tenant's capsule files, and the run's own, for its fetches through
/// `/egress` and its `/out` uploads. The run token lives as long as the run may wait in line,
/// load and run, and then upload.
pub fn capsule_command(signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule) -> Value {
    let now_s = now_ms() / 1000;
    let claims = AttachClaims::new(&caller.tenant.id, &caller.session, now_s, format!("cap_{run}"));
    let token = claims.sign_for_capsule_files(signer);
    let wait_ms = caller.tenant.defaults.queue.max_wait_ms;
    let lifetime_ms = wait_ms + LOAD_BUDGET_MS + capsule.manifest.policy.limits.timeout_ms;
    let run_claims =
        RunClaims::new(&caller.tenant.id, &caller.session, run, &capsule.hash, now_s, run_token_ttl_s(lifetime_ms));
    let size: u64 =
        capsule.manifest.fs_layers.iter().map(|layer| layer.size).sum::<u64>() + capsule.manifest_json.len() as u64;
    let mut command = json!({
        "runId": run,
        "hash": capsule.hash,
        "language": capsule.manifest.language,
        "size": size,
        "manifestUrl": format!("/capsules/{}/capsule.json", capsule.hash),
        "token": token,
        "runToken": run_claims.sign(signer),
    });
    if let Some(inline) = inline_files(capsule) {
        command["inline"] = inline;
    }
    command
}

/// The `capsule` command as an SSE frame.
pub fn capsule_frame(signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule) -> Vec<u8> {
    mcp::sse_frame("capsule", &capsule_command(signer, caller, run, capsule), None).into_bytes()
}

/// The `build` command: the dependencies to build, where to get them, and a run token (naming
/// no capsule yet) for `/registry`, `/capsule/presign` and `/capsule/finalize`, which answers
/// with the `capsule` command's data.
pub fn build_frame(signer: &Signer, caller: &Caller, run: &str, spec: &CapsuleSpec, request: &DepsRequest) -> Vec<u8> {
    let now_s = now_ms() / 1000;
    let claims = RunClaims::new(&caller.tenant.id, &caller.session, run, "", now_s, run_token_ttl_s(LOAD_BUDGET_MS));
    let data = json!({
        "runId": run,
        "language": spec.language,
        "build": request,
        "sources": caller.tenant.defaults.packages,
        "runToken": claims.sign(signer),
    });
    mcp::sse_frame("build", &data, None).into_bytes()
}
