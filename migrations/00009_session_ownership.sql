-- +goose Up

-- A session belongs to the end user who created it (NULL: the tenant's
-- own) and to one agent. A turn's write must never land in a session of
-- another owner or agent, even when two callers race to create the same
-- client-chosen id: WriteTurn's upsert updates only a session with the
-- same owner and agent, and calls this function otherwise. Raising (rather
-- than skipping the update) rolls back the whole write, snapshot, messages
-- and interrupts included. The store maps SQLSTATE HP404 to "not found":
-- another user's session looks like a missing one.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_session_taken() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'session belongs to another end user or agent' USING ERRCODE = 'HP404';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION holdpoint_session_taken();
