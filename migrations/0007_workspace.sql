-- The relay session's workspace (docs/ARCHITECTURE.md "The workspace"): the index of its files
-- and their bodies, stored once by sha256. A file row whose sha256 is NULL is a removal, kept
-- (until pruned) so that a tab can catch up by the changes since the version it holds.
CREATE TABLE workspace_files (
  path TEXT PRIMARY KEY,
  sha256 TEXT,
  size INTEGER NOT NULL,
  mtime_ms INTEGER NOT NULL,
  version INTEGER NOT NULL
);
CREATE INDEX workspace_files_by_version ON workspace_files (version);
-- A body: inline (base64) when it has at most workspace::INLINE_MAX_BYTES, else in R2 under
-- keys::workspace_body. A row is written only once its body is stored.
CREATE TABLE workspace_bodies (
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  inline TEXT
);
-- floor: the last version whose removals were pruned; the version never goes below it.
CREATE TABLE workspace_state (
  id INTEGER PRIMARY KEY CHECK (id = 0),
  floor INTEGER NOT NULL
);
INSERT INTO workspace_state (id, floor) VALUES (0, 0);
-- Each run's workspace root when it started and when it ended (audit::AuditRecord).
ALTER TABLE runs ADD COLUMN workspace_before TEXT;
ALTER TABLE runs ADD COLUMN workspace_after TEXT;
