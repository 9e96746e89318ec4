-- name: InsertTurnJob :exec
-- Raises (holdpoint_turn_jobs_below) when the tenant or the actor already
-- has as many jobs as its bound, so the detach writes nothing.
INSERT INTO turn_jobs (tenant_id, snapshot_id, agent, session_id, parent_id, end_user, actor, inputs, preclaimed, owner)
SELECT @tenant_id, @snapshot_id, @agent, @session_id, @parent_id, @end_user, @actor, @inputs, @preclaimed, @owner
WHERE holdpoint_turn_jobs_below(@tenant_id, @actor, @tenant_cap::integer, @actor_cap::integer);

-- name: ClaimNextTurnJob :one
-- Takes the oldest job nobody owns, or whose owner stopped heartbeating,
-- across tenants, passing over those the claiming instance runs already:
-- a system function (holdpoint_system).
SELECT * FROM holdpoint_claim_next_turn_job(@owner, @agents::text[], @tenant_agents::boolean, @stale_seconds::float8,
                                            @running_tenants::text[], @running_snapshots::text[]);

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

-- name: ReleaseAbortedTurnClaims :many
-- The claims of a turn aborted while nobody ran it, given back (pending
-- again) when no tool call of the turn was journaled: nothing of it ran on
-- any instance. Only by the job's owner: a journaled call is recorded only
-- while its instance owns the job (StartToolCall), so none can be added
-- behind this check. With a journaled call the claims stay resolved (a
-- tool may have run), as when a running turn is aborted after a tool.
UPDATE interrupts i
SET status = 'pending', resolution = NULL, resolved_by = NULL, resolved_at = NULL, resumed_snapshot_id = NULL
FROM turn_jobs j
JOIN snapshots s ON s.tenant_id = j.tenant_id AND s.id = j.snapshot_id
WHERE j.tenant_id = @tenant_id AND j.snapshot_id = @snapshot_id AND j.owner = @owner
  AND s.status = 'aborted'
  AND i.tenant_id = j.tenant_id AND i.snapshot_id = j.parent_id
  AND i.status = 'resolved' AND i.resumed_snapshot_id = j.snapshot_id
  AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.tenant_id = j.tenant_id AND c.turn_id = j.snapshot_id)
RETURNING i.id;

-- name: JournalTurnStep :one
-- Records a model's answer in a journaled turn before anything acts on it,
-- only while owner owns the turn's job (as StartToolCall: not owned means
-- the job was taken over, and this instance must stop). Owned but not
-- recorded: the step was recorded before.
WITH owned AS (
    SELECT 1 FROM turn_jobs j
    WHERE j.tenant_id = @tenant_id::text AND j.snapshot_id = @turn_id::text AND j.owner = @owner::text
    FOR KEY SHARE
), recorded AS (
    INSERT INTO turn_steps (tenant_id, turn_id, step, message, finish_reason)
    SELECT @tenant_id::text, @turn_id::text, @step::integer, @message::json, @finish_reason::text FROM owned
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM owned) AS owned, EXISTS (SELECT 1 FROM recorded) AS recorded;

-- name: ListTurnSteps :many
-- The model's answers a journaled turn recorded, for its takeover to replay.
SELECT step, message, finish_reason FROM turn_steps
WHERE tenant_id = @tenant_id AND turn_id = @turn_id
ORDER BY step;
