//! Effective policy = tenant defaults narrowed by a client's override (docs/CAPSULE.md
//! "Intersection").
//!
//! Every rule can only tighten: allow lists are filtered to what the tenant already admits,
//! deny lists grow, safety switches can only be turned on, limits take the minimum.

use super::domain::DomainPattern;
use super::fs_path::is_within;
use super::mcps;
use super::{FsPolicy, Limits, NetworkPolicy, Policy, PolicyOverride};

/// The policy a run gets; with no override it is the tenant's.
pub fn intersect(tenant: &Policy, client: Option<&PolicyOverride>) -> Policy {
    let client = client.cloned().unwrap_or_default();
    let network = client.network.unwrap_or_default();
    let filesystem = client.filesystem.unwrap_or_default();
    let limits = client.limits.unwrap_or_default();
    let (t_net, t_fs, t_lim) = (&tenant.network, &tenant.filesystem, &tenant.limits);
    Policy {
        network: NetworkPolicy {
            allowed_domains: narrow(&t_net.allowed_domains, network.allowed_domains, |entry| {
                tenant_admits(&t_net.allowed_domains, entry)
            }),
            denied_domains: union(&t_net.denied_domains, network.denied_domains),
            deny_ip_literals: t_net.deny_ip_literals || network.deny_ip_literals == Some(true),
            block_private_ranges: t_net.block_private_ranges || network.block_private_ranges == Some(true),
            max_body_bytes: min(t_net.max_body_bytes, network.max_body_bytes),
            max_redirects: min(t_net.max_redirects, network.max_redirects),
        },
        filesystem: FsPolicy {
            readonly: union(&t_fs.readonly, filesystem.readonly),
            writable: narrow(&t_fs.writable, filesystem.writable, |path| {
                t_fs.writable.iter().any(|root| is_within(path, root))
            }),
        },
        limits: Limits {
            timeout_ms: min(t_lim.timeout_ms, limits.timeout_ms),
            mem_mb: min(t_lim.mem_mb, limits.mem_mb),
            stdout_bytes: min(t_lim.stdout_bytes, limits.stdout_bytes),
        },
        mcps: narrow_mcps(tenant.mcps.as_deref(), client.mcps),
    }
}

/// Whether some tenant pattern admits every host the client's `entry` admits.
fn tenant_admits(tenant: &[String], entry: &str) -> bool {
    let Ok(entry) = DomainPattern::parse(entry) else {
        return false;
    };
    tenant.iter().any(|t| DomainPattern::parse(t).is_ok_and(|t| t.covers(&entry)))
}

/// The client's list filtered by `admits`, or the tenant's when the client gives none.
fn narrow(tenant: &[String], client: Option<Vec<String>>, admits: impl Fn(&str) -> bool) -> Vec<String> {
    match client {
        None => tenant.to_vec(),
        Some(list) => dedup(list.into_iter().filter(|entry| admits(entry))),
    }
}

/// The tenant's list narrowed by a client's: an entry survives when the other list admits
/// everything it names, so `["search"]` and `["search/grep"]` give `["search/grep"]`.
fn narrow_mcps(tenant: Option<&[String]>, client: Option<Vec<String>>) -> Option<Vec<String>> {
    let Some(client) = client else {
        return tenant.map(<[String]>::to_vec);
    };
    let Some(tenant) = tenant else {
        return Some(dedup(client.into_iter()));
    };
    let admitted_by = |list: &[String], entry: &String| {
        let (server, tool) = mcps::split(entry);
        mcps::admits(list, server, tool)
    };
    let from_tenant = tenant.iter().filter(|e| admitted_by(&client, e)).cloned();
    let from_client = client.iter().filter(|e| admitted_by(tenant, e)).cloned().collect::<Vec<_>>();
    Some(dedup(from_tenant.chain(from_client)))
}

fn union(tenant: &[String], client: Option<Vec<String>>) -> Vec<String> {
    dedup(tenant.iter().cloned().chain(client.unwrap_or_default()))
}

/// Keeps the first occurrence of each entry, in order.
fn dedup(entries: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in entries {
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

fn min<T: Ord>(tenant: T, client: Option<T>) -> T {
    match client {
        Some(client) => client.min(tenant),
        None => tenant,
    }
}
