//! Domain patterns of allowedDomains / deniedDomains, and how they match hosts.
//!
//! Hosts and patterns go through the same WHATWG host parser (`url::Host::parse`), so case,
//! IDN and IPv4 number forms are normalized identically on both sides of a comparison.

use url::Host;

/// A parsed `example.com` (itself and subdomains) or `*.example.com` (subdomains only).
#[derive(Debug)]
pub(crate) struct DomainPattern {
    host: String,
    subdomains_only: bool,
}

impl DomainPattern {
    pub(crate) fn parse(entry: &str) -> Result<DomainPattern, String> {
        let (subdomains_only, rest) = match entry.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
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
        Ok(DomainPattern { host, subdomains_only })
    }

    /// Whether `host` (as [`host_text`] writes it) is admitted by this pattern.
    pub(crate) fn matches(&self, host: &str) -> bool {
        let strict_subdomain = host.strip_suffix(self.host.as_str()).is_some_and(|prefix| prefix.ends_with('.'));
        strict_subdomain || (!self.subdomains_only && host == self.host)
    }

    /// Whether every host `other` admits is also admitted by `self`.
    pub(crate) fn covers(&self, other: &DomainPattern) -> bool {
        self.matches(&other.host) || (other.subdomains_only && other.host == self.host)
    }
}

/// The first valid entry of `list` that matches `host`; invalid entries match nothing.
pub(crate) fn first_match<'a>(list: &'a [String], host: &str) -> Option<&'a String> {
    list.iter().find(|entry| DomainPattern::parse(entry).is_ok_and(|p| p.matches(host)))
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
