-- +goose Up

-- A detached turn's end is the same statement as any turn's end
-- (WriteTurn), which rewrites the pending snapshot only while it is still
-- pending. When an abort got there first, the statement calls this
-- function: raising (rather than writing part of the turn) rolls the whole
-- statement back, and the store reports that nothing was written.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_snapshot_not_pending() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'snapshot is no longer pending' USING ERRCODE = 'HP409';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION holdpoint_snapshot_not_pending();
