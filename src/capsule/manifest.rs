//! `capsule.json`: the manifest as docs/CAPSULE.md describes it, as serde types.
//!
//! Field names are camelCase on the wire. `sig` and `entry.stdin` are left out when absent, so
//! the unsigned manifest is exactly the signed one minus `sig`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::Policy;

/// The manifest format version this code writes and reads.
pub const MANIFEST_VERSION: &str = "1";
/// quickjs-emscripten 0.32.0, as served from the Worker's static assets.
pub const QUICKJS_RUNTIME: &str = "quickjs@0.32";
/// pyodide 314.0.7, as served from the Worker's static assets.
pub const PYODIDE_RUNTIME: &str = "pyodide@314";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: String,
    pub language: Language,
    pub runtime: Runtime,
    pub entry: Entry,
    pub fs_layers: Vec<FsLayer>,
    pub policy: Policy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Js,
    Py,
}

impl Language {
    /// The runtime that executes this language.
    pub fn runtime_id(self) -> &'static str {
        match self {
            Language::Js => QUICKJS_RUNTIME,
            Language::Py => PYODIDE_RUNTIME,
        }
    }

    /// The tool that runs this language.
    pub fn tool_name(self) -> &'static str {
        match self {
            Language::Js => "run_js",
            Language::Py => "run_py",
        }
    }

    /// The entry file's name inside the code layer (mounted at `/`).
    pub fn entry_file(self) -> &'static str {
        match self {
            Language::Js => "entry.js",
            Language::Py => "entry.py",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runtime {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub path: String,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

/// One zip layer, unpacked at `/`; the layers of a capsule never hold the same path twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsLayer {
    pub id: String,
    pub sha256: String,
    pub path: String,
    pub size: u64,
}
