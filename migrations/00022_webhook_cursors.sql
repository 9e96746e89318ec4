-- +goose Up

-- Webhook endpoints read the event log from a cursor instead of a row per
-- event and endpoint written with the event. The log is already the
-- outbox: an event exists exactly when the change that caused it
-- committed, and a reader that takes only events older than every running
-- transaction (the horizon, see 00019) misses none. Each enabled endpoint
-- keeps its position in the log; a dispatcher leases the endpoint, reads
-- the events after the position, attempts the ones the endpoint
-- subscribes to, and in one statement moves the position past them and
-- records each attempt as a delivery row. A failed first attempt is a
-- pending row that the retry schedule (the existing claim) takes over.
-- Turns no longer write a row per endpoint in their own transaction, and
-- the dispatcher no longer updates each row twice (claim, outcome): it
-- writes one row per attempt and one position per batch.

CREATE TABLE webhook_cursors (
    tenant_id   text NOT NULL,
    webhook_id  uuid NOT NULL,
    -- The position read up to: every event at or before (xid, id) was
    -- attempted (or was not subscribed to) when the endpoint was enabled.
    xid         xid8 NOT NULL,
    id          bigint NOT NULL,
    -- The instance reading for the endpoint, until lease_until; another
    -- may take over after that.
    lease_owner text,
    lease_until timestamptz,
    PRIMARY KEY (tenant_id, webhook_id),
    FOREIGN KEY (tenant_id, webhook_id) REFERENCES webhooks (tenant_id, id) ON DELETE CASCADE
);

-- An endpoint starts at the horizon when it is created, and moves to it
-- again when it is enabled after being off: it gets the events that
-- commit from then on, as the fan-out trigger it replaces did.
-- +goose StatementBegin
CREATE FUNCTION webhooks_cursor_start() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO webhook_cursors (tenant_id, webhook_id, xid, id)
        VALUES (NEW.tenant_id, NEW.id, pg_snapshot_xmin(pg_current_snapshot()), 0);
    ELSIF NEW.enabled AND NOT OLD.enabled THEN
        UPDATE webhook_cursors SET xid = pg_snapshot_xmin(pg_current_snapshot()), id = 0
        WHERE tenant_id = NEW.tenant_id AND webhook_id = NEW.id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION webhooks_cursor_start() FROM PUBLIC;
CREATE TRIGGER webhooks_cursor_start AFTER INSERT OR UPDATE OF enabled ON webhooks
    FOR EACH ROW EXECUTE FUNCTION webhooks_cursor_start();

INSERT INTO webhook_cursors (tenant_id, webhook_id, xid, id)
SELECT tenant_id, id, pg_snapshot_xmin(pg_current_snapshot()), 0 FROM webhooks;

DROP TRIGGER interrupt_events_fan_out ON interrupt_events;
DROP FUNCTION interrupt_events_fan_out();

ALTER TABLE webhook_cursors ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_cursors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON webhook_cursors
    USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor());
GRANT SELECT, UPDATE ON webhook_cursors TO holdpoint_app;
-- Attempts are recorded as rows by the dispatcher now.
GRANT INSERT ON webhook_deliveries TO holdpoint_app;

-- What an attempt of an event sends: the event and what it is about (its
-- interrupt, or its turn and tool call), with the event's number among
-- its interrupt's events. (webhook_delivery_context is the same for a
-- delivery row.)
CREATE VIEW webhook_event_context WITH (security_invoker = true) AS
SELECT e.tenant_id, e.id AS event_id, e.xid::text::bigint AS event_xid, e.type AS event_type,
       e.created_at AS occurred_at, e.actor, e.interrupt_id,
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
       c.session_id AS call_session_id, c.http_status AS call_http_status,
       -- The position's xid as stored, to join on: a join on event_xid (a
       -- cast) cannot use the key and reads all of the tenant's events.
       e.xid AS event_xid8
FROM interrupt_events e
LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
LEFT JOIN snapshots sn ON e.interrupt_id IS NULL AND sn.tenant_id = e.tenant_id AND sn.id = e.payload ->> 'snapshotId'
LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
    AND c.turn_id = e.payload ->> 'snapshotId' AND c.call_key = e.payload ->> 'callKey';
GRANT SELECT ON webhook_event_context TO holdpoint_app;

-- The view gets the position as stored (xid8), for joins by key: a join
-- on the cast (xid) cannot use the key and reads all of the tenant's
-- events.
CREATE OR REPLACE VIEW event_log WITH (security_invoker = true) AS
SELECT e.tenant_id, e.id, e.xid::text::bigint AS xid, holdpoint_event_name(e.type) AS type, e.interrupt_id,
       e.actor, e.created_at,
       coalesce(i.agent, s.agent, '') AS agent, coalesce(i.tool, c.tool, '') AS tool,
       coalesce(i.session_id, s.session_id, '') AS session_id, coalesce(i.snapshot_id, s.id, '') AS snapshot_id,
       e.xid AS xid8
FROM interrupt_events e
LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
LEFT JOIN snapshots s ON e.interrupt_id IS NULL AND s.tenant_id = e.tenant_id AND s.id = e.payload ->> 'snapshotId'
LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
    AND c.turn_id = e.payload ->> 'snapshotId' AND c.call_key = e.payload ->> 'callKey';

-- The readers of the log, after a position: every tenant's (the live
-- reader) and one tenant's (a stream that resumes). The keys of the turn
-- and the tool call are taken out of the payload before the joins: under
-- row-level security a join condition with a function that is not
-- leakproof (->>) cannot be an index condition, and the view's joins
-- would read all of the tenant's snapshots for each event.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_events_after(p_xid bigint, p_id bigint, p_limit integer) RETURNS SETOF event_log
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT e.tenant_id, e.id, e.xid::text::bigint, holdpoint_event_name(e.type), e.interrupt_id, e.actor, e.created_at,
           coalesce(i.agent, s.agent, ''), coalesce(i.tool, c.tool, ''),
           coalesce(i.session_id, s.session_id, ''), coalesce(i.snapshot_id, s.id, ''), e.xid
    FROM (
        SELECT e.tenant_id, e.id, e.xid, e.type, e.interrupt_id, e.actor, e.created_at,
               e.payload ->> 'snapshotId' AS snapshot_key, e.payload ->> 'callKey' AS call_key
        FROM interrupt_events e
        WHERE (e.xid, e.id) > (holdpoint_xid(p_xid), p_id)
          AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY e.xid, e.id
        LIMIT p_limit
    ) e
    LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
    LEFT JOIN snapshots s ON e.interrupt_id IS NULL AND s.tenant_id = e.tenant_id AND s.id = e.snapshot_key
    LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
        AND c.turn_id = e.snapshot_key AND c.call_key = e.call_key
    ORDER BY e.xid, e.id;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION holdpoint_tenant_events_after(p_tenant text, p_xid bigint, p_id bigint, p_limit integer) RETURNS SETOF event_log
LANGUAGE sql STABLE AS $$
    SELECT e.tenant_id, e.id, e.xid::text::bigint, holdpoint_event_name(e.type), e.interrupt_id, e.actor, e.created_at,
           coalesce(i.agent, s.agent, ''), coalesce(i.tool, c.tool, ''),
           coalesce(i.session_id, s.session_id, ''), coalesce(i.snapshot_id, s.id, ''), e.xid
    FROM (
        SELECT e.tenant_id, e.id, e.xid, e.type, e.interrupt_id, e.actor, e.created_at,
               e.payload ->> 'snapshotId' AS snapshot_key, e.payload ->> 'callKey' AS call_key
        FROM interrupt_events e
        WHERE e.tenant_id = p_tenant
          AND (e.xid, e.id) > (holdpoint_xid(p_xid), p_id)
          AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY e.xid, e.id
        LIMIT p_limit
    ) e
    LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
    LEFT JOIN snapshots s ON e.interrupt_id IS NULL AND s.tenant_id = e.tenant_id AND s.id = e.snapshot_key
    LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
        AND c.turn_id = e.snapshot_key AND c.call_key = e.call_key
    ORDER BY e.xid, e.id;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_tenant_events_after(text, bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_tenant_events_after(text, bigint, bigint, integer) TO holdpoint_app;

-- An endpoint's next events: at most p_limit of the caller's tenant after
-- the position, up to the horizon, of the types it subscribes to, in log
-- order, with what each attempt sends (the columns of
-- webhook_event_context); when fewer than p_limit, then a last row with an
-- empty type at the tenant's last event up to the horizon: the endpoint
-- has read up to there (the events in between are not its types). The scan walks the key in
-- order and stops at p_limit (its plan is kept per connection, as a
-- generic plan: a scan that read and sorted every event after the
-- position would read the whole backlog when the receiver has fallen
-- behind). The keys of the turn and the tool call are taken out
-- of the payload before the joins: under row-level security a join
-- condition with a function that is not leakproof (->>) cannot be an
-- index condition, and the join would read all of the tenant's snapshots
-- for each event.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_webhook_cursor_events(p_tenant text, p_after_xid bigint, p_after_id bigint, p_types text[],
                                                p_limit integer)
RETURNS SETOF webhook_event_context
LANGUAGE plpgsql STABLE AS $$
DECLARE
    horizon xid8 := pg_snapshot_xmin(pg_current_snapshot());
    n integer;
    m webhook_event_context;
BEGIN
    RETURN QUERY
        SELECT e.tenant_id, e.id, e.xid::text::bigint, e.type, e.created_at, e.actor, e.interrupt_id,
               i.agent, i.tool, i.input, i.expires_at, i.session_id, i.snapshot_id, i.status,
               i.resolution, i.resolved_by, i.resolved_at, i.created_at,
               CASE WHEN e.interrupt_id IS NOT NULL THEN (
                   SELECT count(*) FROM interrupt_events s
                   WHERE s.tenant_id = e.tenant_id AND s.interrupt_id = e.interrupt_id AND s.id <= e.id)
               ELSE 0 END::integer,
               sn.id, sn.session_id, sn.agent, sn.finish_reason, sn.error,
               c.call_key, c.tool, c.status, c.ref, c.session_id, c.http_status,
               e.xid
        FROM (
            SELECT e.tenant_id, e.id, e.xid, e.type, e.created_at, e.actor, e.interrupt_id,
                   e.payload ->> 'snapshotId' AS snapshot_key, e.payload ->> 'callKey' AS call_key
            FROM interrupt_events e
            WHERE e.tenant_id = p_tenant
              AND (e.xid, e.id) > (holdpoint_xid(p_after_xid), p_after_id)
              AND e.xid < horizon
              AND holdpoint_event_name(e.type) = ANY (p_types)
            ORDER BY e.xid, e.id
            LIMIT p_limit
        ) e
        LEFT JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
        LEFT JOIN snapshots sn ON e.interrupt_id IS NULL AND sn.tenant_id = e.tenant_id AND sn.id = e.snapshot_key
        LEFT JOIN tool_calls c ON e.type = 'tool.called' AND c.tenant_id = e.tenant_id
            AND c.turn_id = e.snapshot_key AND c.call_key = e.call_key
        ORDER BY e.xid, e.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < p_limit THEN
        -- Every event up to the horizon was looked at: the endpoint has
        -- read up to the last one, which a row with an empty type marks
        -- (when it is not the last row returned already).
        SELECT e.tenant_id, e.id, e.xid::text::bigint, e.created_at, e.xid
        INTO m.tenant_id, m.event_id, m.event_xid, m.occurred_at, m.event_xid8
        FROM interrupt_events e
        WHERE e.tenant_id = p_tenant AND (e.xid, e.id) > (holdpoint_xid(p_after_xid), p_after_id) AND e.xid < horizon
        ORDER BY e.xid DESC, e.id DESC
        LIMIT 1;
        IF FOUND THEN
            m.event_type := '';
            m.actor := '';
            m.sequence := 0;
            RETURN NEXT m;
        END IF;
    END IF;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_webhook_cursor_events(text, bigint, bigint, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_webhook_cursor_events(text, bigint, bigint, text[], integer) TO holdpoint_app;

-- A leased endpoint as its reader needs it.
CREATE VIEW webhook_cursor_lease WITH (security_invoker = true) AS
SELECT c.tenant_id, c.webhook_id, w.url, w.event_types, c.xid::text::bigint AS xid, c.id
FROM webhook_cursors c
JOIN webhooks w ON w.tenant_id = c.tenant_id AND w.id = c.webhook_id;
GRANT SELECT ON webhook_cursor_lease TO holdpoint_app;

-- The dispatcher's lease: enabled endpoints of every tenant with events
-- after their position, up to the horizon, whose lease is free, ran out,
-- or is p_owner's already, and which p_owner is not reading now (p_held):
-- at most p_limit, leased to p_owner for p_lease_seconds. SKIP LOCKED lets
-- every instance lease at once without two taking the same endpoint.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_lease_webhook_cursors(p_owner text, p_lease_seconds float8, p_limit integer, p_held uuid[])
RETURNS SETOF webhook_cursor_lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    RETURN QUERY
    WITH leased AS (
        UPDATE webhook_cursors c
        SET lease_owner = p_owner, lease_until = now() + make_interval(secs => p_lease_seconds)
        FROM (
            SELECT c2.tenant_id, c2.webhook_id FROM webhook_cursors c2
            JOIN webhooks w ON w.tenant_id = c2.tenant_id AND w.id = c2.webhook_id
            WHERE w.enabled
              AND (c2.lease_until IS NULL OR c2.lease_until < now() OR c2.lease_owner = p_owner)
              AND c2.webhook_id <> ALL (p_held)
              AND EXISTS (SELECT 1 FROM interrupt_events e
                          WHERE e.tenant_id = c2.tenant_id AND (e.xid, e.id) > (c2.xid, c2.id)
                            AND e.xid < pg_snapshot_xmin(pg_current_snapshot()))
            LIMIT p_limit
            FOR UPDATE OF c2 SKIP LOCKED
        ) x
        WHERE c.tenant_id = x.tenant_id AND c.webhook_id = x.webhook_id
        RETURNING c.tenant_id, c.webhook_id, c.xid, c.id
    )
    SELECT l.tenant_id, l.webhook_id, w.url, w.event_types, l.xid::text::bigint, l.id
    FROM leased l
    JOIN webhooks w ON w.tenant_id = l.tenant_id AND w.id = l.webhook_id;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_lease_webhook_cursors(text, float8, integer, uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_lease_webhook_cursors(text, float8, integer, uuid[]) TO holdpoint_app;

-- An event still has a delivery to make when a delivery row of it is
-- pending, or an enabled endpoint subscribed to its type has not read up
-- to it yet. Pruning keeps such an event (and its session).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_event_pending(p_tenant text, p_xid xid8, p_id bigint, p_type text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM webhook_deliveries d
                   WHERE d.tenant_id = p_tenant AND d.event_xid = p_xid AND d.event_id = p_id
                     AND d.status = 'pending')
        OR EXISTS (SELECT 1 FROM webhook_cursors c
                   JOIN webhooks w ON w.tenant_id = c.tenant_id AND w.id = c.webhook_id
                   WHERE c.tenant_id = p_tenant AND w.enabled AND (c.xid, c.id) < (p_xid, p_id)
                     AND holdpoint_event_name(p_type) = ANY (w.event_types));
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_event_pending(p_tenant text, p_xid xid8, p_id bigint, p_type text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM webhook_deliveries d
                   WHERE d.tenant_id = p_tenant AND d.event_xid = p_xid AND d.event_id = p_id
                     AND d.status = 'pending');
$$;
-- +goose StatementEnd
DROP FUNCTION holdpoint_lease_webhook_cursors(text, float8, integer, uuid[]);
DROP FUNCTION holdpoint_webhook_cursor_events(text, bigint, bigint, text[], integer);
DROP FUNCTION holdpoint_tenant_events_after(text, bigint, bigint, integer);
DROP FUNCTION holdpoint_events_after(bigint, bigint, integer);
DROP VIEW event_log;
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
GRANT SELECT ON event_log TO holdpoint_app;
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
REVOKE ALL ON FUNCTION holdpoint_events_after(bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_events_after(bigint, bigint, integer) TO holdpoint_app;
DROP VIEW webhook_cursor_lease;
DROP VIEW webhook_event_context;
REVOKE INSERT ON webhook_deliveries FROM holdpoint_app;
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
DROP TRIGGER webhooks_cursor_start ON webhooks;
DROP FUNCTION webhooks_cursor_start();
DROP TABLE webhook_cursors;
