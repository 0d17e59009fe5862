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

/// What the Worker does with the tenant's ledger (`quota`) before a request goes to its relay
/// session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Charge this first; a refusal is the answer.
    Charge(Charge),
    /// Nothing: the relay session was admitted lately, and the request is no call.
    Admitted,
    /// A `run_js`/`run_py` call to a relay session admitted lately: the relay session charges
    /// the call with the run's slot, in one hop (`Charge::Run`'s `call`), instead of one hop
    /// here and another there. Any answer it gives without admitting a run charges the call
    /// alone first, so every `tools/call` is still counted once.
    ToSession,
}

/// What the Worker charges before `request` goes to relay session `session`: a `tools/call` is
/// a call; any other request only admits the relay session, which `admitted_lately` (this
/// isolate saw the ledger admit it: `quota::Admitted`) makes needless. With the request's
/// JSON-RPC id (null if it has none), for a refusal.
pub fn admission(request: &HttpRequest, session: &str, admitted_lately: bool) -> (Admission, Value) {
    let message = serde_json::from_slice::<Value>(&request.body).unwrap_or_default();
    let session = session.to_owned();
    let call = request.method.eq_ignore_ascii_case("POST") && message["method"] == "tools/call";
    let runs = call && matches!(message.pointer("/params/name").and_then(Value::as_str), Some("run_js" | "run_py"));
    let admission = match (call, runs, admitted_lately) {
        (_, true, true) => Admission::ToSession,
        (true, _, _) => Admission::Charge(Charge::Call { session }),
        (false, _, true) => Admission::Admitted,
        (false, _, false) => Admission::Charge(Charge::Admit { session }),
    };
    (admission, message.get("id").cloned().unwrap_or_default())
}
