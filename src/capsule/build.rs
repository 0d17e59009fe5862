//! Building a capsule from a tool call's code, and verifying a capsule before trusting it.
//!
//! The capsule hash is sha256 of the canonical unsigned manifest, which is also the JWS
//! payload: the signature commits to exactly what the hash names. Ed25519 signatures are
//! deterministic, so one spec and one key always give byte-identical output.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::Value;

use super::address::layer_file;
use super::canonical::{canonical_json, sha256_hex, unsigned_bytes};
use super::jws::{self, KeySet, Signer};
use super::layer::build_layer;
use super::limits::check_sizes;
use super::manifest::{Entry, FsLayer, Language, Manifest, Runtime, MANIFEST_VERSION};
use super::CapsuleError;
use crate::policy::fs_path::clean_path;
use crate::policy::Policy;

/// The JWS `typ` of a capsule signature; it keeps other tokens from the same key (attach
/// tokens) from passing as one.
pub const SIG_TYP: &str = "relay-capsule+jws";

/// What a `run_js` / `run_py` call asks for, with the effective (already intersected) policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsuleSpec {
    pub language: Language,
    pub code: String,
    pub entry_argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub stdin: Option<String>,
    /// The working directory the entry starts in; absolute and normalized.
    pub cwd: String,
    pub policy: Policy,
    pub deps: Deps,
}

/// The deps layer of a capsule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deps {
    /// No deps layer.
    None,
    /// Files to zip into the layer here.
    Files(Vec<(String, Vec<u8>)>),
    /// A layer a tab built and uploaded (see `packages`), already stored under its sha256.
    Uploaded(FsLayer),
}

/// A built capsule, ready to store under `capsules/<hash>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capsule {
    pub hash: String,
    /// The signed manifest.
    pub manifest: Manifest,
    /// The exact bytes of `capsule.json`: canonical JSON of the signed manifest.
    pub manifest_json: Vec<u8>,
    /// The layers zipped here, code first, with their bytes, to store (an uploaded deps
    /// layer is stored already, and only in the manifest).
    pub layers: Vec<(FsLayer, Vec<u8>)>,
}

/// Zips the layers, checks the size limits, writes and signs the manifest.
pub fn build_capsule(spec: CapsuleSpec, signer: &Signer) -> Result<Capsule, CapsuleError> {
    spec.policy.validate().map_err(CapsuleError::BadPolicy)?;
    if clean_path(&spec.cwd).is_none() {
        return Err(CapsuleError::BadCwd(spec.cwd));
    }
    let entry_file = spec.language.entry_file();
    let code = build_layer(&[(entry_file.to_string(), spec.code.into_bytes())])?;
    let mut layers = vec![layer("code", code)];
    let mut fs_layers = vec![layers[0].0.clone()];
    match spec.deps {
        Deps::None => {}
        Deps::Files(files) => {
            layers.push(layer("deps", build_deps(&files, entry_file)?));
            fs_layers.push(layers[1].0.clone());
        }
        Deps::Uploaded(uploaded) => fs_layers.push(uploaded),
    }
    check_sizes(fs_layers[0].size, fs_layers.get(1).map_or(0, |deps| deps.size))?;
    let mut manifest = Manifest {
        version: MANIFEST_VERSION.to_string(),
        language: spec.language,
        runtime: Runtime { id: spec.language.runtime_id().to_string() },
        entry: Entry {
            path: format!("/{entry_file}"),
            argv: spec.entry_argv,
            env: spec.env,
            cwd: spec.cwd,
            stdin: spec.stdin,
        },
        fs_layers,
        policy: spec.policy,
        sig: None,
    };
    let payload = unsigned_bytes(&manifest)?;
    let hash = sha256_hex(&payload);
    manifest.sig = Some(signer.sign(&payload, Some(SIG_TYP)));
    let manifest_json = canonical_json(&manifest)?;
    Ok(Capsule { hash, manifest, manifest_json, layers })
}

/// Parses `capsule.json` and checks that `sig` is a capsule JWS from `keys` whose payload is
/// this very manifest minus `sig`, compared as canonical JSON of the raw document, so that
/// changed, added or removed fields all fail.
pub fn verify_manifest(manifest_json: &[u8], keys: &KeySet) -> Result<Manifest, CapsuleError> {
    let mut document: Value =
        serde_json::from_slice(manifest_json).map_err(|e| CapsuleError::BadManifest(e.to_string()))?;
    let object = document.as_object_mut().ok_or_else(|| CapsuleError::BadManifest("it is not a JSON object".into()))?;
    let sig = match object.remove("sig") {
        None => return Err(CapsuleError::MissingSig),
        Some(Value::String(sig)) => sig,
        Some(_) => return Err(CapsuleError::BadManifest("sig is not a string".into())),
    };
    let verified = jws::verify(&sig, keys)?;
    let typ = verified.header.get("typ").and_then(Value::as_str);
    if typ != Some(SIG_TYP) {
        return Err(CapsuleError::WrongSigType(typ.map(str::to_string)));
    }
    if verified.payload != canonical_json(&document)? {
        return Err(CapsuleError::SigMismatch);
    }
    let mut manifest: Manifest =
        serde_json::from_value(document).map_err(|e| CapsuleError::BadManifest(e.to_string()))?;
    if manifest.version != MANIFEST_VERSION {
        let message = format!("version {:?} is not supported; expected {MANIFEST_VERSION:?}", manifest.version);
        return Err(CapsuleError::BadManifest(message));
    }
    manifest.sig = Some(sig);
    Ok(manifest)
}

/// Checks fetched or uploaded layer bytes against their manifest entry.
pub fn verify_layer(layer: &FsLayer, bytes: &[u8]) -> Result<(), CapsuleError> {
    let actual = bytes.len() as u64;
    if actual != layer.size {
        return Err(CapsuleError::LayerSize { id: layer.id.clone(), expected: layer.size, actual });
    }
    let digest = sha256_hex(bytes);
    if digest != layer.sha256 {
        return Err(CapsuleError::LayerDigest { id: layer.id.clone(), expected: layer.sha256.clone(), actual: digest });
    }
    Ok(())
}

/// The deps layer may not hold the entry file: the code layer owns that path.
fn build_deps(files: &[(String, Vec<u8>)], entry_file: &str) -> Result<Vec<u8>, CapsuleError> {
    if let Some((path, _)) = files.iter().find(|(path, _)| path == entry_file) {
        let reason = "the code layer already holds the entry file at that path";
        return Err(CapsuleError::BadPath { path: path.clone(), reason });
    }
    build_layer(files)
}

fn layer(id: &str, bytes: Vec<u8>) -> (FsLayer, Vec<u8>) {
    (layer_entry(id, &sha256_hex(&bytes), bytes.len() as u64), bytes)
}

/// The manifest entry of layer `id` whose zip has `sha256` and `size`.
pub fn layer_entry(id: &str, sha256: &str, size: u64) -> FsLayer {
    FsLayer { id: id.to_string(), sha256: sha256.to_string(), path: layer_file(id), size }
}

/// The most bytes of capsule files a `capsule` command carries inline.
pub const INLINE_MAX: usize = 64 * 1024;

/// A capsule's small files, to travel in its `capsule` command so that the tab can run a new
/// capsule without fetching it (two requests, one after the other): `capsule.json` as text and
/// each layer zipped here as standard base64, by its path, while the raw bytes fit in
/// [`INLINE_MAX`]. The tab checks them exactly as if fetched (signature, hash, sha256); a deps
/// layer uploaded by a tab, or anything past the budget, is fetched as before.
pub fn inline_files(capsule: &Capsule) -> Option<Value> {
    let mut budget = INLINE_MAX.checked_sub(capsule.manifest_json.len())?;
    let manifest = String::from_utf8(capsule.manifest_json.clone()).ok()?;
    let mut layers = serde_json::Map::new();
    for (layer, zip) in &capsule.layers {
        if zip.len() > budget {
            break;
        }
        budget -= zip.len();
        layers.insert(layer.path.clone(), Value::String(STANDARD.encode(zip)));
    }
    Some(serde_json::json!({ "manifest": manifest, "layers": layers }))
}
