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

use crate::error::ErrorName;
use crate::policy::{check_url, NetworkPolicy, Verdict};

/// What the envelope may hold besides the body's base64 (the URL, the method, the headers).
pub const ENVELOPE_SLACK: usize = 64 * 1024;

/// Methods the route performs (those a Worker's `fetch` can send; `CONNECT` and `TRACE` are
/// refused as a browser refuses them).
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Request headers guest code may not set: hop-by-hop headers (they describe one connection,
/// not the request), those the Worker's fetch computes itself, and those that would let guest
/// code speak for the relay, a proxy or a browser's cookie jar.
const DROPPED: [&str; 16] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
    "cookie",
    "cookie2",
    "x-real-ip",
    "forwarded",
    "via",
];
/// Prefixes of dropped headers: Cloudflare's own, proxies' and relay-edge's.
const DROPPED_PREFIXES: [&str; 3] = ["cf-", "x-forwarded-", "x-relay-"];

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

/// Why the route refuses a fetch: an error name (its HTTP status is the route's) and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub name: ErrorName,
    pub message: String,
}

impl Refusal {
    fn invalid(message: impl Into<String>) -> Self {
        Refusal { name: ErrorName::ValidationError, message: format!("egress request: {}", message.into()) }
    }

    fn denied(message: String) -> Self {
        Refusal { name: ErrorName::PolicyDenied, message }
    }
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
pub fn prepare(envelope: &[u8], policy: &NetworkPolicy) -> Result<Outbound, Refusal> {
    let outbound = parse_envelope(envelope, policy.max_body_bytes)?;
    if let Err(e) = Url::parse(&outbound.url) {
        return Err(Refusal::invalid(format!("url {:?} is not a valid absolute URL ({e})", outbound.url)));
    }
    match check_url(policy, &outbound.url) {
        Verdict::Allow => Ok(outbound),
        Verdict::Deny { reason } => Err(Refusal::denied(format!("fetch of {} denied: {reason}", outbound.url))),
    }
}

/// Parses an envelope: a valid method, headers a request may carry (those guest code may not
/// set dropped), and a body of at most `max_body_bytes`.
pub fn parse_envelope(envelope: &[u8], max_body_bytes: u64) -> Result<Outbound, Refusal> {
    let envelope: Envelope = serde_json::from_slice(envelope).map_err(|e| {
        Refusal::invalid(format!(
            "{e}; expected {{\"url\": \"...\", \"method\": \"GET\", \"headers\": [[\"name\", \"value\"]], \"body\": \"<base64>\"}}"
        ))
    })?;
    let method = method(&envelope.method)?;
    for (name, value) in &envelope.headers {
        check_header(name, value)?;
    }
    let body = match envelope.body {
        Some(body) => Some(STANDARD.decode(body).map_err(|e| Refusal::invalid(format!("body is not base64: {e}")))?),
        None => None,
    };
    if body.is_some() && matches!(method.as_str(), "GET" | "HEAD") {
        return Err(Refusal::invalid(format!("a {method} request cannot have a body")));
    }
    if let Some(body) = &body {
        if body.len() as u64 > max_body_bytes {
            return Err(Refusal::denied(format!(
                "the request body ({} bytes) is larger than network.maxBodyBytes ({max_body_bytes} bytes); send less",
                body.len()
            )));
        }
    }
    Ok(Outbound { url: envelope.url, method, headers: guest_headers(envelope.headers), body })
}

/// The method in upper case, if the route performs it.
fn method(asked: &str) -> Result<String, Refusal> {
    let upper = asked.to_ascii_uppercase();
    if METHODS.contains(&upper.as_str()) {
        Ok(upper)
    } else {
        Err(Refusal::invalid(format!("method {asked:?} is not supported; use one of {METHODS:?}")))
    }
}

/// A header a request can carry: a token name, and a value a `Headers` object accepts
/// (Latin-1, no CR, LF or NUL).
fn check_header(name: &str, value: &str) -> Result<(), Refusal> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(Refusal::invalid(format!("header name {name:?} is not a valid HTTP token")));
    }
    if value.chars().any(|c| c as u32 > 0xff || matches!(c, '\r' | '\n' | '\0')) {
        return Err(Refusal::invalid(format!(
            "header {name:?} has a value with CR, LF, NUL or characters beyond Latin-1"
        )));
    }
    Ok(())
}

/// Whether guest code may set request header `name` (see [`DROPPED`], [`DROPPED_PREFIXES`]).
pub fn guest_may_set(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    !DROPPED.contains(&name.as_str()) && !DROPPED_PREFIXES.iter().any(|p| name.starts_with(p))
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
        .filter(|(name, _)| guest_may_set(name) && !named_by_connection.contains(&name.to_ascii_lowercase()))
        .collect()
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
/// GET/HEAD into a GET without body, and a hop to another origin drops `Authorization`.
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
    let cross_origin = from.origin() != to.origin();
    let dropped = |name: &str| {
        let body_header = BODY_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h));
        (to_get && body_header) || (cross_origin && name.eq_ignore_ascii_case("authorization"))
    };
    Outbound {
        url: to.into(),
        method: if to_get { "GET".into() } else { current.method.clone() },
        headers: current.headers.iter().filter(|(name, _)| !dropped(name)).cloned().collect(),
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

/// What the upstream answered, as the route reports it in its `x-relay-*` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub status: u16,
    pub status_text: String,
    /// The final URL, after redirects.
    pub url: String,
    pub redirects: u32,
    pub headers: Vec<(String, String)>,
}

impl Upstream {
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
