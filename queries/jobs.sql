-- name: InsertTurnJob :exec
-- Raises (holdpoint_turn_jobs_below) when the tenant or the actor already
-- has as many jobs as its bound, so the detach writes nothing.
INSERT INTO turn_jobs (tenant_id, snapshot_id, agent, session_id, parent_id, end_user, actor, inputs, preclaimed, owner)
SELECT @tenant_id, @snapshot_id, @agent, @session_id, @parent_id, @end_user, @actor, @inputs, @preclaimed, @owner
WHERE holdpoint_turn_jobs_below(@tenant_id, @actor, @tenant_cap::integer, @actor_cap::integer);

-- name: ClaimNextTurnJob :one
-- Takes the oldest job nobody owns, or whose owner stopped heartbeating,
-- across tenants: a system function (holdpoint_system).
SELECT * FROM holdpoint_claim_next_turn_job(@owner, @agents::text[], @tenant_agents::boolean, @stale_seconds::float8);

-- name: TouchTurnJob :execrows
-- A worker's heartbeat; no row means another instance took the job over.
UPDATE turn_jobs SET heartbeat_at = now()
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id AND owner = @owner;

-- name: AppendTurnJobInputs :exec
UPDATE turn_jobs SET inputs = inputs || @inputs::jsonb
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id;

-- name: DeleteTurnJob :exec
DELETE FROM turn_jobs WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id;

-- name: ReleaseTurnJobs :one
-- Shutdown: hand this instance's jobs back so another takes them at once.
-- A system function (holdpoint_system).
SELECT holdpoint_release_turn_jobs(@owner)::bigint AS released;

-- name: ListenAborts :exec
-- Subscribes the connection to the abort announcements.
LISTEN holdpoint_abort;

