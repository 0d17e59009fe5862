//! The relay session's routes to the tenant's upstream MCP servers, as responses (`/mcps-rpc`,
//! `/mcps`: the decisions and the audit are the core's, `relay_core::relay_session::upstreams`;
//! the POSTs are `platform::upstream`'s).

use super::shared::Shared;
use crate::platform::http::{error, json};
use crate::platform::signer::sealing_key;
use relay_core::protocol::Caller;
use worker::{Headers, Response, Result};

/// `/mcps-rpc`: a call of run `run` (capsule `cap`), answered with the upstream's result.
pub async fn call(shared: &Shared, caller: &Caller, run: String, cap: &str, body: &[u8]) -> Result<Response> {
    let key = sealing_key(&shared.platform.env)?;
    match shared.call_upstream(caller, run, cap, body, &key).await {
        Ok(result) => {
            let headers = Headers::new();
            headers.set("content-type", "application/json")?;
            Ok(Response::from_bytes(result)?.with_headers(headers))
        }
        Err(refusal) => Ok(error(refusal)),
    }
}

/// `/mcps`: the `/mcps` tree, `{files: [{path, text}], listedAt}`.
pub async fn tree(shared: &Shared, caller: &Caller) -> Result<Response> {
    let key = sealing_key(&shared.platform.env)?;
    Ok(shared.mcps_tree(caller, &key).await.map_or_else(error, |tree| json(200, &tree)))
}
