//! Canonical JSON and the capsule hash.
//!
//! The canonical form (docs/CAPSULE.md) is RFC 8785 (JCS) restricted to integers of magnitude
//! at most 2^53 - 1: object keys sorted by UTF-16 code units, no whitespace, minimal string
//! escapes. Restricting numbers to integers sidesteps JCS's float formatting, the part
//! implementations most often get wrong; capping them keeps every one exact in a JavaScript
//! number, so that the page's checker (public/lib/canonical-json.js) writes the same bytes.
//! tests/canonical_cases.json holds both sides to one table of cases.

use serde::Serialize;
use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use super::manifest::Manifest;
use super::CapsuleError;

/// The largest integer magnitude canonical JSON holds: JavaScript's `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Serializes `value` in canonical form; floats and integers beyond ±(2^53 - 1) are refused,
/// naming where they are (a JSON Pointer).
pub fn canonical_json(value: &impl Serialize) -> Result<Vec<u8>, CapsuleError> {
    let value = serde_json::to_value(value).map_err(|e| CapsuleError::NotCanonical(e.to_string()))?;
    let mut writer = Writer { out: Vec::new(), pointer: String::new() };
    writer.value(&value)?;
    Ok(writer.out)
}

/// The capsule's content address: lowercase hex sha256 of the canonical manifest without `sig`.
/// A manifest with no canonical form (a tenant's huge maxBodyBytes, say) has none.
pub fn capsule_hash(manifest: &Manifest) -> Result<String, CapsuleError> {
    Ok(sha256_hex(&unsigned_bytes(manifest)?))
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Canonical JSON of `manifest` with `sig` removed: what is hashed and what the JWS signs.
pub(crate) fn unsigned_bytes(manifest: &Manifest) -> Result<Vec<u8>, CapsuleError> {
    canonical_json(&Manifest { sig: None, ..manifest.clone() })
}

struct Writer {
    out: Vec<u8>,
    /// Where the value being written is, as a JSON Pointer (RFC 6901), for error messages.
    pointer: String,
}

impl Writer {
    fn value(&mut self, value: &Value) -> Result<(), CapsuleError> {
        match value {
            Value::Null => self.out.extend_from_slice(b"null"),
            Value::Bool(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Number(n) => self.number(n)?,
            Value::String(s) => write_string(s, &mut self.out),
            Value::Array(items) => {
                self.out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.member(&i.to_string(), item)?;
                }
                self.out.push(b']');
            }
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                // RFC 8785 3.2.3: compare keys as UTF-16 code units, not as UTF-8 bytes.
                entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                self.out.push(b'{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    write_string(key, &mut self.out);
                    self.out.push(b':');
                    self.member(key, item)?;
                }
                self.out.push(b'}');
            }
        }
        Ok(())
    }

    /// Writes `item`, found under `key` (an object key or an array index) of the current value.
    fn member(&mut self, key: &str, item: &Value) -> Result<(), CapsuleError> {
        let len = self.pointer.len();
        self.pointer.push('/');
        self.pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
        let written = self.value(item);
        self.pointer.truncate(len);
        written
    }

    fn number(&mut self, n: &Number) -> Result<(), CapsuleError> {
        // serde_json holds an integer literal as i64 or u64 when it fits, else as a float.
        let integer = n.as_i64().map(i64::unsigned_abs).or_else(|| n.as_u64());
        let too_large =
            || self.refuse(format!("{n} is beyond ±(2^53 - 1)"), "only integers a JavaScript number keeps exactly");
        match integer {
            Some(m) if m <= MAX_SAFE_INTEGER => {
                self.out.extend_from_slice(n.to_string().as_bytes());
                Ok(())
            }
            Some(_) => Err(too_large()),
            // Too large to be exact in a float is too large as an integer: say so, as the page does.
            None if n.as_f64().is_some_and(|f| f.abs() > MAX_SAFE_INTEGER as f64) => Err(too_large()),
            None => Err(self.refuse(format!("{n} is not an integer"), "only integers")),
        }
    }

    fn refuse(&self, what: String, rule: &str) -> CapsuleError {
        let place = if self.pointer.is_empty() { "the top level" } else { &self.pointer };
        CapsuleError::NotCanonical(format!("{what}, at {place}: canonical JSON holds {rule}"))
    }
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
