//! The keys: the signer of capsules and tokens (the `CAPSULE_SIGNING_KEY` secret), the key
//! sets that verify them, the key that seals upstream servers' header values and the one that
//! seals Python's memory snapshot in R2.

use super::bindings::{CAPSULE_RETIRED_KEYS, CAPSULE_SIGNING_KEY};
use relay_core::capsule::jws::{KeySet, Signer};
use relay_core::runtime_snapshot::Seal;
use relay_core::upstream::seal::SealingKey;
use serde_json::Value;
use worker::{Env, Result};

/// The Worker's capsule signer, from the `CAPSULE_SIGNING_KEY` secret (a 32-byte Ed25519 seed).
pub fn signer(env: &Env) -> Result<Signer> {
    let secret = env.secret(CAPSULE_SIGNING_KEY).map_err(|_| {
        worker::Error::RustError(format!("{CAPSULE_SIGNING_KEY} is not set: wrangler secret put {CAPSULE_SIGNING_KEY}"))
    })?;
    Signer::from_base64url_seed(&secret.to_string())
        .map_err(|e| worker::Error::RustError(format!("{CAPSULE_SIGNING_KEY}: {e}")))
}

/// The keys that verify capsules: the current one plus any retired public keys kept in the
/// `CAPSULE_RETIRED_KEYS` variable (a JWK set), so capsules signed before a rotation verify.
pub fn key_set(env: &Env) -> Result<KeySet> {
    let mut jwks = KeySet::from_signers(&[&signer(env)?]).to_jwks();
    if let Ok(retired) = env.var(CAPSULE_RETIRED_KEYS) {
        let retired: Value = serde_json::from_str(&retired.to_string())?;
        let keys = jwks["keys"].as_array_mut().expect("keys array");
        keys.extend(retired["keys"].as_array().cloned().unwrap_or_default());
    }
    KeySet::from_jwks(&jwks).map_err(|e| worker::Error::RustError(format!("key set: {e}")))
}

/// The keys that verify attach and capsule-files tokens: the current one only. Tokens live five
/// minutes, so a retired key (perhaps retired because it leaked) never needs to mint one again.
pub fn token_keys(env: &Env) -> Result<KeySet> {
    Ok(KeySet::from_signers(&[&signer(env)?]))
}

/// The key that seals and opens upstream servers' header values.
pub fn sealing_key(env: &Env) -> Result<SealingKey> {
    Ok(SealingKey::of(&signer(env)?))
}

/// The key that seals Python's memory snapshot in R2 (`relay_core::runtime_snapshot`).
pub fn snapshot_seal(env: &Env) -> Result<Seal> {
    Ok(Seal::of(&signer(env)?))
}
