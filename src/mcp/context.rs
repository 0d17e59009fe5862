//! What the Durable Object supplies with each request besides the request itself: the time,
//! a session-id minter, and the relay session as the prompt and resource describe it.

use serde_json::Value;

use super::tasks::TaskRecord;
use crate::audit::AuditRecord;
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
    /// tenant's ledger only for a request that reads that resource (`mcp::reads_usage`).
    pub usage: Value,
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
