-- +goose NO TRANSACTION
-- +goose Up

-- A session's snapshots are read by (session_id, tenant_id): its listing
-- (newest 100, sorted) and retention's prune. The index held created_at as
-- well, which made every entry distinct, and since many sessions write at
-- once, each into its own part of the index, every page that filled split
-- in half: about 112 bytes of index per snapshot, 225 per approval cycle
-- (8 x 200). Without created_at the entries of one session have equal
-- keys, and B-tree deduplication keeps them as one key with a list of row
-- pointers (6 bytes each). Listing a session sorts its snapshots instead
-- of reading them in order: a top-100 sort of the session's rows.
CREATE INDEX CONCURRENTLY snapshots_session_idx_new ON snapshots (session_id, tenant_id);
DROP INDEX CONCURRENTLY snapshots_session_idx;
ALTER INDEX snapshots_session_idx_new RENAME TO snapshots_session_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY snapshots_session_idx_old ON snapshots (session_id, tenant_id, created_at);
DROP INDEX CONCURRENTLY snapshots_session_idx;
ALTER INDEX snapshots_session_idx_old RENAME TO snapshots_session_idx;
