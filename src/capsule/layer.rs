//! Layer zips: deterministic to write, defensive to read.
//!
//! The same files always give the same bytes (and so the same sha256 and capsule hash):
//! entries sorted by path, deflate at a fixed level, timestamp 1980-01-01 00:00, mode 0644,
//! no extra fields, no directory entries. Reading validates every path and caps inflation.

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
