-- +goose Up

-- The readers of the event log (the live reader of every tenant's events,
-- a stream that resumes, an endpoint's next events) look up what each
-- event is about: its interrupt, its turn's snapshot, its tool call. They
-- join at most a batch of events, but the functions are planned with their
-- parameters unknown, and the planner, expecting thousands of events,
-- hashed the whole snapshots table for each batch: a 10-minute soak at 400
-- cycles/s went from 1.3 to 8 ms turn p50 as the live reader's batch grew
-- to 130-280 ms (EXPLAIN: Seq Scan on snapshots, 203,769 rows, per call).
-- Each lookup is now a LATERAL subquery with LIMIT 1, which the planner
-- cannot turn into a join of tables: one key lookup per event, whatever
-- the sizes. And the same estimate (a tenth of the events after the
-- position, for a batch of a hundred) made the scan of the log a parallel
-- one once the table grew: two workers started for every batch, some 4 ms
-- of a call that needs a fraction of one. The readers do not use parallel
-- workers.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_events_after(p_xid bigint, p_id bigint, p_limit integer) RETURNS SETOF event_log
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET max_parallel_workers_per_gather = 0 AS $$
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
    LEFT JOIN LATERAL (
        SELECT i.* FROM interrupts i
        WHERE e.interrupt_id IS NOT NULL AND i.tenant_id = e.tenant_id AND i.id = e.interrupt_id LIMIT 1
    ) i ON true
    LEFT JOIN LATERAL (
        SELECT s.* FROM snapshots s
        WHERE e.interrupt_id IS NULL AND s.tenant_id = e.tenant_id AND s.id = e.snapshot_key LIMIT 1
    ) s ON true
    LEFT JOIN LATERAL (
        SELECT c.* FROM tool_calls c
        WHERE e.type = 'tool.called' AND c.tenant_id = e.tenant_id
          AND c.turn_id = e.snapshot_key AND c.call_key = e.call_key LIMIT 1
    ) c ON true
    ORDER BY e.xid, e.id;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_tenant_events_after(p_tenant text, p_xid bigint, p_id bigint, p_limit integer) RETURNS SETOF event_log
LANGUAGE sql STABLE SET max_parallel_workers_per_gather = 0 AS $$
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
    LEFT JOIN LATERAL (
        SELECT i.* FROM interrupts i
        WHERE e.interrupt_id IS NOT NULL AND i.tenant_id = e.tenant_id AND i.id = e.interrupt_id LIMIT 1
    ) i ON true
    LEFT JOIN LATERAL (
        SELECT s.* FROM snapshots s
        WHERE e.interrupt_id IS NULL AND s.tenant_id = e.tenant_id AND s.id = e.snapshot_key LIMIT 1
    ) s ON true
    LEFT JOIN LATERAL (
        SELECT c.* FROM tool_calls c
        WHERE e.type = 'tool.called' AND c.tenant_id = e.tenant_id
          AND c.turn_id = e.snapshot_key AND c.call_key = e.call_key LIMIT 1
    ) c ON true
    ORDER BY e.xid, e.id;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_webhook_cursor_events(p_tenant text, p_after_xid bigint, p_after_id bigint, p_types text[],
                                                p_limit integer)
RETURNS SETOF webhook_event_context
LANGUAGE plpgsql STABLE SET max_parallel_workers_per_gather = 0 AS $$
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
        LEFT JOIN LATERAL (
            SELECT i.* FROM interrupts i
            WHERE e.interrupt_id IS NOT NULL AND i.tenant_id = e.tenant_id AND i.id = e.interrupt_id LIMIT 1
        ) i ON true
        LEFT JOIN LATERAL (
            SELECT sn.* FROM snapshots sn
            WHERE e.interrupt_id IS NULL AND sn.tenant_id = e.tenant_id AND sn.id = e.snapshot_key LIMIT 1
        ) sn ON true
        LEFT JOIN LATERAL (
            SELECT c.* FROM tool_calls c
            WHERE e.type = 'tool.called' AND c.tenant_id = e.tenant_id
              AND c.turn_id = e.snapshot_key AND c.call_key = e.call_key LIMIT 1
        ) c ON true
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

-- +goose Down
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
CREATE OR REPLACE FUNCTION holdpoint_tenant_events_after(p_tenant text, p_xid bigint, p_id bigint, p_limit integer) RETURNS SETOF event_log
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_webhook_cursor_events(p_tenant text, p_after_xid bigint, p_after_id bigint, p_types text[],
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
