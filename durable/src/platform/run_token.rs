//! The run-token guard of a run's side routes (`/egress`, `/files`, `/registry`, a build's
//! routes, `/mcps-rpc`): the claims of the request's `Authorization: Bearer` run token.

use super::http::refuse;
use super::now_ms;
use super::signer::token_keys;
use relay_core::auth::{bearer, run_token_refusal, RunClaims};
use relay_core::error::ErrorName;
use worker::{Env, Request, Response, Result};

/// The claims of the request's run token, or the 401 that names what is wrong with it.
pub fn run_claims(req: &Request, env: &Env) -> Result<std::result::Result<RunClaims, Response>> {
    let header = req.headers().get("authorization")?;
    let Some(token) = bearer(header.as_deref()) else {
        let message = "missing `Authorization: Bearer <run token>`: the relay session gives the tab one with each run";
        return Ok(Err(refuse(ErrorName::Unauthorized, message)));
    };
    Ok(RunClaims::verify(token, &token_keys(env)?, now_ms() / 1000)
        .map_err(|e| refuse(ErrorName::Unauthorized, run_token_refusal(&e))))
}
