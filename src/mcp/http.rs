//! HTTP for Streamable HTTP: the request and response the core sees, header lookup, content
//! negotiation (`Accept`, `Content-Type`), the `Mcp-Name` Base64 sentinel, and Server-Sent
//! Events frames.

use base64::Engine as _;
use serde_json::Value;

/// One HTTP request to `/mcp`, as the Worker forwarded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    /// Header names lower-case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What to send back. `body: None` means an empty body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

impl HttpResponse {
    /// A JSON body with its content type.
    pub fn json(status: u16, body: Value) -> Self {
        let headers = vec![("content-type".into(), "application/json".into())];
        HttpResponse { status, headers, body: Some(body) }
    }

    /// An empty body.
    pub fn empty(status: u16) -> Self {
        HttpResponse { status, headers: Vec::new(), body: None }
    }

    /// 202 with no body: a notification was accepted.
    pub fn accepted() -> Self {
        HttpResponse::empty(202)
    }

    pub(super) fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A comment line: SSE clients ignore it, intermediaries see traffic on a quiet stream
/// (2026-07-28 transports/streamable-http "Receiving Messages", keep-alive note).
pub const SSE_KEEPALIVE: &str = ": keepalive\n\n";

/// Headers for any SSE response the Durable Object opens (a POST answered as a stream, a
/// legacy GET stream, a tab's command stream). `X-Accel-Buffering: no` is the spec's SHOULD so
/// proxies do not buffer; `no-transform` keeps them from compressing it.
pub const SSE_HEADERS: [(&str, &str); 3] =
    [("content-type", "text/event-stream"), ("cache-control", "no-cache, no-transform"), ("x-accel-buffering", "no")];

/// The first value of header `name` (callers pass names lower-case; matched case-insensitively
/// anyway, as RFC 9110 field names are).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
}

/// True when the client's `Accept` lists `text/event-stream` explicitly (a wildcard alone
/// gets plain JSON): the Durable Object may then stream progress and output before the result.
pub fn wants_sse(headers: &[(String, String)]) -> bool {
    header(headers, "accept")
        .is_some_and(|accept| media_ranges(accept).any(|(range, q)| q > 0.0 && range == "text/event-stream"))
}

/// True when `Accept` admits `mime` (`type/sub`), directly or through `type/*` or `*/*`.
pub fn accepts(headers: &[(String, String)], mime: &str) -> bool {
    let Some(accept) = header(headers, "accept") else {
        return false;
    };
    let kind = mime.split('/').next().unwrap_or(mime);
    media_ranges(accept).any(|(range, q)| q > 0.0 && (range == mime || range == "*/*" || range == format!("{kind}/*")))
}

/// True when `Content-Type` is `application/json` (parameters such as `charset` allowed).
pub fn is_json_content(headers: &[(String, String)]) -> bool {
    header(headers, "content-type")
        .is_some_and(|ct| ct.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")))
}

/// `(media range lower-cased, q)` pairs of an `Accept` value; a malformed q counts as 0.
fn media_ranges(accept: &str) -> impl Iterator<Item = (String, f32)> + '_ {
    accept.split(',').map(|part| {
        let mut fields = part.split(';');
        let range = fields.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = fields
            .filter_map(|p| p.trim().strip_prefix("q="))
            .map(|q| q.trim().parse::<f32>().unwrap_or(0.0))
            .next()
            .unwrap_or(1.0);
        (range, q)
    })
}

/// Decodes a header value that may use the `=?base64?…?=` sentinel (2026-07-28
/// streamable-http "Value Encoding"). `None` when the value has characters RFC 9110 forbids
/// in a field value, or its Base64 is not valid UTF-8: both are a HeaderMismatch.
pub fn decode_header_value(raw: &str) -> Option<String> {
    if !is_field_value(raw) {
        return None;
    }
    match raw.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(raw.to_string()),
    }
}

/// True when every character is allowed in an RFC 9110 field value: visible ASCII, space
/// and horizontal tab.
pub fn is_field_value(raw: &str) -> bool {
    raw.chars().all(|c| c == '\t' || (' '..='~').contains(&c))
}

/// One SSE event carrying a JSON-RPC message. `id` is for legacy-era streams only: the
/// 2026-07-28 revision removed event ids with resumability.
pub fn sse_event(json: &Value, id: Option<&str>) -> String {
    sse_frame("message", json, id)
}

/// One SSE event named `event` with JSON `data` (the MCP stream's messages, the tabs'
/// commands). serde_json never emits a raw newline, so the JSON fits one `data:` line; CR/LF
/// are stripped from the id.
pub fn sse_frame(event: &str, data: &Value, id: Option<&str>) -> String {
    let id_line = id.map(|id| id.replace(['\r', '\n'], "")).map(|id| format!("id: {id}\n")).unwrap_or_default();
    format!("{id_line}event: {event}\ndata: {data}\n\n")
}
