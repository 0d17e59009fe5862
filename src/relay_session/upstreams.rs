//! The relay session's side of the tenant's upstream MCP servers (`crate::upstream`):
//!
//! - `/mcps-rpc`: a call from code in one of this session's runs, while the run runs. It is
//!   checked against the tenant's servers and the run's `policy.mcps`, made with the server's
//!   sealed headers opened only here, and audited either way (an `upstream_call` record with
//!   the result's size and hash, or a `policy_denial`), and counted in the metrics.
//! - `/mcps`: the `/mcps` tree (each tool's schema, a `.d.ts` per server) that a tab writes
//!   into its workspace, listed from the servers and kept for [`TREE_TTL_MS`].
//!
//! What each server's protocol era turned out to be (and its legacy session) is kept in the
//! caches, so only the first call probes. The POSTs themselves are the platform's
//! ([`Platform::post`]).

use serde_json::{json, Value};

use super::{Platform, RelaySession};
use crate::audit::Scope;
use crate::error::{ErrorName, HttpError};
use crate::policy::Policy;
use crate::protocol::Caller;
use crate::stores;
use crate::upstream::client::{Exchange, Next};
use crate::upstream::redact::Redactor;
use crate::upstream::seal::SealingKey;
use crate::upstream::tree::{self, Listing};
use crate::upstream::{authorize, RpcCall, Upstream};

/// How long a call to an upstream may take at most (the run's own timeout may be shorter).
pub const CALL_TIMEOUT_MS: u64 = 30_000;
/// How long listing one server's tools may take.
pub const LIST_TIMEOUT_MS: u64 = 10_000;
/// Largest answer read from an upstream while listing its tools.
pub const LIST_BODY_MAX: u64 = 4 * 1024 * 1024;
/// Most pages of `tools/list` read from one server.
pub const LIST_PAGES_MAX: usize = 10;
/// How long a listed `/mcps` tree is served before the servers are listed again.
pub const TREE_TTL_MS: u64 = 60_000;
/// Most POSTs one exchange makes (a legacy server's handshake, a reopened session).
pub const ROUND_TRIPS_MAX: usize = 6;

#[derive(Clone, Copy)]
struct Limits {
    timeout_ms: u64,
    body_max: u64,
}

impl<P: Platform> RelaySession<P> {
    /// A call of run `run` (capsule `cap`; the Worker checked the run token that names both):
    /// the upstream's result as JSON bytes, or the refusal.
    pub async fn call_upstream(
        &self,
        caller: &Caller,
        run: String,
        cap: &str,
        body: &[u8],
        key: &SealingKey,
    ) -> Result<Vec<u8>, HttpError> {
        if !self.has_run(&run) {
            let message = format!("run {run} has ended: code can call upstream MCP servers only while its run runs");
            return Err(HttpError::new(ErrorName::Conflict, message));
        }
        let call = RpcCall::parse(body).map_err(|e| HttpError::new(ErrorName::ValidationError, e))?;
        let tenant = &caller.tenant.id;
        let upstreams = stores::upstreams(self.platform.records(), tenant).await?;
        let policy = self.capsule_policy(tenant, cap).await?;
        let scope =
            Scope { ts_ms: self.now_ms(), tenant: tenant.clone(), relay_session: caller.session.clone(), run_id: run };
        let upstream = match authorize(&upstreams, policy.mcps.as_deref(), &call) {
            Ok(upstream) => upstream,
            Err(refusal) => {
                self.persisted("metrics", self.store().update_metrics(|m| m.observe_denial("mcps-rpc")));
                let record = scope.policy_denial("mcps-rpc", &call.target(), refusal.name.as_str(), &refusal.message);
                self.audited("an upstream call's refusal", self.store().append_record(record).map(Some));
                return Err(refusal);
            }
        };
        let params = Value::Object(call.params.clone());
        let limits = Limits {
            timeout_ms: policy.limits.timeout_ms.min(CALL_TIMEOUT_MS),
            body_max: policy.network.max_body_bytes,
        };
        let arguments = json!({ "name": call.tool, "arguments": params });
        let result = self.exchange(caller, upstream, key, "tools/call", arguments, limits).await;
        let duration_ms = self.now_ms().saturating_sub(scope.ts_ms);
        let outcome = if result.is_ok() { "ok" } else { ErrorName::UpstreamFailed.as_str() };
        self.persisted("metrics", self.store().update_metrics(|m| m.observe_upstream_call(&call.mcp, outcome)));
        let body = result.map(|result| serde_json::to_vec(&result).expect("a JSON value serializes"));
        let audited = body.as_deref().map_err(|_| ErrorName::UpstreamFailed.as_str());
        let record = scope.upstream_call(&call.target(), &params, duration_ms, audited);
        self.audited("an upstream call", self.store().append_record(record).map(Some));
        body.map_err(|why| {
            let message = format!("upstream MCP server {:?}, tool {:?}: {why}", call.mcp, call.tool);
            HttpError::new(ErrorName::UpstreamFailed, message)
        })
    }

    /// The policy of the tenant's capsule `hash`: read once per instance.
    pub(super) async fn capsule_policy(&self, tenant_id: &str, hash: &str) -> Result<Policy, HttpError> {
        if let Some(policy) = self.caches.policy(tenant_id, hash) {
            return Ok(policy);
        }
        let policy = stores::capsule_policy(self.platform.blobs(), tenant_id, hash).await?;
        self.caches.keep_policy(tenant_id, hash, policy.clone());
        Ok(policy)
    }

    /// The `/mcps` tree: `{files: [{path, text}], listedAt}`, the tree of every server's tools.
    pub async fn mcps_tree(&self, caller: &Caller, key: &SealingKey) -> Result<Value, HttpError> {
        self.mcps_tree_within(caller, key, TREE_TTL_MS).await
    }

    /// The `/mcps` tree, listed again only if the one kept is older than `max_age_ms`.
    pub(super) async fn mcps_tree_within(
        &self,
        caller: &Caller,
        key: &SealingKey,
        max_age_ms: u64,
    ) -> Result<Value, HttpError> {
        if let Some(tree) = self.caches.mcps_tree(self.now_ms(), max_age_ms) {
            return Ok(tree);
        }
        let upstreams = stores::upstreams(self.platform.records(), &caller.tenant.id).await?;
        let mut listed = Vec::new();
        for upstream in &upstreams {
            let tools = self.list_tools(caller, upstream, key).await.map(|tools| allowed(upstream, tools));
            listed.push((upstream.name.as_str(), tools));
        }
        let listings: Vec<Listing> = listed
            .iter()
            .map(|(server, tools)| Listing { server, tools: tools.as_deref().map_err(Clone::clone) })
            .collect();
        let files: Vec<Value> =
            tree::files(&listings).into_iter().map(|(path, text)| json!({ "path": path, "text": text })).collect();
        let tree = json!({ "files": files, "listedAt": self.now_ms() });
        self.caches.keep_mcps_tree(self.now_ms(), tree.clone());
        Ok(tree)
    }

    /// The server's tools, every page of them.
    async fn list_tools(&self, caller: &Caller, upstream: &Upstream, key: &SealingKey) -> Result<Vec<Value>, String> {
        let limits = Limits { timeout_ms: LIST_TIMEOUT_MS, body_max: LIST_BODY_MAX };
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..LIST_PAGES_MAX {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let page = self.exchange(caller, upstream, key, "tools/list", params, limits).await?;
            tools.extend(page["tools"].as_array().cloned().unwrap_or_default());
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// One MCP request to `upstream`, in whatever era it speaks (what was learned is kept).
    async fn exchange(
        &self,
        caller: &Caller,
        upstream: &Upstream,
        key: &SealingKey,
        method: &str,
        params: Value,
        limits: Limits,
    ) -> Result<Value, String> {
        let headers = upstream.open_headers(&caller.tenant.id, key)?;
        // The exchange redacts every answer; this redacts what the platform says of a failed
        // POST (a redirect's Location, a fetch error), which can quote the upstream too.
        let redactor = Redactor::of(&headers);
        let era_key = format!("{}\n{}", upstream.name, upstream.url);
        let mut exchange = Exchange::new(method, params, self.caches.upstream_era(&era_key), redactor.clone());
        let deadline = self.now_ms() + limits.timeout_ms;
        for _ in 0..ROUND_TRIPS_MAX {
            let remaining = deadline.saturating_sub(self.now_ms());
            let answer = self
                .platform
                .post(&upstream.url, &headers, &exchange.post(), remaining, limits.body_max)
                .await
                .map_err(|why| redactor.text(&why))?;
            let next = exchange.answer(&answer);
            self.caches.learn_upstream_era(&era_key, exchange.known().clone());
            if let Next::Done(result) = next {
                return result;
            }
        }
        Err(format!("it needed more than {ROUND_TRIPS_MAX} requests to answer one"))
    }
}

/// The tools the tenant lets code call (the server's record may name only some).
fn allowed(upstream: &Upstream, tools: Vec<Value>) -> Vec<Value> {
    match &upstream.tools {
        None => tools,
        Some(names) => {
            tools.into_iter().filter(|t| t["name"].as_str().is_some_and(|n| names.iter().any(|a| a == n))).collect()
        }
    }
}
