//! `read` and `write` answered from the relay session's workspace, with the results and errors
//! the tab gave (`public/lib/file-tools.js` before issue 26): a read of a file is a slice of it
//! (cut on a character boundary in UTF-8), a read of a directory lists it, a write creates,
//! overwrites or appends. The caller fetches the bodies; these only decide. (`search` is the
//! core's engine, `crate::search`, fed the files in scope.)

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::rules::Refusal;
use crate::error::ErrorName;

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// `read`'s arguments (checked against its input schema already).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadArgs {
    pub path: String,
    #[serde(default)]
    pub encoding: Encoding,
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    #[serde(default)]
    pub offset: u64,
}

fn default_max_bytes() -> u64 {
    1 << 20
}

/// `write`'s arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteArgs {
    pub path: String,
    pub content: String,
    #[serde(default)]
    pub encoding: Encoding,
    #[serde(default)]
    pub mode: Mode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Encoding {
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "base64")]
    Base64,
}

impl Encoding {
    fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Base64 => "base64",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Create,
    Append,
    Overwrite,
}

fn invalid(message: String) -> Refusal {
    Refusal::new(ErrorName::ValidationError, message)
}

/// A read of the file at `args.path`, whose bytes are `bytes`: the tool's structuredContent.
pub fn read_file(args: &ReadArgs, bytes: &[u8]) -> Result<Value, Refusal> {
    let (path, size, offset) = (&args.path, bytes.len() as u64, args.offset);
    if offset > size {
        return Err(invalid(format!("offset {offset} is past the end of {path} ({size} bytes)")));
    }
    let mut end = size.min(offset.saturating_add(args.max_bytes)) as usize;
    if args.encoding == Encoding::Utf8 {
        end = char_boundary(bytes, offset as usize, end);
    }
    let slice = &bytes[offset as usize..end];
    let content = match args.encoding {
        Encoding::Base64 => BASE64.encode(slice),
        Encoding::Utf8 => std::str::from_utf8(slice)
            .map_err(|_| invalid(format!("{path} is not UTF-8 text; read it with encoding \"base64\"")))?
            .to_owned(),
    };
    Ok(json!({
        "path": path, "encoding": args.encoding.name(), "size": size, "offset": offset,
        "bytesRead": slice.len(), "truncated": (end as u64) < size, "content": content,
    }))
}

/// `end`, moved back off the middle of a UTF-8 character when the read stops early.
fn char_boundary(bytes: &[u8], start: usize, end: usize) -> usize {
    if end >= bytes.len() {
        return end;
    }
    let mut cut = end;
    while cut > start && cut + 4 > end && (bytes[cut] & 0xc0) == 0x80 {
        cut -= 1;
    }
    if cut > start {
        cut
    } else {
        end
    }
}

/// A read of the directory at `args.path`, which holds `files` (`(path, size)` of every file
/// below it, at any depth): its entries, files with their sizes and subdirectories with a
/// trailing `/` and the size of all they hold, sorted by name as bytes, as text (a line
/// `name TAB size` each) and as `entries`. None below it: there is no such file or directory.
pub fn read_directory(args: &ReadArgs, files: &[(String, u64)]) -> Result<Value, Refusal> {
    let path = &args.path;
    let prefix = format!("{path}/");
    let mut entries: Vec<(String, &'static str, u64)> = Vec::new();
    for (file, size) in files.iter().filter(|(file, _)| file.starts_with(&prefix)) {
        let rest = &file[prefix.len()..];
        let (name, kind) = match rest.split_once('/') {
            Some((dir, _)) => (format!("{dir}/"), "directory"),
            None => (rest.to_owned(), "file"),
        };
        match entries.iter_mut().find(|(n, _, _)| *n == name) {
            Some(entry) => entry.2 += size,
            None => entries.push((name, kind, *size)),
        }
    }
    if entries.is_empty() {
        return Err(invalid(format!(
            "no file or directory {path} in this relay session's workspace; read its parent directory to see what is there"
        )));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let text: Vec<String> = entries.iter().map(|(name, _, size)| format!("{name}\t{size}")).collect();
    let text = text.join("\n");
    let content = match args.encoding {
        Encoding::Base64 => BASE64.encode(&text),
        Encoding::Utf8 => text.clone(),
    };
    let entries: Vec<Value> =
        entries.iter().map(|(name, kind, size)| json!({ "name": name, "type": kind, "size": size })).collect();
    Ok(json!({
        "path": path, "encoding": args.encoding.name(), "content": content, "size": text.len(), "offset": 0,
        "bytesRead": text.len(), "truncated": false, "entries": entries,
    }))
}

/// What a write makes of the file at `args.path` (`existing`, if there is one): its new bytes
/// and how many the call added.
pub fn written(args: &WriteArgs, existing: Option<Vec<u8>>) -> Result<(Vec<u8>, u64), Refusal> {
    let path = &args.path;
    if existing.is_some() && args.mode == Mode::Create {
        return Err(invalid(format!(
            "{path} already exists; use mode \"overwrite\" to replace it or \"append\" to add to it"
        )));
    }
    let added = match args.encoding {
        Encoding::Base64 => BASE64.decode(&args.content).map_err(|e| {
            invalid(format!(
                "content: not valid base64 ({e}); send standard base64 with padding, or use encoding \"utf-8\""
            ))
        })?,
        Encoding::Utf8 => args.content.as_bytes().to_vec(),
    };
    let added_len = added.len() as u64;
    let bytes = match (args.mode, existing) {
        (Mode::Append, Some(mut existing)) => {
            existing.extend_from_slice(&added);
            existing
        }
        _ => added,
    };
    Ok((bytes, added_len))
}

/// A write's structuredContent.
pub fn write_result(path: &str, bytes_written: u64, size: u64) -> Value {
    json!({ "path": path, "bytesWritten": bytes_written, "size": size })
}
