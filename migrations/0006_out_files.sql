-- The files each run published from /out (PUT /files), counted here so that uploads racing
-- each other cannot pass files::MAX_FILES_PER_RUN: the Worker reserves a path's slot before it
-- stores the file in R2, and releases it when that fails. Rows older than a day are pruned (no
-- run token lives that long).
CREATE TABLE out_files (
  run TEXT NOT NULL,
  path TEXT NOT NULL,
  reserved_ms INTEGER NOT NULL,
  PRIMARY KEY (run, path)
);
CREATE INDEX out_files_by_age ON out_files (reserved_ms);
