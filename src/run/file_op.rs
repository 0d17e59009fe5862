//! `read`, `write` and `search` calls checked before the relay session answers them from its
//! workspace (paths against the tenant's filesystem policy, base64, the search pattern and
//! glob), so a bad call fails at once with the error that names what to change.

use super::args::{invalid, ArgsError};
use crate::error::ErrorName;
use crate::policy::fs_path::is_within;
use crate::policy::{check_path, Access, FsPolicy, WORKSPACE_ROOTS};
use crate::search::{self, SearchRequest};
use crate::workspace::MCPS_ROOT as MCPS;
use base64::Engine;
use serde_json::{json, Value};

/// A checked file tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct FileOp {
    pub tool: &'static str,
    /// The call's arguments, with paths as the policy normalized them (a search with no paths
    /// gets the workspace roots, so the policy judges each root it will read).
    pub arguments: Value,
}

impl FileOp {
    /// Whether the call reads under `/mcps` (a `read` there, a `search` covering it), whose
    /// files are listed from the tenant's upstream servers rather than stored.
    pub fn reads_mcps(&self) -> bool {
        let mcps = |path: &Value| path.as_str().is_some_and(|p| is_within(p, MCPS) || is_within(MCPS, p));
        match self.tool {
            "read" => mcps(&self.arguments["path"]),
            "search" => self.arguments["paths"].as_array().is_some_and(|paths| paths.iter().any(mcps)),
            _ => false,
        }
    }
}

/// Checks a `read` / `write` / `search` call (arguments already valid against its input schema).
pub fn file_op(tool: &'static str, arguments: &Value, filesystem: &FsPolicy) -> Result<FileOp, ArgsError> {
    let mut arguments = arguments.clone();
    match tool {
        "read" => {
            arguments["path"] = json!(allowed(filesystem, &arguments["path"], Access::Read)?);
        }
        "write" => {
            arguments["path"] = json!(allowed(filesystem, &arguments["path"], Access::Write)?);
            if arguments["encoding"] == "base64" {
                let content = arguments["content"].as_str().unwrap_or_default();
                base64::engine::general_purpose::STANDARD.decode(content).map_err(|e| {
                    invalid(format!(
                        "content: not valid base64 ({e}); send standard base64 with padding, or use encoding \"utf-8\""
                    ))
                })?;
            }
        }
        "search" => {
            let paths = match arguments.get("paths").and_then(Value::as_array) {
                Some(paths) if !paths.is_empty() => paths.clone(),
                _ => WORKSPACE_ROOTS.iter().map(|root| json!(root)).collect(),
            };
            let checked: Vec<String> =
                paths.iter().map(|path| allowed(filesystem, path, Access::Read)).collect::<Result<_, _>>()?;
            arguments["paths"] = json!(checked);
            let request: SearchRequest =
                serde_json::from_value(arguments.clone()).map_err(|e| invalid(format!("search arguments: {e}")))?;
            search::search(&request, std::iter::empty()).map_err(|e| invalid(e.message))?;
        }
        _ => return Err(invalid(format!("{tool} is not a file tool"))),
    }
    Ok(FileOp { tool, arguments })
}

/// A path the policy admits for `access`, normalized; a refusal is PolicyDenied.
fn allowed(filesystem: &FsPolicy, path: &Value, access: Access) -> Result<String, ArgsError> {
    let path = path.as_str().ok_or_else(|| invalid("path: expected a string"))?;
    check_path(filesystem, path, access).map_err(|message| ArgsError { name: ErrorName::PolicyDenied, message })
}
