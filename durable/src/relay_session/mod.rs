//! The Session Durable Object: one per relay session (`<tenantId>/<name>`). A thin I/O loop
//! over the pure run machine (`relay_core::run::session`) and the MCP core (`relay_core::mcp`).
//! Imports run one way: object -> mcp -> runs -> shared -> store, object -> tabs -> shared, and
//! object -> upstreams -> shared, store.

mod mcp;
mod object;
mod runs;
mod shared;
mod store;
mod tabs;
mod upstreams;
