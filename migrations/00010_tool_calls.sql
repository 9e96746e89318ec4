-- +goose Up

-- Every execution of a tool that is not an interrupt, by any kind of turn
-- (synchronous, detached, client-managed), whatever the turn's end: the
-- row is written as 'running' before the tool runs, so a tool never runs
-- without leaving one, and gets its outcome after. A row still 'running'
-- after its turn ended means the process died while the tool ran: its
-- effect is unknown, and a detached turn taken over refuses to run it
-- again. Operators list them through the REST API; analysts query them.
--
-- turn_id is the id of the turn that ran the tool: for a server-managed
-- agent the id of the snapshot the turn wrote (completed, failed, or the
-- pending snapshot of a detached turn), for a client-managed agent an id of
-- the turn's own (no snapshot row). call_key names the call within its
-- turn (tool name and ref, or its place in the model's answers).
CREATE TABLE tool_calls (
    tenant_id   text NOT NULL,
    turn_id     text NOT NULL,
    call_key    text NOT NULL,
    session_id  text NOT NULL,
    agent       text NOT NULL,
    tool        text NOT NULL,
    ref         text NOT NULL DEFAULT '',
    input       jsonb,
    -- running: started, outcome not recorded (yet); succeeded: output is
    -- the tool's output; interrupted: the tool paused the turn, output is
    -- the interrupt's metadata; failed: error is what the client was told.
    status      text NOT NULL CHECK (status IN ('running', 'succeeded', 'interrupted', 'failed')),
    output      jsonb,
    error       jsonb,
    -- restart says the call was a restart of an interrupted request (the
    -- tool ran with the 'resumed' metadata).
    restart     boolean NOT NULL DEFAULT false,
    actor       text NOT NULL,
    end_user    text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (tenant_id, turn_id, call_key)
);

CREATE INDEX tool_calls_session_idx ON tool_calls (tenant_id, session_id, started_at, turn_id, call_key);

ALTER TABLE tool_calls SET (fillfactor = 80);
ALTER TABLE tool_calls ENABLE ROW LEVEL SECURITY;
ALTER TABLE tool_calls FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tool_calls
    USING (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on')
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on');
-- A record: the server adds and finishes rows, never deletes them.
GRANT SELECT, INSERT, UPDATE ON tool_calls TO holdpoint_app;

-- The journal of detached turns becomes these rows. Calls of jobs still
-- running at the upgrade keep their outcome, so a takeover reuses it.
INSERT INTO tool_calls (tenant_id, turn_id, call_key, session_id, agent, tool, status, output, actor, end_user, started_at, finished_at)
SELECT r.tenant_id, r.snapshot_id, r.call_key, j.session_id, j.agent,
       split_part(split_part(split_part(regexp_replace(r.call_key, '^restart:', ''), '#', 1), '@', 1), '~', 1),
       CASE WHEN NOT r.done THEN 'running'
            WHEN r.result ? 'interrupt' THEN 'interrupted'
            ELSE 'succeeded' END,
       CASE WHEN r.result ? 'interrupt' THEN r.result -> 'interrupt' -> 'metadata' -> 'interrupt'
            ELSE r.result -> 'response' -> 'toolResponse' -> 'output' END,
       j.actor, j.end_user, r.created_at, CASE WHEN r.done THEN r.created_at END
FROM tool_results r
JOIN turn_jobs j ON j.tenant_id = r.tenant_id AND j.snapshot_id = r.snapshot_id;

DROP TABLE tool_results;

-- +goose Down
CREATE TABLE tool_results (
    tenant_id   text NOT NULL,
    snapshot_id text NOT NULL,
    call_key    text NOT NULL,
    result      jsonb NOT NULL,
    done        boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, snapshot_id, call_key)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON tool_results TO holdpoint_app;
ALTER TABLE tool_results ENABLE ROW LEVEL SECURITY;
ALTER TABLE tool_results FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tool_results
    USING (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on')
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on');
DROP TABLE tool_calls;
