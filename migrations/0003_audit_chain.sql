-- The hash-chained audit (src/audit.rs): one sealed record per finished run, its canonical JSON
-- and its chain. Only the latest audit::RETENTION records are kept; the oldest kept record's
-- own `prev` is where verification of the rest starts.
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY,
  record TEXT NOT NULL,
  chain TEXT NOT NULL
);
-- What the record needs besides the run's end, kept when the run is queued: the tenant, the
-- relay session, and the call's arguments already redacted (audit::redact_args).
ALTER TABLE runs ADD COLUMN tenant TEXT;
ALTER TABLE runs ADD COLUMN relay_session TEXT;
ALTER TABLE runs ADD COLUMN args TEXT;
