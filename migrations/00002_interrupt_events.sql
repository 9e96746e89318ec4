-- +goose Up

-- What happens when an interrupt's deadline passes: 'expire' or 'respond'
-- with a fixed output. Stored on the row so the sweeper does not depend on
-- the agent definitions of the instance that runs it.
ALTER TABLE interrupts ADD COLUMN on_expire jsonb;

-- The sweeper looks for due interrupts across all tenants: a system-wide
-- worker query, so this partial index does not lead with tenant_id.
CREATE INDEX interrupts_deadline_idx ON interrupts (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;

CREATE INDEX interrupts_session_idx ON interrupts (tenant_id, session_id, created_at DESC);

-- The audit trail: one row per thing that happened to an interrupt.
-- Append-only: nothing updates it, only retention deletes from it.
CREATE TABLE interrupt_events (
    tenant_id    text NOT NULL,
    id           bigint GENERATED ALWAYS AS IDENTITY,
    interrupt_id uuid NOT NULL,
    type         text NOT NULL CHECK (type IN ('created', 'claimed', 'released', 'resolved', 'expired', 'cancelled')),
    actor        text NOT NULL,
    payload      jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, interrupt_id) REFERENCES interrupts (tenant_id, id)
);

CREATE INDEX interrupt_events_interrupt_idx ON interrupt_events (tenant_id, interrupt_id, id);

-- +goose StatementBegin
CREATE FUNCTION interrupt_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'interrupt_events is append-only';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER interrupt_events_no_update BEFORE UPDATE ON interrupt_events
    FOR EACH ROW EXECUTE FUNCTION interrupt_events_append_only();

-- Every event is announced on the holdpoint_events channel so dashboards on
-- any instance see it. The payload is small: listeners read details by id.
-- +goose StatementBegin
CREATE FUNCTION interrupt_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('holdpoint_events', json_build_object(
        'tenantId', NEW.tenant_id,
        'eventId', NEW.id,
        'interruptId', NEW.interrupt_id,
        'type', NEW.type,
        'at', NEW.created_at)::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER interrupt_events_notify AFTER INSERT ON interrupt_events
    FOR EACH ROW EXECUTE FUNCTION interrupt_events_notify();

-- One row per interrupt with the figures analysts ask about. approved is
-- set when the decision's output has a boolean "approved".
CREATE VIEW interrupt_facts AS
SELECT
    i.tenant_id,
    i.id,
    i.agent,
    i.tool,
    i.session_id,
    i.status,
    i.created_at,
    i.expires_at,
    i.resolved_at,
    i.resolved_by,
    CASE WHEN jsonb_typeof(i.resolution -> 'respond' -> 'approved') = 'boolean'
         THEN (i.resolution -> 'respond' ->> 'approved')::boolean END AS approved,
    EXTRACT(EPOCH FROM (i.resolved_at - i.created_at)) AS decision_seconds,
    CASE WHEN i.status = 'pending'
         THEN EXTRACT(EPOCH FROM (now() - i.created_at)) END AS pending_seconds
FROM interrupts i;

-- Daily figures per tenant, agent and tool.
CREATE VIEW interrupt_daily AS
SELECT
    tenant_id,
    date_trunc('day', created_at) AS day,
    agent,
    tool,
    count(*) AS total,
    count(*) FILTER (WHERE status = 'pending') AS pending,
    count(*) FILTER (WHERE status = 'resolved') AS resolved,
    count(*) FILTER (WHERE status = 'expired') AS expired,
    count(*) FILTER (WHERE approved) AS approved,
    count(*) FILTER (WHERE approved = false) AS denied,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY decision_seconds) AS decision_p50_seconds,
    percentile_cont(0.9) WITHIN GROUP (ORDER BY decision_seconds) AS decision_p90_seconds,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY decision_seconds) AS decision_p99_seconds
FROM interrupt_facts
GROUP BY tenant_id, date_trunc('day', created_at), agent, tool;

-- +goose Down
DROP VIEW interrupt_daily;
DROP VIEW interrupt_facts;
DROP TABLE interrupt_events;
DROP FUNCTION interrupt_events_notify();
DROP FUNCTION interrupt_events_append_only();
DROP INDEX interrupts_session_idx;
DROP INDEX interrupts_deadline_idx;
ALTER TABLE interrupts DROP COLUMN on_expire;
