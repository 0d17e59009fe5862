//! Capsules: the signed, content-addressed unit of work a browser executor runs.
//!
//! A capsule is `capsule.json` (a [`manifest::Manifest`] carrying a JWS over its own canonical
//! JSON) plus layer zips named by their sha256. Everything here is pure: bytes in, bytes out,
//! so the Worker, the tests and (later) the browser build agree byte for byte.
//! The format is specified in `docs/CAPSULE.md`.

pub mod address;
pub mod build;
pub mod canonical;
mod error;
pub mod jws;
pub mod layer;
pub mod limits;
pub mod manifest;
pub mod memo;

pub use build::{
    build_capsule, inline_files, layer_entry, verify_layer, verify_manifest, Capsule, CapsuleSpec, Deps, INLINE_MAX,
};
pub use canonical::{canonical_json, capsule_hash};
pub use error::CapsuleError;
pub use manifest::{FsLayer, Language, Manifest};
pub use memo::CapsuleMemo;
