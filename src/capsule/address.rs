//! How a capsule's files are addressed: `GET /capsules/<hash>/<file>`. The Worker checks both
//! parts here before any storage lookup, so a hostile path is refused for its shape and never
//! reaches R2 as part of a key (R2 refuses overlong keys with an error, not a miss).

/// The signed manifest's file name.
pub const MANIFEST_FILE: &str = "capsule.json";

/// What a capsule hash must be, quoted in refusals.
pub const HASH_RULE: &str =
    "a capsule hash is exactly 64 lowercase hex characters (0-9 a-f): the `hash` POST /capsules returned";
/// What a capsule file name must be, quoted in refusals.
pub const FILE_RULE: &str = "a capsule file is `capsule.json` or a layer as the manifest's fsLayers[].path names it: \
    `fs.<id>.zip`, <id> being 1 to 32 of a-z 0-9 -";

/// Longest layer id a file name may carry (the builder uses `code` and `deps`).
const LAYER_ID_MAX: usize = 32;

/// The file a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapsuleFile<'a> {
    /// `capsule.json`.
    Manifest,
    /// A layer zip, by the path its manifest entry gives (`fs.code.zip`).
    Layer(&'a str),
}

/// The path a layer with this id has in the manifest.
pub fn layer_file(id: &str) -> String {
    format!("fs.{id}.zip")
}

/// Checks a capsule hash's shape; `Err` is [`HASH_RULE`].
pub fn check_hash(hash: &str) -> Result<(), &'static str> {
    let hex = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    hex.then_some(()).ok_or(HASH_RULE)
}

/// Reads a file name; `Err` is [`FILE_RULE`]. Only the shape is checked: whether the capsule
/// has that layer is for its manifest to say.
pub fn parse_file(file: &str) -> Result<CapsuleFile<'_>, &'static str> {
    if file == MANIFEST_FILE {
        return Ok(CapsuleFile::Manifest);
    }
    let id = file.strip_prefix("fs.").and_then(|rest| rest.strip_suffix(".zip")).ok_or(FILE_RULE)?;
    let id_ok = (1..=LAYER_ID_MAX).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    id_ok.then_some(CapsuleFile::Layer(file)).ok_or(FILE_RULE)
}
