//! Run tokens: short-lived JWTs (EdDSA, signed with the capsule key) that the Session DO hands a
//! tab with each run. They authorize that one run's side routes and nothing else: `POST /egress`
//! (guest code's fetches, under the policy of the capsule the token names) and
//! `PUT /files/<run>/...` (the run's `/out` files). Their own JWS `typ` keeps them apart from
//! attach and capsule-files tokens in both directions.

use super::token::{verify_claims, TokenError, ISSUER};
use crate::capsule::jws::{KeySet, Signer};
use serde::{Deserialize, Serialize};

/// The JWS `typ` of run tokens.
const RUN_TYP: &str = "relay-run+jwt";

/// Time a run token outlives its run's timeout: the tab uploads `/out` files after the run
/// ends, and a run may wait a little between being sent and starting.
pub const RUN_TOKEN_GRACE_S: u64 = 120;

/// The lifetime to give the token of a run whose timeout is `timeout_ms`
/// (`policy.limits.timeoutMs`): the timeout, rounded up, plus [`RUN_TOKEN_GRACE_S`].
pub fn run_token_ttl_s(timeout_ms: u64) -> u64 {
    timeout_ms.div_ceil(1000) + RUN_TOKEN_GRACE_S
}

/// The claims of a run token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunClaims {
    pub iss: String,
    /// Tenant id.
    pub sub: String,
    /// Relay session name.
    pub sid: String,
    /// Run id.
    pub run: String,
    /// The hash of the run's capsule, whose policy governs its fetches.
    pub cap: String,
    pub iat: u64,
    pub exp: u64,
}

impl RunClaims {
    /// Claims for the token of `run`, issued at `now_s` for `ttl_s` seconds.
    pub fn new(tenant_id: &str, session: &str, run: &str, capsule_hash: &str, now_s: u64, ttl_s: u64) -> Self {
        RunClaims {
            iss: ISSUER.into(),
            sub: tenant_id.into(),
            sid: session.into(),
            run: run.into(),
            cap: capsule_hash.into(),
            iat: now_s,
            exp: now_s + ttl_s,
        }
    }

    /// The run token.
    pub fn sign(&self, signer: &Signer) -> String {
        signer.sign(&serde_json::to_vec(self).expect("claims serialize"), Some(RUN_TYP))
    }

    /// Verifies a run token: signature, `typ` (`relay-run+jwt` only), issuer and expiry.
    pub fn verify(token: &str, keys: &KeySet, now_s: u64) -> Result<Self, TokenError> {
        verify_claims(token, keys, now_s, &[RUN_TYP])
    }
}

/// A refused run token as its route says it ([`TokenError`]'s own wording speaks of attach
/// tokens): what was wrong and what to do.
pub fn run_token_refusal(error: &TokenError) -> String {
    match error {
        TokenError::Invalid(why) => format!("invalid run token: {why}"),
        TokenError::Expired => {
            "run token expired: each run's token lasts its timeout plus 2 minutes; run the code again".into()
        }
        TokenError::WrongSession => "run token is for another relay session".into(),
    }
}
