//! A relay session's workspace, as the relay session keeps it (docs/ARCHITECTURE.md "The
//! workspace"): an index of files (path → sha256, size, mtime, the version that last changed
//! it) over bodies stored once by sha256. Pure: the store is `relay_session::workspace`, this
//! holds the rules every entrance applies and the answers of the file tools.
//!
//! - [`root`]: the root hash of an index, which the audit records before and after each run.
//! - [`rules`]: which changes the workspace takes (paths, files against directories, the cap).
//! - [`tools`]: `read` and `write` answered from an index and bodies, as the tab answered them.

pub mod root;
pub mod rules;
pub mod tools;

use serde::{Deserialize, Serialize};

pub use root::{root, root_of_listing, EMPTY_ROOT};
pub use rules::{Change, Refusal};

/// The root of the `/mcps` tree: the tenant's upstream servers' files, listed from them when
/// read, never stored in the index.
pub const MCPS_ROOT: &str = "/mcps";
/// A body of at most this many bytes is kept inline in the relay session's SQLite: a `read` of
/// a small file then costs no R2 round trip, and a row stays far below SQLite's limits.
pub const INLINE_MAX_BYTES: u64 = 4 * 1024;
/// The cap on a workspace's bytes, all files together, unless the tenant sets another.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The largest cap a tenant may set: a `search` reads the files it covers one at a time, but a
/// tab's cache holds the whole workspace in memory.
pub const MAX_MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// One file of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    pub path: String,
    /// Lowercase hex.
    pub sha256: String,
    pub size: u64,
    /// When it was last written, milliseconds since the epoch.
    pub mtime_ms: u64,
    /// The workspace version its last change made.
    pub version: u64,
}

/// The tenant's workspace settings (`defaults.workspace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct WorkspaceSettings {
    /// The most bytes a relay session's workspace holds, all files together.
    pub max_bytes: u64,
}

impl Default for WorkspaceSettings {
    fn default() -> Self {
        WorkspaceSettings { max_bytes: DEFAULT_MAX_BYTES }
    }
}

/// Whether `sha256` is a body's name: 64 lowercase hex characters; else what it must be.
pub fn check_sha256(sha256: &str) -> Result<(), String> {
    if sha256.len() == 64 && sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Ok(());
    }
    Err(format!("{sha256:?} is not a body's sha256: 64 lowercase hex characters (0-9 a-f)"))
}
