-- +goose Up

-- A turn that continues a session from the head this instance cached when
-- it last wrote the session (not read back) names that head in its write
-- (WriteTurn's expected_head): the session moves only while its latest
-- snapshot is still the one named. When another writer moved it since (a
-- turn on another instance, a detached turn, retention), the statement
-- calls this function: raising rolls the whole turn back, and the runtime
-- runs the turn again from the session's head as read from the table.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_session_moved() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'the session moved since its head was cached' USING ERRCODE = 'HP428';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION holdpoint_session_moved();
