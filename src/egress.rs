//! The rules of `POST /egress`, the route that performs guest code's fetches (the Worker's I/O
//! is `durable/src/edge/egress.rs`). Guest code has no network of its own: the tab checks each
//! fetch against the run's policy and sends it here as an envelope
//! `{"url", "method", "headers": [[name, value], ...], "body": "<base64>"?}`; this module parses
//! it, keeps only the headers guest code may set, decides every redirect hop
//! ([`next_hop`]) and names what the route answers with. The decision on each URL is
//! [`check_url`], the same one the tab makes: the Worker's is the authoritative one.
//!
//! Not caught here: a listed domain whose DNS answer is a private address. Workers have no DNS
//! API to resolve it first, and Cloudflare's edge does not connect to private ranges anyway,
//! so such a fetch fails upstream (502) rather than reaching anyone's internal network.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use url::Url;

use crate::error::{ErrorName, HttpError};
use crate::policy::{check_url, NetworkPolicy, Verdict};

/// What the envelope may hold besides the body's base64 (the URL, the method, the headers).
pub const ENVELOPE_SLACK: usize = 64 * 1024;

/// Methods the route performs (those a Worker's `fetch` can send; `CONNECT` and `TRACE` are
/// refused as a browser refuses them).
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The Fetch standard's forbidden request-header names: a browser's `fetch` never sends them
/// as a script sets them (`Origin`, `Referer` would let guest code speak as the relay's page;
/// the rest describe the connection or are the browser's to write), so neither does the route.
const FORBIDDEN: [&str; 21] = [
    "accept-charset",
    "accept-encoding",
    "access-control-request-headers",
    "access-control-request-method",
    "connection",
    "content-length",
    "cookie",
    "cookie2",
    "date",
    "dnt",
    "expect",
    "host",
    "keep-alive",
    "origin",
    "referer",
    "set-cookie",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "via",
];
/// Prefixes of the Fetch standard's forbidden names.
const FORBIDDEN_PREFIXES: [&str; 2] = ["proxy-", "sec-"];
/// Headers that carry a method, forbidden when one of the methods they name is forbidden.
const METHOD_OVERRIDES: [&str; 3] = ["x-http-method", "x-http-method-override", "x-method-override"];
/// Methods no fetch may use, not even through an override header.
const FORBIDDEN_METHODS: [&str; 3] = ["connect", "trace", "track"];
/// Besides the forbidden ones: headers that would let guest code speak for a proxy, and
/// prefixes of Cloudflare's own, proxies' and relay-edge's headers.
const RELAY_DROPPED: [&str; 2] = ["x-real-ip", "forwarded"];
const RELAY_DROPPED_PREFIXES: [&str; 3] = ["cf-", "x-forwarded-", "x-relay-"];

/// The most bytes a CORS-safelisted request header's value may have (Fetch standard).
const SAFELISTED_VALUE_MAX: usize = 128;
/// The most bytes all of a request's CORS-safelisted header values may have together.
const SAFELISTED_TOTAL_MAX: usize = 1024;

/// Headers that describe a request body: a redirect that turns a request into a GET without a
/// body drops them too (the Fetch standard's "request-body-header names").
const BODY_HEADERS: [&str; 4] = ["content-encoding", "content-language", "content-location", "content-type"];

/// Response headers left out of `x-relay-headers`: cookies never reach guest code, and the
/// transfer headers describe the upstream's encoding, not the decoded bytes the route returns.
const RESPONSE_HIDDEN: [&str; 5] =
    ["set-cookie", "set-cookie2", "content-encoding", "content-length", "transfer-encoding"];

/// One request to send upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// Why the route refuses a fetch: an envelope it cannot read.
fn invalid(message: impl Into<String>) -> HttpError {
    HttpError::new(ErrorName::ValidationError, format!("egress request: {}", message.into()))
}

/// Why the route refuses a fetch: the policy denies it.
fn denied(message: String) -> HttpError {
    HttpError::new(ErrorName::PolicyDenied, message)
}

/// The envelope as sent; unknown fields are refused (a typo must not silently drop a body).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    url: String,
    #[serde(default = "default_method")]
    method: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: Option<String>,
}

fn default_method() -> String {
    "GET".into()
}

/// The most bytes an envelope may take when bodies are capped at `max_body_bytes`: the body's
/// base64 plus [`ENVELOPE_SLACK`]. The route reads no more than this.
pub fn envelope_limit(max_body_bytes: u64) -> usize {
    let base64 = max_body_bytes.div_ceil(3).saturating_mul(4);
    usize::try_from(base64).unwrap_or(usize::MAX).saturating_add(ENVELOPE_SLACK)
}

/// Parses an envelope and checks its URL: the first request to send, or why not.
pub fn prepare(envelope: &[u8], policy: &NetworkPolicy) -> Result<Outbound, HttpError> {
    let outbound = parse_envelope(envelope, policy.max_body_bytes)?;
    if let Err(e) = Url::parse(&outbound.url) {
        return Err(invalid(format!("url {:?} is not a valid absolute URL ({e})", outbound.url)));
    }
    match check_url(policy, &outbound.url) {
        Verdict::Allow => Ok(outbound),
        Verdict::Deny { reason } => Err(denied(format!("fetch of {} denied: {reason}", outbound.url))),
    }
}

/// Parses an envelope: a valid method, headers a request may carry (those guest code may not
/// set dropped), and a body of at most `max_body_bytes`.
pub fn parse_envelope(envelope: &[u8], max_body_bytes: u64) -> Result<Outbound, HttpError> {
    let envelope: Envelope = serde_json::from_slice(envelope).map_err(|e| {
        invalid(format!(
            "{e}; expected {{\"url\": \"...\", \"method\": \"GET\", \"headers\": [[\"name\", \"value\"]], \"body\": \"<base64>\"}}"
        ))
    })?;
    let method = method(&envelope.method)?;
    for (name, value) in &envelope.headers {
        check_header(name, value)?;
    }
    let body = match envelope.body {
        Some(body) => Some(STANDARD.decode(body).map_err(|e| invalid(format!("body is not base64: {e}")))?),
        None => None,
    };
    if body.is_some() && matches!(method.as_str(), "GET" | "HEAD") {
        return Err(invalid(format!("a {method} request cannot have a body")));
    }
    if let Some(body) = &body {
        if body.len() as u64 > max_body_bytes {
            return Err(denied(format!(
                "the request body ({} bytes) is larger than network.maxBodyBytes ({max_body_bytes} bytes); send less",
                body.len()
            )));
        }
    }
    Ok(Outbound { url: envelope.url, method, headers: guest_headers(envelope.headers), body })
}

/// The method in upper case, if the route performs it.
fn method(asked: &str) -> Result<String, HttpError> {
    let upper = asked.to_ascii_uppercase();
    if METHODS.contains(&upper.as_str()) {
        Ok(upper)
    } else {
        Err(invalid(format!("method {asked:?} is not supported; use one of {METHODS:?}")))
    }
}

/// A header a request can carry: a token name, and a value a `Headers` object accepts
/// (Latin-1, no CR, LF or NUL).
fn check_header(name: &str, value: &str) -> Result<(), HttpError> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(invalid(format!("header name {name:?} is not a valid HTTP token")));
    }
    if value.chars().any(|c| c as u32 > 0xff || matches!(c, '\r' | '\n' | '\0')) {
        return Err(invalid(format!("header {name:?} has a value with CR, LF, NUL or characters beyond Latin-1")));
    }
    Ok(())
}

/// Whether guest code may set request header `name` (not one of the Fetch standard's
/// [`FORBIDDEN`] names or prefixes, nor one the relay drops, [`RELAY_DROPPED`]).
pub fn guest_may_set(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let listed = FORBIDDEN.iter().chain(&RELAY_DROPPED).any(|n| *n == name);
    let prefixed = FORBIDDEN_PREFIXES.iter().chain(&RELAY_DROPPED_PREFIXES).any(|p| name.starts_with(p));
    !listed && !prefixed
}

/// Whether a header that guest code may name carries a forbidden method in its value
/// (`X-HTTP-Method-Override: TRACE`), which makes the whole header forbidden.
fn overrides_to_forbidden_method(name: &str, value: &str) -> bool {
    METHOD_OVERRIDES.iter().any(|n| name.eq_ignore_ascii_case(n))
        && split_list(value).iter().any(|method| FORBIDDEN_METHODS.iter().any(|m| method.eq_ignore_ascii_case(m)))
}

/// A header value split at commas outside double quotes, each part trimmed of HTTP whitespace
/// (the Fetch standard's "get, decode, and split").
fn split_list(value: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in value.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&value[start..]);
    parts.into_iter().map(|p| p.trim_matches([' ', '\t', '\r', '\n'])).collect()
}

/// `headers` without those guest code may not set, nor those its `Connection` header names
/// (hop-by-hop by declaration, RFC 9110 section 7.6.1).
pub fn guest_headers(headers: Vec<(String, String)>) -> Vec<(String, String)> {
    let named_by_connection: Vec<String> = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(',').map(|token| token.trim().to_ascii_lowercase()))
        .collect();
    headers
        .into_iter()
        .filter(|(name, value)| {
            guest_may_set(name)
                && !overrides_to_forbidden_method(name, value)
                && !named_by_connection.contains(&name.to_ascii_lowercase())
        })
        .collect()
}

/// The Fetch standard's CORS-safelisted request headers among `headers`: `Accept`,
/// `Accept-Language`, `Content-Language`, `Content-Type` (of a form or plain text) and a
/// simple `Range`, each value within [`SAFELISTED_VALUE_MAX`] bytes, together within
/// [`SAFELISTED_TOTAL_MAX`] (past it, none is).
pub fn cors_safelisted(headers: &[(String, String)]) -> Vec<(String, String)> {
    let kept: Vec<(String, String)> = headers.iter().filter(|(name, value)| safelisted(name, value)).cloned().collect();
    let total: usize = kept.iter().map(|(_, value)| value.len()).sum();
    if total > SAFELISTED_TOTAL_MAX {
        return Vec::new();
    }
    kept
}

fn safelisted(name: &str, value: &str) -> bool {
    // CORS-unsafe request-header bytes: controls other than tab, and `"():<>?@[\]{}` and DEL.
    let unsafe_byte = |b: u8| (b < 0x20 && b != b'\t') || b"\"():<>?@[\\]{}\x7f".contains(&b);
    let language_byte = |b: u8| b.is_ascii_alphanumeric() || b" *,-.;=".contains(&b);
    if value.len() > SAFELISTED_VALUE_MAX {
        return false;
    }
    match name.to_ascii_lowercase().as_str() {
        "accept" => !value.bytes().any(unsafe_byte),
        "accept-language" | "content-language" => value.bytes().all(language_byte),
        "content-type" => {
            let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            !value.bytes().any(unsafe_byte)
                && ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]
                    .contains(&essence.as_str())
        }
        "range" => simple_range(value),
        _ => false,
    }
}

/// `bytes=<start>-` or `bytes=<start>-<end>` with `start <= end`: the one Range form CORS
/// lets through without a preflight.
fn simple_range(value: &str) -> bool {
    let Some((start, end)) = value.strip_prefix("bytes=").and_then(|r| r.split_once('-')) else {
        return false;
    };
    let number =
        |s: &str| (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u64>().ok()).flatten();
    match (number(start), end) {
        (Some(_), "") => true,
        (Some(start), end) => number(end).is_some_and(|end| start <= end),
        _ => false,
    }
}

/// What to do after an upstream answered `status` (with `location`) to `current`, when `hops`
/// redirects were followed before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hop {
    /// Send this request next.
    Follow(Outbound),
    /// Refuse the whole fetch (PolicyDenied), saying why.
    Deny(String),
    /// The answer is the final one.
    Done,
}

/// Decides one redirect hop as a browser's fetch does (redirect statuses 301, 302, 303, 307,
/// 308 with a Location; anything else is the final answer), under `policy`: the next URL is
/// resolved against the current one and checked like the first (a denied hop refuses the whole
/// fetch), at most `maxRedirects` are followed, 301/302 turn a POST and 303 anything but
/// GET/HEAD into a GET without body, and a hop to another origin keeps only the
/// CORS-safelisted headers ([`cors_safelisted`]).
pub fn next_hop(current: &Outbound, status: u16, location: Option<&str>, hops: u32, policy: &NetworkPolicy) -> Hop {
    let Some(location) = location.filter(|_| matches!(status, 301 | 302 | 303 | 307 | 308)) else {
        return Hop::Done;
    };
    if hops >= policy.max_redirects {
        return Hop::Deny(format!(
            "fetch of {} was redirected more than network.maxRedirects ({}) times; fetch the final URL directly, \
             or ask for a higher maxRedirects in the tenant's default policy",
            current.url, policy.max_redirects
        ));
    }
    let from = match Url::parse(&current.url) {
        Ok(url) => url,
        Err(e) => return Hop::Deny(format!("{} is not a valid URL ({e})", current.url)),
    };
    let to = match from.join(location) {
        Ok(url) => url,
        Err(e) => return Hop::Deny(format!("redirect from {from} to Location {location:?}, which is not a URL ({e})")),
    };
    if let Verdict::Deny { reason } = check_url(policy, to.as_str()) {
        return Hop::Deny(format!("redirect {} from {from} to {to} denied: {reason}", hops + 1));
    }
    Hop::Follow(redirected(current, status, &from, to))
}

/// The request a redirect to `to` makes of `current`.
fn redirected(current: &Outbound, status: u16, from: &Url, to: Url) -> Outbound {
    let method = current.method.as_str();
    let to_get =
        (matches!(status, 301 | 302) && method == "POST") || (status == 303 && !matches!(method, "GET" | "HEAD"));
    // Credentials in any header (Authorization, X-Api-Key, ...) stay with the origin they were
    // set for: another origin gets only what a browser sends anywhere without asking.
    let headers =
        if from.origin() == to.origin() { current.headers.clone() } else { cors_safelisted(&current.headers) };
    let body_header = |name: &str| BODY_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h));
    Outbound {
        url: to.into(),
        method: if to_get { "GET".into() } else { current.method.clone() },
        headers: headers.into_iter().filter(|(name, _)| !(to_get && body_header(name))).collect(),
        body: if to_get { None } else { current.body.clone() },
    }
}

/// The refusal of a response body over the cap.
pub fn body_too_large(url: &str, max_body_bytes: u64) -> String {
    format!(
        "the response body of {url} is larger than network.maxBodyBytes ({max_body_bytes} bytes); fetch less \
         (a smaller page, a range, a filtered query) or ask for a higher maxBodyBytes in the tenant's default policy"
    )
}

/// The message of an upstream that failed (no answer at all): its host and the error.
pub fn upstream_failed(url: &str, error: &str) -> String {
    let host = Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
    format!("fetch of {url} failed: host {host:?} did not answer: {error}")
}

/// A fetched site's response metadata, as the route reports it in its `x-relay-*` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub status_text: String,
    /// The final URL, after redirects.
    pub url: String,
    pub redirects: u32,
    pub headers: Vec<(String, String)>,
}

impl Fetched {
    /// The route's headers that carry the upstream's answer: `x-relay-status`,
    /// `x-relay-status-text`, `x-relay-url`, `x-relay-redirects` and `x-relay-headers` (a JSON
    /// array of `[name, value]`, ASCII only, without the [`RESPONSE_HIDDEN`] ones).
    pub fn relay_headers(&self) -> Vec<(&'static str, String)> {
        let shown: Vec<&(String, String)> = self
            .headers
            .iter()
            .filter(|(name, _)| !RESPONSE_HIDDEN.iter().any(|h| name.eq_ignore_ascii_case(h)))
            .collect();
        vec![
            ("x-relay-status", self.status.to_string()),
            ("x-relay-status-text", ascii_only(&self.status_text)),
            ("x-relay-url", self.url.clone()),
            ("x-relay-redirects", self.redirects.to_string()),
            ("x-relay-headers", ascii_json(&serde_json::to_string(&shown).expect("strings serialize"))),
        ]
    }
}

/// JSON with every non-ASCII character escaped (`\uXXXX`), so it fits in a header value.
/// Non-ASCII characters only occur inside JSON strings, where the escape means the same.
pub fn ascii_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// A status text fit for a header value: printable ASCII, others as `?`.
fn ascii_only(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect()
}
