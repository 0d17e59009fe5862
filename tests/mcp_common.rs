//! Test support shared by the tests/mcp_*.rs files (each includes it with `#[path]`): a
//! map-backed SessionStore, a fixed Context, and request builders for both eras.
#![allow(dead_code)] // each test file uses a different part of it

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use relay_core::audit::{seal, AuditRecord, ChainHead, Kind};
use relay_core::mcp::tasks::TaskRecord;
use relay_core::mcp::{
    handle, Context, Dispatch, Era, HttpRequest, HttpResponse, LogLevel, RelayView, SessionStatus, SessionStore, Tool,
    ToolCall,
};
use relay_core::run::readiness::Readiness;
use serde_json::{json, Value};

pub const PAGE_URL: &str = "https://relay.example/?session=default";
pub const MODERN: &str = "2026-07-28";
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Legacy sessions in a map: id -> (protocol version, created at, ended). `lookups` counts
/// `status` calls: in the Durable Object each is a SQLite query.
#[derive(Default)]
pub struct MemStore {
    pub sessions: HashMap<String, (String, u64, bool)>,
    pub lookups: Cell<usize>,
}

impl SessionStore for MemStore {
    fn create(&mut self, id: &str, protocol_version: &str, now_ms: u64) {
        self.sessions.insert(id.to_string(), (protocol_version.to_string(), now_ms, false));
    }

    fn status(&self, id: &str) -> SessionStatus {
        self.lookups.set(self.lookups.get() + 1);
        match self.sessions.get(id) {
            None => SessionStatus::Unknown,
            Some((_, _, true)) => SessionStatus::Ended,
            Some((_, _, false)) => SessionStatus::Active,
        }
    }

    fn end(&mut self, id: &str) {
        if let Some(entry) = self.sessions.get_mut(id) {
            entry.2 = true;
        }
    }
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

fn next_session_id() -> String {
    format!("sess-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// The relay session's audit: three sealed records, of which the latest `n`.
pub fn audit_records(n: usize) -> Vec<AuditRecord> {
    let mut records: Vec<AuditRecord> = Vec::new();
    for i in 0..3u64 {
        let fields = AuditRecord {
            // Set by `seal`.
            seq: 0,
            prev: String::new(),
            chain: String::new(),
            ts_ms: 1_700_000_000_000 + i,
            tenant: "t_test".into(),
            relay_session: "default".into(),
            run_id: format!("r_{i}"),
            kind: Kind::ToolCall,
            tool: "run_js".into(),
            error_name: Some("NoExecutorAttached".into()),
            exit_code: Some(1),
            duration_ms: 0,
            stdout_bytes: 0,
            stdout_sha256: String::new(),
            stderr_bytes: 0,
            stderr_sha256: String::new(),
            args: json!({}),
            workspace_before: None,
            workspace_after: None,
            executor: None,
        };
        let head = records.last().map(|r| ChainHead { seq: r.seq, chain: r.chain.clone() });
        records.push(seal(fields, head.as_ref()));
    }
    records.split_off(3usize.saturating_sub(n))
}

/// A context with two tabs attached and a small limits object.
pub fn cx() -> Context<'static> {
    Context {
        now_ms: 1_700_000_000_000,
        new_session_id: &next_session_id,
        relay: RelayView {
            session: "default".into(),
            tab_ids: vec!["tab-a".into(), "tab-b".into()],
            queue_depth: 3,
            recent_runs: json!([{ "runId": "r_1", "exitCode": 0 }]),
            clients: json!([{ "name": "seen-before", "version": "1", "lastSeenMs": 1 }]),
            contexts: json!({ "contexts": [] }),
            usage: json!({ "runsInFlight": { "limit": 20, "used": 1 } }),
            next_tab: Some(
                Readiness::parse(br#"{"runtimes": {"quickjs@0.32": "ready", "pyodide@314": "loading"}}"#).unwrap(),
            ),
        },
        audit_records: &audit_records,
        workspace: &|| serde_json::json!({ "version": 0, "root": relay_core::workspace::EMPTY_ROOT, "files": [] }),
        page_url: PAGE_URL.into(),
        limits_json: json!({ "timeoutMs": 60000, "memMb": 256, "stdoutBytes": 1048576 }),
        client_seen: &record_client,
        task: &known_task,
    }
}

/// The relay session's tasks in `cx()`: `task_working` (run `r_w`) and `task_done`.
fn known_task(task_id: &str) -> Option<TaskRecord> {
    let working = TaskRecord::working(task_id, "r_w", 1_700_000_000_000);
    match task_id {
        "task_working" => Some(working),
        "task_done" => {
            Some(working.ended(&json!({ "result": { "content": [], "isError": false } }), false, 1_700_000_001_000))
        }
        _ => None,
    }
}

thread_local! {
    /// The clientInfo values `cx()`'s `client_seen` was told, in order (per test thread).
    pub static CLIENTS_SEEN: std::cell::RefCell<Vec<Value>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn record_client(info: &Value) {
    CLIENTS_SEEN.with(|seen| seen.borrow_mut().push(info.clone()));
}

/// The clientInfo values seen so far on this thread, forgotten as they are returned.
pub fn clients_seen() -> Vec<Value> {
    CLIENTS_SEEN.with(|seen| seen.take())
}

pub fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

/// A POST with the given headers and a JSON body.
pub fn post(pairs: &[(&str, &str)], body: &Value) -> HttpRequest {
    HttpRequest { method: "POST".into(), headers: headers(pairs), body: serde_json::to_vec(body).unwrap() }
}

/// The `_meta` every 2026-07-28 request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": { "name": "test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// The value `Mcp-Name` must carry for a method, if any.
pub fn name_of(method: &str, params: &Value) -> Option<String> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params.get(field).and_then(Value::as_str).map(str::to_string)
}

/// A well-formed 2026-07-28 request: `_meta` merged into params, every mirrored header set.
pub fn modern(method: &str, params: Value) -> HttpRequest {
    let mut params = params;
    params["_meta"] = merge(modern_meta(), params.get("_meta").cloned());
    let mut pairs = vec![
        ("content-type", "application/json".to_string()),
        ("accept", ACCEPT_BOTH.to_string()),
        ("mcp-protocol-version", MODERN.to_string()),
        ("mcp-method", method.to_string()),
    ];
    if let Some(name) = name_of(method, &params) {
        pairs.push(("mcp-name", name));
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    HttpRequest {
        method: "POST".into(),
        headers: pairs.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

fn merge(mut base: Value, extra: Option<Value>) -> Value {
    if let Some(Value::Object(extra)) = extra {
        for (k, v) in extra {
            base[k] = v;
        }
    }
    base
}

/// Replaces (or, with `None`, removes) one header.
pub fn set_header(req: &mut HttpRequest, name: &str, value: Option<&str>) {
    req.headers.retain(|(n, _)| n != name);
    if let Some(value) = value {
        req.headers.push((name.to_string(), value.to_string()));
    }
}

/// A legacy request with a session id (and no MCP-Protocol-Version header).
pub fn legacy(session: &str, id: u64, method: &str, params: Value) -> HttpRequest {
    post(
        &[("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-session-id", session)],
        &json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
    )
}

/// A bodiless request (GET, DELETE, ...).
pub fn bare(method: &str, pairs: &[(&str, &str)]) -> HttpRequest {
    HttpRequest { method: method.into(), headers: headers(pairs), body: Vec::new() }
}

/// A server: one store, one context.
pub struct Server {
    pub store: MemStore,
    pub cx: Context<'static>,
}

impl Default for Server {
    fn default() -> Self {
        Server { store: MemStore::default(), cx: cx() }
    }
}

impl Server {
    pub fn new() -> Self {
        Server::default()
    }

    pub fn send(&mut self, req: &HttpRequest) -> Dispatch {
        handle(req, &mut self.store, &self.cx)
    }

    /// Sends and expects an immediate reply.
    pub fn reply(&mut self, req: &HttpRequest) -> HttpResponse {
        match self.send(req) {
            Dispatch::Reply(response) => response,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    /// Runs `initialize` with `version` and returns the new session id.
    pub fn initialize(&mut self, version: &str) -> String {
        let req = post(
            &[("content-type", "application/json"), ("accept", ACCEPT_BOTH)],
            &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": { "name": "legacy-test", "version": "1" } } }),
        );
        let response = self.reply(&req);
        assert_eq!(response.status, 200, "{response:?}");
        header_of(&response, "mcp-session-id").expect("a session id")
    }
}

pub fn header_of(response: &HttpResponse, name: &str) -> Option<String> {
    response.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
}

/// The JSON-RPC error code of a reply.
pub fn code(response: &HttpResponse) -> Option<i64> {
    response.body.as_ref()?.get("error")?.get("code")?.as_i64()
}

/// The `result` of a reply, asserting success.
pub fn result(response: &HttpResponse) -> Value {
    let body = response.body.as_ref().expect("a body");
    assert_eq!(response.status, 200, "{body}");
    body.get("result").cloned().unwrap_or_else(|| panic!("no result: {body}"))
}

/// A validated `run_js` call (id 11, progress token "tok"), as the Durable Object gets it.
pub fn a_call(era: Era, stream: bool, log_level: Option<LogLevel>) -> ToolCall {
    ToolCall {
        id: json!(11),
        tool: Tool::RunJs,
        arguments: json!({"code": "1"}),
        progress_token: Some(json!("tok")),
        stream,
        era,
        log_level,
        session_id: None,
        task: false,
    }
}
