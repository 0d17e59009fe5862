//! Absolute runtime paths of the filesystem policy, compared segment by segment, and the rule
//! a guest's file access must pass (docs/CAPSULE.md "The rule for one path").

use super::FsPolicy;

/// The workspace's roots: every path a guest reads or writes lies under one of them.
pub const WORKSPACE_ROOTS: [&str; 4] = ["/tmp", "/out", "/host", "/mcps"];
/// The root that holds the tenant's MCP servers' files: readable at most, never writable.
const NEVER_WRITABLE: &str = "/mcps";
const MAX_PATH_BYTES: usize = 1024;
const MAX_SEGMENT_BYTES: usize = 255;
/// Percent-encoded `.`, `/`, `\` and NUL: a layer that decodes paths later would turn them
/// into an escape, so they are refused as written (compared case-insensitively).
const ENCODED_ESCAPES: [&str; 4] = ["%2e", "%2f", "%5c", "%00"];

/// What a guest does with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Decides whether a guest may `access` `path` under `fs`.
///
/// Ok is the path with one trailing `/` dropped; Err is a sentence that names the path and
/// says what to change. An escape attempt (`..`, `//`, `%2e`, a backslash) is refused, never
/// repaired: a path is checked exactly as the guest wrote it.
pub fn check_path(fs: &FsPolicy, path: &str, access: Access) -> Result<String, String> {
    let normalized = well_formed(path)?;
    let root = WORKSPACE_ROOTS.into_iter().find(|root| is_within(normalized, root)).ok_or_else(|| {
        format!("path {path:?} is outside the workspace; use a path under one of {WORKSPACE_ROOTS:?}")
    })?;
    match access {
        Access::Write => check_write(fs, path, normalized, root)?,
        Access::Read => check_read(fs, path, normalized, root)?,
    }
    Ok(normalized.to_string())
}

/// `path` without its trailing `/` if it breaks none of the syntactic rules, else which one.
/// (`files::out_path` holds a published file's decoded path to the same rules.)
pub(crate) fn well_formed(path: &str) -> Result<&str, String> {
    let refuse = |why: &str| Err(format!("path {path:?} {why}"));
    if !path.starts_with('/') {
        return refuse("is not absolute; start it with \"/\" and one of the workspace roots, e.g. \"/tmp/\"");
    }
    if path.len() > MAX_PATH_BYTES {
        return refuse(&format!("is {} bytes long; a path may have at most {MAX_PATH_BYTES}", path.len()));
    }
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return refuse(&format!("contains the control character U+{:04X}; remove it", u32::from(c)));
    }
    if path.contains('\\') {
        return refuse("contains a backslash; separate segments with \"/\" only");
    }
    let lower = path.to_ascii_lowercase();
    if let Some(code) = ENCODED_ESCAPES.iter().find(|code| lower.contains(*code)) {
        return refuse(&format!(
            "contains {code:?}, a percent-encoded \".\", \"/\", \"\\\" or NUL; write names as they are"
        ));
    }
    // One trailing slash after a segment is dropped ("/tmp/"); "/" has no segments at all.
    let rest = &path[1..];
    let rest = rest.strip_suffix('/').filter(|_| rest != "/").unwrap_or(rest);
    for segment in rest.split('/').filter(|_| !rest.is_empty()) {
        match segment {
            "" => return refuse("has an empty segment (\"//\"); remove the extra \"/\""),
            "." | ".." => {
                return refuse(&format!(
                    "has a {segment:?} segment; paths are not normalized, so name the file without \".\" or \"..\""
                ))
            }
            long if long.len() > MAX_SEGMENT_BYTES => {
                return refuse(&format!(
                    "has a segment of {} bytes; a segment may have at most {MAX_SEGMENT_BYTES}",
                    long.len()
                ))
            }
            _ => {}
        }
    }
    Ok(&path[..1 + rest.len()])
}

fn check_write(fs: &FsPolicy, path: &str, normalized: &str, root: &str) -> Result<(), String> {
    if root == NEVER_WRITABLE {
        return Err(format!(
            "path {path:?} is not writable: {NEVER_WRITABLE} holds the tenant's MCP servers' files and is never \
             writable; write under one of policy.filesystem.writable {:?}",
            fs.writable
        ));
    }
    if fs.writable.iter().any(|prefix| is_within(normalized, prefix)) {
        return Ok(());
    }
    if fs.writable.is_empty() {
        return Err(format!(
            "path {path:?} is not writable: policy.filesystem.writable is empty, so nothing is; ask the \
             tenant to add {root:?}"
        ));
    }
    Err(format!(
        "path {path:?} is not writable: policy.filesystem.writable is {:?}; write under one of those, or ask \
         the tenant to add {root:?}",
        fs.writable
    ))
}

fn check_read(fs: &FsPolicy, path: &str, normalized: &str, root: &str) -> Result<(), String> {
    if fs.readonly.iter().chain(&fs.writable).any(|prefix| is_within(normalized, prefix)) {
        return Ok(());
    }
    Err(format!(
        "path {path:?} is not readable: policy.filesystem.readonly is {:?} and writable is {:?}; read under one \
         of those, or ask the tenant to add {root:?} to readonly",
        fs.readonly, fs.writable
    ))
}

/// `path` without a trailing `/` if it is absolute and has no empty, `.` or `..` segment.
pub(crate) fn clean_path(path: &str) -> Option<&str> {
    let trimmed = if path == "/" { path } else { path.strip_suffix('/').unwrap_or(path) };
    let rest = trimmed.strip_prefix('/')?;
    let clean = rest.is_empty() || rest.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
    clean.then_some(trimmed)
}

/// Whether `path` is `root` or lies under it (`/tmp` holds `/tmp/x`, not `/tmpx`).
pub(crate) fn is_within(path: &str, root: &str) -> bool {
    let (Some(path), Some(root)) = (clean_path(path), clean_path(root)) else {
        return false;
    };
    root == "/" || path == root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'))
}
