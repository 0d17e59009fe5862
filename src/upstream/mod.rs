//! A tenant's upstream MCP servers: code in a run calls their tools through `POST /mcps-rpc`
//! (seed 000 section 1.4) with credentials that never leave the Worker.
//!
//! - [`Upstream`] is a server as stored (KV `upstreams:<tenantId>`), its header values sealed
//!   ([`seal`]); [`UpstreamSpec`] is what the admin route takes; [`Upstream::view`] what it
//!   lists (header names only).
//! - [`RpcCall`] is the route's body; [`authorize`] decides whether the run may make it.
//! - [`client`] speaks MCP to the upstream in either protocol era, without doing I/O.
//! - [`tree`] turns an upstream's `tools/list` into the `/mcps` files guest code reads
//!   (a schema per tool, a TypeScript definition per server).
//! - [`redact`] removes the opened header values, in every form, from what an upstream says.

pub mod client;
pub mod redact;
pub mod seal;
pub mod tree;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use url::Url;

use crate::error::{ErrorName, HttpError};
use crate::mcp::http::is_field_value;
use crate::policy::check_mcp;
use crate::policy::mcps::{check_entry, server_name_ok, tool_name_ok, SERVER_NAME_RULE};
use seal::{Place, SealingKey};

/// Most upstream servers a tenant may have.
pub const MAX_UPSTREAMS: usize = 16;

/// The longest header value a tenant may give an upstream (servers refuse longer headers, and
/// the [`redact`] automaton stays small).
pub const MAX_HEADER_VALUE: usize = 8 * 1024;

/// Headers the relay sets itself on every upstream request; a tenant may not set them.
const RESERVED_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "content-type",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// An upstream MCP server of a tenant, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upstream {
    pub name: String,
    /// Its Streamable HTTP endpoint.
    pub url: String,
    /// Header name and sealed value ([`SealingKey::seal`]).
    pub headers: Vec<(String, String)>,
    /// The tools code may call; absent: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// `PUT /admin/tenants/<id>/upstreams/<name>`: the server's endpoint, the headers sent with
/// every request to it (credentials: sealed before they are stored, never shown again), and
/// optionally which of its tools code may call.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamSpec {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub tools: Option<Vec<String>>,
}

impl UpstreamSpec {
    /// Refuses what could never work, naming it: a bad name, a URL that is not absolute
    /// http(s) or carries credentials, a header the relay sets itself or one that is not a
    /// valid field, a tool name MCP does not allow.
    pub fn validate(&self, name: &str) -> Result<(), String> {
        if !server_name_ok(name) {
            return Err(format!("upstream server name {name:?}: {SERVER_NAME_RULE}"));
        }
        let url = Url::parse(&self.url).map_err(|e| format!("url {:?}: {e}", self.url))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("url {:?}: must be an absolute http:// or https:// URL", self.url));
        }
        if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
            return Err(format!(
                "url {:?}: no user info or fragment; send credentials as a header (\"headers\": {{\"authorization\": \"Bearer ...\"}}), which is stored sealed",
                self.url
            ));
        }
        for (header, value) in &self.headers {
            let token = !header.is_empty()
                && header.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token || RESERVED_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
                return Err(format!("header {header:?}: not a header name the relay lets a tenant set"));
            }
            if !is_field_value(value) {
                return Err(format!("header {header:?}: its value has characters a header may not carry"));
            }
            if value.len() > MAX_HEADER_VALUE {
                return Err(format!("header {header:?}: its value is longer than {MAX_HEADER_VALUE} bytes"));
            }
        }
        for tool in self.tools.iter().flatten() {
            if !tool_name_ok(tool) {
                return Err(format!("tools: {tool:?} is not an MCP tool name"));
            }
        }
        Ok(())
    }

    /// The server as stored, its header values sealed for `tenant` with one nonce each.
    pub fn seal(self, name: &str, tenant: &str, key: &SealingKey, mut nonce: impl FnMut() -> [u8; 12]) -> Upstream {
        let headers = self
            .headers
            .into_iter()
            .map(|(header, value)| {
                let sealed = key.seal(&Place { tenant, server: name, header: &header }, &value, nonce());
                (header.to_ascii_lowercase(), sealed)
            })
            .collect();
        Upstream { name: name.to_owned(), url: self.url, headers, tools: self.tools }
    }
}

impl Upstream {
    /// What the admin listing shows: everything but the header values.
    pub fn view(&self) -> Value {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        json!({ "name": self.name, "url": self.url, "headers": headers, "tools": self.tools })
    }

    /// The headers to send, opened.
    pub fn open_headers(&self, tenant: &str, key: &SealingKey) -> Result<Vec<(String, String)>, String> {
        self.headers
            .iter()
            .map(|(header, sealed)| {
                let value = key.open(&Place { tenant, server: &self.name, header }, sealed)?;
                Ok((header.clone(), value))
            })
            .collect()
    }
}

/// `POST /mcps-rpc`'s body: `{mcp, tool, params}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcCall {
    pub mcp: String,
    pub tool: String,
    #[serde(default)]
    pub params: Map<String, Value>,
}

impl RpcCall {
    /// The call, or a ValidationError message naming what to fix.
    pub fn parse(body: &[u8]) -> Result<RpcCall, String> {
        let call: RpcCall = serde_json::from_slice(body)
            .map_err(|e| format!("/mcps-rpc takes {{\"mcp\": server, \"tool\": name, \"params\": {{...}}}}: {e}"))?;
        check_entry(&format!("{}/{}", call.mcp, call.tool))?;
        Ok(call)
    }

    /// `server/tool`, as audits and policies name it.
    pub fn target(&self) -> String {
        format!("{}/{}", self.mcp, self.tool)
    }
}

/// The upstream `call` goes to, if the tenant has that server, the server's record lets code
/// call that tool, and the run's `policy.mcps` allows it.
pub fn authorize<'a>(
    upstreams: &'a [Upstream],
    policy_mcps: Option<&[String]>,
    call: &RpcCall,
) -> Result<&'a Upstream, HttpError> {
    let Some(upstream) = upstreams.iter().find(|u| u.name == call.mcp) else {
        let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
        let known = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
        let message = format!(
            "unknown upstream MCP server {:?}: this tenant has {known} (read /mcps/ for their tools; an admin adds servers with PUT /admin/tenants/<id>/upstreams/<name>)",
            call.mcp
        );
        return Err(HttpError::new(ErrorName::ValidationError, message));
    };
    if let Some(tools) = &upstream.tools {
        if !tools.contains(&call.tool) {
            let message = format!(
                "tool {:?} of upstream server {:?} is not one this tenant lets code call (allowed: {}); ask an admin to add it to the server's tools",
                call.tool,
                call.mcp,
                tools.join(", ")
            );
            return Err(HttpError::new(ErrorName::PolicyDenied, message));
        }
    }
    check_mcp(policy_mcps, &call.mcp, &call.tool)
        .map_err(|message| HttpError::new(ErrorName::PolicyDenied, message))?;
    Ok(upstream)
}
