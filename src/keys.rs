//! Every storage key of relay-edge, in one place: the Worker's KV (`KV_CONFIG`) and R2
//! (`R2_CAPSULES`). A relay session's own SQLite has its tables instead (`migrations/`,
//! `relay_session::store`). Keys never hold a secret: API keys, codes and tokens appear only
//! as their sha256.

use crate::auth::{key_hash, session_name_ok};
use crate::capsule::address::MANIFEST_FILE;
use crate::oauth::token_hash;

/// KV: the tenant holding `api_key`.
pub fn tenant_by_key(api_key: &str) -> String {
    tenant_by_key_hash(&key_hash(api_key))
}

/// KV: the tenant holding the key whose sha256 is `hash` (`tenant:` alone: every key's record).
pub fn tenant_by_key_hash(hash: &str) -> String {
    format!("tenant:{hash}")
}

/// KV: a tenant's API keys and their states (`auth::keyring::KeyRing`).
pub fn tenant_keys(id: &str) -> String {
    format!("tenant-keys:{id}")
}

/// KV: the tenant with id `id` (its current record; the one `PATCH` changes).
pub fn tenant_by_id(id: &str) -> String {
    format!("tenant-id:{id}")
}

/// KV: a tenant's upstream MCP servers.
pub fn upstreams(tenant_id: &str) -> String {
    format!("upstreams:{tenant_id}")
}

/// KV: the prefix of every relay session's listing.
pub const RELAY_SESSION_PREFIX: &str = "relay-session:";

/// KV: a relay session that has served a request, listed under its tenant for the metrics
/// and the retention sweep of workspace bodies.
pub fn relay_session(tenant_id: &str, session: &str) -> String {
    format!("{RELAY_SESSION_PREFIX}{tenant_id}:{session}")
}

/// The tenant and relay session a listing's KV key names, if it is one (both by the rule of
/// `auth::session_name_ok`, which has no `:`).
pub fn listed_relay_session(kv_key: &str) -> Option<(&str, &str)> {
    let (tenant, session) = kv_key.strip_prefix(RELAY_SESSION_PREFIX)?.split_once(':')?;
    (session_name_ok(tenant) && session_name_ok(session)).then_some((tenant, session))
}

/// KV: the prefixes of OAuth grants, tokens and codes (a deletion scans them for a tenant's).
pub const OAUTH_GRANT_PREFIX: &str = "oauth:grant:";
pub const OAUTH_TOKEN_PREFIX: &str = "oauth:token:";
pub const OAUTH_CODE_PREFIX: &str = "oauth:code:";

/// KV: an OAuth client.
pub fn oauth_client(client_id: &str) -> String {
    format!("oauth:client:{client_id}")
}

/// KV: an OAuth grant.
pub fn oauth_grant(grant_id: &str) -> String {
    format!("{OAUTH_GRANT_PREFIX}{grant_id}")
}

/// KV: an OAuth authorization code, by its hash.
pub fn oauth_code(code: &str) -> String {
    format!("{OAUTH_CODE_PREFIX}{}", token_hash(code))
}

/// KV: an OAuth access or refresh token, by its hash.
pub fn oauth_token(token: &str) -> String {
    format!("{OAUTH_TOKEN_PREFIX}{}", token_hash(token))
}

/// R2: a layer zip, by its sha256, shared by every capsule that has it.
pub fn layer(sha256: &str) -> String {
    format!("layers/{sha256}")
}

/// R2: a tenant's capsule.json (the egress route reads its policy there).
pub fn manifest(tenant_id: &str, hash: &str) -> String {
    format!("capsules/{tenant_id}/{hash}/{MANIFEST_FILE}")
}

/// R2: a tenant's finished build of a dependency request (`packages::BuildRecord`).
pub fn build_record(tenant_id: &str, key: &str) -> String {
    format!("builds/{tenant_id}/{key}.json")
}

/// R2: a file a run published from `/out`.
pub fn out_file(tenant: &str, run: &str, path: &str) -> String {
    format!("files/{tenant}/{run}/{}", path.trim_start_matches('/'))
}

/// R2: a body of a relay session's workspace files, by its sha256; `relay_session` is its
/// object name (`protocol::object_name`: `<tenant>/<session>`). Each relay session owns its
/// prefix, so its retention sweep can tell what nothing names (`relay_session::body_sweep`);
/// `relay_session::workspace` says which bodies are inline in SQLite instead.
pub fn workspace_body(relay_session: &str, sha256: &str) -> String {
    format!("workspace/{relay_session}/{sha256}")
}

/// R2: a body stored before bodies were kept per relay session: once for all of a tenant's
/// relay sessions (read still; never deleted but with the tenant).
pub fn tenant_workspace_body(tenant: &str, sha256: &str) -> String {
    format!("workspace/{tenant}/{sha256}")
}

// R2 also holds Pyodide's memory snapshot for the edge executor, no tenant's, written and read
// by the Worker's JavaScript (`durable/js/edge-pyodide.mjs` `snapshotOf`):
// `runtime-snapshots/<runtime id>/<sha256 of what shaped it>`, which no retention sweep lists.

/// R2: the prefixes of everything a tenant owns there (layers are shared, never a tenant's):
/// its capsules, its build records, its `/out` files, its workspace bodies. Each ends in `/`.
pub fn tenant_prefixes(tenant: &str) -> [(&'static str, String); 4] {
    [
        ("capsules", format!("capsules/{tenant}/")),
        ("builds", format!("builds/{tenant}/")),
        ("outFiles", format!("files/{tenant}/")),
        ("workspaceBodies", tenant_workspace_body(tenant, "")),
    ]
}
