//! Which changes a workspace takes, the same at every entrance (the file tools, a run's
//! commits, a tab's upload of files from before): a path `check_path` admits as a file of the
//! workspace, never a file where a directory is or below a file, and never past the cap.
//! The store gathers the [`Facts`] about a path; the decision is here.

use crate::error::{ErrorName, HttpError};
use crate::policy::{check_path, Access, FsPolicy, WORKSPACE_ROOTS};

/// One change to the workspace: a file written (its body stored already, by `sha256`), or
/// removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Write { path: String, sha256: String, size: u64 },
    Remove { path: String },
}

impl Change {
    pub fn path(&self) -> &str {
        match self {
            Change::Write { path, .. } | Change::Remove { path, .. } => path,
        }
    }
}

/// Why a change was refused: the error name a tool result or a route answers with, and a
/// sentence that names what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub name: ErrorName,
    pub message: String,
    /// When a route answers it: its `Retry-After` (a quota's), if it passes with time.
    pub retry_after_s: Option<u64>,
    /// A quota's refusal: its data, for the tool result's error (`HttpError::quota`).
    pub quota: Option<serde_json::Value>,
}

impl Refusal {
    pub fn new(name: ErrorName, message: impl Into<String>) -> Self {
        Refusal { name, message: message.into(), retry_after_s: None, quota: None }
    }
}

impl From<HttpError> for Refusal {
    fn from(e: HttpError) -> Self {
        Refusal { name: e.name, message: e.message, retry_after_s: e.retry_after_s, quota: e.quota }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name.as_str(), self.message)
    }
}

/// What the rules need to know of the workspace around one path, as it stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The size of the file at the path, if there is one.
    pub existing: Option<u64>,
    /// A file at a directory above the path (`/tmp/a` for `/tmp/a/b`), if there is one.
    pub file_above: Option<String>,
    /// How many files lie below the path, at any depth (it is a directory if any).
    pub files_below: u64,
    /// Every file's bytes together.
    pub total_bytes: u64,
    /// How many files the workspace holds.
    pub total_files: u64,
}

/// How many files a workspace may hold. Each sync, commit and root reads the whole index in
/// the relay session (128 MB for everything it does), so the count is bounded as the bytes
/// are: 16,384 files of 1 KiB paths stay a few tens of MB there. Empty files would otherwise
/// cost nothing against the cap.
pub const MAX_FILES: u64 = 16_384;

/// A path the workspace may hold a file at: `check_path`'s syntax, under a root and not a root
/// itself, written as the rule leaves it (no trailing `/`). The refusal is ValidationError.
pub fn file_path(path: &str) -> Result<(), Refusal> {
    let any_read = FsPolicy { readonly: vec!["/".into()], writable: Vec::new() };
    let invalid = |message: String| Refusal::new(ErrorName::ValidationError, message);
    let normalized = check_path(&any_read, path, Access::Read).map_err(invalid)?;
    if WORKSPACE_ROOTS.contains(&path) {
        return Err(invalid(format!("path {path:?} is a root of the workspace, not a file")));
    }
    if normalized != path {
        return Err(invalid(format!("path {path:?} ends with \"/\"; name the file as {normalized:?}")));
    }
    Ok(())
}

/// The directories above `path`, nearest last (`/tmp`, `/tmp/a` for `/tmp/a/b`).
pub fn directories_above(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').skip(1).map(move |(end, _)| &path[..end])
}

/// Whether a file of `size` bytes may be written at `path` given `facts`, under a cap of
/// `max_bytes`: the path's shape, no file above it, no files below it, the cap.
pub fn check_write(path: &str, size: u64, facts: &Facts, max_bytes: u64) -> Result<(), Refusal> {
    file_path(path)?;
    if let Some(file) = &facts.file_above {
        let message = format!("cannot write {path}: {file} is a file; remove it first or choose another path");
        return Err(Refusal::new(ErrorName::ValidationError, message));
    }
    if facts.files_below > 0 {
        let n = facts.files_below;
        let message = format!(
            "cannot write {path}: it is a directory (it holds {n} file{}); choose another path",
            if n == 1 { "" } else { "s" }
        );
        return Err(Refusal::new(ErrorName::ValidationError, message));
    }
    if facts.existing.is_none() && facts.total_files >= MAX_FILES {
        let message = format!(
            "cannot write {path}: the workspace holds {} files, its limit; delete files under /tmp or /out you no \
             longer need (fs.rmSync in JavaScript, os.remove or shutil.rmtree in Python), or put many small ones \
             in one file (a zip or a JSON), and write again",
            facts.total_files
        );
        return Err(Refusal::new(ErrorName::OutputLimitExceeded, message));
    }
    let total = facts.total_bytes - facts.existing.unwrap_or(0) + size;
    if total > max_bytes {
        return Err(Refusal::new(ErrorName::OutputLimitExceeded, full_message(path, total, max_bytes)));
    }
    Ok(())
}

/// Why a write that would make the workspace `total` bytes is refused: what the limit is,
/// what to delete and how.
pub fn full_message(path: &str, total: u64, max_bytes: u64) -> String {
    let mib = max_bytes as f64 / (1024.0 * 1024.0);
    format!(
        "writing {path} would make the workspace {total} bytes, over its limit of {mib} MiB ({max_bytes} bytes); \
         delete files under /tmp or /out you no longer need (fs.rmSync in JavaScript, os.remove or shutil.rmtree \
         in Python) and write again, or ask the relay's admin to raise the tenant's defaults.workspace.maxBytes"
    )
}
