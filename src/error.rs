//! The one error vocabulary of relay-edge: the error names relay-mcp's tools report (README
//! "Using it" lists them) plus `Cancelled`, and the names the HTTP routes answer with, each
//! with its HTTP status, the exit code a run that ended with it reports, and what an agent or
//! a person does about it. [`HttpError`] is every refusal of a route (name, status, message,
//! remedy); the Worker turns it into a response in one place. The executor page reads the same
//! table, generated from this one (`relay-capsule error-names`, at build time), so it can only
//! name errors that exist.

use serde_json::{json, Map, Value};

/// Every error name of relay-edge. Those in [`ErrorName::TOOL`] are the ones a tool result
/// carries (with `isError`), listed in the tools' `outputSchema` and the `use-relay` prompt;
/// the rest only ever answer an HTTP request (or, for `TooManyRequests`, a guest's fetch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorName {
    ValidationError,
    PolicyDenied,
    Timeout,
    OutputLimitExceeded,
    DepsResolutionFailed,
    NoExecutorAttached,
    /// The run was stopped before it ended: the client cancelled or went away, or it waited
    /// in the queue too long.
    Cancelled,
    /// Something the run reached out to (a site through guarded fetch, an upstream MCP server)
    /// gave no usable answer.
    UpstreamFailed,
    /// The browser process running the code died under it, almost always because the code ran
    /// the runtime out of memory in a way no limit catches first (the tab restarts its sandbox).
    RuntimeCrashed,
    /// The tenant's edge budget (runs a minute, CPU ms a day) is spent, or it has none, or a run
    /// is too large for the edge (its workspace past `EDGE_WORKSPACE_MAX_BYTES`).
    EdgeBudgetExceeded,
    Internal,
    /// No such route, object or record.
    NotFound,
    /// A credential is missing, malformed, expired or unknown.
    Unauthorized,
    /// A credential that is valid, but not for this.
    Forbidden,
    /// The request no longer fits the state it names (a run that ended).
    Conflict,
    /// An upload grant used a second time.
    GrantSpent,
    /// A build's finalize names a layer that was not uploaded under its grants.
    LayerNotUploaded,
    /// A request body over its route's limit.
    PayloadTooLarge,
    /// A request body that did not arrive by its deadline.
    RequestTimeout,
    /// A Range outside a capsule layer.
    RangeNotSatisfiable,
    /// A WebSocket route asked without `Upgrade: websocket`.
    UpgradeRequired,
    /// Too many of something at once (a guest's fetches in flight).
    TooManyRequests,
    /// The relay session's queue is full (the data of a refused `tools/call`).
    QueueFull,
    /// A backchannel batch whose every event named a run this relay session does not know.
    UnknownRun,
    /// A backchannel batch some of whose events were refused.
    EventsRefused,
    /// KV, R2 or the relay session's SQLite failed; it passes.
    StorageUnavailable,
    /// A tenant's quota (`defaults.quotas`: calls a minute, relay sessions, runs in flight,
    /// egress a day) is reached; the message names it, its value, what was used and when it
    /// comes back.
    QuotaExceeded,
}

impl ErrorName {
    /// The names a tool result may carry.
    pub const TOOL: [ErrorName; 12] = [
        ErrorName::ValidationError,
        ErrorName::PolicyDenied,
        ErrorName::Timeout,
        ErrorName::OutputLimitExceeded,
        ErrorName::DepsResolutionFailed,
        ErrorName::NoExecutorAttached,
        ErrorName::Cancelled,
        ErrorName::UpstreamFailed,
        ErrorName::RuntimeCrashed,
        ErrorName::EdgeBudgetExceeded,
        ErrorName::QuotaExceeded,
        ErrorName::Internal,
    ];

    /// The names only an HTTP route answers with.
    const HTTP: [ErrorName; 15] = [
        ErrorName::NotFound,
        ErrorName::Unauthorized,
        ErrorName::Forbidden,
        ErrorName::Conflict,
        ErrorName::GrantSpent,
        ErrorName::LayerNotUploaded,
        ErrorName::PayloadTooLarge,
        ErrorName::RequestTimeout,
        ErrorName::RangeNotSatisfiable,
        ErrorName::UpgradeRequired,
        ErrorName::TooManyRequests,
        ErrorName::QueueFull,
        ErrorName::UnknownRun,
        ErrorName::EventsRefused,
        ErrorName::StorageUnavailable,
    ];

    /// Every name: the tools' and the HTTP routes'.
    pub const ALL: [ErrorName; 27] = joined(ErrorName::TOOL, ErrorName::HTTP);

    /// Whether a tool result may carry this name (see [`ErrorName::TOOL`]).
    pub fn in_tool_results(self) -> bool {
        ErrorName::TOOL.contains(&self)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorName::ValidationError => "ValidationError",
            ErrorName::PolicyDenied => "PolicyDenied",
            ErrorName::Timeout => "Timeout",
            ErrorName::OutputLimitExceeded => "OutputLimitExceeded",
            ErrorName::DepsResolutionFailed => "DepsResolutionFailed",
            ErrorName::NoExecutorAttached => "NoExecutorAttached",
            ErrorName::Cancelled => "Cancelled",
            ErrorName::UpstreamFailed => "UpstreamFailed",
            ErrorName::RuntimeCrashed => "RuntimeCrashed",
            ErrorName::EdgeBudgetExceeded => "EdgeBudgetExceeded",
            ErrorName::Internal => "Internal",
            ErrorName::NotFound => "NotFound",
            ErrorName::Unauthorized => "Unauthorized",
            ErrorName::Forbidden => "Forbidden",
            ErrorName::Conflict => "Conflict",
            ErrorName::GrantSpent => "GrantSpent",
            ErrorName::LayerNotUploaded => "LayerNotUploaded",
            ErrorName::PayloadTooLarge => "PayloadTooLarge",
            ErrorName::RequestTimeout => "RequestTimeout",
            ErrorName::RangeNotSatisfiable => "RangeNotSatisfiable",
            ErrorName::UpgradeRequired => "UpgradeRequired",
            ErrorName::TooManyRequests => "TooManyRequests",
            ErrorName::QueueFull => "QueueFull",
            ErrorName::UnknownRun => "UnknownRun",
            ErrorName::EventsRefused => "EventsRefused",
            ErrorName::StorageUnavailable => "StorageUnavailable",
            ErrorName::QuotaExceeded => "QuotaExceeded",
        }
    }

    /// The name spelled `name`, if it is one of ours.
    pub fn from_name(name: &str) -> Option<ErrorName> {
        ErrorName::ALL.into_iter().find(|n| n.as_str() == name)
    }

    /// The exit code of a run that ended with this error: 124 for a timeout as GNU
    /// timeout(1), 130 for a cancel as a program stopped by SIGINT, 137 for a crashed runtime
    /// as a program the kernel's out-of-memory killer stopped (SIGKILL), else 1.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorName::Timeout => 124,
            ErrorName::Cancelled => 130,
            ErrorName::RuntimeCrashed => 137,
            _ => 1,
        }
    }

    /// The HTTP status that goes with this error, where a plain HTTP status applies (the
    /// `use-relay` prompt quotes it to agents).
    pub fn http_status(self) -> u16 {
        match self {
            ErrorName::ValidationError => 400,
            ErrorName::PolicyDenied => 403,
            ErrorName::Timeout => 408,
            ErrorName::OutputLimitExceeded => 413,
            ErrorName::DepsResolutionFailed => 424,
            ErrorName::NoExecutorAttached => 425,
            // nginx's "client closed request": no standard status says it.
            ErrorName::Cancelled => 499,
            ErrorName::UpstreamFailed => 502,
            ErrorName::RuntimeCrashed | ErrorName::Internal => 500,
            ErrorName::NotFound | ErrorName::UnknownRun => 404,
            ErrorName::Unauthorized => 401,
            ErrorName::Forbidden => 403,
            ErrorName::Conflict | ErrorName::GrantSpent | ErrorName::LayerNotUploaded | ErrorName::EventsRefused => 409,
            ErrorName::PayloadTooLarge => 413,
            ErrorName::RequestTimeout => 408,
            ErrorName::RangeNotSatisfiable => 416,
            ErrorName::UpgradeRequired => 426,
            ErrorName::TooManyRequests
            | ErrorName::QueueFull
            | ErrorName::EdgeBudgetExceeded
            | ErrorName::QuotaExceeded => 429,
            ErrorName::StorageUnavailable => 503,
        }
    }

    /// What the error means and how an agent fixes it (quoted in the `use-relay` prompt).
    pub fn remedy(self) -> &'static str {
        match self {
            ErrorName::ValidationError => "the arguments do not match the tool's inputSchema; the message names the field. Fix that field and call again.",
            ErrorName::PolicyDenied => "the code tried a network request or a file access the policy forbids; the message names the domain or path. Use an allowed one, or ask the user to have the tenant's admin allow it in the tenant's defaults (PATCH /admin/tenants/<id>; a `policy` argument can only narrow them).",
            ErrorName::Timeout => "the run hit its time limit (policy.limits.timeoutMs). Do less per call, make the code faster, or split the work across calls.",
            ErrorName::OutputLimitExceeded => "stdout/stderr went over policy.limits.stdoutBytes. Print summaries instead of bulky data (a `policy` argument can lower this limit, never raise it past the tenant's).",
            ErrorName::DepsResolutionFailed => "a dependency could not be resolved or bundled: npm packages must be pure JavaScript (no Node built-ins, no native addons), Python packages pure-Python wheels. Pick another version or package; the message quotes the log.",
            ErrorName::NoExecutorAttached => "no browser tab is attached to this relay session, so nothing can run. Ask the user to open the relay page (its URL is in the message) and keep the tab open, then retry.",
            ErrorName::Cancelled => "the run was stopped before it finished: its request was cancelled, or it waited in the queue longer than the tenant allows. Call again if the result is still needed.",
            ErrorName::UpstreamFailed => "a site the code fetched, or an upstream MCP server it called, failed or did not answer; the message quotes what it said. Retry later, or call something else.",
            ErrorName::RuntimeCrashed => "the browser process running the code died, almost always because the code used too much memory in a way no limit stops first (Python filling the browser's JavaScript heap through Pyodide's FFI, say). The tab restarted its sandbox and serves the next call; the same code will crash it again. Use less memory per call (work in pieces), then call again.",
            ErrorName::EdgeBudgetExceeded => "no tab was attached and the tenant's edge budget (runs a minute or CPU ms a day, defaults.edge) is spent; the message says which and when it comes back. Ask the user to open the relay page so runs go to a tab, or the relay's operator to raise the budget.",
            ErrorName::Internal => "a fault in relay itself, not in your code. Retry once; if it happens again, tell the user the message.",
            ErrorName::NotFound => "nothing is at that address; the message names what is missing. Check the path (README lists the endpoints) or create the thing first.",
            ErrorName::Unauthorized => "the credential is missing, malformed, expired or unknown; the message says which. Send a valid one in `Authorization: Bearer`.",
            ErrorName::Forbidden => "the credential is valid but not for this request (another origin, relay session or file). Use the one issued for it.",
            ErrorName::Conflict => "the request names something that has moved on (a run that ended). Start again from a fresh call.",
            ErrorName::GrantSpent => "an upload grant uploads once. Ask POST /capsule/presign for a new one.",
            ErrorName::LayerNotUploaded => "finalize names a layer that was not uploaded under this build's grants. Upload it, then finalize again.",
            ErrorName::PayloadTooLarge => "the request body is over the route's limit (README lists each). Send a smaller one.",
            ErrorName::RequestTimeout => "the request body did not arrive in time. Send it again, faster or smaller.",
            ErrorName::RangeNotSatisfiable => "the Range lies outside the file; Content-Range gives its size. Ask for a range inside it.",
            ErrorName::UpgradeRequired => "this route is a WebSocket. Open it with `Upgrade: websocket`, or use the POST route the message names.",
            ErrorName::TooManyRequests => "too many requests at once; the message says the limit. Wait for some to finish, then send more.",
            ErrorName::QueueFull => "the relay session's queue is full. Retry after the seconds Retry-After gives.",
            ErrorName::UnknownRun => "the batch named runs this relay session does not know (they ended long ago, or the relay restarted). Stop those runs.",
            ErrorName::EventsRefused => "some events of the batch were refused; each says why. Stop the runs they name.",
            ErrorName::StorageUnavailable => "the relay's storage did not answer; it passes. Retry after the seconds Retry-After gives.",
            ErrorName::QuotaExceeded => "one of the tenant's quotas (defaults.quotas) is reached; the message names it, its value and when it comes back. Retry after the seconds Retry-After gives, or ask the relay's operator to raise it.",
        }
    }
}

/// Seconds a caller waits before retrying after a storage failure (`retry-after`).
pub const STORAGE_RETRY_AFTER_S: u64 = 5;

/// `tool` then `http`, as one list (a `const` array cannot be concatenated otherwise).
const fn joined(tool: [ErrorName; 12], http: [ErrorName; 15]) -> [ErrorName; 27] {
    let mut all = [ErrorName::Internal; 27];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < tool.len() { tool[i] } else { http[i - tool.len()] };
        i += 1;
    }
    all
}

/// Every refusal of an HTTP route: a name of the vocabulary (which gives the status and the
/// remedy) and a message that says what to change. The Worker turns it into a response in one
/// place (`durable/src/platform/http.rs`), as `{"error": {"name", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub name: ErrorName,
    pub message: String,
    /// Seconds to wait before retrying, when the refusal passes with time (a quota's
    /// `Retry-After`); `StorageUnavailable` always has [`STORAGE_RETRY_AFTER_S`].
    pub retry_after_s: Option<u64>,
    /// A quota's refusal: its data (`quota::Refusal::data`), which a tool result's error
    /// carries besides its name and message, as the JSON-RPC refusal -32051 does.
    pub quota: Option<Value>,
}

impl HttpError {
    pub fn new(name: ErrorName, message: impl Into<String>) -> Self {
        HttpError { name, message: message.into(), retry_after_s: None, quota: None }
    }

    /// This refusal with `Retry-After: seconds`.
    pub fn retry_after(self, seconds: u64) -> Self {
        HttpError { retry_after_s: Some(seconds), ..self }
    }

    /// A store (R2, KV, the relay session's SQLite) that did not answer: 503 with
    /// `retry-after`, because it passes (a bare 500 would tell the caller that retrying is
    /// pointless). The message names the store only: the cause goes to the log.
    pub fn storage_unavailable(store: &str) -> Self {
        let message = format!("{store} storage did not answer; retry in {STORAGE_RETRY_AFTER_S} seconds");
        HttpError::new(ErrorName::StorageUnavailable, message)
    }

    pub fn status(&self) -> u16 {
        self.name.http_status()
    }

    pub fn remedy(&self) -> &'static str {
        self.name.remedy()
    }

    /// `{"error": {"name", "message"}}`, the body of every error answer (and of a results
    /// socket's reply).
    pub fn body(&self) -> Value {
        json!({ "error": { "name": self.name.as_str(), "message": self.message } })
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name.as_str(), self.message)
    }
}

/// The table the executor page reads: `{name: {status, exitCode, tool}}` for every name
/// (`tool`: a run may end with it, [`ErrorName::in_tool_results`]).
pub fn table_json() -> Value {
    let entries = ErrorName::ALL.into_iter().map(|name| {
        let entry =
            json!({ "status": name.http_status(), "exitCode": name.exit_code(), "tool": name.in_tool_results() });
        (name.as_str().to_owned(), entry)
    });
    Value::Object(entries.collect::<Map<String, Value>>())
}
