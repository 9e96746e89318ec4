-- +goose NO TRANSACTION
-- +goose Up

-- The indexes of a session's snapshots and tool calls began with
-- tenant_id, like the tables' keys. The plan of a foreign key check (made
-- once per connection, when a connection first checks one) then saw two
-- indexes for "tenant_id = $1 AND id = $2": the key, and the session index
-- on tenant_id alone. While the table is small the two cost the same, and
-- when the planner took the session index the check read every snapshot
-- of the tenant, on every message, interrupt and tool call written, for as
-- long as the connection lived (found with auto_explain: a turn's checks
-- read hundreds of index entries each, more as the tenant grew). With
-- session_id first, the session indexes serve only lookups by session, and
-- the keys serve the checks. Built concurrently: writes go on meanwhile.
CREATE INDEX CONCURRENTLY snapshots_session_idx_new ON snapshots (session_id, tenant_id, created_at DESC);
DROP INDEX CONCURRENTLY snapshots_session_idx;
ALTER INDEX snapshots_session_idx_new RENAME TO snapshots_session_idx;
CREATE INDEX CONCURRENTLY tool_calls_session_idx_new ON tool_calls (session_id, tenant_id, started_at, turn_id, call_key);
DROP INDEX CONCURRENTLY tool_calls_session_idx;
ALTER INDEX tool_calls_session_idx_new RENAME TO tool_calls_session_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY snapshots_session_idx_old ON snapshots (tenant_id, session_id, created_at DESC);
DROP INDEX CONCURRENTLY snapshots_session_idx;
ALTER INDEX snapshots_session_idx_old RENAME TO snapshots_session_idx;
CREATE INDEX CONCURRENTLY tool_calls_session_idx_old ON tool_calls (tenant_id, session_id, started_at, turn_id, call_key);
DROP INDEX CONCURRENTLY tool_calls_session_idx;
ALTER INDEX tool_calls_session_idx_old RENAME TO tool_calls_session_idx;
