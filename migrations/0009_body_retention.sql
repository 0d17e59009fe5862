-- Retention of workspace bodies (relay_session::body_sweep): when each body was last stored (a
-- store of bytes already here renews it, so a body uploaded before the commit that names it keeps
-- its grace), and where its R2 copy is: own = 1 under this relay session's own prefix
-- (keys::workspace_body), which its sweep lists and deletes from; 0 under its tenant's
-- (keys::tenant_workspace_body, bodies stored before this migration, which other relay sessions
-- of the tenant may share: a sweep forgets such a row but never deletes the object).
ALTER TABLE workspace_bodies ADD COLUMN stored_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workspace_bodies ADD COLUMN own INTEGER NOT NULL DEFAULT 0;
