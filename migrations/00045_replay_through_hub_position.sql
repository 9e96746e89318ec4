-- +goose Up

-- A resumed event stream subscribes to its instance's live reader (the
-- hub), which hands it every event past the hub's position, then replays
-- from the log what the client missed up to that position. It replayed up
-- to the horizon (00043), taken again by the replay's own statement. The
-- horizon is not the same for every reader at every moment: it leaves out
-- transactions that pg_stat_activity shows running in another database,
-- and one that ends between the snapshot and that read is not left out.
-- So a replay could stop short of where the hub already was, and the
-- events between (read by the hub before the stream subscribed, so never
-- handed to it) reached the client neither way: it waited for them until
-- it reconnected. On a server shared with other databases (the test
-- suite's, each test with a database of its own) it happened now and then.
--
-- Every event at or before the hub's position is final (the hub read it
-- below a horizon), so the replay now reads up to that position whatever
-- the horizon says at the time, and beyond it up to the horizon as
-- before. The old function stays for instances of the previous version
-- during a rolling upgrade.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_tenant_events_through(p_tenant text, p_xid bigint, p_id bigint,
                                                p_through_xid bigint, p_through_id bigint, p_limit integer)
RETURNS SETOF event_log
LANGUAGE sql STABLE SET enable_sort = off AS $$
    SELECT e.tenant_id, e.id, e.xid::text::bigint, holdpoint_event_name(e.type), e.interrupt_id, e.actor, e.created_at,
           coalesce(i.agent, s.agent, ''), coalesce(i.tool, c.tool, ''),
           coalesce(i.session_id, s.session_id, ''), coalesce(i.snapshot_id, s.id, ''), e.xid
    FROM (
        SELECT e.tenant_id, e.id, e.xid, e.type, e.interrupt_id, e.actor, e.created_at,
               e.payload ->> 'snapshotId' AS snapshot_key, e.payload ->> 'callKey' AS call_key
        FROM interrupt_events e
        WHERE e.tenant_id = p_tenant
          AND (e.xid, e.id) > (holdpoint_xid(p_xid), p_id)
          AND ((e.xid, e.id) <= (holdpoint_xid(p_through_xid), p_through_id) OR e.xid < (SELECT holdpoint_horizon()))
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
REVOKE ALL ON FUNCTION holdpoint_tenant_events_through(text, bigint, bigint, bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_tenant_events_through(text, bigint, bigint, bigint, bigint, integer) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_tenant_events_through(text, bigint, bigint, bigint, bigint, integer);
