//! The files a run leaves in `/out`: which paths a run may publish, where they live in R2, and
//! the signed, expiring URLs that download them (the Worker's I/O is
//! `durable/src/edge/files.rs`).
//!
//! The tab uploads each file with `PUT /files/<run>/out/<path>` and the run token; the Worker
//! stores it at `files/<tenant>/<run>/out/<path>` and answers a download URL
//! `/files/<tenant>/<run>/out/<path>?exp=<unix s>&sig=<base64url>`. The URL needs no key: `sig`
//! is an Ed25519 signature (the capsule signing key's) over
//! `relay-download-v1\nGET\n<url path>\n<exp>`, so it admits that one path until `exp` and
//! nothing else. URL paths carry every byte outside `A-Z a-z 0-9 - . _ ~ /` percent-encoded,
//! a form URL parsers leave as it is, so the path signed is the path the Worker sees.

use serde::Serialize;

use crate::capsule::jws::{self, b64url, b64url_decode, KeySet, Signer};
use crate::policy::fs_path::{clean_path, is_within};
use serde_json::json;

/// How long a download URL works: one hour, enough to fetch a run's results, short enough
/// that a URL pasted somewhere stops working soon. A new run (or the DO) mints new ones.
pub const DOWNLOAD_URL_TTL_S: u64 = 3600;
/// The most files one run may publish.
pub const MAX_FILES_PER_RUN: usize = 32;
/// The directory runs publish from.
pub const OUT_DIR: &str = "/out";
/// Longest runtime path a file may have (bytes), and longest name of one segment.
const MAX_PATH_BYTES: usize = 1024;
const MAX_SEGMENT_BYTES: usize = 255;
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
/// decoded on its own: an encoded `/` is refused rather than read as a separator.
pub fn out_path(encoded_segments: &[&str]) -> Result<String, PathError> {
    let malformed = |why: String| Err(PathError::Malformed(why));
    let mut path = String::new();
    for segment in encoded_segments {
        let Some(decoded) = percent_decode(segment) else {
            return malformed(format!("segment {segment:?} is not valid percent-encoded UTF-8"));
        };
        if decoded.contains('/') || decoded.chars().any(char::is_control) || decoded.len() > MAX_SEGMENT_BYTES {
            return malformed(format!(
                "segment {decoded:?} has a '/', a control character or more than {MAX_SEGMENT_BYTES} bytes"
            ));
        }
        path.push('/');
        path.push_str(&decoded);
    }
    if path.len() > MAX_PATH_BYTES {
        return malformed(format!("it is longer than {MAX_PATH_BYTES} bytes"));
    }
    if clean_path(&path) != Some(path.as_str()) {
        return malformed(format!("{path:?} must be absolute with no empty, \".\" or \"..\" segments"));
    }
    if path == OUT_DIR || !is_within(&path, OUT_DIR) {
        return Err(PathError::OutsideOut(path));
    }
    Ok(path)
}

/// Where a run's file is kept in R2.
pub fn object_key(tenant: &str, run: &str, path: &str) -> String {
    format!("files/{tenant}/{run}/{}", path.trim_start_matches('/'))
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
    /// Path and query, relative to the Worker's origin.
    pub url: String,
    /// Unix seconds.
    pub expires_at: u64,
}

/// The download URL of a run's file, valid for [`DOWNLOAD_URL_TTL_S`] from `now_s`: what the
/// Session DO lists in a run's result for each file the tab reports.
pub fn download_url(signer: &Signer, tenant: &str, run: &str, path: &str, now_s: u64) -> DownloadUrl {
    let expires_at = now_s + DOWNLOAD_URL_TTL_S;
    DownloadUrl { url: sign_download(signer, tenant, run, path, expires_at), expires_at }
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
            "this download URL expired at {exp} (unix seconds; URLs last {DOWNLOAD_URL_TTL_S} s): run the code \
             again, or ask for a new URL"
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
