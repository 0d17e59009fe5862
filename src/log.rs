//! Structured logs: one JSON line per request the Worker answers and one per run that ends,
//! readable in `wrangler tail`. A line holds only the fields below, so no header value, key,
//! token, body or output can reach it; and a request's route is its pattern
//! (`PUT /files/:run/out/*`), never its path, whose segments and query carry run ids, signed
//! URLs and session names.
//!
//! A deployment may set the least [`Level`] it keeps (`LOG_LEVEL`): a line below it is not
//! written at all, which is what makes it free (a console line is work for the runtime's log
//! pipeline, and under `wrangler dev` ~2-3 ms of CPU: docs/BENCHMARKS.md).

use serde::Serialize;

use crate::audit::{AuditRecord, Kind};
use crate::mcp::tasks::iso8601;

/// How much a line matters, least first: what went as asked, what a client got wrong (4xx, a
/// run that failed), what the server got wrong (5xx).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    #[default]
    Info,
    Warn,
    Error,
}

impl Level {
    /// The level of a request answered with `status`.
    pub fn of_status(status: u16) -> Level {
        match status {
            500.. => Level::Error,
            400.. => Level::Warn,
            _ => Level::Info,
        }
    }

    /// A deployment's `LOG_LEVEL`: `info` (every line, also when unset), `warn` or `error`.
    /// Anything else is refused with a sentence saying what to set, for the caller to log.
    pub fn threshold(setting: Option<&str>) -> Result<Level, String> {
        match setting.map(str::trim) {
            None | Some("") | Some("info") => Ok(Level::Info),
            Some("warn") => Ok(Level::Warn),
            Some("error") => Ok(Level::Error),
            Some(other) => Err(format!(
                "LOG_LEVEL is {other:?}, which is no level: set info, warn or error in the Worker's \
                 variables (wrangler.toml [vars]); until then every line is written"
            )),
        }
    }
}

/// One log line.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    pub ts: String,
    pub level: Level,
    /// `request` or `run`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_out: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl LogLine {
    /// A request answered with `status` after `duration_ms`, by its route pattern; the tenant
    /// and relay session when the handler learned them from a credential.
    pub fn request(
        now_ms: u64,
        route: &'static str,
        status: u16,
        duration_ms: u64,
        who: Option<(String, String)>,
    ) -> Self {
        let (tenant, session) = who.unzip();
        LogLine {
            ts: iso8601(now_ms),
            level: Level::of_status(status),
            kind: "request",
            route: Some(route),
            status: Some(status),
            duration_ms,
            tenant,
            session,
            ..Default::default()
        }
    }

    /// A run that ended, from its audit record (which has already dropped what must not be
    /// kept): a tool call only.
    pub fn run(record: &AuditRecord) -> Option<Self> {
        (record.kind == Kind::ToolCall).then(|| LogLine {
            ts: iso8601(record.ts_ms),
            level: if record.error_name.is_some() { Level::Warn } else { Level::Info },
            kind: "run",
            duration_ms: record.duration_ms,
            tenant: Some(record.tenant.clone()),
            session: Some(record.relay_session.clone()),
            run_id: Some(record.run_id.clone()),
            tool: Some(record.tool.clone()),
            language: language(&record.tool),
            exit_code: record.exit_code,
            bytes_out: Some(record.stdout_bytes + record.stderr_bytes),
            error: record.error_name.clone(),
            ..Default::default()
        })
    }

    /// Whether a deployment keeping `threshold` and above writes this line.
    pub fn kept(&self, threshold: Level) -> bool {
        self.level >= threshold
    }

    /// The line as `wrangler tail` shows it: one JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a log line serializes")
    }
}

/// The language a tool runs, if it runs one.
pub fn language(tool: &str) -> Option<&'static str> {
    match tool {
        "run_js" => Some("js"),
        "run_py" => Some("py"),
        _ => None,
    }
}

/// The route pattern of a request: the Worker's route table in words, ids replaced by names.
pub fn route(method: &str, path: &str) -> &'static str {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        ("OPTIONS", _) => "OPTIONS *",
        (_, ["healthz"]) => "GET /healthz",
        (_, [""]) => "GET /",
        (_, ["mcp"]) => "/mcp",
        ("POST", ["session"]) => "POST /session",
        (_, ["session", _, "refresh"]) => "POST /session/:id/refresh",
        (_, ["session", _, "events"]) => "GET /session/:id/events",
        (_, ["session", _, "result"]) => "POST /session/:id/result",
        (_, ["session", _, "results"]) => "GET /session/:id/results",
        (_, ["session", _, "ready"]) => "POST /session/:id/ready",
        (_, ["session", _, "mcps"]) => "GET /session/:id/mcps",
        (_, ["session", _, "detach"]) => "POST /session/:id/detach",
        (_, ["session", _, "workspace"]) => "GET /session/:id/workspace",
        ("PUT", ["session", _, "workspace", "bodies", _]) => "PUT /session/:id/workspace/bodies/:sha256",
        (_, ["session", _, "workspace", "bodies", _]) => "GET /session/:id/workspace/bodies/:sha256",
        (_, ["session", _, "workspace", "upload"]) => "POST /session/:id/workspace/upload",
        (_, ["workspace", "bodies", _]) => "PUT /workspace/bodies/:sha256",
        (_, ["workspace", "commit"]) => "POST /workspace/commit",
        ("GET", ["session", _, "lease"]) => "GET /session/:id/lease",
        (_, ["session", _, "lease"]) => "POST /session/:id/lease",
        ("POST", ["capsules"]) => "POST /capsules",
        (_, ["capsules", "verify"]) => "POST /capsules/verify",
        (_, ["capsules", _, _]) => "GET /capsules/:hash/:file",
        (_, ["capsule", "presign"]) => "POST /capsule/presign",
        (_, ["capsule", "upload"]) => "PUT /capsule/upload",
        (_, ["capsule", "finalize"]) => "POST /capsule/finalize",
        (_, ["registry"]) => "GET /registry",
        (_, ["egress"]) => "POST /egress",
        (_, ["mcps-rpc"]) => "POST /mcps-rpc",
        ("PUT", ["files", ..]) => "PUT /files/:run/out/*",
        (_, ["files", ..]) => "GET /files/:tenant/:run/out/*",
        (_, ["admin", "metrics"]) => "GET /admin/metrics",
        (_, ["admin", "tenants"]) => "/admin/tenants",
        (_, ["admin", "tenants", _, "upstreams", ..]) => "/admin/tenants/:id/upstreams",
        (_, ["admin", "tenants", _, "keys"]) => "/admin/tenants/:id/keys",
        (_, ["admin", "tenants", _, "keys", _]) => "DELETE /admin/tenants/:id/keys/:key",
        (_, ["admin", "tenants", _, "audit"]) => "GET /admin/tenants/:id/audit",
        (_, ["admin", "tenants", _, "usage"]) => "GET /admin/tenants/:id/usage",
        (_, ["admin", "tenants", _]) => "/admin/tenants/:id",
        (_, [".well-known", ..]) => "GET /.well-known/*",
        (_, ["oauth", "register"]) => "POST /oauth/register",
        (_, ["oauth", "authorize"]) => "/oauth/authorize",
        (_, ["oauth", "consent"]) => "GET /oauth/consent",
        (_, ["oauth", "token"]) => "POST /oauth/token",
        (_, ["oauth", "revoke"]) => "POST /oauth/revoke",
        _ => "static or unknown",
    }
}
