-- name: GetRetentionPolicy :one
SELECT * FROM retention_policies WHERE tenant_id = @tenant_id;

-- name: UpsertRetentionPolicy :exec
INSERT INTO retention_policies (tenant_id, completed_seconds, failed_seconds, events_seconds)
VALUES (@tenant_id, sqlc.narg('completed_seconds'), sqlc.narg('failed_seconds'), sqlc.narg('events_seconds'))
ON CONFLICT (tenant_id) DO UPDATE
SET completed_seconds = EXCLUDED.completed_seconds, failed_seconds = EXCLUDED.failed_seconds,
    events_seconds = EXCLUDED.events_seconds, updated_at = now();

-- name: DeleteRetentionPolicy :exec
DELETE FROM retention_policies WHERE tenant_id = @tenant_id;

-- name: PruneSessions :one
-- One batch of a tenant's sessions (a system function, scoped to the
-- tenant it is given); the result is a JSON object of counts and the
-- position to go on from.
SELECT holdpoint_prune_sessions(@tenant_id, sqlc.narg('completed_seconds'), sqlc.narg('failed_seconds'),
                                sqlc.narg('events_seconds'), @after::text, @batch::integer)::jsonb AS result;

-- name: PruneEvents :one
-- One batch of a tenant's turn and tool events whose snapshot is gone.
SELECT holdpoint_prune_events(@tenant_id, sqlc.narg('cutoff_seconds'), @after_xid::bigint, @after_id::bigint,
                              @batch::integer)::jsonb AS result;

-- name: PrunePreview :one
-- What a prune would delete now, per table (a JSON object of counts).
SELECT holdpoint_prune_preview(@tenant_id, sqlc.narg('completed_seconds'), sqlc.narg('failed_seconds'),
                               sqlc.narg('events_seconds'))::jsonb AS result;

-- name: TryAdvisoryXactLock :one
-- Transaction-level: held until the transaction ends, so it works behind a
-- transaction pooler (a session-level lock would stay with whichever server
-- connection took it).
SELECT pg_try_advisory_xact_lock(@key::bigint) AS locked;
