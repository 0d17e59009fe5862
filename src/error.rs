//! The one error vocabulary of relay-edge: the error names relay-mcp's tools report (README
//! "Using it" lists them) plus `Cancelled`, each with its HTTP status (where a plain HTTP
//! answer applies), the exit code a run that ended with it reports, and what an agent does
//! about it. The executor page reads the same table, generated from this one
//! (`relay-capsule error-names`, at build time).

use serde_json::{json, Map, Value};

/// The uniform error names, carried in tool results with `isError`.
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
    Internal,
}

impl ErrorName {
    pub const ALL: [ErrorName; 10] = [
        ErrorName::ValidationError,
        ErrorName::PolicyDenied,
        ErrorName::Timeout,
        ErrorName::OutputLimitExceeded,
        ErrorName::DepsResolutionFailed,
        ErrorName::NoExecutorAttached,
        ErrorName::Cancelled,
        ErrorName::UpstreamFailed,
        ErrorName::RuntimeCrashed,
        ErrorName::Internal,
    ];

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
            ErrorName::Internal => "Internal",
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
            ErrorName::Internal => "a fault in relay itself, not in your code. Retry once; if it happens again, tell the user the message.",
        }
    }
}

/// The table the executor page reads: `{name: {status, exitCode}}` for every name.
pub fn table_json() -> Value {
    let entries = ErrorName::ALL
        .into_iter()
        .map(|name| (name.as_str().to_owned(), json!({ "status": name.http_status(), "exitCode": name.exit_code() })));
    Value::Object(entries.collect::<Map<String, Value>>())
}
