-- +goose Up

-- A turn taken over by another instance (its own died, or shut down) ran
-- again from its paused snapshot, asking the model again: a model answers
-- differently from one call to the next (other tools, other inputs, and
-- with most providers a new ref for every tool request), and the journal
-- of tool calls is keyed by the request's ref. So a call the instance
-- before had made (a transfer that went out) was not recognised, and the
-- takeover made it a second time. Now a journaled turn (detached, or a
-- resume guarded by a job) records each of the model's answers here before
-- anything acts on it, and a takeover replays the recorded answers instead
-- of asking the model: its tool requests are the ones the journal knows.
-- The steps go with the turn's job. The answer is kept as the text the
-- server wrote (json, as a snapshot's messages): nothing looks inside it,
-- and a model's text may hold what jsonb refuses (\u0000).
CREATE TABLE turn_steps (
    tenant_id     text NOT NULL,
    turn_id       text NOT NULL,
    step          integer NOT NULL CHECK (step >= 0),
    message       json NOT NULL,
    finish_reason text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id, step),
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turn_jobs (tenant_id, snapshot_id) ON DELETE CASCADE
);

ALTER TABLE turn_steps ENABLE ROW LEVEL SECURITY;
ALTER TABLE turn_steps FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON turn_steps
    USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor());
GRANT SELECT, INSERT ON turn_steps TO holdpoint_app;

-- +goose Down
DROP TABLE turn_steps;
