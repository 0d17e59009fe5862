//! OAuth 2.1 for hosted MCP clients (MCP authorization, revisions 2025-11-25 and 2026-07-28):
//! relay-edge is both the protected resource (`/mcp`) and its authorization server. This
//! module holds the rules; the Worker (`edge/oauth.rs`) only stores and fetches.
//!
//! - Metadata: protected resource (RFC 9728) and authorization server (RFC 8414) documents,
//!   and the `WWW-Authenticate` challenge that points a client at them.
//! - Clients: dynamic registration (RFC 7591), bounded in size and forgotten when unused, or a
//!   client ID metadata document (the client id is an https URL whose document names the
//!   client and its redirect URIs), fetched under strict rules (`document`).
//! - Redirect URIs (`redirect`): what may be registered and asked for, and where it sends the
//!   person; the consent page's facts (`consent`), with the client's name as hostile text.
//! - Authorization code with PKCE (S256 only), single use, bound to client, redirect URI,
//!   resource, tenant and relay session; access tokens bound to the resource (audience);
//!   refresh tokens rotated on every use, a reused one revoking its grant.
//! - Every code and token is a random string stored only as its sha256 ([`token_hash`]), as
//!   `@cloudflare/workers-oauth-provider` stores them.

pub mod consent;
pub mod document;
pub mod metadata;
pub mod records;
pub mod redirect;

pub use consent::ConsentView;
pub use metadata::{authorization_server_metadata, protected_resource_metadata, resource_id, www_authenticate};
pub use records::{AuthRequest, Client, CodeRecord, Grant, Registration, TokenKind, TokenRecord, TokenRequest};

use serde_json::{json, Value};

use crate::capsule::canonical::sha256_hex;
use crate::capsule::jws::b64url;

/// Lifetime of an authorization code.
pub const CODE_TTL_S: u64 = 300;
/// Lifetime of an access token.
pub const ACCESS_TTL_S: u64 = 3600;
/// Lifetime of a refresh token (and so of a grant that is used).
pub const REFRESH_TTL_S: u64 = 30 * 24 * 3600;
/// How long a registered client is kept if no person allows it anything.
pub const UNUSED_CLIENT_TTL_S: u64 = 24 * 3600;
/// How long a registered client is kept after a person last allowed it: past its grant's
/// refresh tokens, so it can be allowed again with the same client_id.
pub const CLIENT_TTL_S: u64 = 90 * 24 * 3600;
/// Largest registration request body (RFC 7591 metadata this server does not keep included).
pub const REGISTRATION_MAX_BYTES: usize = 16 * 1024;
/// The one scope: the relay session's MCP endpoint.
pub const SCOPE: &str = "mcp";

/// What a code or token is stored under: its sha256, never itself.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// A new secret (code, token, client id) from 32 random bytes, with a prefix saying what it is.
pub fn mint(prefix: &str, random: &[u8; 32]) -> String {
    format!("{prefix}{}", b64url(random))
}

/// An OAuth error: its code (RFC 6749 section 5.2 and friends), what to fix, and the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub error: &'static str,
    pub description: String,
    pub status: u16,
}

impl OAuthError {
    pub fn new(error: &'static str, description: impl Into<String>) -> Self {
        let status = if error == "invalid_client" { 401 } else { 400 };
        OAuthError { error, description: description.into(), status }
    }

    /// The same error with another HTTP status (429 for a rate limit).
    pub fn with_status(self, status: u16) -> Self {
        OAuthError { status, ..self }
    }

    pub fn to_json(&self) -> Value {
        json!({ "error": self.error, "error_description": self.description })
    }
}

/// PKCE (RFC 7636) with S256, the only method MCP allows: the verifier is 43 to 128 unreserved
/// characters and its sha256, base64url without padding, is the challenge.
pub fn verify_pkce(verifier: &str, challenge: &str) -> Result<(), OAuthError> {
    let unreserved = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    if !(43..=128).contains(&verifier.len()) || !verifier.chars().all(unreserved) {
        return Err(OAuthError::new(
            "invalid_grant",
            "code_verifier must be 43 to 128 unreserved characters (RFC 7636)",
        ));
    }
    let digest = sha2_digest(verifier.as_bytes());
    if b64url(&digest) != challenge {
        return Err(OAuthError::new("invalid_grant", "code_verifier does not match the code_challenge"));
    }
    Ok(())
}

fn sha2_digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).into()
}

/// The token endpoint's answer.
pub fn token_response(access: &str, refresh: &str, scope: &str) -> Value {
    json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TTL_S,
        "refresh_token": refresh,
        "scope": scope,
    })
}
