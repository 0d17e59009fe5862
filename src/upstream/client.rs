//! An MCP client for upstream servers over Streamable HTTP, in either protocol era, without
//! I/O: [`Exchange`] says which POST to send next and reads each answer, and the Durable
//! Object only carries them. Era detection follows 2026-07-28 basic/versioning ("Backward
//! Compatibility"): send the modern request; a `4xx` without a recognized modern error means a
//! legacy server, which then gets `initialize`, `notifications/initialized` and the request
//! under its `Mcp-Session-Id`. What was learned ([`Known`]) is for the caller to keep per
//! server, so later calls skip the probe and the handshake.
//!
//! Every answer is redacted ([`Redactor`]) before it is read: nothing the exchange returns (a
//! result, a message quoting the upstream) can hold the credentials it was sent with.

use serde_json::{json, Value};

use super::redact::Redactor;

use crate::mcp::http::header;
use crate::mcp::jsonrpc::{HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION};
use crate::mcp::server_info;

/// The modern version we send.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The legacy version we offer in `initialize`.
pub const LEGACY_VERSION: &str = "2025-11-25";

/// What is known about an upstream server's era.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Known {
    #[default]
    Unknown,
    Modern,
    /// A legacy server, and its session once one was opened (`None` for a server that
    /// answered `initialize` without a session id: it is stateless).
    Legacy {
        version: String,
        session: Option<String>,
    },
}

/// One POST to the upstream's endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The upstream's answer to a [`Post`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What to do after an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Send [`Exchange::post`] now.
    Send,
    /// The request's `result`, or why there is none (a message quoting the upstream).
    Done(Result<Value, String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Request,
    Initialize,
    Initialized,
}

/// One request (`tools/call`, `tools/list`) to one upstream server.
#[derive(Debug, Clone)]
pub struct Exchange {
    method: String,
    params: Value,
    known: Known,
    step: Step,
    /// Whether a legacy session was already opened afresh for this request (a second expired
    /// session is the upstream's fault, not a reason to loop).
    reopened: bool,
    /// What the modern request got, when it made us try the legacy era.
    probe: Option<String>,
    /// Removes the credentials sent to the upstream from each of its answers.
    redactor: Redactor,
}

impl Exchange {
    /// An exchange for `method` with `params`, starting from what is `known` of the server,
    /// whose answers `redactor` cleans of the credentials sent with the request.
    pub fn new(method: &str, params: Value, known: Known, redactor: Redactor) -> Self {
        let step = match known {
            Known::Legacy { session: None, .. } => Step::Initialize,
            _ => Step::Request,
        };
        Exchange { method: method.to_owned(), params, known, step, reopened: false, probe: None, redactor }
    }

    /// What is known of the server now: keep it for the next exchange.
    pub fn known(&self) -> &Known {
        &self.known
    }

    /// The POST to send next.
    pub fn post(&self) -> Post {
        match (self.step, &self.known) {
            (Step::Initialize, _) => legacy_post(None, LEGACY_VERSION, &request("initialize", initialize_params())),
            (Step::Initialized, Known::Legacy { version, session }) => legacy_post(
                session.as_deref(),
                version,
                &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            ),
            (_, Known::Legacy { version, session }) => {
                legacy_post(session.as_deref(), version, &request(&self.method, self.params.clone()))
            }
            _ => self.modern_post(),
        }
    }

    /// Reads the answer to the last [`post`](Self::post), its body redacted first.
    pub fn answer(&mut self, answer: &Received) -> Next {
        let redacted = Received { body: self.redactor.bytes(&answer.body).into_owned(), ..answer.clone() };
        let answer = &redacted;
        match self.step {
            Step::Initialize => self.initialized(answer),
            Step::Initialized if (200..300).contains(&answer.status) => {
                self.step = Step::Request;
                Next::Send
            }
            Step::Initialized => Next::Done(Err(format!(
                "it answered notifications/initialized with HTTP {}: {}",
                answer.status,
                snippet(&answer.body)
            ))),
            Step::Request => self.requested(answer),
        }
    }

    fn requested(&mut self, answer: &Received) -> Next {
        let legacy = matches!(self.known, Known::Legacy { .. });
        if legacy && answer.status == 404 && !self.reopened {
            // streamable-http: 404 means the session expired; start a new one.
            self.reopened = true;
            self.step = Step::Initialize;
            return Next::Send;
        }
        if self.known == Known::Unknown && (400..500).contains(&answer.status) && !modern_error(answer) {
            self.probe = Some(format!("HTTP {}: {}", answer.status, snippet(&answer.body)));
            self.known = Known::Legacy { version: LEGACY_VERSION.into(), session: None };
            self.step = Step::Initialize;
            return Next::Send;
        }
        match response(answer) {
            Ok(message) => {
                if !legacy {
                    self.known = Known::Modern;
                }
                Next::Done(outcome(&message))
            }
            Err(why) => Next::Done(Err(why)),
        }
    }

    fn initialized(&mut self, answer: &Received) -> Next {
        let result = match response(answer).and_then(|message| outcome(&message)) {
            Ok(result) => result,
            Err(why) => return Next::Done(Err(self.neither_era(&why))),
        };
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        if !crate::mcp::SUPPORTED_VERSIONS.contains(&version) || version >= MODERN_VERSION {
            return Next::Done(Err(format!(
                "it answered initialize with protocol version {version:?}, which relay does not speak"
            )));
        }
        let session = header(&answer.headers, "mcp-session-id").map(str::to_owned);
        self.known = Known::Legacy { version: version.to_owned(), session };
        self.step = Step::Initialized;
        Next::Send
    }

    /// Why `initialize` failed, with what the modern request got first, if it was tried.
    fn neither_era(&self, why: &str) -> String {
        match &self.probe {
            Some(probe) => format!("it speaks neither protocol era: a {MODERN_VERSION} request got {probe}; initialize ({LEGACY_VERSION}) got: {why}"),
            None => format!("initialize failed: {why}"),
        }
    }

    /// A 2026-07-28 request: `_meta` with our version and capabilities, and the mirrored
    /// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
    fn modern_post(&self) -> Post {
        let mut params = self.params.clone();
        if let Value::Object(map) = &mut params {
            map.insert(
                "_meta".into(),
                json!({
                    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }),
            );
        }
        let mut headers = base_headers(MODERN_VERSION);
        headers.push(("mcp-method".into(), self.method.clone()));
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            headers.push(("mcp-name".into(), name.to_owned()));
        }
        Post { headers, body: serde_json::to_vec(&request(&self.method, params)).expect("JSON serializes") }
    }
}

fn initialize_params() -> Value {
    json!({ "protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": server_info() })
}

fn request(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params })
}

fn base_headers(version: &str) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "application/json".into()),
        ("accept".into(), "application/json, text/event-stream".into()),
        ("mcp-protocol-version".into(), version.into()),
    ]
}

fn legacy_post(session: Option<&str>, version: &str, message: &Value) -> Post {
    let mut headers = base_headers(version);
    if let Some(session) = session {
        headers.push(("mcp-session-id".into(), session.to_owned()));
    }
    Post { headers, body: serde_json::to_vec(message).expect("JSON serializes") }
}

/// The JSON-RPC response with our id in an answer: a JSON body, or the first such message of
/// an SSE stream (notifications before it are skipped).
fn response(answer: &Received) -> Result<Value, String> {
    let content_type = header(&answer.headers, "content-type").unwrap_or_default().to_ascii_lowercase();
    let messages: Vec<Value> = if content_type.starts_with("text/event-stream") {
        sse_data(&answer.body).filter_map(|data| serde_json::from_str(&data).ok()).collect()
    } else {
        serde_json::from_slice(&answer.body).into_iter().collect()
    };
    let found = messages
        .into_iter()
        .find(|m| m.get("id") == Some(&json!(1)) && (m.get("result").is_some() || m.get("error").is_some()));
    match found {
        Some(message) if (200..300).contains(&answer.status) || message.get("error").is_some() => Ok(message),
        _ => Err(format!("it answered HTTP {}: {}", answer.status, snippet(&answer.body))),
    }
}

/// The `result`, or the JSON-RPC error quoted.
fn outcome(message: &Value) -> Result<Value, String> {
    match (message.get("result"), message.get("error")) {
        (Some(result), _) => Ok(result.clone()),
        (_, Some(error)) => {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
            let text = error.get("message").and_then(Value::as_str).unwrap_or("(no message)");
            Err(format!("it answered error {code}: {text}"))
        }
        _ => Err("it answered a message with neither result nor error".into()),
    }
}

/// Whether a `4xx` carries an error only a 2026-07-28 server sends: such a server is modern,
/// and the request was wrong, not the era.
fn modern_error(answer: &Received) -> bool {
    let code = serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(|m| m.pointer("/error/code").and_then(Value::as_i64));
    matches!(code, Some(HEADER_MISMATCH | UNSUPPORTED_PROTOCOL_VERSION))
}

/// The `data` of each event of an SSE body, its lines joined.
fn sse_data(body: &[u8]) -> impl Iterator<Item = String> + '_ {
    let text = std::str::from_utf8(body).unwrap_or_default();
    text.split("\n\n").flat_map(|block| block.split("\r\n\r\n")).filter_map(|event| {
        let lines: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    })
}

/// The start of a body, for a message.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None if text.is_empty() => "(empty body)".into(),
        None => text.to_owned(),
    }
}
