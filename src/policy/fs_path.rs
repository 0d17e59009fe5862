//! Absolute runtime paths of the filesystem policy, compared segment by segment.

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
