//! The run policy a capsule carries (docs/CAPSULE.md "Policy"): network, filesystem and
//! resource limits.
//!
//! A tenant's defaults are narrowed by a client's [`PolicyOverride`] with [`intersect`] (never
//! widened), the result is written into the capsule, [`check_url`] decides each fetch and
//! [`check_path`] each file access. The browser enforces the same rules with this very code
//! compiled to wasm (`policy-wasm/`); `tests/policy_cases.json` and `tests/fs_path_cases.json`
//! are the tables both sides test.
//!
//! Domain patterns (allowedDomains, deniedDomains):
//! - `example.com` admits `example.com` and every subdomain (`api.example.com`), never a
//!   parent (`api.example.com` does not admit `example.com`) and never a mere suffix
//!   (`badexample.com`, `example.com.evil.net`);
//! - `*.example.com` admits strict subdomains only;
//! - matching is case-insensitive, ignores one trailing dot and compares IDNs in punycode;
//! - an IP address entry (`93.184.216.34`, `[2001:db8::1]`) admits exactly that address, and
//!   only matters when `denyIpLiterals` is off;
//! - an entry may name a port (`example.com:8443`); in allowedDomains an entry without one
//!   admits only the scheme's default port, in deniedDomains it denies every port;
//! - deniedDomains beat allowedDomains; an empty allowedDomains admits nothing.

mod check;
mod domain;
pub(crate) mod fs_path;
mod intersect;
mod ip;
pub mod mcps;

use serde::{Deserialize, Serialize};

pub use check::{check_url, Verdict};
pub use domain::host_port;
pub use fs_path::{check_path, Access, WORKSPACE_ROOTS};
pub use intersect::intersect;
pub use mcps::check_mcp;

use domain::DomainPattern;
use fs_path::clean_path;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Policy {
    pub network: NetworkPolicy,
    pub filesystem: FsPolicy,
    pub limits: Limits,
    /// The tenant's upstream MCP servers code in the run may call through `/mcps-rpc`
    /// ([`mcps::check_mcp`]); absent: every one the tenant configured. Left out of the JSON
    /// when absent, so capsules made before it existed keep their hashes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcps: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkPolicy {
    pub allowed_domains: Vec<String>,
    pub denied_domains: Vec<String>,
    pub deny_ip_literals: bool,
    pub block_private_ranges: bool,
    pub max_body_bytes: u64,
    pub max_redirects: u32,
}

impl Default for NetworkPolicy {
    /// IP literals and private ranges denied, 5 MiB bodies, 5 redirects, and no domain
    /// allowed until the tenant says so.
    fn default() -> Self {
        NetworkPolicy {
            allowed_domains: Vec::new(),
            denied_domains: Vec::new(),
            deny_ip_literals: true,
            block_private_ranges: true,
            max_body_bytes: 5 * 1024 * 1024,
            max_redirects: 5,
        }
    }
}

/// Absolute paths in the runtime's filesystem: everything under `readonly` can be read,
/// only what is under `writable` can be written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FsPolicy {
    pub readonly: Vec<String>,
    pub writable: Vec<String>,
}

impl Default for FsPolicy {
    fn default() -> Self {
        FsPolicy { readonly: vec!["/".into()], writable: vec!["/tmp".into(), "/out".into()] }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Limits {
    pub timeout_ms: u64,
    pub mem_mb: u32,
    pub stdout_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout_ms: 60_000, mem_mb: 256, stdout_bytes: 1024 * 1024 }
    }
}

/// The largest limits a policy may hold. A run's token lives as long as its timeout (plus the
/// grace for its uploads), the relay session's DO holds its output in memory, and a wasm32
/// runtime addresses 4 GiB at most; the tasks extension is the way to long runs.
pub const MAX_TIMEOUT_MS: u64 = 60 * 60 * 1000;
pub const MAX_MEM_MB: u32 = 4096;
pub const MAX_STDOUT_BYTES: u64 = 16 * 1024 * 1024;
/// The largest fetch body (either way): a Worker reads no request body over 100 MB.
pub const MAX_BODY_BYTES: u64 = 100 * 1024 * 1024;
/// As many redirects as a browser's fetch follows.
pub const MAX_REDIRECTS: u32 = 20;

/// `Err` naming `field` and its allowed range unless `value` lies in `min..=max`.
pub fn bounded<T: PartialOrd + std::fmt::Display>(field: &str, value: T, min: T, max: T) -> Result<(), String> {
    if value < min || value > max {
        return Err(format!("{field} is {value}; it must be between {min} and {max}"));
    }
    Ok(())
}

/// What a client may ask for in a tool call; every field optional, unknown fields refused
/// (a typo must not silently leave a rule out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyOverride {
    pub network: Option<NetworkOverride>,
    pub filesystem: Option<FsOverride>,
    pub limits: Option<LimitsOverride>,
    pub mcps: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkOverride {
    pub allowed_domains: Option<Vec<String>>,
    pub denied_domains: Option<Vec<String>>,
    pub deny_ip_literals: Option<bool>,
    pub block_private_ranges: Option<bool>,
    pub max_body_bytes: Option<u64>,
    pub max_redirects: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsOverride {
    pub readonly: Option<Vec<String>>,
    pub writable: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsOverride {
    pub timeout_ms: Option<u64>,
    pub mem_mb: Option<u32>,
    pub stdout_bytes: Option<u64>,
}

impl Policy {
    /// Refuses entries that could never match as written (`https://x.com`, `api.*.com`,
    /// `tmp/../etc`) and limits out of bounds ([`MAX_TIMEOUT_MS`], ...), naming the first one.
    pub fn validate(&self) -> Result<(), String> {
        let network = &self.network;
        bounded("network.maxBodyBytes", network.max_body_bytes, 0, MAX_BODY_BYTES)?;
        bounded("network.maxRedirects", network.max_redirects, 0, MAX_REDIRECTS)?;
        let limits = &self.limits;
        bounded("limits.timeoutMs", limits.timeout_ms, 1, MAX_TIMEOUT_MS)?;
        bounded("limits.memMb", limits.mem_mb, 1, MAX_MEM_MB)?;
        bounded("limits.stdoutBytes", limits.stdout_bytes, 0, MAX_STDOUT_BYTES)?;
        for entry in network.allowed_domains.iter().chain(&network.denied_domains) {
            DomainPattern::parse(entry).map_err(|e| format!("domain pattern {entry:?}: {e}"))?;
        }
        let filesystem = &self.filesystem;
        for path in filesystem.readonly.iter().chain(&filesystem.writable) {
            if clean_path(path).is_none() {
                return Err(format!(
                    "filesystem path {path:?} must be absolute with no empty, \".\" or \"..\" segments"
                ));
            }
        }
        for entry in self.mcps.iter().flatten() {
            mcps::check_entry(entry)?;
        }
        Ok(())
    }
}
