//! The Worker's bindings, secrets and variables (wrangler.toml), each named once.

use worker::{Env, Result};

/// R2, KV, the page's assets, the OAuth registration limiter: named in the core's table, which
/// the deploy check holds wrangler.toml to (`relay_core::deploy::BINDINGS`).
pub use relay_core::deploy::{ASSETS, KV_CONFIG, LEDGERS, OAUTH_REGISTER, R2_CAPSULES};
/// The relay sessions' Durable Objects (named by `protocol::object_name`).
pub use relay_core::protocol::SESSIONS_BINDING as SESSIONS;
/// Secret: the Ed25519 seed that signs capsules and tokens.
pub const CAPSULE_SIGNING_KEY: &str = "CAPSULE_SIGNING_KEY";
/// Secret: the admin routes' bearer token.
pub const ADMIN_TOKEN: &str = "ADMIN_TOKEN";
/// Variable: retired public keys (a JWK set) that still verify capsules.
pub const CAPSULE_RETIRED_KEYS: &str = "CAPSULE_RETIRED_KEYS";
/// Variable: the origin clients reach the Worker at, behind a proxy.
pub const PUBLIC_URL: &str = "PUBLIC_URL";
/// Variable: the deployed version, for `/healthz`.
pub const RELAY_VERSION: &str = "RELAY_VERSION";
/// Variable: the least level of the request log lines the Worker writes (`relay_core::log::Level`).
pub const LOG_LEVEL: &str = "LOG_LEVEL";
/// Variable: `1` under `wrangler dev`, where loopback origins may call `/mcp`.
pub const RELAY_ALLOW_LOCALHOST: &str = "RELAY_ALLOW_LOCALHOST";
/// Variable: `1` in one edge test only (never in wrangler.toml): a relay session loses its edge
/// standby before each run (`relay_session::edge`).
pub const RELAY_TEST_LOSE_STANDBY: &str = "RELAY_TEST_LOSE_STANDBY";

pub fn bucket(env: &Env) -> Result<worker::Bucket> {
    env.bucket(R2_CAPSULES)
}

pub fn kv(env: &Env) -> Result<worker::kv::KvStore> {
    env.kv(KV_CONFIG)
}

/// A variable's value, if the deployment sets it.
pub fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|value| value.to_string())
}

/// The origin the Worker's URLs are made with: `PUBLIC_URL` when the deployment sets it
/// (behind a proxy), else the request's own (`relay_core::protocol::public_origin`). A
/// malformed `PUBLIC_URL` is an error naming it (500), never a wrong URL.
pub fn public_origin(env: &Env, url: &url::Url) -> Result<String> {
    relay_core::protocol::public_origin(var(env, PUBLIC_URL).as_deref(), &url.origin().ascii_serialization())
        .map_err(worker::Error::RustError)
}
