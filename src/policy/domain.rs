//! Domain patterns of allowedDomains / deniedDomains, and how they match a URL's host and port.
//!
//! Hosts and patterns go through the same WHATWG host parser (`url::Host::parse`), so case,
//! IDN and IPv4 number forms are normalized identically on both sides of a comparison.
//!
//! Ports: an entry may name one (`example.com:8443`, `[2001:db8::1]:8443`). In allowedDomains
//! an entry without one admits only the scheme's default port (80 for http, 443 for https), so
//! listing a host does not open every service on it; an entry with one admits that port under
//! either scheme. In deniedDomains an entry without a port denies every port of its hosts.

use url::Host;

/// A parsed `example.com` (itself and subdomains) or `*.example.com` (subdomains only), with
/// the port it names, if it names one.
#[derive(Debug)]
pub(crate) struct DomainPattern {
    host: String,
    subdomains_only: bool,
    port: Option<u16>,
}

/// Where a URL goes, as patterns compare it: its host ([`host_text`]), the port it names
/// (`None` when it is the scheme's default, as the URL parser leaves it) and the port it uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub host: &'a str,
    pub port: Option<u16>,
    pub effective_port: u16,
}

impl DomainPattern {
    pub(crate) fn parse(entry: &str) -> Result<DomainPattern, String> {
        let (subdomains_only, rest) = match entry.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
        let (rest, port) = split_port(rest)?;
        let rest = rest.strip_suffix('.').unwrap_or(rest);
        if rest.is_empty() {
            return Err("it names no domain".into());
        }
        let parsed = Host::parse(rest).map_err(|e| format!("it is not a host name ({e})"))?;
        if subdomains_only && !matches!(parsed, Host::Domain(_)) {
            return Err("\"*.\" cannot apply to an IP address".into());
        }
        let host = host_text(&parsed);
        if host.contains('*') {
            return Err("\"*\" is only allowed as a leading \"*.\"".into());
        }
        if host.split('.').any(str::is_empty) {
            return Err("it has an empty label".into());
        }
        Ok(DomainPattern { host, subdomains_only, port })
    }

    /// Whether `host` (as [`host_text`] writes it) is one of this pattern's hosts, any port.
    fn matches_host(&self, host: &str) -> bool {
        let strict_subdomain = host.strip_suffix(self.host.as_str()).is_some_and(|prefix| prefix.ends_with('.'));
        strict_subdomain || (!self.subdomains_only && host == self.host)
    }

    /// Whether this allowedDomains entry admits `target`: its host, and the port the entry
    /// names (or, naming none, the scheme's default port).
    pub(crate) fn admits(&self, target: Target) -> bool {
        let port_ok = match self.port {
            Some(port) => target.effective_port == port,
            None => target.port.is_none(),
        };
        port_ok && self.matches_host(target.host)
    }

    /// Whether this deniedDomains entry denies `target`: its host, at the port the entry names
    /// (or, naming none, at any port).
    pub(crate) fn denies(&self, target: Target) -> bool {
        self.port.is_none_or(|port| target.effective_port == port) && self.matches_host(target.host)
    }

    /// Whether every host and port `other` admits is also admitted by `self`.
    pub(crate) fn covers(&self, other: &DomainPattern) -> bool {
        let hosts = self.matches_host(&other.host) || (other.subdomains_only && other.host == self.host);
        hosts && self.port == other.port
    }
}

/// `host` and the port after it (`example.com:8443`, `[::1]:8443`), if the entry names one.
fn split_port(entry: &str) -> Result<(&str, Option<u16>), String> {
    let split = match entry.strip_prefix('[') {
        // A bracketed IPv6 address: a port can only follow its closing bracket.
        Some(_) => {
            entry.find(']').and_then(|end| entry[end + 1..].strip_prefix(':').map(|port| (&entry[..=end], port)))
        }
        None => entry.rsplit_once(':'),
    };
    let Some((host, port)) = split else { return Ok((entry, None)) };
    match port.parse::<u16>() {
        Ok(number) if number > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok((host, Some(number))),
        _ => Err(format!("port {port:?} must be a number from 1 to 65535 (\"example.com:8443\")")),
    }
}

/// The first valid entry of allowedDomains `list` that admits `target`; invalid entries admit nothing.
pub(crate) fn first_admitting<'a>(list: &'a [String], target: Target) -> Option<&'a String> {
    list.iter().find(|entry| DomainPattern::parse(entry).is_ok_and(|p| p.admits(target)))
}

/// The first valid entry of deniedDomains `list` that denies `target`; invalid entries deny nothing.
pub(crate) fn first_denying<'a>(list: &'a [String], target: Target) -> Option<&'a String> {
    list.iter().find(|entry| DomainPattern::parse(entry).is_ok_and(|p| p.denies(target)))
}

/// The first valid entry of `list` whose hosts include `host`, at whatever port.
pub(crate) fn first_naming_host<'a>(list: &'a [String], host: &str) -> Option<&'a String> {
    list.iter().find(|entry| DomainPattern::parse(entry).is_ok_and(|p| p.matches_host(host)))
}

/// Where a URL goes, as an allow-list entry writes it: `host`, or `host:port` when the URL
/// names a port (`port` as the URL parser leaves it: `None` for the scheme's default).
pub fn host_port(host: &str, port: Option<u16>) -> String {
    match port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// A host as patterns compare it: its WHATWG serialization (lowercase punycode, dotted IPv4,
/// compressed IPv6 in brackets, as `new URL(..).hostname` gives) without a trailing dot.
pub(crate) fn host_text(host: &Host<impl AsRef<str>>) -> String {
    let mut text = host.to_string();
    if text.ends_with('.') {
        text.pop();
    }
    text
}
