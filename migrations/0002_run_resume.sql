-- What a resuming client needs, and what the audit says of a run that ended with an error.
-- error_message: the message besides the name, when the relay ended the run (its own words,
-- capped at 500 characters; never run output: a tab's message may quote the run, so none is
-- kept). Runs cut off by a restart of the relay get theirs when the Session DO starts again.
-- mcp_session and request_id: the legacy MCP session and JSON-RPC id a run answers, so a
-- client that lost its stream (GET + Last-Event-ID) gets its answer, even after a restart.
ALTER TABLE runs ADD COLUMN error_message TEXT;
ALTER TABLE runs ADD COLUMN mcp_session TEXT;
ALTER TABLE runs ADD COLUMN request_id TEXT;
