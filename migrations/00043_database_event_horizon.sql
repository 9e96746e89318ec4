-- +goose Up

-- The event log's readers (the live streams, the replays, the webhook
-- dispatcher) take only events whose transaction is older than every
-- transaction that may still commit one: the horizon (see 00019). It was
-- pg_snapshot_xmin, the oldest transaction still running anywhere on the
-- PostgreSQL server, so a transaction left open in another database of
-- the same server (a batch job, a migration, a stuck client) held every
-- stream and webhook of this one back for as long as it ran.
--
-- A transaction can only write to the database it is connected to. The
-- horizon is now the oldest transaction still running that is not known
-- to belong to another database: of the snapshot's running transactions
-- (pg_snapshot_xip), those that pg_stat_activity shows in another database
-- are left out; with none left, the snapshot's xmax. The reader's own
-- transaction, when it has an id, counts as running, as before.
--
-- Why leaving those out is safe: a transaction in the snapshot's list was
-- running, in its backend, before the snapshot was taken, so when
-- pg_stat_activity (read after it) shows that transaction id it shows it
-- with its own backend's database. Every PostgreSQL role can read the
-- database and transaction id columns of pg_stat_activity. A transaction
-- it does not show (a prepared one, one that ended since) is not left out.
--
-- PL/pgSQL, so its query is planned once per connection. It reads
-- pg_stat_activity (some 100 µs) only when a transaction is running; the
-- event readers call it at most once per statement, and the live reader
-- at most once per wake-up (50 a second).
-- +goose StatementBegin
CREATE FUNCTION holdpoint_horizon() RETURNS xid8
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    snap pg_snapshot := pg_current_snapshot();
    h xid8 := least(pg_snapshot_xmax(snap), pg_current_xact_id_if_assigned());
BEGIN
    IF pg_snapshot_xmin(snap) < h THEN
        SELECT least(h, min(x)) INTO h
        FROM pg_snapshot_xip(snap) x
        WHERE x::text::bigint % 4294967296 NOT IN (
            SELECT a.backend_xid::text::bigint
            FROM pg_stat_get_activity(NULL) a
            WHERE a.backend_xid IS NOT NULL AND a.datid IS NOT NULL
              AND a.datid <> (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()));
    END IF;
    RETURN h;
END;
$$;
-- +goose StatementEnd

-- Every reader of the log, and the trigger that starts a webhook endpoint
-- at the horizon, use it. (SELECT holdpoint_horizon()) is computed once per
-- statement, not once per row.
-- +goose StatementBegin
DO $$
DECLARE
    fn regprocedure;
    def text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'holdpoint_events_after(bigint, bigint, integer)',
        'holdpoint_tenant_events_after(text, bigint, bigint, integer)',
        'holdpoint_lease_webhook_cursors(text, double precision, integer, uuid[])',
        'holdpoint_webhook_cursor_events(text, bigint, bigint, text[], integer)',
        'webhooks_cursor_start()',
        'holdpoint_event_horizon()']::regprocedure[]
    LOOP
        def := pg_get_functiondef(fn);
        IF strpos(def, 'pg_snapshot_xmin(pg_current_snapshot())') = 0 THEN
            RAISE EXCEPTION '% does not read pg_snapshot_xmin', fn;
        END IF;
        EXECUTE replace(def, 'pg_snapshot_xmin(pg_current_snapshot())', '(SELECT holdpoint_horizon())');
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
               WHERE n.nspname = 'public' AND p.prosrc LIKE '%pg_snapshot_xmin%'
                 AND p.proname <> 'holdpoint_horizon') THEN
        RAISE EXCEPTION 'a function still reads pg_snapshot_xmin';
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'public' AND p.prosrc LIKE '%(SELECT holdpoint_horizon())%'
    LOOP
        EXECUTE replace(pg_get_functiondef(fn), '(SELECT holdpoint_horizon())', 'pg_snapshot_xmin(pg_current_snapshot())');
    END LOOP;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION holdpoint_horizon();
