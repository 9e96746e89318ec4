-- name: StartToolCall :one
-- Records that a tool is about to run; no row comes back when it was not
-- recorded. A detached turn's call (job_owner set) is recorded only while
-- that instance still owns the turn's job: a stalled instance whose job was
-- taken over is fenced off here, before it can run the tool. A call
-- recorded before is not recorded again.
INSERT INTO tool_calls (tenant_id, turn_id, call_key, session_id, agent, tool, ref, input, status, restart, actor, end_user)
SELECT @tenant_id, @turn_id, @call_key, @session_id, @agent, @tool, @ref, @input, 'running', @restart, @actor, sqlc.narg(end_user)
WHERE sqlc.narg(job_owner)::text IS NULL OR EXISTS (
    SELECT 1 FROM turn_jobs
    WHERE tenant_id = @tenant_id AND snapshot_id = @turn_id AND owner = sqlc.narg(job_owner)::text)
ON CONFLICT DO NOTHING
RETURNING call_key;

-- name: FinishToolCalls :exec
-- Records the outcomes of a turn's calls (only of calls still running: an
-- outcome is written once), and a tool.called event for each.
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
    WHERE t.tenant_id = @tenant_id AND t.turn_id = @turn_id AND t.call_key = f.call_key AND t.status = 'running'
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
