//! The protocol between the Worker, a relay session's Durable Object and its tabs, typed once:
//!
//! - [`SessionRequest`]: every request the Worker sends a relay session's DO, one variant per
//!   route with its typed parameters, turned into an [`Envelope`] (method, path, headers, body)
//!   and back in this file only. The DO's binding and the name of each relay session's object
//!   are here too ([`SESSIONS_BINDING`], [`object_name`]).
//! - [`TabCommand`] (`tab.rs`): every command the DO sends a tab on its stream, serialized in
//!   one place; the page's list of command names is generated from it at build time.
//! - [`Caller`] (`caller.rs`): who is calling, which every forwarded request carries.
//!
//! Adding a route or a command is one variant: the compiler finds every site.

mod caller;
mod tab;

pub use caller::{own_page_origin, public_origin, Caller, CALLER_HEADER};
pub use tab::{
    table_json as tab_commands_json, BuildCommand, CapsuleCommand, CommandName, ContextOrder, RanCommand, TabCommand,
    TabsCommand, RAN_OUTPUT_CHARS,
};

use crate::error::{ErrorName, HttpError};
use crate::mcp::HttpRequest;
use crate::packages::UploadGrant;

/// The binding of the relay sessions' Durable Object class (wrangler.toml).
pub const SESSIONS_BINDING: &str = "SESSIONS";

/// The name of a relay session's Durable Object: `<tenantId>/<session>`. The tenant always
/// comes from a credential, so no request can name another tenant's object.
pub fn object_name(tenant_id: &str, session: &str) -> String {
    format!("{tenant_id}/{session}")
}

/// The header naming the tab a tab route's request comes from (the `tabId` of its `hello`).
pub const TAB_HEADER: &str = "x-relay-tab";
/// On a relay session's answer to a legacy client's standalone `GET /mcp`: the stream is
/// accepted, and the Worker holds it (nothing is ever sent on it unprompted: keep-alives only),
/// so the DO keeps no timer awake for it.
pub const HOLD_STREAM_HEADER: &str = "x-relay-hold-stream";

/// On a tab socket's upgrade: when the attach token it was opened with expires (seconds since
/// the epoch). The DO takes no batch on that socket after it.
pub const TOKEN_EXPIRY_HEADER: &str = "x-relay-token-expiry";

/// A request for a relay session's DO, as the Worker sends it: which route, with what.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionRequest {
    /// `/mcp`: the client's request as it came (its method, headers and body). `charge_call`:
    /// the Worker left the charge of this `tools/call` to the relay session
    /// (`mcp::Admission::ToSession`).
    Mcp { request: HttpRequest, charge_call: bool },
    /// A tab opens its command stream: a WebSocket from the Worker, which holds the tab's SSE
    /// stream and writes on it what the DO sends. `previous`: the id the page had before, when
    /// it attaches anew (its stream broke): its contexts are this tab's now.
    Events { previous: Option<String> },
    /// A batch of a tab's events (NDJSON, judged by `run::backchannel`).
    Result { tab: Option<String>, batch: Vec<u8> },
    /// A tab opens its results socket (hibernatable; batches come as its messages).
    ResultsSocket { tab: String, token_expiry_s: u64 },
    /// A tab opens its lease socket (the runtime answers its pings).
    LeaseSocket { tab: String, token_expiry_s: u64 },
    /// A tab renews its lease by POST (its lease socket cannot open).
    RenewLease { tab: Option<String> },
    /// A tab is going away.
    Detach { tab: Option<String> },
    /// What a tab says of its runtimes (`run::readiness`).
    Ready { tab: Option<String>, report: Vec<u8> },
    /// Code in run `run` (capsule `cap`) calls an upstream MCP server: the call's body.
    McpsRpc { run: String, cap: String, call: Vec<u8> },
    /// The `/mcps` tree of the tenant's upstream servers.
    McpsTree,
    /// Upload grants for the layers run `run`'s tab built (`{layers}`).
    BuildPresign { run: String, ask: Vec<u8> },
    /// The Worker received bytes matching `grant`: spend it, once.
    BuildSpend(UploadGrant),
    /// Run `run`'s tab proposes its build (`packages::Proposal`).
    BuildFinalize { run: String, proposal: Vec<u8> },
    /// Reserve the slot of `path` among run `run`'s published `/out` files, for `tab` if a
    /// tab publishes it.
    ReserveOutFile { run: String, path: String, tab: Option<String> },
    /// Give back the slot of a file that could not be stored.
    ReleaseOutFile { run: String, path: String },
    /// The workspace's changes since version `since` (all of it without), asked by `tab`
    /// before it starts run `run` (whose audit records the root it got).
    WorkspaceIndex { since: Option<u64>, run: Option<String>, tab: Option<String> },
    /// A body of the workspace, by its sha256.
    WorkspaceBody { sha256: String },
    /// Run `run` uploads a body before it commits the file that names it (no run: a tab
    /// uploading the files it held from before the relay session kept the workspace).
    WorkspacePutBody { run: Option<String>, sha256: String, body: Vec<u8> },
    /// A tab uploads the files it held from before the relay session kept the workspace
    /// (`{changes}`, writes of paths the index does not have).
    WorkspaceUpload { changes: Vec<u8> },
    /// Run `run` (capsule `cap`) commits changes to the workspace (`{changes}`), from `tab` if
    /// a tab sends them.
    WorkspaceCommit { run: String, cap: String, tab: Option<String>, changes: Vec<u8> },
    /// The relay session's metrics.
    Metrics,
    /// The relay session's whole audit chain (`audit::RETENTION` records at most), for an
    /// operator's export.
    Audit,
    /// Deletes all of the relay session's storage: its tenant is being deleted.
    Erase,
    /// The retention sweep of its workspace bodies, as of `as_of_ms` (the Cron Trigger's
    /// scheduled time): answers what it looked at and deleted (`retention::Sweep`).
    SweepBodies { as_of_ms: u64 },
}

/// A [`SessionRequest`] on the wire: what the Worker's request to the DO holds (the caller
/// travels beside it, in [`CALLER_HEADER`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub method: String,
    /// The path and query, such as `/mcps-rpc?run=r_1&cap=ab`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The routes, by path: the one table both directions read.
mod path {
    pub const MCP: &str = "/mcp";
    pub const EVENTS: &str = "/events";
    pub const RESULT: &str = "/result";
    pub const RESULTS: &str = "/results";
    pub const LEASE: &str = "/lease";
    pub const DETACH: &str = "/detach";
    pub const READY: &str = "/ready";
    pub const MCPS_RPC: &str = "/mcps-rpc";
    pub const MCPS: &str = "/mcps";
    pub const BUILD_PRESIGN: &str = "/build/presign";
    pub const BUILD_SPEND: &str = "/build/spend";
    pub const BUILD_FINALIZE: &str = "/build/finalize";
    pub const FILES_RESERVE: &str = "/files/reserve";
    pub const FILES_RELEASE: &str = "/files/release";
    pub const METRICS: &str = "/metrics";
    pub const AUDIT: &str = "/audit";
    pub const ERASE: &str = "/erase";
    pub const SWEEP_BODIES: &str = "/sweep-bodies";
    pub const WORKSPACE: &str = "/workspace";
    pub const WORKSPACE_BODY: &str = "/workspace/body";
    pub const WORKSPACE_COMMIT: &str = "/workspace/commit";
    pub const WORKSPACE_UPLOAD: &str = "/workspace/upload";
}

impl SessionRequest {
    /// The request on the wire.
    pub fn encode(self) -> Envelope {
        use SessionRequest::*;
        let post = |path: &str, query: &[(&str, &str)], headers: Vec<(String, String)>, body: Vec<u8>| Envelope {
            method: "POST".into(),
            path: with_query(path, query),
            headers,
            body,
        };
        match self {
            Mcp { request, charge_call } => Envelope {
                method: request.method,
                path: with_query(path::MCP, if charge_call { &[("chargeCall", "1")] } else { &[] }),
                headers: request.headers,
                body: request.body,
            },
            Events { previous } => {
                let query = present(&[("previous", previous.as_deref())]);
                get(&with_query(path::EVENTS, &query), vec![("upgrade".into(), "websocket".into())])
            }
            Result { tab, batch } => post(path::RESULT, &[], tab_header(tab), batch),
            ResultsSocket { tab, token_expiry_s } => get(path::RESULTS, socket_headers(tab, token_expiry_s)),
            LeaseSocket { tab, token_expiry_s } => get(path::LEASE, socket_headers(tab, token_expiry_s)),
            RenewLease { tab } => post(path::LEASE, &[], tab_header(tab), Vec::new()),
            Detach { tab } => post(path::DETACH, &[], tab_header(tab), Vec::new()),
            Ready { tab, report } => post(path::READY, &[], tab_header(tab), report),
            McpsRpc { run, cap, call } => post(path::MCPS_RPC, &[("run", &run), ("cap", &cap)], Vec::new(), call),
            McpsTree => get(path::MCPS, Vec::new()),
            BuildPresign { run, ask } => post(path::BUILD_PRESIGN, &[("run", &run)], Vec::new(), ask),
            BuildSpend(grant) => {
                post(path::BUILD_SPEND, &[], Vec::new(), serde_json::to_vec(&grant).expect("a grant serializes"))
            }
            BuildFinalize { run, proposal } => post(path::BUILD_FINALIZE, &[("run", &run)], Vec::new(), proposal),
            ReserveOutFile { run, path, tab } => {
                let query = present(&[("run", Some(&run)), ("path", Some(&path)), ("tab", tab.as_deref())]);
                post(path::FILES_RESERVE, &query, vec![], vec![])
            }
            ReleaseOutFile { run, path } => {
                post(path::FILES_RELEASE, &[("run", &run), ("path", &path)], vec![], vec![])
            }
            Metrics => get(path::METRICS, Vec::new()),
            Audit => get(path::AUDIT, Vec::new()),
            Erase => post(path::ERASE, &[], Vec::new(), Vec::new()),
            SweepBodies { as_of_ms } => post(path::SWEEP_BODIES, &[("asOf", &as_of_ms.to_string())], vec![], vec![]),
            WorkspaceIndex { since, run, tab } => {
                let since = since.map(|v| v.to_string());
                let query = present(&[("since", since.as_deref()), ("run", run.as_deref()), ("tab", tab.as_deref())]);
                get(&with_query(path::WORKSPACE, &query), Vec::new())
            }
            WorkspaceBody { sha256 } => get(&with_query(path::WORKSPACE_BODY, &[("sha256", &sha256)]), Vec::new()),
            WorkspacePutBody { run, sha256, body } => {
                let query = present(&[("run", run.as_deref()), ("sha256", Some(&sha256))]);
                post(path::WORKSPACE_BODY, &query, Vec::new(), body)
            }
            WorkspaceUpload { changes } => post(path::WORKSPACE_UPLOAD, &[], Vec::new(), changes),
            WorkspaceCommit { run, cap, tab, changes } => {
                let query = present(&[("run", Some(&run)), ("cap", Some(&cap)), ("tab", tab.as_deref())]);
                post(path::WORKSPACE_COMMIT, &query, Vec::new(), changes)
            }
        }
    }

    /// The request an envelope holds; a path no route has, or a parameter missing, is refused
    /// (404, 400) naming it.
    pub fn decode(envelope: Envelope) -> std::result::Result<SessionRequest, HttpError> {
        use SessionRequest::*;
        let Envelope { method, path, headers, body } = envelope;
        let (route, query) = path.split_once('?').unwrap_or((path.as_str(), ""));
        let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
        let param = |name: &str| -> std::result::Result<String, HttpError> {
            match params.iter().find(|(k, _)| k == name) {
                Some((_, value)) => Ok(value.clone()),
                None => Err(HttpError::new(ErrorName::ValidationError, format!("{route} needs `{name}`"))),
            }
        };
        let header = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let tab = header(TAB_HEADER);
        let socket = || -> std::result::Result<(String, u64), HttpError> {
            let expiry = header(TOKEN_EXPIRY_HEADER).and_then(|s| s.parse().ok()).unwrap_or(0);
            let tab = tab.clone().ok_or_else(|| not_attached("?tab="))?;
            Ok((tab, expiry))
        };
        Ok(match (route, method.as_str()) {
            (path::MCP, _) => Mcp {
                request: HttpRequest { method: method.clone(), headers, body },
                charge_call: params.iter().any(|(k, v)| k == "chargeCall" && v == "1"),
            },
            (path::EVENTS, _) => Events { previous: param("previous").ok() },
            (path::RESULT, _) => Result { tab, batch: body },
            (path::RESULTS, _) => socket().map(|(tab, token_expiry_s)| ResultsSocket { tab, token_expiry_s })?,
            (path::LEASE, "POST") => RenewLease { tab },
            (path::LEASE, _) => socket().map(|(tab, token_expiry_s)| LeaseSocket { tab, token_expiry_s })?,
            (path::DETACH, _) => Detach { tab },
            (path::READY, _) => Ready { tab, report: body },
            (path::MCPS_RPC, _) => McpsRpc { run: param("run")?, cap: param("cap")?, call: body },
            (path::MCPS, _) => McpsTree,
            (path::BUILD_PRESIGN, _) => BuildPresign { run: param("run")?, ask: body },
            (path::BUILD_SPEND, _) => BuildSpend(serde_json::from_slice(&body).map_err(|e| {
                HttpError::new(ErrorName::ValidationError, format!("{route}: the grant does not parse: {e}"))
            })?),
            (path::BUILD_FINALIZE, _) => BuildFinalize { run: param("run")?, proposal: body },
            (path::FILES_RESERVE, _) => {
                let tab = param("tab").ok();
                out_file(&param, |run, path| ReserveOutFile { run, path, tab })?
            }
            (path::FILES_RELEASE, _) => out_file(&param, |run, path| ReleaseOutFile { run, path })?,
            (path::METRICS, _) => Metrics,
            (path::AUDIT, _) => Audit,
            (path::ERASE, "POST") => Erase,
            (path::SWEEP_BODIES, "POST") => SweepBodies {
                as_of_ms: param("asOf")?.parse().map_err(|_| {
                    HttpError::new(ErrorName::ValidationError, "asOf must be milliseconds since the epoch")
                })?,
            },
            (path::WORKSPACE, _) => {
                let since = params.iter().find(|(k, _)| k == "since").map(|(_, v)| v.parse::<u64>());
                let since = since.transpose().map_err(|_| {
                    HttpError::new(ErrorName::ValidationError, "since must be a workspace version (a whole number)")
                })?;
                WorkspaceIndex { since, run: param("run").ok(), tab: param("tab").ok() }
            }
            (path::WORKSPACE_BODY, "POST") => {
                WorkspacePutBody { run: param("run").ok(), sha256: param("sha256")?, body }
            }
            (path::WORKSPACE_UPLOAD, _) => WorkspaceUpload { changes: body },
            (path::WORKSPACE_BODY, _) => WorkspaceBody { sha256: param("sha256")? },
            (path::WORKSPACE_COMMIT, _) => {
                WorkspaceCommit { run: param("run")?, cap: param("cap")?, tab: param("tab").ok(), changes: body }
            }
            (route, _) => {
                return Err(HttpError::new(ErrorName::NotFound, format!("session object has no route {route}")))
            }
        })
    }
}

/// A route that names a run and a path of its `/out` files.
fn out_file(
    param: &dyn Fn(&str) -> std::result::Result<String, HttpError>,
    make: impl FnOnce(String, String) -> SessionRequest,
) -> std::result::Result<SessionRequest, HttpError> {
    match (param("run"), param("path")) {
        (Ok(run), Ok(path)) => Ok(make(run, path)),
        _ => Err(HttpError::new(ErrorName::ValidationError, "a slot of a run's files needs `run` and `path`")),
    }
}

/// The refusal of a tab request whose `field` names no tab attached (or one no longer attached).
pub fn not_attached(field: &str) -> HttpError {
    let message = format!(
        "{field} must name a tab attached to this relay session (the tabId of its hello); a tab that was dropped attaches again"
    );
    HttpError::new(ErrorName::ValidationError, message)
}

fn get(path: &str, headers: Vec<(String, String)>) -> Envelope {
    Envelope { method: "GET".into(), path: path.to_owned(), headers, body: Vec::new() }
}

fn with_query(path: &str, query: &[(&str, &str)]) -> String {
    if query.is_empty() {
        return path.to_owned();
    }
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in query {
        serializer.append_pair(name, value);
    }
    format!("{path}?{}", serializer.finish())
}

/// The query parameters of `pairs` that have a value, in order.
fn present<'a>(pairs: &[(&'a str, Option<&'a str>)]) -> Vec<(&'a str, &'a str)> {
    pairs.iter().filter_map(|&(name, value)| Some((name, value?))).collect()
}

fn tab_header(tab: Option<String>) -> Vec<(String, String)> {
    tab.map(|tab| (TAB_HEADER.to_owned(), tab)).into_iter().collect()
}

/// A socket's upgrade: the runtime hands the DO's WebSocket back only to an upgrade request.
fn socket_headers(tab: String, token_expiry_s: u64) -> Vec<(String, String)> {
    vec![
        ("upgrade".into(), "websocket".into()),
        (TAB_HEADER.into(), tab),
        (TOKEN_EXPIRY_HEADER.into(), token_expiry_s.to_string()),
    ]
}
