-- name: StartToolCall :one
-- Records that a tool is about to run; no row comes back when it was not
-- recorded. A detached turn's call (job_owner set) is recorded only while
-- that instance still owns the turn's job: a stalled instance whose job was
-- taken over is fenced off here, before it can run the tool. The job's row
-- is share-locked until the call's row commits: a takeover (its claim
-- skips locked jobs) comes after it and finds the call journaled, or
-- before it, and then this records nothing. A call recorded before is not
-- recorded again.
INSERT INTO tool_calls (tenant_id, turn_id, call_key, session_id, agent, tool, ref, input, status, restart, actor, end_user,
                        attempt, call_id)
SELECT @tenant_id, @turn_id, @call_key, @session_id, @agent, @tool, @ref, @input, 'running', @restart, @actor, sqlc.narg(end_user),
       @attempt, sqlc.narg(call_id)
WHERE sqlc.narg(job_owner)::text IS NULL OR EXISTS (
    SELECT 1 FROM turn_jobs
    WHERE tenant_id = @tenant_id AND snapshot_id = @turn_id AND owner = sqlc.narg(job_owner)::text
    FOR KEY SHARE)
ON CONFLICT DO NOTHING
RETURNING call_key;

-- name: FinishToolCalls :exec
-- Records the outcomes of a turn's calls (only of calls still running, or
-- marked unknown meanwhile: an outcome is written once, and a late one
-- that does land tells what the unknown call did), and a tool.called event
-- for each.
WITH done AS (
    UPDATE tool_calls t
    SET status = f.status, output = f.output, error = f.error, finished_at = f.finished_at,
        http_status = nullif(f.http_status, 0), attempts = nullif(f.attempts, 0)
    FROM (
        SELECT unnest(@call_keys::text[]) AS call_key, unnest(@statuses::text[]) AS status,
               unnest(@outputs::jsonb[]) AS output, unnest(@errors::jsonb[]) AS error,
               unnest(@finished_ats::timestamptz[]) AS finished_at,
               unnest(@http_statuses::integer[]) AS http_status, unnest(@attempts::integer[]) AS attempts
    ) AS f
    WHERE t.tenant_id = @tenant_id AND t.turn_id = @turn_id AND t.call_key = f.call_key AND t.status IN ('running', 'unknown')
    RETURNING t.call_key, t.actor
)
INSERT INTO interrupt_events (tenant_id, type, actor, payload)
SELECT @tenant_id, 'tool.called', done.actor, jsonb_build_object('snapshotId', @turn_id::text, 'callKey', done.call_key)
FROM done;

-- name: GetToolCall :one
SELECT * FROM tool_calls
WHERE tenant_id = @tenant_id AND turn_id = @turn_id AND call_key = @call_key;

-- name: ListSessionToolCalls :many
-- A session's tool calls, oldest first, with keyset pagination on
-- (started_at, turn_id, call_key) so every page is a scan of
-- tool_calls_session_idx.
SELECT * FROM tool_calls
WHERE tenant_id = @tenant_id AND session_id = @session_id
  AND (sqlc.narg(after_started_at)::timestamptz IS NULL
       OR (started_at, turn_id, call_key) > (sqlc.narg(after_started_at), sqlc.narg(after_turn_id)::text, sqlc.narg(after_call_key)::text))
ORDER BY started_at, turn_id, call_key
LIMIT @page_size;

-- name: ListTurnToolCalls :many
-- The tool calls of some turns (an interrupt's paused turn and the turn
-- that resumed it), oldest first.
SELECT * FROM tool_calls
WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::text[])
ORDER BY started_at, turn_id, call_key;

-- name: MarkToolCallUnknown :one
-- A call the instance taking its turn over finds still running: its
-- instance died between the tool's effect and the outcome's write, so it
-- may have run. It waits for a human; a tool.called event says so.
WITH marked AS (
    UPDATE tool_calls t SET status = 'unknown'
    WHERE t.tenant_id = @tenant_id::text AND t.turn_id = @turn_id::text AND t.call_key = @call_key::text AND t.status = 'running'
      -- A human's retry runs the call on the row it set running: not lost
      -- (if its instance dies, the sweep marks it once it is old).
      AND t.decision IS DISTINCT FROM 'retried'
    RETURNING t.id, t.actor
), events AS (
    INSERT INTO interrupt_events (tenant_id, type, actor, payload)
    SELECT @tenant_id::text, 'tool.called', marked.actor, jsonb_build_object('snapshotId', @turn_id::text, 'callKey', @call_key::text)
    FROM marked
)
SELECT id FROM marked;

-- name: MarkLostToolCalls :many
-- The sweep of calls left running by turns nobody runs any more, across
-- tenants: a system function (holdpoint_system).
SELECT tenant_id::text AS tenant_id, id::uuid AS id
FROM holdpoint_mark_lost_tool_calls(@started_before::timestamptz, @batch_size::integer);

-- name: GetToolCallByID :one
SELECT * FROM tool_calls WHERE tenant_id = @tenant_id AND id = @id;

-- name: DecideToolCall :one
-- A human's decision on an unknown call: confirmed (succeeded, with the
-- output they record), cancelled, or retried (running again, for the one
-- run the retry makes). The guard on 'unknown' is the claim: of two
-- decisions exactly one changes the row. A tool.called event names the
-- human; the retry's outcome gets its own when it is written.
WITH decided AS (
    UPDATE tool_calls t
    SET status = @status::text, output = coalesce(sqlc.narg(output)::jsonb, t.output),
        finished_at = CASE WHEN @status::text = 'running' THEN NULL ELSE now() END,
        -- A retry starts the call again: the sweep of lost calls counts
        -- its age from now, not from the run that was lost.
        started_at = CASE WHEN @status::text = 'running' THEN now() ELSE t.started_at END,
        decided_by = @actor::text, decided_at = now(), decision = @decision::text, note = sqlc.narg(note)::text
    WHERE t.tenant_id = @tenant_id::text AND t.id = @id::uuid AND t.status = 'unknown'
    RETURNING t.*
), events AS (
    INSERT INTO interrupt_events (tenant_id, type, actor, payload)
    SELECT @tenant_id::text, 'tool.called', @actor::text, jsonb_build_object('snapshotId', decided.turn_id, 'callKey', decided.call_key)
    FROM decided WHERE @status::text <> 'running'
)
SELECT * FROM decided;
