//! Who is calling: tenants behind API keys, the attach tokens that let a tab join a relay
//! session, and the run tokens that let it act for one run.
//! Pure: the Worker looks records up in KV and passes them in.

pub mod admin;
pub mod cache;
pub mod keyring;
pub mod lifecycle;
pub mod run_token;
pub mod tenant;
pub mod token;

pub use run_token::{run_token_refusal, run_token_ttl_s, RunClaims, RUN_TOKEN_GRACE_S};
pub use tenant::{
    check_key_shape, key_hash, mint_api_key, session_name_ok, ApiKeyError, QueueSettings, Tenant, TenantDefaults,
    OUT_FILE_MAX_BYTES, SESSION_NAME_RULE,
};
pub use token::{AttachClaims, TokenError, ATTACH_TOKEN_TTL_S, MAX_ATTACH_S};

/// The token of an `Authorization: Bearer <token>` header, if that is what the header holds.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The WebSocket subprotocol of a tab's results socket (`GET /session/:id/results`).
pub const RESULTS_PROTOCOL: &str = "relay-results";
/// The WebSocket subprotocol of a tab's lease socket (`GET /session/:id/lease`).
pub const LEASE_PROTOCOL: &str = "relay-lease";

/// The token a browser's WebSocket carries where it can set no `Authorization` header: its
/// offered subprotocols (`Sec-WebSocket-Protocol`) must be the socket's `protocol` (such as
/// `relay-results`) and `bearer.<token>` (a JWT is a valid protocol name), so the token stays
/// out of the URL.
pub fn socket_bearer<'a>(protocols: Option<&'a str>, protocol: &str) -> Option<&'a str> {
    let offered: Vec<&str> = protocols?.split(',').map(str::trim).collect();
    if !offered.contains(&protocol) {
        return None;
    }
    offered.iter().find_map(|p| p.strip_prefix("bearer.")).filter(|token| !token.is_empty())
}
