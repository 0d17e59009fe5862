//! What the Worker tells a relay session's Durable Object about each request it forwards: who
//! is calling. One typed value, serialized once into one header that only the Worker sets (a
//! DO has no public address). It travels as base64url JSON: a tenant's name may be any
//! Unicode, a header value may not.

use serde::{Deserialize, Serialize};

use crate::auth::Tenant;
use crate::capsule::jws::{b64url, b64url_decode};

/// The header that carries the [`Caller`].
pub const CALLER_HEADER: &str = "x-relay-caller";

/// The caller of a forwarded request, as the Worker authenticated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Caller {
    /// The tenant's record: from its API key (`/mcp`), or from its id in a tab's token.
    pub tenant: Tenant,
    /// The relay session's name.
    pub session: String,
    /// The Worker's own origin, for URLs in messages (the executor page).
    pub origin: String,
}

/// The origin the Worker's own URLs (download links, the executor page) are made with:
/// `configured` (the `PUBLIC_URL` variable) when the deployment sets it, since behind a proxy
/// the request's own origin is the proxy's upstream rather than what clients reach; else the
/// request's origin. A `PUBLIC_URL` that is not a plain http(s) origin is refused, naming it.
pub fn public_origin(configured: Option<&str>, request_origin: &str) -> Result<String, String> {
    let Some(configured) = configured.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok(request_origin.to_owned());
    };
    let plain = url::Url::parse(configured).ok().filter(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.host().is_some()
            && url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
    });
    match plain {
        Some(url) => Ok(url.origin().ascii_serialization()),
        None => Err(format!(
            "PUBLIC_URL {configured:?} must be the origin clients reach this Worker at, such as \
             \"https://relay.example.com\" (http or https, no path, query or credentials); fix it in \
             wrangler.toml's [vars] or the Worker's settings"
        )),
    }
}

impl Caller {
    pub fn encode(&self) -> String {
        b64url(&serde_json::to_vec(self).expect("a caller serializes"))
    }

    pub fn decode(header: &str) -> Result<Caller, String> {
        let json = b64url_decode(header).ok_or_else(|| format!("{CALLER_HEADER}: not base64url"))?;
        serde_json::from_slice(&json).map_err(|e| format!("{CALLER_HEADER}: {e}"))
    }

    /// The executor page for this relay session.
    pub fn page_url(&self) -> String {
        match self.session.as_str() {
            "default" => format!("{}/", self.origin),
            name => format!("{}/#session={name}", self.origin),
        }
    }

    /// NoExecutorAttached, saying exactly what to do.
    pub fn no_executor_message(&self) -> String {
        format!(
            "no browser tab is attached to relay session '{}' of tenant '{}': open {} in a browser, enter your API key once, keep the tab open, and call the tool again",
            self.session,
            self.tenant.name,
            self.page_url()
        )
    }
}
