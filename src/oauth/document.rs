//! Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document-00, which MCP
//! 2025-11-25 and 2026-07-28 adopt): a client_id that is an https URL names a JSON document
//! describing the client. Anyone can make this server fetch one (`GET /oauth/authorize` needs
//! no credential), so it fetches only what the egress rules would let a run fetch from a
//! public host, and tells the asker nothing about the target:
//!
//! - the URL: https, written as it parses, a path, no userinfo or fragment, a domain name with
//!   a dot (never an IP literal, `localhost` or a private range: [`check_url`]); in dev
//!   (`RELAY_ALLOW_LOCALHOST=1`) also http or https on loopback, for tests, and nothing else;
//! - the fetch (the Worker's): one GET, redirects not followed, [`DOCUMENT_DEADLINE_MS`] for
//!   the whole answer, the body read as a stream and dropped past [`DOCUMENT_MAX_BYTES`];
//! - every failure after the URL passed, whatever the target did (refused, hung, redirected,
//!   answered 404, too much, not JSON, a document that does not name itself or lists bad
//!   redirect URIs), gets one answer, [`refused`]; what happened goes to the log only.

use serde_json::Value;
use url::{Host, Url};

use super::redirect::{host_with_port, is_loopback_host};
use super::{Client, OAuthError};
use crate::policy::{check_url, NetworkPolicy, Verdict};

/// Largest metadata document, in bytes.
pub const DOCUMENT_MAX_BYTES: usize = 8 * 1024;
/// How long the fetch of a metadata document may take, answer and body together.
pub const DOCUMENT_DEADLINE_MS: u64 = 5_000;

/// Whether `client_id` names a metadata document (an http or https URL) rather than a client
/// registered here (`rc_...`).
pub fn names_document(client_id: &str) -> bool {
    Url::parse(client_id).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
}

/// The URL to fetch for `client_id`, or why this server will not fetch it (about the URL
/// alone: nothing has been fetched).
pub fn document_url(client_id: &str, dev_loopback: bool) -> Result<Url, OAuthError> {
    let refuse = |why: String| OAuthError::new("invalid_client", format!("client_id {client_id:?}: {why}"));
    let url = Url::parse(client_id).map_err(|e| refuse(format!("not an absolute URL ({e})")))?;
    if url.as_str() != client_id {
        return Err(refuse(format!("write it exactly as it parses: {:?}", url.as_str())));
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() || url.path() == "/" {
        return Err(refuse("a metadata document's URL has a path and no user:password@ or #fragment".into()));
    }
    if dev_loopback && is_loopback_host(&url) {
        return Ok(url);
    }
    if url.scheme() != "https" {
        return Err(refuse("a metadata document's URL is https".into()));
    }
    // The egress rule with this URL's host (and port) allowed: what is left to refuse is the
    // host itself (an IP literal, a loopback or private name). Its reasons are written for a
    // tenant's policy, so the refusal here is in this rule's own words.
    let policy = NetworkPolicy { allowed_domains: host_with_port(&url).into_iter().collect(), ..Default::default() };
    let host = url.host_str().unwrap_or_default();
    if check_url(&policy, client_id) != Verdict::Allow || !host.contains('.') {
        return Err(refuse(not_public(&url)));
    }
    Ok(url)
}

/// Why the host of a metadata document's URL is not one this server fetches from.
fn not_public(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    let what = match url.host() {
        Some(Host::Domain(_)) => format!(
            "{host:?} is no public domain name (one such as clients.example.com: a dot, no empty label, not localhost)"
        ),
        _ => format!("{host} is an IP address literal"),
    };
    format!("{what}; this server fetches metadata documents only from public domain names: publish the document on one")
}

/// The client a fetch of its metadata document describes. `fetched` is the body of a 200
/// answer, or what went wrong; every failure gives [`refused`], with what happened (for the
/// log, never for the asker).
pub fn client_from_fetch(client_id: &str, fetched: Result<&[u8], String>) -> Result<Client, (OAuthError, String)> {
    let document: Value = serde_json::from_slice(fetched.map_err(|why| (refused(), why))?)
        .map_err(|e| (refused(), format!("not JSON: {e}")))?;
    Client::from_metadata_document(client_id, &document).map_err(|e| (refused(), e.description))
}

/// The one answer to a metadata document that could not be used, whatever the reason: it
/// names every rule the document must meet, and nothing about what the target did.
pub fn refused() -> OAuthError {
    OAuthError::new(
        "invalid_client",
        format!(
            "no usable client metadata document at client_id: this server GETs it without following redirects \
             and needs status 200 within {} s, at most {DOCUMENT_MAX_BYTES} bytes of JSON whose client_id is that \
             very URL and whose redirect_uris are valid. Fix the document, or register at /oauth/register instead",
            DOCUMENT_DEADLINE_MS / 1000
        ),
    )
}
