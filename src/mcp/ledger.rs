//! What an MCP request asks of the tenant's ledger (`crate::quota`) before it reaches its
//! relay session: the charge it makes, and whether it reads `relay://usage`.

use serde_json::Value;

use super::content::USAGE_URI;
use super::HttpRequest;
use crate::quota::Charge;

/// Whether `request` reads `relay://usage` (a `resources/read` naming it), so its caller
/// fetches the tenant's usage from its ledger for this request only.
pub fn reads_usage(request: &HttpRequest) -> bool {
    let Ok(message) = serde_json::from_slice::<Value>(&request.body) else { return false };
    message.get("method").and_then(Value::as_str) == Some("resources/read")
        && message.pointer("/params/uri").and_then(Value::as_str) == Some(USAGE_URI)
}

/// What the tenant's ledger is charged (`quota`) before `request` goes to relay session
/// `session`: a `tools/call` is a call; any other request only admits the relay session. With
/// the request's JSON-RPC id (null if it has none), for a refusal.
pub fn admission(request: &HttpRequest, session: &str) -> (Charge, Value) {
    let message = serde_json::from_slice::<Value>(&request.body).unwrap_or_default();
    let session = session.to_owned();
    let call = request.method.eq_ignore_ascii_case("POST") && message["method"] == "tools/call";
    let charge = if call { Charge::Call { session } } else { Charge::Admit { session } };
    (charge, message.get("id").cloned().unwrap_or_default())
}
