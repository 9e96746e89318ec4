-- +goose Up

-- Retention: how long a tenant keeps its finished sessions and its event
-- log. Every age is in seconds; NULL keeps forever, and a tenant without a
-- row keeps everything (unless the operator gives prune or serve a
-- default for tenants that set nothing).
--
-- What a session is, for retention, is read from the data:
--   completed: its latest snapshot (sessions.latest_snapshot_id) has status
--              'completed' (finish reason stop, interrupted, ...);
--   failed:    anything else: its latest snapshot is 'failed' or
--              'aborted', or 'pending' with no job left to finish it (the
--              process running the detached turn died), or it has no
--              snapshot at all (its first turn never got written).
-- Its last activity is the latest of the session's, its snapshots' and its
-- interrupts' timestamps (a turn written, an abort, an interrupt created or
-- decided). A session is removed, with its snapshots, messages,
-- interrupts, tool calls, events and their webhook deliveries, only when
--   * the age of its kind is set and its last activity is older than it,
--   * and, if the tenant sets an event retention, older than that too
--     (the event log is kept that long, and a session goes with it),
--   * no interrupt of it is pending,
--   * no turn job of it exists (a detached turn queued or running),
--   * no event of its interrupts (the audit trail of its decisions) is
--     younger than the event retention,
--   * no event of its interrupts has a webhook delivery still pending.
-- The last four are checked again, under a lock on the session's row,
-- in the transaction that deletes it, so a turn that lands meanwhile keeps
-- the session.
CREATE TABLE retention_policies (
    tenant_id         text PRIMARY KEY REFERENCES tenants (id),
    completed_seconds bigint CHECK (completed_seconds > 0),
    failed_seconds    bigint CHECK (failed_seconds > 0),
    events_seconds    bigint CHECK (events_seconds > 0),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE retention_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE retention_policies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON retention_policies
    USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor());
GRANT SELECT, INSERT, UPDATE, DELETE ON retention_policies TO holdpoint_app;

-- Pruning removes an event's deliveries with it, and keeps an event
-- whose delivery is still pending: both look deliveries up by event.
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (tenant_id, event_xid, event_id);

-- Whether an event still has a delivery to make: a pending (or retrying)
-- delivery row. Pruning keeps such an event, and its session.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_event_pending(p_tenant text, p_xid xid8, p_id bigint, p_type text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM webhook_deliveries d
                   WHERE d.tenant_id = p_tenant AND d.event_xid = p_xid AND d.event_id = p_id
                     AND d.status = 'pending');
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_event_pending(text, xid8, bigint, text) FROM PUBLIC;

-- Whether one session may be removed under the given ages (seconds, NULL:
-- keep forever): the rules above. Called by the functions below only.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_session_prunable(p_tenant text, p_session text, p_completed bigint, p_failed bigint, p_events bigint)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT coalesce((
        SELECT a.age IS NOT NULL
               AND a.last_at < now() - make_interval(secs => a.age)
               AND (p_events IS NULL OR a.last_at < now() - make_interval(secs => p_events))
               AND NOT a.busy
               AND NOT EXISTS (
                   SELECT 1 FROM snapshots sn
                   JOIN interrupts i ON i.tenant_id = sn.tenant_id AND i.snapshot_id = sn.id
                   JOIN interrupt_events e ON e.tenant_id = i.tenant_id AND e.interrupt_id = i.id
                   WHERE sn.tenant_id = s.tenant_id AND sn.session_id = s.id
                     AND ((p_events IS NOT NULL AND e.created_at >= now() - make_interval(secs => p_events))
                          OR holdpoint_event_pending(e.tenant_id, e.xid, e.id, e.type)))
        FROM sessions s
        LEFT JOIN snapshots l ON l.tenant_id = s.tenant_id AND l.id = s.latest_snapshot_id
        CROSS JOIN LATERAL (
            SELECT CASE WHEN l.status = 'completed' THEN p_completed ELSE p_failed END AS age,
                   greatest(s.updated_at, max(sn.updated_at), max(i.created_at), max(i.resolved_at)) AS last_at,
                   coalesce(bool_or(i.status = 'pending' OR j.snapshot_id IS NOT NULL), false) AS busy
            FROM snapshots sn
            LEFT JOIN interrupts i ON i.tenant_id = sn.tenant_id AND i.snapshot_id = sn.id
            LEFT JOIN turn_jobs j ON j.tenant_id = sn.tenant_id AND j.snapshot_id = sn.id
            WHERE sn.tenant_id = s.tenant_id AND sn.session_id = s.id
        ) a
        WHERE s.tenant_id = p_tenant AND s.id = p_session
    ), false);
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_session_prunable(text, text, bigint, bigint, bigint) FROM PUBLIC;

-- One batch of a tenant's prune: the next p_batch sessions after p_after
-- (in id order) whose row is old enough are locked (SKIP LOCKED: a session
-- a turn is writing is left for the next run), checked again with every
-- rule, and removed with everything that belongs to them, children first.
-- A turn that committed before the lock moved the session's updated_at,
-- which the lock re-reads; one that comes after waits for this
-- transaction. Runs as the tables' owner (the application role may not
-- delete from the audit trail or the tool call record), only ever on
-- p_tenant's rows. Returns the rows deleted per table, the last session
-- id looked at (the next batch starts after it) and whether the scan is
-- done.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_prune_sessions(p_tenant text, p_completed bigint, p_failed bigint, p_events bigint,
                                         p_after text, p_batch integer)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    youngest interval := make_interval(secs => least(p_completed, p_failed));
    scanned text[];
    ids text[];
    snaps text[];
    irqs uuid[];
    n_deliveries bigint;
    n_events bigint;
    n_tool_calls bigint;
    n_messages bigint;
    n_interrupts bigint;
    n_snapshots bigint;
    n_sessions bigint;
BEGIN
    IF least(p_completed, p_failed) IS NULL OR p_batch < 1 THEN
        RETURN jsonb_build_object('last', p_after, 'done', true);
    END IF;
    SELECT array_agg(c.id ORDER BY c.id) INTO scanned FROM (
        SELECT s.id FROM sessions s
        WHERE s.tenant_id = p_tenant AND s.id > p_after AND s.updated_at < now() - youngest
        ORDER BY s.id
        LIMIT p_batch
    ) c;
    IF scanned IS NULL THEN
        RETURN jsonb_build_object('last', p_after, 'done', true);
    END IF;
    SELECT array_agg(c.id) INTO ids FROM (
        SELECT s.id FROM sessions s
        WHERE s.tenant_id = p_tenant AND s.id = ANY (scanned) AND s.updated_at < now() - youngest
        FOR UPDATE SKIP LOCKED
    ) c;
    -- A new statement: it sees whatever committed before the locks.
    SELECT array_agg(x) INTO ids FROM unnest(ids) AS x
    WHERE holdpoint_session_prunable(p_tenant, x, p_completed, p_failed, p_events);
    SELECT array_agg(sn.id) INTO snaps FROM snapshots sn
    WHERE sn.tenant_id = p_tenant AND sn.session_id = ANY (ids);
    SELECT array_agg(i.id) INTO irqs FROM interrupts i
    WHERE i.tenant_id = p_tenant AND i.snapshot_id = ANY (snaps);

    DELETE FROM webhook_deliveries d USING interrupt_events e
    WHERE e.tenant_id = p_tenant AND e.interrupt_id = ANY (irqs)
      AND d.tenant_id = p_tenant AND d.event_xid = e.xid AND d.event_id = e.id;
    GET DIAGNOSTICS n_deliveries = ROW_COUNT;
    DELETE FROM interrupt_events WHERE tenant_id = p_tenant AND interrupt_id = ANY (irqs);
    GET DIAGNOSTICS n_events = ROW_COUNT;
    DELETE FROM tool_calls WHERE tenant_id = p_tenant AND session_id = ANY (ids);
    GET DIAGNOSTICS n_tool_calls = ROW_COUNT;
    DELETE FROM messages WHERE tenant_id = p_tenant AND snapshot_id = ANY (snaps);
    GET DIAGNOSTICS n_messages = ROW_COUNT;
    DELETE FROM interrupts WHERE tenant_id = p_tenant AND id = ANY (irqs);
    GET DIAGNOSTICS n_interrupts = ROW_COUNT;
    DELETE FROM snapshots WHERE tenant_id = p_tenant AND id = ANY (snaps);
    GET DIAGNOSTICS n_snapshots = ROW_COUNT;
    DELETE FROM sessions WHERE tenant_id = p_tenant AND id = ANY (ids);
    GET DIAGNOSTICS n_sessions = ROW_COUNT;

    RETURN jsonb_build_object(
        'sessions', n_sessions, 'snapshots', n_snapshots, 'messages', n_messages, 'interrupts', n_interrupts,
        'events', n_events, 'toolCalls', n_tool_calls, 'deliveries', n_deliveries,
        'last', scanned[array_upper(scanned, 1)], 'done', cardinality(scanned) < p_batch);
END;
$$;
-- +goose StatementEnd

-- Turn and tool events (turn.completed, turn.failed, tool.called) name
-- their snapshot in their payload rather than by a key. Once the
-- snapshot is gone (its session was removed; a client-managed agent's
-- turn never has one) such an event goes when it is older than p_cutoff
-- seconds, with its delivered or dead deliveries; one with a delivery
-- still pending stays until that ends. One batch scans the next p_batch
-- events of the tenant after the position (p_after_xid, p_after_id), in
-- log order, and returns what it deleted, the last position looked at,
-- and whether the scan is done.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_prune_events(p_tenant text, p_cutoff bigint, p_after_xid bigint, p_after_id bigint, p_batch integer)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    xids xid8[];
    ids bigint[];
    doomed boolean[];
    n integer;
    n_deliveries bigint;
    n_events bigint;
BEGIN
    IF p_cutoff IS NULL OR p_batch < 1 THEN
        RETURN jsonb_build_object('xid', p_after_xid, 'id', p_after_id, 'done', true);
    END IF;
    SELECT array_agg(c.xid ORDER BY c.xid, c.id), array_agg(c.id ORDER BY c.xid, c.id), array_agg(c.doomed ORDER BY c.xid, c.id)
    INTO xids, ids, doomed
    FROM (
        SELECT e.xid, e.id,
               e.interrupt_id IS NULL AND e.created_at < now() - make_interval(secs => p_cutoff)
               AND NOT EXISTS (SELECT 1 FROM snapshots sn WHERE sn.tenant_id = e.tenant_id AND sn.id = e.payload ->> 'snapshotId')
               AND NOT holdpoint_event_pending(e.tenant_id, e.xid, e.id, e.type) AS doomed
        FROM interrupt_events e
        WHERE e.tenant_id = p_tenant AND (e.xid, e.id) > (holdpoint_xid(p_after_xid), p_after_id)
        ORDER BY e.xid, e.id
        LIMIT p_batch
    ) c;
    n := coalesce(cardinality(ids), 0);
    IF n = 0 THEN
        RETURN jsonb_build_object('xid', p_after_xid, 'id', p_after_id, 'done', true);
    END IF;
    DELETE FROM webhook_deliveries d USING unnest(xids, ids, doomed) AS x (xid, id, doomed)
    WHERE x.doomed AND d.tenant_id = p_tenant AND d.event_xid = x.xid AND d.event_id = x.id;
    GET DIAGNOSTICS n_deliveries = ROW_COUNT;
    DELETE FROM interrupt_events e USING unnest(xids, ids, doomed) AS x (xid, id, doomed)
    WHERE x.doomed AND e.tenant_id = p_tenant AND e.xid = x.xid AND e.id = x.id;
    GET DIAGNOSTICS n_events = ROW_COUNT;
    RETURN jsonb_build_object('events', n_events, 'deliveries', n_deliveries,
                              'xid', xids[n]::text::bigint, 'id', ids[n], 'done', n < p_batch);
END;
$$;
-- +goose StatementEnd

-- What a prune with these ages would delete now, per table, without
-- deleting anything (platform prune --dry-run): the sessions of
-- holdpoint_session_prunable with their rows, and the turn and tool
-- events holdpoint_prune_events would take once those sessions are gone.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_prune_preview(p_tenant text, p_completed bigint, p_failed bigint, p_events bigint)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH c AS (
        SELECT s.id FROM sessions s
        WHERE s.tenant_id = p_tenant AND least(p_completed, p_failed) IS NOT NULL
          AND s.updated_at < now() - make_interval(secs => least(p_completed, p_failed))
          AND holdpoint_session_prunable(p_tenant, s.id, p_completed, p_failed, p_events)
    ), sn AS (
        SELECT x.id FROM snapshots x WHERE x.tenant_id = p_tenant AND x.session_id IN (SELECT id FROM c)
    ), ir AS (
        SELECT x.id FROM interrupts x WHERE x.tenant_id = p_tenant AND x.snapshot_id IN (SELECT id FROM sn)
    ), ev AS (
        SELECT e.xid, e.id FROM interrupt_events e
        WHERE e.tenant_id = p_tenant AND e.interrupt_id IN (SELECT id FROM ir)
        UNION ALL
        SELECT e.xid, e.id FROM interrupt_events e
        WHERE e.tenant_id = p_tenant AND e.interrupt_id IS NULL
          AND e.created_at < now() - make_interval(secs => coalesce(p_events, least(p_completed, p_failed)))
          AND (e.payload ->> 'snapshotId' IN (SELECT id FROM sn)
               OR NOT EXISTS (SELECT 1 FROM snapshots x WHERE x.tenant_id = e.tenant_id AND x.id = e.payload ->> 'snapshotId'))
          AND NOT holdpoint_event_pending(e.tenant_id, e.xid, e.id, e.type)
    )
    SELECT jsonb_build_object(
        'sessions', (SELECT count(*) FROM c),
        'snapshots', (SELECT count(*) FROM sn),
        'messages', (SELECT count(*) FROM messages m WHERE m.tenant_id = p_tenant AND m.snapshot_id IN (SELECT id FROM sn)),
        'interrupts', (SELECT count(*) FROM ir),
        'events', (SELECT count(*) FROM ev),
        'toolCalls', (SELECT count(*) FROM tool_calls t WHERE t.tenant_id = p_tenant AND t.session_id IN (SELECT id FROM c)),
        'deliveries', (SELECT count(*) FROM webhook_deliveries d JOIN ev ON d.event_xid = ev.xid AND d.event_id = ev.id
                       WHERE d.tenant_id = p_tenant));
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['holdpoint_prune_sessions(text, bigint, bigint, bigint, text, integer)',
                             'holdpoint_prune_events(text, bigint, bigint, bigint, integer)',
                             'holdpoint_prune_preview(text, bigint, bigint, bigint)'] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO holdpoint_app', f);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION holdpoint_prune_preview(text, bigint, bigint, bigint);
DROP FUNCTION holdpoint_prune_events(text, bigint, bigint, bigint, integer);
DROP FUNCTION holdpoint_prune_sessions(text, bigint, bigint, bigint, text, integer);
DROP FUNCTION holdpoint_session_prunable(text, text, bigint, bigint, bigint);
DROP FUNCTION holdpoint_event_pending(text, xid8, bigint, text);
DROP INDEX webhook_deliveries_event_idx;
DROP TABLE retention_policies;
