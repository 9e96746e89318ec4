-- name: GetSnapshot :one
-- The session's end user comes along: a caller acting for another user
-- must not see the snapshot.
SELECT sqlc.embed(snapshots), sessions.end_user AS session_end_user
FROM snapshots
JOIN sessions ON sessions.tenant_id = snapshots.tenant_id AND sessions.id = snapshots.session_id
WHERE snapshots.tenant_id = @tenant_id AND snapshots.id = @id;

-- name: GetSnapshotForUpdate :one
-- Locks the snapshot so a status change (abort, finalize, heartbeat) is a
-- read-modify-write that no concurrent writer can interleave with.
SELECT sqlc.embed(snapshots), sessions.end_user AS session_end_user
FROM snapshots
JOIN sessions ON sessions.tenant_id = snapshots.tenant_id AND sessions.id = snapshots.session_id
WHERE snapshots.tenant_id = @tenant_id AND snapshots.id = @id
FOR UPDATE OF snapshots;

-- name: InsertSnapshot :exec
INSERT INTO snapshots (
    tenant_id, id, session_id, agent, parent_id, status, finish_reason, error,
    custom, artifacts, message_count, heartbeat_at
) VALUES (
    @tenant_id, @id, @session_id, @agent, @parent_id, @status, @finish_reason, @error,
    @custom, @artifacts, @message_count, @heartbeat_at
);

-- name: FinalizePendingSnapshot :execrows
-- Only a pending snapshot is finalized: an abort that got there first wins
-- and the finished work is dropped.
UPDATE snapshots
SET status = @status, finish_reason = @finish_reason, error = @error,
    custom = @custom, artifacts = @artifacts, message_count = @message_count,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending';

-- name: AbortPendingSnapshot :execrows
UPDATE snapshots
SET status = 'aborted', finish_reason = 'aborted', updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending';

-- name: TouchSnapshotHeartbeat :one
-- Refreshes a pending snapshot's heartbeat and reports its status either
-- way, so the worker learns of an abort from the same round trip.
UPDATE snapshots
SET heartbeat_at = CASE WHEN status = 'pending' THEN now() ELSE heartbeat_at END
WHERE tenant_id = @tenant_id AND id = @id
RETURNING status;
