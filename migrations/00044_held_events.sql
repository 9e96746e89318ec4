-- +goose Up

-- The events written but not yet sent: past the horizon (00043), held back
-- by a transaction of this database, older than them, still open. A few,
-- for a few milliseconds, is the normal state of a busy server; an oldest
-- one minutes old means a transaction has been open that long and every
-- event stream and webhook waits for it (the metrics endpoint reports
-- both). The position index finds them: they are the log's last
-- positions. A system function (holdpoint_system).
-- +goose StatementBegin
CREATE FUNCTION holdpoint_held_events() RETURNS TABLE (held bigint, oldest timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT count(*), min(e.created_at)
    FROM interrupt_events e
    WHERE e.xid >= (SELECT holdpoint_horizon());
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_held_events() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_held_events() TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_held_events();
