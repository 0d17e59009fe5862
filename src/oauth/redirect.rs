//! Redirect URIs, where an authorization code is sent: which a client may register, which an
//! authorization request may name (exactly a registered one, or, on loopback, the same with
//! another port: RFC 8252 section 7.3), and what the consent page says of where it goes.
//! Every rule looks at what the URL parser produced, and a URI must be written as it parses:
//! a parser drops tabs and newlines and resolves dot segments, so the text before it proves
//! nothing.

use serde::Serialize;
use url::{Host, Url};

use crate::policy::host_port;

/// Most redirect URIs one client registers.
pub const REDIRECT_URIS_MAX: usize = 5;
/// Longest redirect URI, in bytes.
pub const REDIRECT_URI_MAX_BYTES: usize = 512;

/// Schemes a browser handles itself (the WHATWG special and fetch schemes, script schemes,
/// view-source): never an app's own callback. https and loopback http are judged apart.
const BROWSER_SCHEMES: &[&str] =
    &["about", "blob", "data", "file", "filesystem", "ftp", "javascript", "vbscript", "view-source", "ws", "wss"];

/// Why `uri` may not be registered as a redirect URI, saying what to write instead.
pub fn check_registrable(uri: &str) -> Result<(), String> {
    if uri.len() > REDIRECT_URI_MAX_BYTES {
        return Err(format!("a redirect URI is at most {REDIRECT_URI_MAX_BYTES} bytes"));
    }
    let url = canonical(uri)?;
    if url.fragment().is_some() || has_userinfo(&url) {
        return Err(format!("{uri:?} must have no #fragment and no user:password@ part"));
    }
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(&url) => Ok(()),
        "http" => Err(format!("{uri:?}: http only on loopback (127.0.0.1, [::1] or localhost); use https")),
        scheme if BROWSER_SCHEMES.contains(&scheme) => Err(format!(
            "{uri:?}: a {scheme}: URI is not a redirect URI; use https, loopback http or an app's own scheme"
        )),
        _ => Ok(()), // an app's own scheme (RFC 8252 section 7.1), which the browser hands to it
    }
}

/// Whether an authorization request may send its code to `asked` for a client that registered
/// `registered`: the very same URI, or (RFC 8252 section 7.3) a loopback one that differs only
/// in its port, without a fragment or userinfo.
pub fn matches(registered: &str, asked: &str) -> bool {
    if registered == asked {
        return true;
    }
    let (Ok(r), Ok(a)) = (Url::parse(registered), canonical(asked)) else { return false };
    is_loopback(&r)
        && is_loopback(&a)
        && a.fragment().is_none()
        && !has_userinfo(&a)
        && r.host() == a.host()
        && r.path() == a.path()
        && r.query() == a.query()
}

/// `uri` parsed, if it is written exactly as it parses.
fn canonical(uri: &str) -> Result<Url, String> {
    let url = Url::parse(uri).map_err(|e| format!("{uri:?} is not an absolute URL ({e})"))?;
    if url.as_str() != uri {
        return Err(format!("{uri:?} must be written as it parses: {:?}", url.as_str()));
    }
    Ok(url)
}

fn has_userinfo(url: &Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// An http URL on this computer's loopback interface.
pub(crate) fn is_loopback(url: &Url) -> bool {
    url.scheme() == "http" && is_loopback_host(url)
}

/// A URL whose host is 127.0.0.1, [::1] or localhost.
pub(crate) fn is_loopback_host(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip == std::net::Ipv4Addr::LOCALHOST,
        Some(Host::Ipv6(ip)) => ip == std::net::Ipv6Addr::LOCALHOST,
        Some(Host::Domain(name)) => name == "localhost",
        None => false,
    }
}

/// Where a checked redirect URI sends the browser, for a person to judge: a web site (its
/// host, in ASCII, so a look-alike name shows as its punycode), a program on this computer
/// (loopback: any program can listen there), or the app that handles a scheme.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Destination {
    Web { host: String },
    Loopback { host: String, port: u16 },
    App { scheme: String },
}

impl Destination {
    pub fn of(uri: &str) -> Option<Destination> {
        let url = Url::parse(uri).ok()?;
        let host = || url.host_str().map(str::to_owned);
        Some(match url.scheme() {
            "https" => Destination::Web { host: host_with_port(&url)? },
            "http" if is_loopback(&url) => Destination::Loopback { host: host()?, port: url.port_or_known_default()? },
            scheme => Destination::App { scheme: scheme.to_owned() },
        })
    }
}

/// `host` or `host:port` when the port is not the scheme's own.
pub(crate) fn host_with_port(url: &Url) -> Option<String> {
    Some(host_port(url.host_str()?, url.port()))
}
