//! What the Durable Object supplies with each request besides the request itself: the time,
//! a session-id minter, and the relay session as the prompt and resource describe it.

use serde_json::Value;

use super::tasks::TaskRecord;
use crate::audit::AuditRecord;
use crate::quota::Charge;
use crate::run::readiness::Readiness;

/// The relay session as the `relay://session` resource and the prompt describe it.
#[derive(Debug, Clone, Default)]
pub struct RelayView {
    /// The relay session's name (`default` unless the client asked for another).
    pub session: String,
    /// Ids of the browser tabs attached as executors.
    pub tab_ids: Vec<String>,
    /// Runs waiting behind the current one.
    pub queue_depth: usize,
    /// Recent runs, newest first, as the Durable Object records them.
    pub recent_runs: Value,
    /// MCP clients seen recently, newest first: `[{name, version, lastSeenMs}]`.
    pub clients: Value,
    /// What the tab that runs next said of its runtimes, if it has reported yet.
    pub next_tab: Option<Readiness>,
    /// The live contexts, as `relay://contexts` shows them (`run::contexts`).
    pub contexts: Value,
    /// The tenant's quotas and what it used, as `relay://usage` shows them: read from the
    /// tenant's ledger only for a request that reads that resource ([`reads_usage`]).
    pub usage: Value,
}

/// Whether `request` reads `relay://usage` (a `resources/read` naming it), so its caller
/// fetches the tenant's usage from its ledger for this request only.
pub fn reads_usage(request: &super::HttpRequest) -> bool {
    let Ok(message) = serde_json::from_slice::<Value>(&request.body) else { return false };
    message.get("method").and_then(Value::as_str) == Some("resources/read")
        && message.pointer("/params/uri").and_then(Value::as_str) == Some(super::content::USAGE_URI)
}

/// What the tenant's ledger is charged (`quota`) before `request` goes to relay session
/// `session`: a `tools/call` is a call; any other request only admits the relay session. With
/// the request's JSON-RPC id (null if it has none), for a refusal.
pub fn admission(request: &super::HttpRequest, session: &str) -> (Charge, Value) {
    let message = serde_json::from_slice::<Value>(&request.body).unwrap_or_default();
    let session = session.to_owned();
    let call = request.method.eq_ignore_ascii_case("POST") && message["method"] == "tools/call";
    let charge = if call { Charge::Call { session } } else { Charge::Admit { session } };
    (charge, message.get("id").cloned().unwrap_or_default())
}

/// What `handle` needs from its caller besides the request.
pub struct Context<'a> {
    pub now_ms: u64,
    /// Mints a legacy `Mcp-Session-Id`: secure random, visible ASCII.
    pub new_session_id: &'a dyn Fn() -> String,
    pub relay: RelayView,
    /// The relay session's latest `n` audit records, oldest first (`relay://audit`); read only
    /// when that resource is, since each record is up to a few KiB.
    pub audit_records: &'a dyn Fn(usize) -> Vec<AuditRecord>,
    /// The workspace's listing, `{version, root, files}` (`relay://workspace`); read only when
    /// that resource is.
    pub workspace: &'a dyn Fn() -> Value,
    /// The executor page a person opens to attach a tab.
    pub page_url: String,
    /// The effective limits, quoted to agents in the prompt.
    pub limits_json: Value,
    /// Told the `clientInfo` (`{name, version, ...}`) a request carries: a modern request's
    /// `_meta`, a legacy `initialize`'s params. The page lists the clients seen recently.
    pub client_seen: &'a dyn Fn(&Value),
    /// The relay session's task of this id, if it has one (the tasks extension).
    pub task: &'a dyn Fn(&str) -> Option<TaskRecord>,
}
