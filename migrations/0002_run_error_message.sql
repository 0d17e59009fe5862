-- What the audit says of a run that ended with an error: the message besides the name (a
-- server-side sentence, capped; never run output). Runs cut off by a restart of the relay get
-- theirs when the Session DO starts again.
ALTER TABLE runs ADD COLUMN error_message TEXT;
