//! Attach tokens: short-lived JWTs (EdDSA, signed with the capsule key) that let one tab join
//! one relay session of one tenant. The tenant comes from the token, never from the URL, so a
//! session id in a path cannot reach another tenant's Durable Object.

use crate::capsule::jws::{self, KeySet, Signer};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Attach tokens last five minutes: a tab refreshes its token while it stays attached, so a
/// token that leaks is soon worthless.
pub const ATTACH_TOKEN_TTL_S: u64 = 300;
/// The issuer every token of relay-edge names.
pub(crate) const ISSUER: &str = "relay-edge";
/// The JWS `typ` of attach tokens: other JWSs of the same key (capsule signatures) never pass.
const TYP: &str = "JWT";
/// The `typ` of the narrower tokens the DO hands a tab with each capsule: they read the
/// tenant's capsule files and nothing else (no attaching, no posting results).
const CAPSULE_FILES_TYP: &str = "relay-capsule-files+jwt";

/// The claims of an attach token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachClaims {
    pub iss: String,
    /// Tenant id.
    pub sub: String,
    /// Relay session name.
    pub sid: String,
    pub iat: u64,
    pub exp: u64,
    /// Unique token id (for audit and refresh).
    pub jti: String,
    /// When the tab last proved the tenant's key: refreshes keep it, and stop working
    /// [`MAX_ATTACH_S`] after it, so a leaked token cannot be renewed forever.
    pub auth: u64,
}

/// How long refreshed tokens may go on before the tab must attach with the key again.
pub const MAX_ATTACH_S: u64 = 12 * 3600;

/// Why an attach token was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenError {
    Invalid(String),
    Expired,
    WrongSession,
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Invalid(why) => write!(f, "invalid attach token: {why}"),
            TokenError::Expired => f.write_str("attach token expired: attach again with POST /session"),
            TokenError::WrongSession => f.write_str("attach token is for another relay session"),
        }
    }
}

impl AttachClaims {
    /// Claims for a new token issued at `now_s`.
    pub fn new(tenant_id: &str, session: &str, now_s: u64, jti: String) -> Self {
        AttachClaims {
            iss: ISSUER.into(),
            sub: tenant_id.into(),
            sid: session.into(),
            iat: now_s,
            exp: now_s + ATTACH_TOKEN_TTL_S,
            jti,
            auth: now_s,
        }
    }

    /// The claims of a refreshed token: same tenant, session and key proof, new expiry.
    pub fn refreshed(&self, now_s: u64, jti: String) -> Result<Self, TokenError> {
        if now_s >= self.auth + MAX_ATTACH_S {
            return Err(TokenError::Expired);
        }
        Ok(AttachClaims { iat: now_s, exp: now_s + ATTACH_TOKEN_TTL_S, jti, ..self.clone() })
    }

    /// An attach token.
    pub fn sign(&self, signer: &Signer) -> String {
        self.sign_as(signer, TYP)
    }

    /// A token that only reads the tenant's capsule files.
    pub fn sign_for_capsule_files(&self, signer: &Signer) -> String {
        self.sign_as(signer, CAPSULE_FILES_TYP)
    }

    fn sign_as(&self, signer: &Signer, typ: &str) -> String {
        let payload = serde_json::to_vec(self).expect("claims serialize");
        signer.sign(&payload, Some(typ))
    }

    /// Verifies an attach token: signature, `typ`, issuer and expiry.
    pub fn verify(token: &str, keys: &KeySet, now_s: u64) -> Result<Self, TokenError> {
        verify_claims(token, keys, now_s, &[TYP])
    }

    /// Verifies a token that may read capsule files: a capsule-files token or an attach token.
    pub fn verify_capsule_files(token: &str, keys: &KeySet, now_s: u64) -> Result<Self, TokenError> {
        verify_claims(token, keys, now_s, &[CAPSULE_FILES_TYP, TYP])
    }

    /// Verifies as [`AttachClaims::verify`] and that the token is for `session` (a path's id).
    pub fn verify_for(token: &str, keys: &KeySet, session: &str, now_s: u64) -> Result<Self, TokenError> {
        let claims = Self::verify(token, keys, now_s)?;
        if claims.sid != session {
            return Err(TokenError::WrongSession);
        }
        Ok(claims)
    }
}

/// The claims every token of this module carries, checked before its own claims are read.
#[derive(Deserialize)]
struct Common {
    iss: String,
    exp: u64,
}

/// Verifies a token whose JWS `typ` is one of `accepted`: signature, `typ`, issuer and expiry;
/// then reads its claims as `C`. Every token type (attach, capsule files, run) goes through here.
pub(crate) fn verify_claims<C: DeserializeOwned>(
    token: &str,
    keys: &KeySet,
    now_s: u64,
    accepted: &[&str],
) -> Result<C, TokenError> {
    let verified = jws::verify(token, keys).map_err(|e| TokenError::Invalid(e.to_string()))?;
    let typ = verified.header.get("typ").and_then(serde_json::Value::as_str);
    if !typ.is_some_and(|t| accepted.contains(&t)) {
        return Err(TokenError::Invalid(format!("typ {typ:?}; expected one of {accepted:?}")));
    }
    let invalid_claims = |e: serde_json::Error| TokenError::Invalid(format!("claims: {e}"));
    let common: Common = serde_json::from_slice(&verified.payload).map_err(invalid_claims)?;
    if common.iss != ISSUER {
        return Err(TokenError::Invalid(format!("issuer {:?}", common.iss)));
    }
    if now_s >= common.exp {
        return Err(TokenError::Expired);
    }
    serde_json::from_slice(&verified.payload).map_err(invalid_claims)
}
