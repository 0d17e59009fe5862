//! Who is calling: tenants behind API keys, the attach tokens that let a tab join a relay
//! session, and the run tokens that let it act for one run.
//! Pure: the Worker looks records up in KV and passes them in.

pub mod cache;
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
