-- +goose Up

-- A turn's messages in its snapshot's row. A snapshot stores the messages
-- its turn wrote (appended, or rewrote: a resume rewrites the interrupted
-- model message) and the message at a position is the one written by the
-- nearest snapshot on the ancestor chain, as before; but they were one row
-- per message, each with its own tuple header, its copy of the key (the
-- tenant, the 36-character snapshot id, the position) and its primary key
-- entry: an approval cycle wrote 5 message rows, 1.9 KB with the index,
-- of which 0.9 KB was the messages themselves. Now a snapshot row holds
-- them as one JSON array (messages) of the positions messages_from,
-- messages_from + 1, ...; an element is null where the snapshot left the
-- position to its ancestors (a client's history replaced wholesale can
-- change positions that are not adjacent). A snapshot that wrote none has
-- both columns null.
ALTER TABLE snapshots
    ADD COLUMN messages_from integer CHECK (messages_from >= 0),
    ADD COLUMN messages jsonb CHECK (jsonb_typeof(messages) = 'array'),
    ADD CONSTRAINT snapshots_messages_pair CHECK ((messages_from IS NULL) = (messages IS NULL));

UPDATE snapshots s SET messages_from = m.lo, messages = m.bodies
FROM (
    SELECT m.tenant_id, m.snapshot_id, min(m.position) AS lo,
           (SELECT jsonb_agg(x.body ORDER BY g.p)
            FROM generate_series(min(m.position), max(m.position)) AS g (p)
            LEFT JOIN messages x ON x.tenant_id = m.tenant_id AND x.snapshot_id = m.snapshot_id AND x.position = g.p) AS bodies
    FROM messages m
    GROUP BY m.tenant_id, m.snapshot_id
) m
WHERE s.tenant_id = m.tenant_id AND s.id = m.snapshot_id;

DROP TABLE messages;

-- The messages as rows, for SQL: the same columns the table had (its
-- created_at is the snapshot's). With security_invoker the snapshots'
-- tenant policy applies to whoever reads it.
CREATE VIEW messages WITH (security_invoker = true) AS
SELECT s.tenant_id, s.id AS snapshot_id, s.messages_from + (e.n - 1)::integer AS position,
       (e.body ->> 'role')::text AS role, e.body::jsonb AS body, s.created_at
FROM snapshots s
CROSS JOIN LATERAL jsonb_array_elements(s.messages) WITH ORDINALITY AS e (body, n)
WHERE s.messages IS NOT NULL AND jsonb_typeof(e.body) = 'object';
GRANT SELECT ON messages TO holdpoint_app;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_prune_sessions(p_tenant text, p_completed bigint, p_failed bigint, p_events bigint,
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
    -- A snapshot's messages go with its row.
    SELECT count(*) INTO n_messages FROM messages WHERE tenant_id = p_tenant AND snapshot_id = ANY (snaps);
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

-- +goose Down
DROP VIEW messages;
CREATE TABLE messages (
    tenant_id   text NOT NULL,
    snapshot_id text NOT NULL,
    position    integer NOT NULL CHECK (position >= 0),
    role        text NOT NULL,
    body        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, snapshot_id, position),
    FOREIGN KEY (tenant_id, snapshot_id) REFERENCES snapshots (tenant_id, id)
);
INSERT INTO messages (tenant_id, snapshot_id, position, role, body, created_at)
SELECT s.tenant_id, s.id, s.messages_from + (e.n - 1)::integer, e.body ->> 'role', e.body, s.created_at
FROM snapshots s
CROSS JOIN LATERAL jsonb_array_elements(s.messages) WITH ORDINALITY AS e (body, n)
WHERE s.messages IS NOT NULL AND jsonb_typeof(e.body) = 'object';
GRANT SELECT, INSERT, UPDATE, DELETE ON messages TO holdpoint_app;
ALTER TABLE messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE messages FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON messages
    USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor());
ALTER TABLE snapshots DROP CONSTRAINT snapshots_messages_pair, DROP COLUMN messages, DROP COLUMN messages_from;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_prune_sessions(p_tenant text, p_completed bigint, p_failed bigint, p_events bigint,
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
