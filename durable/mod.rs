//! The Session Durable Object: one per relay session (`<tenantId>/<name>`). A thin I/O loop
//! over the pure run machine (`crate::run::session`) and the MCP core (`crate::mcp`).
//! Imports run one way: session -> mcp -> runs -> shared -> store, and session -> tabs -> shared.

mod mcp;
mod runs;
mod session;
mod shared;
mod store;
mod tabs;
