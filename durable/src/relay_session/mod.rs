//! The Session Durable Object: one per relay session (`<tenantId>/<name>`). A thin I/O loop
//! over the pure run machine (`relay_core::run::machine`) and the MCP core (`relay_core::mcp`).
//! Imports run one way: object -> mcp -> runs -> builds -> commands -> shared -> store (and
//! object -> builds for a build's routes), object -> tabs -> shared -> leases (and tabs ->
//! leases), object -> upstreams -> shared, store, and object -> out_files -> shared, store.

mod builds;
mod commands;
mod leases;
mod mcp;
mod object;
mod out_files;
mod runs;
mod shared;
mod tabs;
mod upstreams;
