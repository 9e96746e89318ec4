-- name: InsertTurnJob :exec
INSERT INTO turn_jobs (tenant_id, snapshot_id, agent, session_id, parent_id, end_user, actor, inputs, preclaimed, owner)
VALUES (@tenant_id, @snapshot_id, @agent, @session_id, @parent_id, @end_user, @actor, @inputs, @preclaimed, @owner);

-- name: ClaimNextTurnJob :one
-- Takes the oldest job nobody owns, or whose owner stopped heartbeating.
-- SKIP LOCKED lets every instance's worker poll at once without two of them
-- taking the same job.
UPDATE turn_jobs
SET owner = @owner, heartbeat_at = now(), attempts = attempts + 1
WHERE (tenant_id, snapshot_id) = (
    SELECT j.tenant_id, j.snapshot_id FROM turn_jobs j
    WHERE (j.owner IS NULL OR j.heartbeat_at < now() - make_interval(secs => @stale_seconds::float8))
      AND j.agent = ANY(@agents::text[])
    ORDER BY j.heartbeat_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: TouchTurnJob :execrows
-- A worker's heartbeat; no row means another instance took the job over.
UPDATE turn_jobs SET heartbeat_at = now()
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id AND owner = @owner;

-- name: AppendTurnJobInputs :exec
UPDATE turn_jobs SET inputs = inputs || @inputs::jsonb
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id;

-- name: DeleteTurnJob :exec
DELETE FROM turn_jobs WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id;

-- name: ReleaseTurnJobs :execrows
-- Shutdown: hand this instance's jobs back so another takes them at once.
UPDATE turn_jobs SET owner = NULL WHERE owner = @owner;

-- name: ListenAborts :exec
-- Subscribes the connection to the abort announcements.
LISTEN holdpoint_abort;

