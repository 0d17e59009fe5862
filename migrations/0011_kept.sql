-- What the relay session keeps in memory that must outlive its Durable Object's instance (it
-- sleeps between runs and may be evicted): relay_core::relay_session::kept, one JSON document.
CREATE TABLE kept (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  doc TEXT NOT NULL
);
