//! The egress decision for one URL: the rule the browser's guarded fetch applies to every
//! request and every redirect hop (docs/CAPSULE.md "The decision on one URL").

use std::net::IpAddr;

use url::{Host, Url};

use super::domain::{first_admitting, first_denying, first_naming_host, host_port, host_text, Target};
use super::ip::blocked_range;
use super::NetworkPolicy;

/// The decision on one URL; a denial says which rule refused it and how to allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny { reason: String },
}

/// Decides whether a fetch of `url` is allowed under `policy`.
///
/// The URL is parsed as a browser parses it (WHATWG), so `http://2130706433/`,
/// `http://0x7f.1/` and `http://127.1/` are the IP literal 127.0.0.1 here as they are there.
pub fn check_url(policy: &NetworkPolicy, url: &str) -> Verdict {
    match check(policy, url) {
        Ok(()) => Verdict::Allow,
        Err(reason) => Verdict::Deny { reason },
    }
}

fn check(policy: &NetworkPolicy, url: &str) -> Result<(), String> {
    let url = Url::parse(url).map_err(|e| format!("not a valid absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme \"{}:\" is not allowed; only http and https are", url.scheme()));
    }
    let host = url.host().ok_or("URL has no host")?;
    let text = host_text(&host);
    match host {
        Host::Domain(_) => check_name(policy, &text)?,
        Host::Ipv4(ip) => check_ip(policy, ip.into(), &text)?,
        Host::Ipv6(ip) => check_ip(policy, ip.into(), &text)?,
    }
    let effective_port = url.port_or_known_default().ok_or("URL has no port")?;
    check_lists(policy, Target { host: &text, port: url.port(), effective_port })
}

fn check_name(policy: &NetworkPolicy, name: &str) -> Result<(), String> {
    // `.example.com` or `localhost..` would otherwise slip past the dot-boundary comparisons;
    // no such name resolves, so refusing it costs nothing.
    if name.split('.').any(str::is_empty) {
        return Err(format!("host {name:?} has an empty label; write the host name without extra dots"));
    }
    if policy.block_private_ranges && (name == "localhost" || name.ends_with(".localhost")) {
        return Err(format!("host {name:?} is a loopback name and blockPrivateRanges is on"));
    }
    Ok(())
}

fn check_ip(policy: &NetworkPolicy, ip: IpAddr, shown: &str) -> Result<(), String> {
    if policy.deny_ip_literals {
        return Err(format!(
            "host {shown} is an IP address literal and denyIpLiterals is on; \
             use a domain name listed in network.allowedDomains{TENANT_SETS}"
        ));
    }
    match blocked_range(ip) {
        Some(range) if policy.block_private_ranges => {
            Err(format!("host {shown} is in the {range} and blockPrivateRanges is on{TENANT_SETS}"))
        }
        _ => Ok(()),
    }
}

fn check_lists(policy: &NetworkPolicy, target: Target) -> Result<(), String> {
    let host = target.host;
    if let Some(entry) = first_denying(&policy.denied_domains, target) {
        return Err(format!(
            "host {host:?} matches deniedDomains entry {entry:?}; deny beats allow, so no \
             allowedDomains entry can admit it{TENANT_SETS}"
        ));
    }
    // What to list to allow this URL: the host, with its port when that is not the default.
    let wanted = host_port(host, target.port);
    if policy.allowed_domains.is_empty() {
        return Err(format!(
            "host {host:?} is not allowed: network.allowedDomains is empty, so no host is. {}",
            how_to_allow(&wanted)
        ));
    }
    if first_admitting(&policy.allowed_domains, target).is_some() {
        return Ok(());
    }
    if let Some(entry) = first_naming_host(&policy.allowed_domains, host) {
        return Err(format!(
            "port {} of host {host:?} is not allowed: allowedDomains entry {entry:?} admits another port \
             (an entry without a port admits only the scheme's default, 80 for http and 443 for https). {}",
            target.effective_port,
            how_to_allow(&wanted)
        ));
    }
    Err(format!(
        "host {host:?} is not in network.allowedDomains {:?}. {}",
        policy.allowed_domains,
        how_to_allow(&wanted)
    ))
}

/// How a host gets allowed: only by the tenant's admin, since a call's `policy` can narrow the
/// tenant's network policy, never widen it (an agent that adds the host to its own call's
/// allowedDomains is refused again).
fn how_to_allow(host: &str) -> String {
    format!(
        "To allow it, the tenant's admin can add {host:?} (or a parent domain) to the tenant's \
         defaults.policy.network.allowedDomains (PATCH /admin/tenants/<tenant id>, README \"Tenants and \
         their defaults\"); a call's own policy can only narrow the tenant's, never widen it"
    )
}

/// Appended to a refusal by another rule of the tenant's, which an agent cannot lift either.
const TENANT_SETS: &str = ". Only the tenant's admin can change this rule (PATCH /admin/tenants/<tenant id>); \
     a call's own policy can only narrow the tenant's";
