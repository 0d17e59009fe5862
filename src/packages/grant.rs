//! Upload grants: what `/capsule/presign` hands a building tab, one per layer. A grant is a
//! JWT (EdDSA, the capsule key) bound to the tenant, the relay session, the run whose build it
//! is, the layer, its sha256 and its exact size; it expires after [`GRANT_TTL_S`] and is spent
//! by its first upload ([`super::PendingBuild::spend`]). R2 has no presigned URLs without S3
//! credentials, so the Worker receives the upload itself: `PUT` [`UPLOAD_PATH`] with the grant as
//! `Authorization: Bearer`, never in the URL, so that no request log holds one.

use crate::auth::token::{verify_claims, ISSUER};
use crate::auth::TokenError;
use crate::capsule::jws::{KeySet, Signer};
use serde::{Deserialize, Serialize};

/// The JWS `typ` of upload grants: no other token of the key passes as one, nor one as another.
const GRANT_TYP: &str = "relay-upload+jwt";
/// Where a grant's upload is `PUT`.
pub const UPLOAD_PATH: &str = "/capsule/upload";
/// How long a grant may wait for its upload.
pub const GRANT_TTL_S: u64 = 600;

/// The claims of an upload grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadGrant {
    pub iss: String,
    /// Tenant id.
    pub sub: String,
    /// Relay session name.
    pub sid: String,
    /// The run whose build this is.
    pub run: String,
    /// The layer (`deps`).
    pub layer: String,
    /// The sha256 (hex) the uploaded bytes must have.
    pub sha256: String,
    /// The exact size in bytes the upload must have.
    pub size: u64,
    pub iat: u64,
    pub exp: u64,
    /// Unique: a grant is spent once.
    pub jti: String,
}

impl UploadGrant {
    /// A grant for `layer` of `run`'s build, issued at `now_s`.
    pub fn new(run: &RunRef, layer: &str, sha256: &str, size: u64, now_s: u64, jti: String) -> Self {
        UploadGrant {
            iss: ISSUER.into(),
            sub: run.tenant.clone(),
            sid: run.session.clone(),
            run: run.run.clone(),
            layer: layer.into(),
            sha256: sha256.into(),
            size,
            iat: now_s,
            exp: now_s + GRANT_TTL_S,
            jti,
        }
    }

    pub fn sign(&self, signer: &Signer) -> String {
        signer.sign(&serde_json::to_vec(self).expect("claims serialize"), Some(GRANT_TYP))
    }

    /// Verifies a grant: signature, `typ`, issuer and expiry.
    pub fn verify(token: &str, keys: &KeySet, now_s: u64) -> Result<Self, String> {
        verify_claims(token, keys, now_s, &[GRANT_TYP]).map_err(|e| match e {
            TokenError::Expired => "the upload grant expired; ask POST /capsule/presign for a new one".to_string(),
            TokenError::Invalid(why) => format!("invalid upload grant: {why}"),
            TokenError::WrongSession => "the upload grant is for another relay session".to_string(),
        })
    }
}

/// The run a build belongs to: tenant, relay session, run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub tenant: String,
    pub session: String,
    pub run: String,
}
