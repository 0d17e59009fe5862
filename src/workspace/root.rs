//! The root hash of a workspace: what its whole content was, in 64 hex characters. The audit
//! records it before and after each run, and anyone holding a listing can recompute it
//! (`relay-capsule workspace-root`), so an operator can say which files a run saw and left.
//!
//! Definition: the sha256 (lowercase hex) of one line per file, `path` TAB `sha256` TAB `size`
//! (decimal) LF, the files sorted by path as bytes. No path holds a tab or a line break
//! (`check_path` refuses control characters), so the lines say exactly one index. An empty
//! workspace's root is the sha256 of nothing, [`EMPTY_ROOT`].

use sha2::{Digest, Sha256};

/// The root of a workspace with no files.
pub const EMPTY_ROOT: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The root of the workspace holding `files` (`(path, sha256, size)`, in any order).
pub fn root<'a>(files: impl IntoIterator<Item = (&'a str, &'a str, u64)>) -> String {
    let mut files: Vec<_> = files.into_iter().collect();
    files.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut hash = Sha256::new();
    for (path, sha256, size) in files {
        hash.update(format!("{path}\t{sha256}\t{size}\n").as_bytes());
    }
    hex::encode(hash.finalize())
}

/// A listed file, as `relay://workspace` lists it (other fields are ignored).
#[derive(Debug, Clone, serde::Deserialize)]
struct Listed {
    path: String,
    sha256: String,
    size: u64,
}

/// The root of a listing an operator saved: `relay://workspace`'s object (its `files`), a JSON
/// array of files, or NDJSON (a file a line), each with `path`, `sha256` and `size`. A path
/// listed twice is refused: no index holds it.
pub fn root_of_listing(text: &str) -> Result<String, String> {
    let whole = serde_json::from_str::<serde_json::Value>(text).ok();
    let listed = match whole {
        Some(serde_json::Value::Object(mut resource)) if resource.contains_key("files") => {
            serde_json::from_value(resource.remove("files").unwrap_or_default())
        }
        Some(array @ serde_json::Value::Array(_)) => serde_json::from_value(array),
        _ => {
            let lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
            let parsed = lines.map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1)));
            return check_and_hash(parsed.collect::<Result<_, _>>()?);
        }
    };
    check_and_hash(listed.map_err(|e| format!("the listing: {e}"))?)
}

/// The root of listed files, none of them listed twice.
fn check_and_hash(files: Vec<Listed>) -> Result<String, String> {
    let mut paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    paths.sort_unstable();
    if let Some(twice) = paths.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(format!("{} is listed twice; a workspace holds one file per path", twice[0]));
    }
    Ok(root(files.iter().map(|f| (f.path.as_str(), f.sha256.as_str(), f.size))))
}
