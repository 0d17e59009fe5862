//! Canonical JSON and the capsule hash.
//!
//! The canonical form (docs/CAPSULE.md) is RFC 8785 (JCS) restricted to integers: object keys
//! sorted by UTF-16 code units, no whitespace, minimal string escapes. Restricting numbers to
//! integers sidesteps JCS's float formatting, the part implementations most often get wrong.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::manifest::Manifest;
use super::CapsuleError;

/// Serializes `value` in canonical form; floats are refused.
pub fn canonical_json(value: &impl Serialize) -> Result<Vec<u8>, CapsuleError> {
    let value = serde_json::to_value(value).map_err(|e| CapsuleError::NotCanonical(e.to_string()))?;
    let mut out = Vec::new();
    write_value(&value, &mut out)?;
    Ok(out)
}

/// The capsule's content address: lowercase hex sha256 of the canonical manifest without `sig`.
pub fn capsule_hash(manifest: &Manifest) -> String {
    sha256_hex(&unsigned_bytes(manifest))
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Canonical JSON of `manifest` with `sig` removed: what is hashed and what the JWS signs.
pub(crate) fn unsigned_bytes(manifest: &Manifest) -> Vec<u8> {
    let unsigned = Manifest { sig: None, ..manifest.clone() };
    // A manifest holds only strings, integers, booleans, arrays and string-keyed maps.
    canonical_json(&unsigned).expect("a manifest has no floats")
}

fn write_value(value: &Value, out: &mut Vec<u8>) -> Result<(), CapsuleError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) if n.is_i64() || n.is_u64() => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Number(n) => {
            return Err(CapsuleError::NotCanonical(format!("{n} is not an integer; only integers are allowed")))
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            // RFC 8785 3.2.3: compare keys as UTF-16 code units, not as UTF-8 bytes.
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// RFC 8785 3.2.2.2: escape only `"`, `\` and control characters, short forms where JSON has them.
fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if c < ' ' => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.push(b'"');
}
