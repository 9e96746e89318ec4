-- +goose Up

-- Nothing reads these: a session's snapshots are found through its latest
-- snapshot and the parent chain, and the inbox filters sessions on the
-- inbox index. Every index costs each turn a write.
DROP INDEX snapshots_session_idx;
DROP INDEX interrupts_session_idx;

-- Rows that are updated in place (a session's latest snapshot, an
-- interrupt's claim, a pending snapshot's finalize) leave room on their page
-- so the update can stay on it.
ALTER TABLE sessions SET (fillfactor = 70);
ALTER TABLE interrupts SET (fillfactor = 80);
ALTER TABLE snapshots SET (fillfactor = 90);

-- +goose Down
ALTER TABLE snapshots RESET (fillfactor);
ALTER TABLE interrupts RESET (fillfactor);
ALTER TABLE sessions RESET (fillfactor);
CREATE INDEX interrupts_session_idx ON interrupts (tenant_id, session_id, created_at DESC);
CREATE INDEX snapshots_session_idx ON snapshots (tenant_id, session_id, created_at);
