-- +goose Up

-- Durable streams: the frames of a streaming turn (POST {base}/:agent with
-- Accept: text/event-stream), kept so a client that lost the connection
-- can rejoin the stream on any instance (x-genkit-stream-id, or
-- Last-Event-ID) and read it from the start or from where it left off.
-- One row per stream, one per frame; the last frame (terminal) is the
-- result or the error. Streams are deleted, with their frames, a
-- retention after they end (holdpoint_prune_streams).
CREATE TABLE turn_streams (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    -- Who may rejoin: the same end user of the same tenant.
    end_user   text NOT NULL DEFAULT '',
    agent      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    ended_at   timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX turn_streams_ended_idx ON turn_streams (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX turn_streams_open_idx ON turn_streams (created_at) WHERE ended_at IS NULL;

CREATE TABLE turn_stream_frames (
    tenant_id text NOT NULL,
    stream_id uuid NOT NULL,
    seq       integer NOT NULL CHECK (seq > 0),
    -- The frame's JSON, exactly as sent: {"message": ...}, {"result": ...}
    -- or {"error": ...}.
    frame     text NOT NULL,
    terminal  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, stream_id, seq),
    FOREIGN KEY (tenant_id, stream_id) REFERENCES turn_streams (tenant_id, id) ON DELETE CASCADE
);

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['turn_streams', 'turn_stream_frames'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
GRANT SELECT, INSERT, UPDATE, DELETE ON turn_streams, turn_stream_frames TO holdpoint_app;

-- Deletes, across tenants, at most p_limit streams that ended longer
-- than p_ended_seconds ago, or that never ended (their instance died)
-- and began longer than p_open_seconds ago; their frames go with them.
-- A system function, like the other pruners.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_prune_streams(p_ended_seconds float8, p_open_seconds float8, p_limit integer)
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH doomed AS (
        (SELECT tenant_id, id FROM turn_streams
         WHERE ended_at IS NOT NULL AND ended_at < now() - make_interval(secs => p_ended_seconds)
         LIMIT p_limit)
        UNION ALL
        (SELECT tenant_id, id FROM turn_streams
         WHERE ended_at IS NULL AND created_at < now() - make_interval(secs => p_open_seconds)
         LIMIT p_limit)
    ), gone AS (
        DELETE FROM turn_streams s USING doomed d
        WHERE s.tenant_id = d.tenant_id AND s.id = d.id
        RETURNING 1
    )
    SELECT count(*) FROM gone;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_prune_streams(float8, float8, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_prune_streams(float8, float8, integer) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_prune_streams(float8, float8, integer);
DROP TABLE turn_stream_frames;
DROP TABLE turn_streams;
