-- +goose Up

-- The event log (interrupt_events) also records the end of every turn and
-- every tool call, so webhooks and event streams can report them. Those
-- rows name no interrupt; their type is the public event name.
ALTER TABLE interrupt_events ALTER COLUMN interrupt_id DROP NOT NULL;
ALTER TABLE interrupt_events DROP CONSTRAINT interrupt_events_type_check;
ALTER TABLE interrupt_events ADD CONSTRAINT interrupt_events_type_check CHECK (
    (interrupt_id IS NOT NULL AND type IN ('created', 'claimed', 'released', 'resolved', 'expired', 'cancelled'))
    OR (interrupt_id IS NULL AND type IN ('turn.completed', 'turn.failed', 'tool.called')));

-- The position of an event in the log is (xid, id): the writing
-- transaction's id, then the row's number. Numbers are handed out before
-- commit, so a reader that went past number n could later see a smaller
-- one commit. A reader instead takes only events whose transaction is
-- older than every transaction still running (pg_snapshot_xmin): no event
-- can appear at or before such a position any more, so a reader that
-- resumes after a position misses nothing.
ALTER TABLE interrupt_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
DROP INDEX interrupt_events_recent_idx;
-- The key leads with the position within a tenant: one tenant's replay
-- scans it, and a delivery names its event by (xid, id). The live reader
-- of every tenant scans the position alone.
ALTER TABLE interrupt_events DROP CONSTRAINT interrupt_events_pkey;
ALTER TABLE interrupt_events ADD PRIMARY KEY (tenant_id, xid, id);
CREATE INDEX interrupt_events_position_idx ON interrupt_events (xid, id);
-- Turn and tool events name no interrupt: the audit trail's index skips
-- them.
DROP INDEX interrupt_events_interrupt_idx;
CREATE INDEX interrupt_events_interrupt_idx ON interrupt_events (tenant_id, interrupt_id, id) WHERE interrupt_id IS NOT NULL;

-- The public name of an event: interrupt events are "interrupt.<type>".
-- +goose StatementBegin
CREATE FUNCTION holdpoint_event_name(p_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN strpos(p_type, '.') > 0 THEN p_type ELSE 'interrupt.' || p_type END;
$$;
-- +goose StatementEnd

-- A tenant's webhook endpoints.
CREATE TABLE webhooks (
    tenant_id       text NOT NULL REFERENCES tenants (id),
    id              uuid NOT NULL DEFAULT gen_random_uuid(),
    url             text NOT NULL,
    description     text NOT NULL DEFAULT '',
    -- Public event names (holdpoint_event_name); never empty.
    event_types     text[] NOT NULL CHECK (cardinality(event_types) > 0),
    enabled         boolean NOT NULL DEFAULT true,
    -- Why the platform turned it off (a 410 from the receiver), if it did.
    disabled_reason text,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, url)
);

-- Signing secrets. The newest signs; older ones keep signing until they
-- expire (rotation with overlap: a receiver verifies with either).
CREATE TABLE webhook_secrets (
    tenant_id  text NOT NULL,
    webhook_id uuid NOT NULL,
    key_id     integer NOT NULL CHECK (key_id > 0),
    secret     bytea NOT NULL CHECK (length(secret) >= 24),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    PRIMARY KEY (tenant_id, webhook_id, key_id),
    FOREIGN KEY (tenant_id, webhook_id) REFERENCES webhooks (tenant_id, id) ON DELETE CASCADE
);

-- Time-ordered (version 7) UUIDs: random enough to say nothing about other
-- tenants' volume, ordered by creation so an endpoint's deliveries list in
-- key order.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_uuid7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid;
$$;
-- +goose StatementEnd

-- The outbox: one row per event and endpoint, written by the trigger below
-- in the transaction that wrote the event, so a delivery exists if and only
-- if its event committed. A dispatcher claims due rows by moving
-- next_attempt_at past a lease: if it dies mid-delivery, the row is due
-- again when the lease runs out, and another instance delivers it.
CREATE TABLE webhook_deliveries (
    tenant_id       text NOT NULL,
    id              uuid NOT NULL DEFAULT holdpoint_uuid7(),
    webhook_id      uuid NOT NULL,
    event_xid       xid8 NOT NULL,
    event_id        bigint NOT NULL,
    -- pending: to be attempted at next_attempt_at; delivered: a 2xx came
    -- back; dead: every attempt failed (or the receiver answered 410).
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    -- The instance holding the current attempt; with attempts, the fence
    -- that lets only that attempt record its outcome.
    lease_owner     text,
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- An endpoint's deliveries, newest first, are a scan of the key.
    PRIMARY KEY (tenant_id, webhook_id, id),
    -- No foreign keys: checking them would share-lock the endpoint's row
    -- from every writing turn at once (and look up the event the same
    -- statement just wrote). Rows come only from the trigger below, which
    -- joins both; deleting an endpoint deletes its deliveries; a delivery
    -- of an endpoint deleted while its turn was writing is never claimed
    -- (the claim joins the endpoint).
    CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL))
);

-- The dispatcher's scan: an endpoint's due deliveries, oldest first.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (tenant_id, webhook_id, next_attempt_at)
    WHERE status = 'pending';

-- The fan-out: every event inserted becomes a delivery to each enabled
-- endpoint of its tenant subscribed to its type, in the same statement.
-- It runs as the owner so that system work (the deadline sweeper) fans out
-- too; it only joins rows of the events' own tenants.
-- +goose StatementBegin
CREATE FUNCTION interrupt_events_fan_out() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO webhook_deliveries (tenant_id, webhook_id, event_xid, event_id, next_attempt_at)
    SELECT e.tenant_id, w.id, e.xid, e.id, now()
    FROM new_events e
    JOIN webhooks w ON w.tenant_id = e.tenant_id AND w.enabled
        AND holdpoint_event_name(e.type) = ANY (w.event_types);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER interrupt_events_fan_out AFTER INSERT ON interrupt_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION interrupt_events_fan_out();
REVOKE ALL ON FUNCTION interrupt_events_fan_out() FROM PUBLIC;

-- Positions travel as bigint (xid8 values stay far below 2^63).
-- +goose StatementBegin
CREATE FUNCTION holdpoint_xid(p bigint) RETURNS xid8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p::text::xid8;
$$;
-- +goose StatementEnd

-- The event log as readers see it: public event names, and what each
-- event is about (agent, tool, session, snapshot) whatever its kind.
CREATE VIEW event_log WITH (security_invoker = true) AS
SELECT e.tenant_id, e.id, e.xid::text::bigint AS xid, holdpoint_event_name(e.type) AS type, e.interrupt_id,
       e.actor, e.created_at,
       coalesce(i.agent, s.agent, '') AS agent, coalesce(i.tool, c.tool, '') AS tool,
       coalesce(i.session_id, s.session_id, '') AS session_id, coalesce(i.snapshot_id, s.id, '') AS snapshot_id
FROM interrupt_events e
LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
LEFT JOIN snapshots s ON e.interrupt_id IS NULL AND s.tenant_id = e.tenant_id AND s.id = e.payload ->> 'snapshotId'
LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
    AND c.turn_id = e.payload ->> 'snapshotId' AND c.call_key = e.payload ->> 'callKey';

-- The live reader: events of every tenant after a position, up to the
-- horizon (see above).
-- +goose StatementBegin
CREATE FUNCTION holdpoint_events_after(p_xid bigint, p_id bigint, p_limit integer) RETURNS SETOF event_log
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT v.* FROM (
        SELECT e.tenant_id, e.id, e.xid FROM interrupt_events e
        WHERE (e.xid, e.id) > (holdpoint_xid(p_xid), p_id)
          AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY e.xid, e.id
        LIMIT p_limit
    ) p
    JOIN event_log v ON v.tenant_id = p.tenant_id AND v.xid = p.xid::text::bigint AND v.id = p.id
    ORDER BY p.xid, p.id;
$$;
-- +goose StatementEnd

DROP FUNCTION holdpoint_recent_interrupt_events(timestamptz);

-- +goose StatementBegin
CREATE FUNCTION holdpoint_event_horizon() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint;
$$;
-- +goose StatementEnd

-- What one attempt of a delivery sends: the endpoint, the event, and what
-- the event is about (its interrupt, or its turn and tool call), with the
-- event's number among its interrupt's events.
CREATE VIEW webhook_delivery_context WITH (security_invoker = true) AS
SELECT d.tenant_id, d.id, d.webhook_id, d.attempts, d.status,
       w.url, w.enabled,
       e.id AS event_id, e.xid::text::bigint AS event_xid, e.type AS event_type, e.created_at AS occurred_at,
       e.actor, e.interrupt_id,
       i.agent AS interrupt_agent, i.tool AS interrupt_tool, i.input AS interrupt_input, i.expires_at,
       i.session_id AS interrupt_session_id, i.snapshot_id AS interrupt_snapshot_id, i.status AS interrupt_status,
       i.resolution, i.resolved_by, i.resolved_at, i.created_at AS interrupt_created_at,
       CASE WHEN e.interrupt_id IS NOT NULL THEN (
           SELECT count(*) FROM interrupt_events s
           WHERE s.tenant_id = e.tenant_id AND s.interrupt_id = e.interrupt_id AND s.id <= e.id)
       ELSE 0 END::integer AS sequence,
       sn.id AS turn_snapshot_id, sn.session_id AS turn_session_id, sn.agent AS turn_agent,
       sn.finish_reason AS turn_finish_reason, sn.error AS turn_error,
       c.call_key, c.tool AS call_tool, c.status AS call_status, c.ref AS call_ref,
       c.session_id AS call_session_id, c.http_status AS call_http_status
FROM webhook_deliveries d
JOIN webhooks w ON w.tenant_id = d.tenant_id AND w.id = d.webhook_id
JOIN interrupt_events e ON e.tenant_id = d.tenant_id AND e.xid = d.event_xid AND e.id = d.event_id
LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
LEFT JOIN snapshots sn ON e.interrupt_id IS NULL AND sn.tenant_id = e.tenant_id AND sn.id = e.payload ->> 'snapshotId'
LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
    AND c.turn_id = e.payload ->> 'snapshotId' AND c.call_key = e.payload ->> 'callKey';

-- The dispatcher's batch: due deliveries of enabled endpoints of every
-- tenant, at most p_per_endpoint of each and none of the endpoints in
-- p_busy (those this instance already has enough of in flight), leased to
-- p_owner for p_lease_seconds, returned with what they send (one round
-- trip). SKIP LOCKED lets every instance claim at once without two taking
-- the same delivery.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_claim_webhook_deliveries(p_owner text, p_lease_seconds float8, p_limit integer,
                                                   p_per_endpoint integer, p_busy uuid[])
RETURNS SETOF webhook_delivery_context
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp
-- Planned once per connection: planning the view's joins afresh costs
-- several times what running them does.
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    tenants text[];
    hooks uuid[];
    ids uuid[];
BEGIN
    WITH claimed AS (
        UPDATE webhook_deliveries d
        SET next_attempt_at = now() + make_interval(secs => p_lease_seconds),
            attempts = d.attempts + 1, lease_owner = p_owner, last_attempt_at = now()
        FROM (
            SELECT x.tenant_id, x.webhook_id, x.id
            FROM webhooks w
            CROSS JOIN LATERAL (
                SELECT d2.tenant_id, d2.webhook_id, d2.id FROM webhook_deliveries d2
                WHERE d2.tenant_id = w.tenant_id AND d2.webhook_id = w.id
                  AND d2.status = 'pending' AND d2.next_attempt_at <= now()
                ORDER BY d2.next_attempt_at
                LIMIT p_per_endpoint
                FOR UPDATE SKIP LOCKED
            ) x
            WHERE w.enabled AND w.id <> ALL (p_busy)
            LIMIT p_limit
        ) c
        WHERE d.tenant_id = c.tenant_id AND d.webhook_id = c.webhook_id AND d.id = c.id
        RETURNING d.tenant_id, d.webhook_id, d.id
    )
    SELECT array_agg(claimed.tenant_id), array_agg(claimed.webhook_id), array_agg(claimed.id)
    INTO tenants, hooks, ids FROM claimed;
    -- By whole key, so the plan follows keys whatever the statistics say
    -- (a burst of new deliveries is not in them yet).
    RETURN QUERY
        SELECT c.* FROM unnest(tenants, hooks, ids) AS k (tenant_id, webhook_id, id)
        JOIN webhook_delivery_context c ON c.tenant_id = k.tenant_id AND c.webhook_id = k.webhook_id AND c.id = k.id;
END;
$$;
-- +goose StatementEnd

-- Delivery health per endpoint, for analysts and operators.
CREATE VIEW webhook_health WITH (security_invoker = true) AS
SELECT
    w.tenant_id,
    w.id AS webhook_id,
    w.url,
    w.enabled,
    w.disabled_reason,
    count(d.id) FILTER (WHERE d.status = 'pending') AS pending,
    count(d.id) FILTER (WHERE d.status = 'delivered') AS delivered,
    count(d.id) FILTER (WHERE d.status = 'dead') AS dead,
    count(d.id) FILTER (WHERE d.status = 'pending' AND d.attempts > 0) AS retrying,
    min(d.created_at) FILTER (WHERE d.status = 'pending') AS oldest_pending_at,
    max(d.delivered_at) AS last_delivered_at,
    max(d.last_attempt_at) FILTER (WHERE d.last_error IS NOT NULL) AS last_failure_at,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM (d.delivered_at - d.created_at)))
        FILTER (WHERE d.status = 'delivered') AS delivery_p50_seconds,
    percentile_cont(0.9) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM (d.delivered_at - d.created_at)))
        FILTER (WHERE d.status = 'delivered') AS delivery_p90_seconds
FROM webhooks w
LEFT JOIN webhook_deliveries d ON d.tenant_id = w.tenant_id AND d.webhook_id = w.id
GROUP BY w.tenant_id, w.id, w.url, w.enabled, w.disabled_reason;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['webhooks', 'webhook_secrets', 'webhook_deliveries'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())$p$, t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['holdpoint_events_after(bigint, bigint, integer)',
                             'holdpoint_claim_webhook_deliveries(text, float8, integer, integer, uuid[])'] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', t);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO holdpoint_app', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
GRANT SELECT, INSERT, UPDATE, DELETE ON webhooks, webhook_secrets TO holdpoint_app;
GRANT SELECT, UPDATE, DELETE ON webhook_deliveries TO holdpoint_app;
GRANT SELECT ON webhook_health, event_log, webhook_delivery_context TO holdpoint_app;

-- +goose Down
DROP VIEW webhook_health;
DROP FUNCTION holdpoint_claim_webhook_deliveries(text, float8, integer, integer, uuid[]);
DROP VIEW webhook_delivery_context;
DROP FUNCTION holdpoint_event_horizon();
DROP FUNCTION holdpoint_events_after(bigint, bigint, integer);
DROP VIEW event_log;
DROP FUNCTION holdpoint_xid(bigint);
-- +goose StatementBegin
CREATE FUNCTION holdpoint_recent_interrupt_events(p_since timestamptz) RETURNS SETOF interrupt_events
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM interrupt_events
    WHERE created_at >= p_since
    ORDER BY created_at, id
    LIMIT 10000;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_recent_interrupt_events(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_recent_interrupt_events(timestamptz) TO holdpoint_app;
DROP TRIGGER interrupt_events_fan_out ON interrupt_events;
DROP FUNCTION interrupt_events_fan_out();
DROP TABLE webhook_deliveries;
DROP FUNCTION holdpoint_uuid7();
DROP TABLE webhook_secrets;
DROP TABLE webhooks;
DROP FUNCTION holdpoint_event_name(text);
DROP INDEX interrupt_events_position_idx;
DROP INDEX interrupt_events_interrupt_idx;
CREATE INDEX interrupt_events_interrupt_idx ON interrupt_events (tenant_id, interrupt_id, id);
ALTER TABLE interrupt_events DROP CONSTRAINT interrupt_events_pkey;
ALTER TABLE interrupt_events ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE interrupt_events DROP COLUMN xid;
CREATE INDEX interrupt_events_recent_idx ON interrupt_events (created_at);
DELETE FROM interrupt_events WHERE interrupt_id IS NULL;
ALTER TABLE interrupt_events DROP CONSTRAINT interrupt_events_type_check;
ALTER TABLE interrupt_events ADD CONSTRAINT interrupt_events_type_check
    CHECK (type IN ('created', 'claimed', 'released', 'resolved', 'expired', 'cancelled'));
ALTER TABLE interrupt_events ALTER COLUMN interrupt_id SET NOT NULL;
