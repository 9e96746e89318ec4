-- +goose NO TRANSACTION
-- +goose Up

-- Every turn moves its session's latest snapshot (latest_snapshot_id,
-- updated_at): two updates of the row per approval cycle. updated_at was
-- a column of sessions_end_user_idx, and an update that changes any
-- indexed column cannot be a heap-only (HOT) update: each one added an
-- entry to both of the table's indexes and left a dead version that only
-- vacuum removes. Where vacuum lags (or, on a server with autovacuum off,
-- never comes) a session's key leads through all its dead versions, and a
-- soak at half the peak rate slowed from 411 to 169 cycles/s over ten
-- minutes. Without updated_at in an index, and with room left on each page
-- (fillfactor 80), the updates are HOT: the new version goes on the same
-- page, no index changes, and the page's dead versions are pruned the next
-- time it is read. The end user index only finds a user's sessions; the
-- few it finds are sorted by updated_at as the query asks.
ALTER TABLE sessions SET (fillfactor = 80);
CREATE INDEX CONCURRENTLY sessions_end_user_idx_new ON sessions (tenant_id, end_user) WHERE end_user IS NOT NULL;
DROP INDEX CONCURRENTLY sessions_end_user_idx;
ALTER INDEX sessions_end_user_idx_new RENAME TO sessions_end_user_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY sessions_end_user_idx_old ON sessions (tenant_id, end_user, updated_at DESC) WHERE end_user IS NOT NULL;
DROP INDEX CONCURRENTLY sessions_end_user_idx;
ALTER INDEX sessions_end_user_idx_old RENAME TO sessions_end_user_idx;
ALTER TABLE sessions RESET (fillfactor);
