-- +goose Up

-- The dashboard finds an end user's sessions, newest first, and lists a
-- session's snapshots.
CREATE INDEX sessions_end_user_idx ON sessions (tenant_id, end_user, updated_at DESC) WHERE end_user IS NOT NULL;
-- and a session's snapshots.
CREATE INDEX snapshots_session_idx ON snapshots (tenant_id, session_id, created_at DESC);

-- +goose Down
DROP INDEX snapshots_session_idx;
DROP INDEX sessions_end_user_idx;
