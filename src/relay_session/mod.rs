//! A relay session's decisions that need its storage, written against small traits so that
//! `cargo test` runs them on real SQLite (`tests/relay_session.rs`, rusqlite) and the Durable
//! Object runs them on its own (`durable/src/platform/sql.rs`): the migrations, admitting and
//! finishing runs with their chained audit records, the metrics, legacy resumption, tasks, the
//! count of a run's `/out` files, legacy MCP sessions. Every write returns its error: a failed
//! one is the caller's to report (`StorageError`), never dropped here.

pub mod sql;
pub mod store;

pub use sql::{Sql, SqlValue, StorageError};
pub use store::{Ended, McpSessions, Queued, Store, MIGRATIONS};
