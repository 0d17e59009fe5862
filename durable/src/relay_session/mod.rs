//! The Session Durable Object: one per relay session (`<tenantId>/<name>`). The I/O of the
//! core's relay session (`relay_core::relay_session`: the runs desk, runs, builds, upstream
//! calls, the store), which decides everything. Imports run one way: object -> mcp -> runs ->
//! shared, object -> {builds, tabs, upstreams, out_files, workspace} -> shared, shared -> leases,
//! tabs -> leases.

mod builds;
mod edge;
mod leases;
mod mcp;
mod object;
mod out_files;
mod runs;
mod shared;
mod tabs;
mod upstreams;
mod workspace;
