//! Capsules already built, remembered by what they were built from: a repeated call (the same
//! code, arguments, policy and signing key) gets its signed capsule again instead of having its
//! layers zipped, hashed and its manifest signed once more. Ed25519 signatures are
//! deterministic, so a remembered capsule is byte-identical to a rebuilt one: the memo changes
//! how fast an answer comes, never what it is.

use std::collections::VecDeque;

use super::build::{build_capsule, Capsule, CapsuleSpec};
use super::jws::Signer;
use super::CapsuleError;

/// The most capsules remembered; the least recently used goes first.
pub const MEMO_ENTRIES: usize = 64;
/// The most bytes (code, manifest and layers) remembered; a capsule bigger than this is built
/// every time.
pub const MEMO_BYTES: usize = 8 * 1024 * 1024;

/// A small least-recently-used memo of built capsules. Lookups compare the whole spec (and the
/// key id) for equality: with at most [`MEMO_ENTRIES`] entries, that is cheaper than hashing
/// a spec's code on every call and cannot confuse two inputs.
#[derive(Debug, Default)]
pub struct CapsuleMemo {
    entries: VecDeque<Entry>,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    spec: CapsuleSpec,
    kid: String,
    capsule: Capsule,
    bytes: usize,
}

impl CapsuleMemo {
    /// The capsule `spec` builds with `signer`: remembered, or built now (and remembered if it
    /// fits). A build error is returned and never remembered.
    pub fn build(&mut self, spec: CapsuleSpec, signer: &Signer) -> Result<Capsule, CapsuleError> {
        if let Some(at) = self.entries.iter().position(|e| e.kid == signer.kid() && e.spec == spec) {
            let entry = self.entries.remove(at).expect("position is in range");
            let capsule = entry.capsule.clone();
            self.entries.push_back(entry);
            return Ok(capsule);
        }
        let capsule = build_capsule(spec.clone(), signer)?;
        let bytes = spec.code.len()
            + capsule.manifest_json.len()
            + capsule.layers.iter().map(|(_, zip)| zip.len()).sum::<usize>();
        if bytes <= MEMO_BYTES {
            self.bytes += bytes;
            self.entries.push_back(Entry { spec, kid: signer.kid().to_owned(), capsule: capsule.clone(), bytes });
            while self.entries.len() > MEMO_ENTRIES || self.bytes > MEMO_BYTES {
                let oldest = self.entries.pop_front().expect("over a limit, so not empty");
                self.bytes -= oldest.bytes;
            }
        }
        Ok(capsule)
    }

    /// How many capsules are remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
