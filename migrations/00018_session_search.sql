-- +goose Up

-- The dashboard finds an end user's sessions, newest first.
CREATE INDEX sessions_end_user_idx ON sessions (tenant_id, end_user, updated_at DESC) WHERE end_user IS NOT NULL;

-- +goose Down
DROP INDEX sessions_end_user_idx;
