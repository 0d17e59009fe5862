//! Storing a capsule in R2 before its command is sent (once per hash and instance), and the
//! commands a tab gets for a capsule run (`capsule`, `build`: the core's `TabCommand`).

use super::shared::Shared;
use crate::platform::bindings::bucket;
use crate::platform::now_ms;
use crate::platform::r2::store_capsule;
use relay_core::capsule::jws::Signer;
use relay_core::capsule::{Capsule, CapsuleSpec};
use relay_core::packages::DepsRequest;
use relay_core::protocol::{BuildCommand, Caller, CapsuleCommand, TabCommand};

/// Stores a capsule in R2 unless this instance already did (content-addressed: stored once is
/// stored); a failure is the reason to end the run with.
pub async fn store_new(shared: &Shared, caller: &Caller, capsule: &Capsule) -> Result<(), String> {
    if shared.stored(&capsule.hash) {
        return Ok(());
    }
    let started = now_ms();
    let stored = match bucket(&shared.env) {
        Ok(bucket) => store_capsule(&bucket, &caller.tenant.id, capsule).await,
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        worker::console_error!("storing capsule {}: {e}", capsule.hash);
        return Err("its capsule could not be stored; retry the call".into());
    }
    shared.mark_stored(&capsule.hash);
    let stored_in = now_ms() - started;
    shared.persisted("metrics", shared.store().update_metrics(|m| m.observe_build(stored_in)));
    Ok(())
}

/// The `capsule` command for run `run`.
pub fn capsule_command(signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule) -> CapsuleCommand {
    CapsuleCommand::new(signer, caller, run, capsule, now_ms() / 1000)
}

/// The `capsule` command as an SSE frame.
pub fn capsule_frame(signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule) -> Vec<u8> {
    TabCommand::Capsule(capsule_command(signer, caller, run, capsule)).frame()
}

/// The `build` command as an SSE frame.
pub fn build_frame(signer: &Signer, caller: &Caller, run: &str, spec: &CapsuleSpec, request: &DepsRequest) -> Vec<u8> {
    TabCommand::Build(BuildCommand::new(signer, caller, run, spec, request, now_ms() / 1000)).frame()
}
