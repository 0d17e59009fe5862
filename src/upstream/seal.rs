//! Upstream credentials at rest: each header value of a tenant's upstream MCP server is sealed
//! with AES-256-GCM before it is written to KV, under a key derived (HKDF-SHA256) from the
//! Worker's signing key, with the tenant, server and header names as associated data, so
//! a sealed value opens only where it was sealed. Rotating the signing key makes stored values
//! unreadable: the admin sets them again.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};

use crate::capsule::jws::{b64url, b64url_decode, Signer};

const INFO: &[u8] = b"relay-edge upstream header values v1";

/// The key that seals and opens header values.
pub struct SealingKey(Aes256Gcm);

impl SealingKey {
    /// The key derived from the Worker's signing key.
    pub fn of(signer: &Signer) -> Self {
        SealingKey(Aes256Gcm::new(&signer.derive_key(INFO).into()))
    }

    /// `value` sealed for `place` (tenant, server, header name) with the 12-byte `nonce`
    /// (random, from the caller): base64url of the nonce then the ciphertext.
    pub fn seal(&self, place: &Place, value: &str, nonce: [u8; 12]) -> String {
        let aad = place.aad();
        let payload = Payload { msg: value.as_bytes(), aad: &aad };
        let sealed = self.0.encrypt(Nonce::from_slice(&nonce), payload).expect("AES-GCM seals any length we store");
        b64url(&[nonce.as_slice(), &sealed].concat())
    }

    /// The value sealed for `place`, or why it cannot be opened (moved, edited, or sealed under
    /// another key).
    pub fn open(&self, place: &Place, sealed: &str) -> Result<String, String> {
        let refused = || {
            format!(
                "the stored value of header {:?} of upstream server {:?} cannot be opened (was the signing key rotated?): set the server again with PUT /admin/tenants/{}/upstreams/{}",
                place.header, place.server, place.tenant, place.server
            )
        };
        let bytes = b64url_decode(sealed).filter(|b| b.len() > 12).ok_or_else(refused)?;
        let (nonce, ciphertext) = bytes.split_at(12);
        let aad = place.aad();
        let plain =
            self.0.decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad: &aad }).map_err(|_| refused())?;
        String::from_utf8(plain).map_err(|_| refused())
    }
}

/// Where a sealed value belongs.
pub struct Place<'a> {
    pub tenant: &'a str,
    pub server: &'a str,
    pub header: &'a str,
}

impl Place<'_> {
    fn aad(&self) -> Vec<u8> {
        [self.tenant, self.server, &self.header.to_ascii_lowercase()].join("\0").into_bytes()
    }
}
