-- The relay session's metrics (relay_core::metrics::Snapshot as JSON), one row, updated as
-- runs end, policies refuse and upstream servers are called.
CREATE TABLE metrics (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  snapshot TEXT NOT NULL
);
