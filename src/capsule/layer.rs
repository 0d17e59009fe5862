//! Layer zips: deterministic to write, defensive to read.
//!
//! The same files always give the same bytes (and so the same sha256 and capsule hash):
//! entries sorted by path, deflate at a fixed level, timestamp 1980-01-01 00:00, mode 0644,
//! no extra fields, no directory entries. Reading validates every path and caps inflation.
//! A deps layer a tab uploads is judged by its entry names alone ([`check_deps_layer`]), read
//! as the executor page reads them.

use std::io::{Cursor, Read, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

use super::limits::UNPACKED_MAX;
use super::CapsuleError;

/// Zips `files` (path, content) deterministically; input order does not matter.
pub fn build_layer(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, CapsuleError> {
    for (path, _) in files {
        check_path(path)?;
    }
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    reject_duplicates(sorted.iter().map(|(path, _)| path))?;
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (path, content) in sorted {
        zip.start_file(path.as_str(), entry_options()).map_err(write_error)?;
        zip.write_all(content).map_err(write_error)?;
    }
    Ok(zip.finish().map_err(write_error)?.into_inner())
}

/// Unzips a layer, sorted by path, inflating at most [`UNPACKED_MAX`] bytes in all.
pub fn read_layer(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, CapsuleError> {
    read_layer_with_limit(bytes, UNPACKED_MAX)
}

/// [`read_layer`] with a caller's cap on the total inflated bytes. Directory entries are
/// skipped; symlinks, bad paths and duplicates are refused.
pub fn read_layer_with_limit(bytes: &[u8], limit: u64) -> Result<Vec<(String, Vec<u8>)>, CapsuleError> {
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(read_error)?;
    let mut files = Vec::with_capacity(archive.len());
    let mut budget = limit;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(read_error)?;
        if entry.is_dir() {
            continue;
        }
        let path = entry.name().map_err(read_error)?.into_owned();
        if entry.is_symlink() {
            return Err(CapsuleError::NotAFile(path));
        }
        check_path(&path)?;
        // Trust the bytes inflated, never the sizes the archive declares.
        let mut content = Vec::new();
        (&mut entry).take(budget.saturating_add(1)).read_to_end(&mut content).map_err(read_error)?;
        budget = budget.checked_sub(content.len() as u64).ok_or(CapsuleError::UnpackedTooLarge { limit })?;
        files.push((path, content));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    reject_duplicates(files.iter().map(|(path, _)| path))?;
    Ok(files)
}

/// A layer path must be relative and normalized: segments separated by single `/`, none of
/// them empty, `.` or `..`; no backslash, no NUL.
pub fn check_path(path: &str) -> Result<(), CapsuleError> {
    let reason = if path.is_empty() {
        "it is empty"
    } else if path.contains('\0') {
        "it contains a NUL byte"
    } else if path.contains('\\') {
        "it contains a backslash; separate segments with \"/\""
    } else if path.starts_with('/') {
        "it starts with \"/\"; layer paths are relative to the layer root"
    } else if path.split('/').any(str::is_empty) {
        "it has an empty segment (\"//\" or a trailing \"/\")"
    } else if path.split('/').any(|s| s == "..") {
        "it has a \"..\" segment"
    } else if path.split('/').any(|s| s == ".") {
        "it has a \".\" segment"
    } else {
        return Ok(());
    };
    Err(CapsuleError::BadPath { path: path.to_string(), reason })
}

/// Where a deps layer may put files: packages only, so it can never replace the call's own
/// code (the executor page refuses any other path too: `DEPS_DIRS` in public/lib/capsule.js).
pub const DEPS_ROOTS: [&str; 2] = ["node_modules/", "wheels/"];

/// Checks a deps layer's entries without inflating them: each name a normal relative path
/// ([`check_path`]; a directory's without its trailing `/`) under one of [`DEPS_ROOTS`], no
/// symlink, no name twice. The first entry that fails is the error.
pub fn check_deps_layer(bytes: &[u8]) -> Result<(), CapsuleError> {
    let mut names = Vec::new();
    for entry in central_directory(bytes)? {
        let name = entry.name;
        check_path(name.strip_suffix('/').unwrap_or(&name))?;
        if !DEPS_ROOTS.iter().any(|root| name.starts_with(root)) {
            return Err(CapsuleError::OutsideDeps(name));
        }
        if entry.symlink {
            return Err(CapsuleError::NotAFile(name));
        }
        names.push(name);
    }
    names.sort();
    reject_duplicates(names.iter())
}

/// One entry of a zip's central directory.
struct CentralEntry {
    name: String,
    symlink: bool,
}

const END_OF_CENTRAL_DIRECTORY: u32 = 0x0605_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
/// The end record: 22 bytes, then a comment of up to 64 KiB.
const END_RECORD_LEN: usize = 22;
const CENTRAL_HEADER_LEN: usize = 46;

/// The central directory's entries exactly as the executor page's `public/lib/zip.js` finds
/// them: the last end record in the final 64 KiB + 22 bytes, its entry count and offset, and
/// each header's raw name. Extra fields are never consulted: a general zip reader would take
/// an Info-ZIP Unicode Path field over the name, and so see another name than the page runs.
fn central_directory(bytes: &[u8]) -> Result<Vec<CentralEntry>, CapsuleError> {
    let bad = |why: &str| CapsuleError::BadZip(why.to_owned());
    let last = bytes.len().checked_sub(END_RECORD_LEN).ok_or_else(|| bad("too short for a zip"))?;
    let end = (last.saturating_sub(0xffff)..=last)
        .rev()
        .find(|&at| le32(bytes, at) == Some(END_OF_CENTRAL_DIRECTORY))
        .ok_or_else(|| bad("no end of central directory record"))?;
    let field = |at| le16(bytes, end + at).ok_or_else(|| bad("truncated end record"));
    let count = field(10)?;
    let mut at = le32(bytes, end + 16).ok_or_else(|| bad("truncated end record"))? as usize;
    if count == 0xffff || at == 0xffff_ffff {
        return Err(bad("zip64 layers are not supported"));
    }
    let mut entries = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let header =
            |offset| le16(bytes, at + offset).map(usize::from).ok_or_else(|| bad("truncated central directory"));
        if le32(bytes, at) != Some(CENTRAL_HEADER) {
            return Err(bad("corrupt central directory"));
        }
        let (name_len, extra_len, comment_len) = (header(28)?, header(30)?, header(32)?);
        let start = at + CENTRAL_HEADER_LEN;
        let raw = bytes.get(start..start + name_len).ok_or_else(|| bad("truncated central directory"))?;
        let name = String::from_utf8(raw.to_vec()).map_err(|_| CapsuleError::BadPath {
            path: String::from_utf8_lossy(raw).into_owned(),
            reason: "it is not UTF-8",
        })?;
        // Made on Unix (the high byte of "version made by" is 3) with a symlink's file type.
        let unix = le16(bytes, at + 4).is_some_and(|made_by| made_by >> 8 == 3);
        let mode = le32(bytes, at + 38).unwrap_or(0) >> 16;
        entries.push(CentralEntry { name, symlink: unix && mode & 0o170_000 == 0o120_000 });
        at = start + name_len + extra_len + comment_len;
    }
    Ok(entries)
}

fn le16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn entry_options() -> SimpleFileOptions {
    SimpleFileOptions::DEFAULT
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::DEFAULT)
        .unix_permissions(0o644)
}

fn reject_duplicates<'a>(sorted: impl Iterator<Item = &'a String>) -> Result<(), CapsuleError> {
    let mut previous: Option<&String> = None;
    for path in sorted {
        if previous == Some(path) {
            return Err(CapsuleError::DuplicatePath(path.clone()));
        }
        previous = Some(path);
    }
    Ok(())
}

fn write_error(e: impl std::fmt::Display) -> CapsuleError {
    CapsuleError::ZipWrite(e.to_string())
}

fn read_error(e: impl std::fmt::Display) -> CapsuleError {
    CapsuleError::BadZip(e.to_string())
}
