//! A build's routes in the relay session (`SessionRequest::Build*`), as responses: presign,
//! spend and finalize are the core's (`relay_core::relay_session::builds`).

use super::shared::Shared;
use crate::platform::http::{error, json};
use crate::platform::signer::signer;
use relay_core::packages::UploadGrant;
use relay_core::protocol::Caller;
use worker::{Response, Result};

/// `{layers}` -> `{grants}`: upload grants for the layers the tab built.
pub fn presign(shared: &Shared, caller: &Caller, run: &str, ask: &[u8]) -> Result<Response> {
    let signer = signer(&shared.platform.env)?;
    Ok(shared.presign(caller, run, ask, &signer).map_or_else(error, |grants| json(200, &grants)))
}

/// The Worker received bytes matching `grant`: 204 once the grant is spent.
pub fn spend(shared: &Shared, grant: &UploadGrant) -> Result<Response> {
    match shared.spend(grant) {
        Ok(()) => Ok(Response::empty()?.with_status(204)),
        Err(refusal) => Ok(error(refusal)),
    }
}

/// The `capsule` command's data (plus `capsuleUrl`) for the finalized build.
pub async fn finalize(shared: &Shared, caller: &Caller, run: &str, proposal: &[u8]) -> Result<Response> {
    let signer = signer(&shared.platform.env)?;
    Ok(shared.finalize(caller, run, proposal, &signer).await.map_or_else(error, |answer| json(200, &answer)))
}
