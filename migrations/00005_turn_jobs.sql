-- +goose Up

-- A detached turn is a job: written with its pending snapshot, before the
-- client learns the snapshot id, so the work survives the process that
-- accepted it. Workers claim jobs with FOR UPDATE SKIP LOCKED; a job whose
-- worker stopped heartbeating is taken over by another instance.
CREATE TABLE turn_jobs (
    tenant_id    text NOT NULL,
    snapshot_id  text NOT NULL,
    agent        text NOT NULL,
    session_id   text NOT NULL,
    parent_id    text,
    end_user     text,
    actor        text NOT NULL DEFAULT 'system',
    inputs       jsonb NOT NULL,
    preclaimed   uuid[] NOT NULL DEFAULT '{}',
    owner        text,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, snapshot_id),
    FOREIGN KEY (tenant_id, snapshot_id) REFERENCES snapshots (tenant_id, id)
);

-- Workers look for claimable jobs across tenants (a system query).
CREATE INDEX turn_jobs_claim_idx ON turn_jobs (heartbeat_at);

-- The journal of a turn's tool results, written before the turn moves on,
-- so a turn taken over after a crash reuses them instead of running the
-- tools again. A model call may be repeated; a tool call may not.
CREATE TABLE tool_results (
    tenant_id   text NOT NULL,
    snapshot_id text NOT NULL,
    call_key    text NOT NULL,
    result      jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, snapshot_id, call_key)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON turn_jobs, tool_results TO holdpoint_app;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['turn_jobs', 'tool_results'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- An abort is announced on holdpoint_abort so whichever instance runs the
-- snapshot's turn cancels it at once.
-- +goose StatementBegin
CREATE FUNCTION snapshots_notify_abort() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'aborted' AND OLD.status IS DISTINCT FROM 'aborted' THEN
        PERFORM pg_notify('holdpoint_abort', json_build_object(
            'tenantId', NEW.tenant_id, 'snapshotId', NEW.id)::text);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER snapshots_notify_abort AFTER UPDATE OF status ON snapshots
    FOR EACH ROW EXECUTE FUNCTION snapshots_notify_abort();

-- +goose Down
DROP TRIGGER snapshots_notify_abort ON snapshots;
DROP FUNCTION snapshots_notify_abort();
DROP TABLE tool_results;
DROP TABLE turn_jobs;
