-- +goose Up

-- NOTIFY inside a writing transaction serializes the commits of every such
-- transaction (PostgreSQL takes one lock for the notification queue until
-- commit), which capped the approval cycle at a few dozen per second. The
-- events are now found by reading interrupt_events; instances only send a
-- small NOTIFY, outside the writing transaction, to wake each other up.
DROP TRIGGER interrupt_events_notify ON interrupt_events;
DROP FUNCTION interrupt_events_notify();

-- The live-event reader scans recent events of every tenant (a system
-- query), by time.
CREATE INDEX interrupt_events_recent_idx ON interrupt_events (created_at);

-- +goose Down
DROP INDEX interrupt_events_recent_idx;
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
