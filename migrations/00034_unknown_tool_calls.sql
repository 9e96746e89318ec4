-- +goose Up

-- A tool call whose outcome nobody recorded (its instance died, or
-- PostgreSQL restarted, between the tool's effect and the outcome's write)
-- may have run. It becomes 'unknown' (the takeover of its detached turn, or
-- the sweep of calls left 'running' by turns nobody runs any more), and
-- stays so until a human decides: 'succeeded' with the outcome they
-- confirm, 'cancelled' (nothing more runs), or a retry with the same call
-- id (the row goes back to 'running' for that one run). An unknown call is
-- never run again by a plain re-approval: the interrupts of its turn stay
-- resolved.
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_status_check;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_status_check
    CHECK (status IN ('running', 'succeeded', 'interrupted', 'failed', 'unknown', 'cancelled'));

-- A stable id names a call in a URL (/api/v1/tool-calls/{id}); the key
-- (turn_id, call_key) is made of client and model strings.
ALTER TABLE tool_calls ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX tool_calls_id_idx ON tool_calls (id);

-- Who decided an unknown call, when, and how (confirmed, cancelled,
-- retried), with their note: the audit trail of the decision.
ALTER TABLE tool_calls ADD COLUMN decided_by text;
ALTER TABLE tool_calls ADD COLUMN decided_at timestamptz;
ALTER TABLE tool_calls ADD COLUMN decision text CHECK (decision IN ('confirmed', 'cancelled', 'retried'));
ALTER TABLE tool_calls ADD COLUMN note text;

-- The sweep looks for the few calls still running: a partial index keeps
-- it off the (large) table of finished calls.
CREATE INDEX tool_calls_running_idx ON tool_calls (started_at) WHERE status = 'running';

-- The sweep of every tenant's lost calls: those still running since before
-- p_started_before whose turn no instance runs (no turn_jobs row: a
-- detached turn's job is taken over instead, and its takeover decides).
-- A synchronous turn writes its outcomes only with its end, so a row it
-- left behind when its instance died is found by nothing else. Each lost
-- call gets a tool.called event, so webhooks hear that it needs a human.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_mark_lost_tool_calls(p_started_before timestamptz, p_batch integer)
RETURNS TABLE (tenant_id text, id uuid)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH lost AS (
        SELECT t.tenant_id, t.turn_id, t.call_key FROM tool_calls t
        WHERE t.status = 'running' AND t.started_at < p_started_before
          AND NOT EXISTS (SELECT 1 FROM turn_jobs j WHERE j.tenant_id = t.tenant_id AND j.snapshot_id = t.turn_id)
        ORDER BY t.started_at
        LIMIT p_batch
        FOR UPDATE OF t SKIP LOCKED
    ), marked AS (
        UPDATE tool_calls t SET status = 'unknown'
        FROM lost l
        WHERE t.tenant_id = l.tenant_id AND t.turn_id = l.turn_id AND t.call_key = l.call_key AND t.status = 'running'
        RETURNING t.tenant_id, t.turn_id, t.call_key, t.actor, t.id
    ), events AS (
        INSERT INTO interrupt_events (tenant_id, type, actor, payload)
        SELECT m.tenant_id, 'tool.called', m.actor, jsonb_build_object('snapshotId', m.turn_id, 'callKey', m.call_key)
        FROM marked m
    )
    SELECT m.tenant_id, m.id FROM marked m;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_mark_lost_tool_calls(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_mark_lost_tool_calls(timestamptz, integer) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_mark_lost_tool_calls(timestamptz, integer);
DROP INDEX tool_calls_running_idx;
ALTER TABLE tool_calls DROP COLUMN note;
ALTER TABLE tool_calls DROP COLUMN decision;
ALTER TABLE tool_calls DROP COLUMN decided_at;
ALTER TABLE tool_calls DROP COLUMN decided_by;
DROP INDEX tool_calls_id_idx;
ALTER TABLE tool_calls DROP COLUMN id;
-- Before 00034 an unknown call read as one still 'running' after its turn,
-- and a cancelled one is the nearest a failed call.
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_status_check;
UPDATE tool_calls SET status = 'running' WHERE status = 'unknown';
UPDATE tool_calls SET status = 'failed', finished_at = coalesce(finished_at, now()),
    error = coalesce(error, '{"status":"CANCELLED","message":"cancelled by a human"}'::jsonb)
WHERE status = 'cancelled';
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_status_check
    CHECK (status IN ('running', 'succeeded', 'interrupted', 'failed'));
