//! The files a run leaves in `/out`: which paths a run may publish, where they live in R2, and
//! the signed, expiring URLs that download them (the Worker's I/O is
//! `durable/src/edge/files.rs`).
//!
//! The tab uploads each file with `PUT /files/<run>/out/<path>` and the run token; the Worker
//! stores it at `files/<tenant>/<run>/out/<path>` and answers a download URL
//! `<origin>/files/<tenant>/<run>/out/<path>?exp=<unix s>&sig=<base64url>`, absolute, so that a
//! client that does not know the server's address (one behind mcp-remote) can still use it. The
//! URL needs no key: `sig`
//! is an Ed25519 signature (the capsule signing key's) over
//! `relay-download-v1\nGET\n<url path>\n<exp>`, so it admits that one path until `exp` and
//! nothing else. URL paths carry every byte outside `A-Z a-z 0-9 - . _ ~ /` percent-encoded,
//! a form URL parsers leave as it is, so the path signed is the path the Worker sees.

use serde::Serialize;

use crate::capsule::jws::{self, b64url, b64url_decode, KeySet, Signer};
use crate::policy::fs_path::{is_within, well_formed};
use serde_json::json;

/// How long a download URL works: one hour, enough to fetch a run's results, short enough
/// that a URL pasted somewhere stops working soon. A new run (or the DO) mints new ones.
pub const DOWNLOAD_URL_TTL_S: u64 = 3600;
/// The most files one run may publish.
pub const MAX_FILES_PER_RUN: usize = 32;
/// The directory runs publish from.
pub const OUT_DIR: &str = "/out";
/// The JWS `typ` download signatures are made with: no token of another kind can pass as one.
const DOWNLOAD_TYP: &str = "relay-download";
/// Domain separation of the signed string, versioned so its form can change.
const SIGNED_PREFIX: &str = "relay-download-v1";

/// Why a file path was refused: malformed (400) or outside `/out` (403).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    Malformed(String),
    OutsideOut(String),
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::Malformed(why) => write!(f, "file path: {why}"),
            PathError::OutsideOut(path) => write!(
                f,
                "file path {path:?} is not under {OUT_DIR}: only files a run writes under {OUT_DIR} are published"
            ),
        }
    }
}

/// The runtime path (`/out/...`) a URL's percent-encoded path segments name. Each segment is
/// decoded on its own: an encoded `/` is refused rather than read as a separator. The decoded
/// path must then pass the workspace's own path rule (`policy::check_path`'s: no backslash,
/// control character, `.` or `..` segment, empty segment, or over-long name), so `/out` never
/// holds a name the workspace could not.
pub fn out_path(encoded_segments: &[&str]) -> Result<String, PathError> {
    let mut path = String::new();
    for segment in encoded_segments {
        let Some(decoded) = percent_decode(segment) else {
            return Err(PathError::Malformed(format!("segment {segment:?} is not valid percent-encoded UTF-8")));
        };
        if decoded.contains('/') {
            return Err(PathError::Malformed(format!("segment {decoded:?} has a '/'; name files without one")));
        }
        path.push('/');
        path.push_str(&decoded);
    }
    match well_formed(&path) {
        Ok(normalized) if normalized == path => {}
        Ok(_) => return Err(PathError::Malformed(format!("path {path:?} ends with \"/\"; name a file"))),
        Err(why) => return Err(PathError::Malformed(why)),
    }
    if path == OUT_DIR || !is_within(&path, OUT_DIR) {
        return Err(PathError::OutsideOut(path));
    }
    Ok(path)
}

/// What one more upload of a run's file does to the run's count of published files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The path was published already: the upload replaces it and counts once.
    Replace,
    /// A new path, within [`MAX_FILES_PER_RUN`]: it takes a slot.
    Take,
    /// A new path past [`MAX_FILES_PER_RUN`]: refused.
    Full,
}

/// The slot an upload of a path gets, given whether the run published that path already and
/// how many paths it holds. The relay session decides this in one synchronous step per upload
/// (its Durable Object handles one at a time), so uploads racing each other cannot pass the cap.
pub fn slot(already_published: bool, published: usize) -> Slot {
    match (already_published, published >= MAX_FILES_PER_RUN) {
        (true, _) => Slot::Replace,
        (false, false) => Slot::Take,
        (false, true) => Slot::Full,
    }
}

/// Why a run's upload was refused for the count, for a 413.
pub fn too_many_files(path: &str) -> String {
    format!(
        "{path}: a run publishes at most {MAX_FILES_PER_RUN} files from /out; write fewer, larger files (an archive)"
    )
}

/// The URL path that downloads a run's file (percent-encoded, without query).
pub fn download_path(tenant: &str, run: &str, path: &str) -> String {
    format!("/files/{}/{}{}", percent_encode(tenant), percent_encode(run), percent_encode(path))
}

/// The download URL (path and query) of `path` of `run`, valid until `exp` (unix seconds).
pub fn sign_download(signer: &Signer, tenant: &str, run: &str, path: &str, exp: u64) -> String {
    let url_path = download_path(tenant, run, path);
    let jws = signer.sign(signed_string(&url_path, exp).as_bytes(), Some(DOWNLOAD_TYP));
    let sig = jws.rsplit('.').next().expect("a compact JWS has a signature part");
    format!("{url_path}?exp={exp}&sig={sig}")
}

/// A signed download URL and when it stops working.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadUrl {
    /// Absolute: the Worker's public origin, path and query.
    pub url: String,
    /// Unix seconds.
    pub expires_at: u64,
}

/// The download URL of a run's file on `origin` (the Worker's public origin, `scheme://host`),
/// valid for [`DOWNLOAD_URL_TTL_S`] from `now_s`: what `PUT /files` answers and what the
/// Session DO lists in a run's result for each file the tab reports.
pub fn download_url(signer: &Signer, origin: &str, tenant: &str, run: &str, path: &str, now_s: u64) -> DownloadUrl {
    let expires_at = now_s + DOWNLOAD_URL_TTL_S;
    let origin = origin.trim_end_matches('/');
    DownloadUrl { url: format!("{origin}{}", sign_download(signer, tenant, run, path, expires_at)), expires_at }
}

/// Checks a download request: `sig` must sign `url_path` and `exp` under one of `keys`, and
/// `exp` must not have passed. The error says which, for a 403.
pub fn verify_download(keys: &KeySet, url_path: &str, exp: u64, sig: &str, now_s: u64) -> Result<(), String> {
    let tampered = || {
        "this download URL's signature does not match its path and expiry; use the URL exactly as the run's \
         result gave it"
            .to_string()
    };
    if b64url_decode(sig).is_none() {
        return Err(tampered());
    }
    let payload = b64url(signed_string(url_path, exp).as_bytes());
    let signed_by_a_key = kids(keys).iter().any(|kid| {
        let header = json!({ "alg": "EdDSA", "kid": kid, "typ": DOWNLOAD_TYP });
        let compact = format!("{}.{payload}.{sig}", b64url(header.to_string().as_bytes()));
        jws::verify(&compact, keys).is_ok()
    });
    if !signed_by_a_key {
        return Err(tampered());
    }
    if now_s >= exp {
        return Err(format!(
            "this download URL expired at {exp} (unix seconds; URLs last {DOWNLOAD_URL_TTL_S} s) and none is \
             signed again: read the file from the workspace with the `read` tool (its /out path), or run the code again"
        ));
    }
    Ok(())
}

fn signed_string(url_path: &str, exp: u64) -> String {
    format!("{SIGNED_PREFIX}\nGET\n{url_path}\n{exp}")
}

fn kids(keys: &KeySet) -> Vec<String> {
    let jwks = keys.to_jwks();
    let listed = jwks["keys"].as_array().cloned().unwrap_or_default();
    listed.iter().filter_map(|key| key["kid"].as_str().map(str::to_owned)).collect()
}

/// The content type a file is served with, by its extension; unknown ones download as bytes.
pub fn content_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let extension = name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "txt" | "log" => "text/plain; charset=utf-8",
        "md" => "text/markdown; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "tsv" => "text/tab-separated-values; charset=utf-8",
        "json" => "application/json",
        "ndjson" | "jsonl" => "application/x-ndjson",
        "html" | "htm" => "text/html; charset=utf-8",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// Percent-encodes every byte outside `A-Z a-z 0-9 - . _ ~ /`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit))?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
