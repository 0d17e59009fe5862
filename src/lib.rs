//! relay-core: the protocol and the rules of relay-edge, with no Cloudflare Workers types at
//! all (this crate does not depend on `worker`, so the compiler keeps it pure). It takes bytes,
//! strings and the current time, and is tested natively with `cargo test` (`tests/`). The
//! Worker crate (`durable/`) is a thin layer of I/O over it.
//!
//! `audit` the hash-chained audit of runs; `mcp` MCP over Streamable HTTP, both protocol eras; `error` the one error vocabulary;
//! `capsule` the signed, content-addressed capsule; `policy` network, filesystem and limit rules; `run` a relay session's runs (the
//! state machine the Session DO drives); `auth` tenants, keys and tokens; `protocol` what the
//! Worker tells the Session DO with each request and what the DO tells a tab; `range` HTTP Range answers; `egress` the rules
//! of guest code's fetches through the Worker; `files` the files a run publishes from `/out`
//! and their signed download URLs; `body` how long a request's body may take to arrive; `text`
//! which characters of a name a person would not see; `deploy` what a dry run of a deploy
//! must show (bindings, bundle size); `retention` what the scheduled cleanup deletes; `runtime_snapshot` the edge's Python
//! memory snapshot in R2 (its key, its seal, when it goes); `quota` the tenant's quotas and the
//! ledger that counts them.

pub mod audit;
pub mod auth;
pub mod body;
pub mod capsule;
pub mod deploy;
pub mod egress;
pub mod error;
pub mod files;
pub mod keys;
pub mod log;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod packages;
pub mod policy;
pub mod protocol;
pub mod quota;
pub mod range;
pub mod relay_session;
pub mod retention;
pub mod run;
pub mod runtime_snapshot;
pub mod search;
pub mod stores;
pub mod text;
pub mod upstream;
pub mod workspace;
