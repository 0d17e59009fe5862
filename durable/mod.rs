//! The Session Durable Object: one per relay session (`<tenantId>/<name>`). It holds the tabs
//! attached as executors, the run queue, the runs in flight and the legacy MCP sessions, and
//! drives the pure state machines of `crate::run` and `crate::mcp`.

mod executor;
mod mcp;
mod runs;
mod session;
mod store;
