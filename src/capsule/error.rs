//! The one error type of capsule building and verification.
//!
//! Every message names the offending item and, where it helps, what would be accepted, so a
//! tool result can carry it to the agent unchanged.

use crate::error::{ErrorName, HttpError};
use std::fmt;

use super::build::SIG_TYP;
use super::jws::JwsError;
use super::layer::DEPS_ROOTS;
use super::limits::mib;

/// What went wrong while building, reading or verifying a capsule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapsuleError {
    /// A layer path that could escape the layer's root or is not in normal form.
    BadPath { path: String, reason: &'static str },
    /// Two layer entries with the same path.
    DuplicatePath(String),
    /// A layer entry that is not a regular file (a symlink could point outside the layer).
    NotAFile(String),
    /// A deps layer entry outside `node_modules/` and `wheels/` (`layer::DEPS_ROOTS`).
    OutsideDeps(String),
    /// A layer, or the capsule as a whole, over its size limit.
    TooLarge { what: &'static str, actual: u64, limit: u64 },
    /// A layer whose content inflates past the cap (a zip bomb, or just too much).
    UnpackedTooLarge { limit: u64 },
    /// Bytes that are not a readable zip.
    BadZip(String),
    /// Writing a zip failed (in memory, so this is a bug, not bad input).
    ZipWrite(String),
    /// A value canonical JSON cannot express (a float, a map with non-string keys).
    NotCanonical(String),
    /// A working directory that is not an absolute, normalized path.
    BadCwd(String),
    /// A policy that cannot be enforced as written.
    BadPolicy(String),
    /// `capsule.json` that does not parse as a manifest.
    BadManifest(String),
    /// A manifest with no `sig`.
    MissingSig,
    /// A `sig` that is not a valid JWS from a known key.
    Jws(JwsError),
    /// A valid JWS that is not a capsule signature (say, an attach token).
    WrongSigType(Option<String>),
    /// A valid signature over something other than this manifest.
    SigMismatch,
    /// Layer bytes whose length differs from the manifest's.
    LayerSize { id: String, expected: u64, actual: u64 },
    /// Layer bytes whose sha256 differs from the manifest's.
    LayerDigest { id: String, expected: String, actual: String },
}

impl CapsuleError {
    /// The error name a tool result carries for this error: bad input of any kind is
    /// `ValidationError`, a zip that could not be written in memory is `Internal`.
    pub fn error_name(&self) -> &'static str {
        self.name().as_str()
    }

    pub fn name(&self) -> ErrorName {
        match self {
            CapsuleError::ZipWrite(_) => ErrorName::Internal,
            _ => ErrorName::ValidationError,
        }
    }
}

impl From<CapsuleError> for HttpError {
    fn from(e: CapsuleError) -> Self {
        HttpError::new(e.name(), e.to_string())
    }
}

impl fmt::Display for CapsuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapsuleError::BadPath { path, reason } => {
                write!(f, "layer path {path:?} is not allowed: {reason}")
            }
            CapsuleError::DuplicatePath(p) => write!(f, "layer path {p:?} appears more than once"),
            CapsuleError::NotAFile(p) => {
                write!(f, "layer entry {p:?} is not a regular file (symlinks are not allowed)")
            }
            CapsuleError::OutsideDeps(p) => write!(
                f,
                "the deps layer holds {p:?}, outside {}: a deps layer carries packages only, never the call's own files; the tab that built it must leave them out and build again",
                DEPS_ROOTS.join(" and ")
            ),
            CapsuleError::TooLarge { what, actual, limit } => {
                write!(f, "{what} is {} ({actual} bytes); the limit is {} ({limit} bytes)", mib(*actual), mib(*limit))
            }
            CapsuleError::UnpackedTooLarge { limit } => {
                write!(f, "layer unpacks to more than {} ({limit} bytes); refusing to inflate it further", mib(*limit))
            }
            CapsuleError::BadZip(e) => write!(f, "layer is not a valid zip: {e}"),
            CapsuleError::ZipWrite(e) => write!(f, "could not write layer zip: {e}"),
            CapsuleError::NotCanonical(e) => write!(f, "cannot write canonical JSON: {e}"),
            CapsuleError::BadCwd(cwd) => {
                write!(f, "cwd {cwd:?} must be an absolute path with no empty, \".\" or \"..\" segments")
            }
            CapsuleError::BadPolicy(e) => write!(f, "invalid policy: {e}"),
            CapsuleError::BadManifest(e) => write!(f, "capsule.json is not a valid manifest: {e}"),
            CapsuleError::MissingSig => write!(f, "capsule.json has no sig"),
            CapsuleError::Jws(e) => write!(f, "capsule signature is invalid: {e}"),
            CapsuleError::WrongSigType(Some(typ)) => {
                write!(f, "capsule signature has typ {typ:?}; expected {SIG_TYP:?}")
            }
            CapsuleError::WrongSigType(None) => {
                write!(f, "capsule signature has no typ; expected {SIG_TYP:?}")
            }
            CapsuleError::SigMismatch => {
                write!(f, "capsule signature does not cover this manifest: it was changed after signing")
            }
            CapsuleError::LayerSize { id, expected, actual } => {
                write!(f, "layer {id:?} is {actual} bytes; the manifest says {expected}")
            }
            CapsuleError::LayerDigest { id, expected, actual } => {
                write!(f, "layer {id:?} has sha256 {actual}; the manifest says {expected}")
            }
        }
    }
}

impl std::error::Error for CapsuleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CapsuleError::Jws(e) => Some(e),
            _ => None,
        }
    }
}

impl From<JwsError> for CapsuleError {
    fn from(e: JwsError) -> Self {
        CapsuleError::Jws(e)
    }
}
