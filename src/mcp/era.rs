//! Protocol versions and eras: which versions we speak, how one request is assigned to the
//! stateless 2026-07-28 era or the legacy session era (2026-07-28 basic/versioning
//! "Backward Compatibility"), and the per-request checks of the stateless era.

use serde_json::{json, Map, Value};

use super::http::{decode_header_value, header, is_field_value};
use super::jsonrpc::{RpcError, HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION};
use super::logging::LogLevel;

/// Every protocol version we speak, newest first. Versions from 2026-07-28 on are modern
/// (stateless); the older ones are legacy (an `initialize` handshake and `Mcp-Session-Id`).
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];
const MODERN_SINCE: &str = "2026-07-28";

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// The two ways of speaking MCP on one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: every request carries its version and capabilities; no sessions.
    Modern,
    /// 2025-03-26 to 2025-11-25: `initialize`, then `Mcp-Session-Id` on every request.
    Legacy,
}

/// The era of a supported version; `None` when we do not speak it.
pub fn era_of_version(version: &str) -> Option<Era> {
    SUPPORTED_VERSIONS.contains(&version).then(|| if version >= MODERN_SINCE { Era::Modern } else { Era::Legacy })
}

/// The newest legacy version: what `initialize` answers when the client's is unknown.
pub fn latest_legacy() -> &'static str {
    SUPPORTED_VERSIONS.into_iter().find(|v| era_of_version(v) == Some(Era::Legacy)).unwrap_or(MODERN_SINCE)
}

/// Assigns a message to an era (2026-07-28 basic/versioning "Backward Compatibility": a
/// request carrying modern per-request `_meta` is served statelessly; an `initialize`
/// selects legacy semantics). So a modern `_meta` version wins, even on `initialize`, which
/// the stateless era answers as an unknown method; a stray `Mcp-Session-Id` is then ignored
/// (streamable-http "Earlier Streamable HTTP Revisions"). Without one, `initialize`, a
/// session id or a legacy `MCP-Protocol-Version` header means a legacy client. Anything
/// else is judged as a modern request, whose checks then say precisely what is missing.
pub fn detect(method: Option<&str>, params: &Map<String, Value>, headers: &[(String, String)]) -> Era {
    if let Some(version) = meta(params).and_then(|m| m.get(META_VERSION)) {
        let legacy = version.as_str().and_then(era_of_version) == Some(Era::Legacy);
        return if legacy { Era::Legacy } else { Era::Modern };
    }
    if method == Some("initialize") {
        return Era::Legacy;
    }
    match header(headers, "mcp-protocol-version").map(era_of_version) {
        Some(Some(Era::Modern)) => Era::Modern,
        Some(Some(Era::Legacy)) => Era::Legacy,
        _ if header(headers, "mcp-session-id").is_some() => Era::Legacy,
        _ => Era::Modern,
    }
}

fn meta(params: &Map<String, Value>) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

/// The per-request checks of 2026-07-28: required `_meta` fields (basic "Per-request protocol
/// fields": -32602, HTTP 400), an `MCP-Protocol-Version` header equal to the body's version
/// (else -32020: a header that disagrees with the body is a mismatch before it is an
/// unsupported version), a supported version (-32022 listing ours), and the other mirrored
/// headers (streamable-http "Server Validation": -32020, HTTP 400). Returns the log level
/// the request asked for, if any.
pub fn check_modern(
    method: &str,
    params: &Map<String, Value>,
    headers: &[(String, String)],
) -> Result<Option<LogLevel>, RpcError> {
    let meta = meta(params).ok_or_else(|| missing_meta("_meta"))?;
    let version = meta.get(META_VERSION).and_then(Value::as_str).ok_or_else(|| missing_meta(META_VERSION))?;
    expect_header(headers, "MCP-Protocol-Version", Some(version))?;
    if era_of_version(version) != Some(Era::Modern) {
        return Err(unsupported_version(version));
    }
    if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
        return Err(missing_meta(META_CAPABILITIES));
    }
    check_headers(method, params, headers)?;
    log_level(meta)
}

/// server/utilities/logging "Error Handling": an unknown level is -32602.
fn log_level(meta: &Map<String, Value>) -> Result<Option<LogLevel>, RpcError> {
    let Some(level) = meta.get(META_LOG_LEVEL) else {
        return Ok(None);
    };
    LogLevel::from_json(level)
        .map(Some)
        .ok_or_else(|| RpcError::rejected(INVALID_PARAMS, format!("Invalid {META_LOG_LEVEL}: {level}")))
}

fn missing_meta(field: &str) -> RpcError {
    RpcError::rejected(
        INVALID_PARAMS,
        format!(
            "Missing or invalid params._meta field `{field}`: protocol 2026-07-28 requires \
             `{META_VERSION}` and `{META_CAPABILITIES}` on every request (legacy clients \
             start with `initialize` instead)"
        ),
    )
}

/// UnsupportedProtocolVersionError (2026-07-28 basic/versioning): HTTP 400, our versions in
/// `data.supported`.
pub fn unsupported_version(requested: &str) -> RpcError {
    RpcError::rejected(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
        .with_data(json!({ "supported": SUPPORTED_VERSIONS, "requested": requested }))
}

/// `Mcp-Method` and, for the named methods, `Mcp-Name` must be present and equal the body
/// (streamable-http "Standard Request Headers"; ext-tasks "Routing Headers" for `tasks/*`).
fn check_headers(method: &str, params: &Map<String, Value>, headers: &[(String, String)]) -> Result<(), RpcError> {
    expect_header(headers, "Mcp-Method", Some(method))?;
    let name_field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return Ok(()),
    };
    expect_header(headers, "Mcp-Name", params.get(name_field).and_then(Value::as_str))
}

/// One header against its body value; `body` is `None` when the body lacks the field, in
/// which case an absent header is fine and the method reports the missing field itself.
/// Only `Mcp-Name` may use the Base64 sentinel ("Value Encoding").
fn expect_header(headers: &[(String, String)], name: &str, body: Option<&str>) -> Result<(), RpcError> {
    let raw = header(headers, &name.to_ascii_lowercase());
    let mismatch = |detail: String| RpcError::rejected(HEADER_MISMATCH, format!("Header mismatch: {detail}"));
    let decode = |raw: &str| match name {
        "Mcp-Name" => decode_header_value(raw),
        _ => is_field_value(raw).then(|| raw.to_string()),
    };
    match (raw, body) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(mismatch(format!("required header {name} is missing"))),
        (Some(raw), body) => match decode(raw) {
            None => Err(mismatch(format!("{name} header has invalid characters or encoding"))),
            Some(value) if Some(value.as_str()) == body => Ok(()),
            Some(value) => Err(mismatch(format!(
                "{name} header value '{value}' does not match body value '{}'",
                body.unwrap_or("(absent)")
            ))),
        },
    }
}
