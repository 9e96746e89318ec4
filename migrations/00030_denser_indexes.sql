-- +goose NO TRANSACTION
-- +goose Up

-- Index pages that new entries split in half stay half empty. PostgreSQL
-- fills a B-tree page to its fillfactor when a key goes after every other
-- key of the page (the end of the index, or the end of a tenant's range
-- of an ascending key), but splits it in the middle when a key goes first
-- or at random. Two indexes put each new row first in its range: the inbox
-- (tenant_id, status, created_at DESC, id DESC) and a session's snapshots
-- (session_id, tenant_id, created_at DESC). Ascending, each new entry goes
-- last, and a query that orders by those columns descending reads them
-- backwards (every column descending alike), so the plans are the same.
-- (The ids the server makes are version 7 UUIDs, which begin with their
-- time, for the same reason: the keys that hold a snapshot or interrupt id
-- grow at their end.)
CREATE INDEX CONCURRENTLY interrupts_inbox_idx_new ON interrupts (tenant_id, status, created_at, id);
DROP INDEX CONCURRENTLY interrupts_inbox_idx;
ALTER INDEX interrupts_inbox_idx_new RENAME TO interrupts_inbox_idx;
CREATE INDEX CONCURRENTLY snapshots_session_idx_new ON snapshots (session_id, tenant_id, created_at);
DROP INDEX CONCURRENTLY snapshots_session_idx;
ALTER INDEX snapshots_session_idx_new RENAME TO snapshots_session_idx;

-- An interrupt's update (its claim, its expiry) changes its status, which
-- the inbox index holds, so it is never a heap-only update: the room
-- fillfactor 80 left on every page for it bought nothing.
ALTER TABLE interrupts RESET (fillfactor);

-- A snapshot row is written once. Only a detached turn's pending snapshot
-- is updated (its heartbeat, every --heartbeat-interval, and its end), and
-- for those few updates fillfactor 90 kept a tenth of every page empty,
-- 190 bytes per approval cycle since a snapshot holds its messages. Such an
-- update now usually goes to another page, with a new entry in the
-- snapshot's two indexes, which PostgreSQL removes again when the page
-- would split (the key is unchanged: bottom-up deletion).
ALTER TABLE snapshots RESET (fillfactor);

-- +goose Down
ALTER TABLE snapshots SET (fillfactor = 90);
ALTER TABLE interrupts SET (fillfactor = 80);
CREATE INDEX CONCURRENTLY snapshots_session_idx_old ON snapshots (session_id, tenant_id, created_at DESC);
DROP INDEX CONCURRENTLY snapshots_session_idx;
ALTER INDEX snapshots_session_idx_old RENAME TO snapshots_session_idx;
CREATE INDEX CONCURRENTLY interrupts_inbox_idx_old ON interrupts (tenant_id, status, created_at DESC, id DESC);
DROP INDEX CONCURRENTLY interrupts_inbox_idx;
ALTER INDEX interrupts_inbox_idx_old RENAME TO interrupts_inbox_idx;
