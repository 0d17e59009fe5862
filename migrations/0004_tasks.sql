-- Tasks of the tasks extension (io.modelcontextprotocol/tasks): one row per task, the
-- `TaskRecord` as JSON, kept for `tasks::TASK_TTL_MS` after it was created.
CREATE TABLE tasks (
  task_id TEXT PRIMARY KEY,
  created_ms INTEGER NOT NULL,
  record TEXT NOT NULL
);
CREATE INDEX tasks_created ON tasks (created_ms);
