//! What the Worker tells a relay session's Durable Object about each request it forwards: who
//! is calling. One typed value, serialized once into one header that only the Worker sets (a
//! DO has no public address). It travels as base64url JSON: a tenant's name may be any
//! Unicode, a header value may not.

use serde::{Deserialize, Serialize};
use url::Url;

use crate::auth::Tenant;
use crate::capsule::jws::{b64url, b64url_decode};
use crate::oauth::redirect::is_loopback_host;

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

/// The origin the Worker's own URLs (download links, the executor page, OAuth's issuer and
/// resource) are made with: `configured` (the `PUBLIC_URL` variable) when the deployment sets
/// it, since behind a proxy the request's own origin is the proxy's upstream rather than what
/// clients reach; else the request's origin. A `PUBLIC_URL` that is not a plain http(s) origin
/// is refused, naming it.
pub fn public_origin(configured: Option<&str>, request_origin: &str) -> Result<String, String> {
    Ok(configured_origin(configured)?.unwrap_or_else(|| request_origin.to_owned()))
}

/// Whether a browser page at `origin` is the Worker's own page, which every tenant lets call
/// `/mcp` (other pages only by the tenant's `allowedOrigins`). Deployed, that is the
/// [`public_origin`]. In dev (`dev`: `RELAY_ALLOW_LOCALHOST=1`) `wrangler dev` answers whatever
/// Host a request names, which is exactly what DNS rebinding forges (Host and Origin both
/// `evil.example`), so there the request's origin proves nothing: only loopback origins count,
/// and a configured `PUBLIC_URL` (a value nobody's request chose).
pub fn own_page_origin(
    origin: &str,
    configured: Option<&str>,
    request_origin: &str,
    dev: bool,
) -> Result<bool, String> {
    let configured = configured_origin(configured)?;
    let origin = origin.trim_end_matches('/');
    if configured.as_deref() == Some(origin) {
        return Ok(true);
    }
    Ok(match dev {
        true => Url::parse(origin).is_ok_and(|o| matches!(o.scheme(), "http" | "https") && is_loopback_host(&o)),
        false => configured.is_none() && origin == request_origin,
    })
}

/// `PUBLIC_URL` as an origin, if the deployment sets it.
fn configured_origin(configured: Option<&str>) -> Result<Option<String>, String> {
    let Some(configured) = configured.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok(None);
    };
    let plain = Url::parse(configured).ok().filter(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.host().is_some()
            && url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
    });
    match plain {
        Some(url) => Ok(Some(url.origin().ascii_serialization())),
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

    /// The name of the relay session's Durable Object (`super::object_name`).
    pub fn object_name(&self) -> String {
        super::object_name(&self.tenant.id, &self.session)
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
