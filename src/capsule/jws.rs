//! Compact JWS (RFC 7515) with EdDSA over Ed25519 (RFC 8037), generic over the payload bytes.
//!
//! Signs capsule manifests and attach-token JWTs. Verification accepts `alg: "EdDSA"` only and
//! picks the key by `kid`, so "alg":"none", HMAC-with-the-public-key and key-confusion attacks
//! have nothing to work with. Keys are identified by a kid derived from the public key itself.

use std::collections::BTreeMap;
use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use rand_core::{OsRng, RngCore};
use serde_json::{json, Value};

use super::canonical::sha256_hex;

const ALG: &str = "EdDSA";

/// Why a seed, a key set or a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwsError {
    /// A signing seed that is neither 43 base64url characters nor 64 hex characters.
    BadSeed(String),
    /// A JWKS that does not hold usable Ed25519 public keys.
    BadJwks(String),
    /// A token that is not `header.payload.signature`.
    PartCount(usize),
    /// A token part that is not unpadded base64url.
    BadBase64(&'static str),
    /// A header that is not a JSON object.
    BadHeader(String),
    /// A header with no `alg`.
    MissingAlg,
    /// A header whose `alg` is anything but `EdDSA`.
    UnsupportedAlg(String),
    /// A header with a `crit` list: no extension is understood, so none may be critical.
    CritUnsupported,
    /// A header with no `kid`.
    MissingKid,
    /// A `kid` that is not in the key set.
    UnknownKid(String),
    /// A signature of the wrong length.
    SignatureLength(usize),
    /// A signature that does not verify under the key named by `kid`.
    BadSignature,
}

impl fmt::Display for JwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwsError::BadSeed(e) => write!(f, "signing key seed is invalid: {e}"),
            JwsError::BadJwks(e) => write!(f, "key set is invalid: {e}"),
            JwsError::PartCount(n) => {
                write!(f, "token has {n} dot-separated parts; a compact JWS has 3 (header.payload.signature)")
            }
            JwsError::BadBase64(part) => write!(f, "token {part} is not unpadded base64url"),
            JwsError::BadHeader(e) => write!(f, "token header is not a JSON object: {e}"),
            JwsError::MissingAlg => write!(f, "token header has no alg; only {ALG:?} is accepted"),
            JwsError::UnsupportedAlg(alg) => {
                write!(f, "token alg {alg:?} is not accepted; only {ALG:?} is")
            }
            JwsError::CritUnsupported => {
                write!(f, "token header has crit, and no critical extension is supported")
            }
            JwsError::MissingKid => write!(f, "token header has no kid"),
            JwsError::UnknownKid(kid) => write!(f, "token kid {kid:?} is not a known key"),
            JwsError::SignatureLength(n) => {
                write!(f, "token signature is {n} bytes; Ed25519 signatures are 64")
            }
            JwsError::BadSignature => write!(f, "token signature does not verify"),
        }
    }
}

impl std::error::Error for JwsError {}

/// An Ed25519 signing key and its kid.
pub struct Signer {
    key: SigningKey,
    kid: String,
}

// Hand-written so that debug output can never print the secret key.
impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl Signer {
    pub fn from_seed(seed: &[u8; 32]) -> Signer {
        let key = SigningKey::from_bytes(seed);
        let kid = kid_of(&key.verifying_key());
        Signer { key, kid }
    }

    /// From a secret as stored in the Worker's environment: 43 base64url characters (no
    /// padding) or 64 hex characters; surrounding whitespace is ignored.
    pub fn from_base64url_seed(secret: &str) -> Result<Signer, JwsError> {
        let secret = secret.trim();
        let bytes = match secret.len() {
            43 => b64url_decode(secret).ok_or_else(|| JwsError::BadSeed("43 characters but not base64url".into()))?,
            // hex::decode takes exactly [0-9a-fA-F] in pairs: no sign, no odd length.
            64 => hex::decode(secret).map_err(|_| JwsError::BadSeed("64 characters but not hex".into()))?,
            n => {
                return Err(JwsError::BadSeed(format!(
                    "{n} characters; expected 43 base64url or 64 hex characters (32 bytes)"
                )))
            }
        };
        let seed: [u8; 32] = bytes.try_into().map_err(|_| JwsError::BadSeed("does not decode to 32 bytes".into()))?;
        Ok(Signer::from_seed(&seed))
    }

    /// A key for another purpose derived from this one's seed (HKDF-SHA256 with `info`), so
    /// one secret serves both and the derived key reveals nothing of the signing key.
    pub fn derive_key(&self, info: &[u8]) -> [u8; 32] {
        let mut key = [0u8; 32];
        hkdf::Hkdf::<sha2::Sha256>::new(None, &self.key.to_bytes())
            .expand(info, &mut key)
            .expect("32 bytes is a valid HKDF length");
        key
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// Compact JWS over `payload`, with header `{"alg":"EdDSA","kid":..,"typ":..}`.
    pub fn sign(&self, payload: &[u8], typ: Option<&str>) -> String {
        // Keys in alg, kid, typ order: sorted, and also insertion order.
        let mut header = json!({ "alg": ALG, "kid": self.kid });
        if let Some(typ) = typ {
            header["typ"] = typ.into();
        }
        let input = format!("{}.{}", b64url(header.to_string().as_bytes()), b64url(payload));
        let signature = self.key.sign(input.as_bytes());
        format!("{input}.{}", b64url(&signature.to_bytes()))
    }
}

/// Verification keys by kid; several at once so that tokens signed before a rotation still verify.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: BTreeMap<String, VerifyingKey>,
}

impl KeySet {
    pub fn from_signers(signers: &[&Signer]) -> KeySet {
        let keys = signers.iter().map(|s| (s.kid.clone(), s.key.verifying_key())).collect();
        KeySet { keys }
    }

    /// From `{"keys":[{"kty":"OKP","crv":"Ed25519","x":..,"kid":..}, ..]}`; a missing kid is
    /// derived from the key as [`Signer::kid`] does.
    pub fn from_jwks(jwks: &Value) -> Result<KeySet, JwsError> {
        let list =
            jwks.get("keys").and_then(Value::as_array).ok_or_else(|| JwsError::BadJwks("no \"keys\" array".into()))?;
        let mut keys = BTreeMap::new();
        for (i, jwk) in list.iter().enumerate() {
            let (kid, key) = parse_jwk(jwk).map_err(|e| JwsError::BadJwks(format!("key {i}: {e}")))?;
            keys.insert(kid, key);
        }
        Ok(KeySet { keys })
    }

    /// `{"keys":[..]}` sorted by kid.
    pub fn to_jwks(&self) -> Value {
        let keys: Vec<Value> = self.keys.iter().map(|(kid, key)| jwk(kid, key)).collect();
        json!({ "keys": keys })
    }
}

/// A token that verified: the key that signed it, its header and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub kid: String,
    pub header: Value,
    pub payload: Vec<u8>,
}

/// Verifies a compact JWS: EdDSA only, key chosen by `kid`, strict Ed25519 verification.
pub fn verify(token: &str, keys: &KeySet) -> Result<Verified, JwsError> {
    let parts: Vec<&str> = token.split('.').collect();
    let [header_b64, payload_b64, signature_b64] = parts[..] else {
        return Err(JwsError::PartCount(parts.len()));
    };
    let header = parse_header(header_b64)?;
    let kid = header_kid(&header)?;
    let key = keys.keys.get(kid).ok_or_else(|| JwsError::UnknownKid(kid.to_string()))?;
    let signature = b64url_decode(signature_b64).ok_or(JwsError::BadBase64("signature"))?;
    let signature = Signature::from_slice(&signature).map_err(|_| JwsError::SignatureLength(signature.len()))?;
    let payload = b64url_decode(payload_b64).ok_or(JwsError::BadBase64("payload"))?;
    let input = &token[..header_b64.len() + 1 + payload_b64.len()];
    // verify_strict also refuses small-order keys and non-canonical signatures (malleability).
    key.verify_strict(input.as_bytes(), &signature).map_err(|_| JwsError::BadSignature)?;
    Ok(Verified { kid: kid.to_string(), header, payload })
}

/// 32 fresh random bytes from the OS (`crypto.getRandomValues` in a Worker).
pub fn generate_seed() -> [u8; 32] {
    let mut seed = [0; 32];
    OsRng.fill_bytes(&mut seed);
    seed
}

/// Unpadded base64url, as JWS uses.
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Strict unpadded base64url: padding, other alphabets and stray trailing bits are refused.
pub fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

fn parse_header(header_b64: &str) -> Result<Value, JwsError> {
    let bytes = b64url_decode(header_b64).ok_or(JwsError::BadBase64("header"))?;
    let header: Value = serde_json::from_slice(&bytes).map_err(|e| JwsError::BadHeader(e.to_string()))?;
    if !header.is_object() {
        return Err(JwsError::BadHeader("it is not an object".into()));
    }
    match header.get("alg") {
        None => return Err(JwsError::MissingAlg),
        Some(Value::String(alg)) if alg == ALG => {}
        Some(Value::String(alg)) => return Err(JwsError::UnsupportedAlg(alg.clone())),
        Some(other) => return Err(JwsError::UnsupportedAlg(other.to_string())),
    }
    if header.get("crit").is_some() {
        return Err(JwsError::CritUnsupported);
    }
    Ok(header)
}

fn header_kid(header: &Value) -> Result<&str, JwsError> {
    match header.get("kid") {
        Some(Value::String(kid)) => Ok(kid),
        _ => Err(JwsError::MissingKid),
    }
}

fn parse_jwk(jwk: &Value) -> Result<(String, VerifyingKey), String> {
    let field = |name: &str| jwk.get(name).and_then(Value::as_str);
    for (name, want, required) in
        [("kty", "OKP", true), ("crv", "Ed25519", true), ("alg", ALG, false), ("use", "sig", false)]
    {
        match field(name) {
            Some(value) if value == want => {}
            None if !required => {}
            _ => return Err(format!("{name} must be {want:?}")),
        }
    }
    let x = field("x").ok_or("no \"x\"")?;
    let bytes: [u8; 32] =
        b64url_decode(x).and_then(|b| b.try_into().ok()).ok_or("\"x\" is not 32 bytes of base64url")?;
    let key = VerifyingKey::from_bytes(&bytes).map_err(|_| "\"x\" is not an Ed25519 point")?;
    if key.is_weak() {
        return Err("\"x\" is a small-order (weak) key".into());
    }
    let kid = field("kid").map_or_else(|| kid_of(&key), str::to_string);
    Ok((kid, key))
}

fn jwk(kid: &str, key: &VerifyingKey) -> Value {
    json!({
        "kty": "OKP",
        "crv": "Ed25519",
        "x": b64url(key.as_bytes()),
        "kid": kid,
        "alg": ALG,
        "use": "sig",
    })
}

/// First 16 hex characters of sha256 of the 32-byte public key.
fn kid_of(key: &VerifyingKey) -> String {
    sha256_hex(key.as_bytes())[..16].to_string()
}
