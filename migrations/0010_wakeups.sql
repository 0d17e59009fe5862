-- Why the relay session's Durable Object ran code (relay_core::metrics::Wake), counted across
-- its instances: a DO that hibernates starts a new instance at each wake, so memory cannot.
CREATE TABLE wakeups (
  kind TEXT PRIMARY KEY,
  n INTEGER NOT NULL
);
