-- The Session DO's own tables. Applied once, in file order, by durable/store.rs.

-- Legacy-era MCP sessions (Mcp-Session-Id). The 2026-07-28 era keeps no session state.
CREATE TABLE mcp_sessions (
  id TEXT PRIMARY KEY,
  protocol_version TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  ended_ms INTEGER
);

-- The audit of runs: what ran, how it ended, and hashes of the output, never the output itself.
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  tool TEXT NOT NULL,
  capsule_hash TEXT NOT NULL,
  queued_ms INTEGER NOT NULL,
  finished_ms INTEGER,
  exit_code INTEGER,
  error_name TEXT,
  wall_ms INTEGER,
  stdout_bytes INTEGER,
  stdout_sha256 TEXT,
  stderr_bytes INTEGER,
  stderr_sha256 TEXT
);
CREATE INDEX runs_by_time ON runs (queued_ms);
