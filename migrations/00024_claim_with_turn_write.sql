-- +goose Up

-- A synchronous resume that runs no tool claims its interrupts in the
-- same statement that writes the turn it produced (WriteTurn), rather than
-- in a transaction of its own before the turn runs. When an interrupt it
-- answers is no longer pending (another resume, an operator or a deadline
-- got there first), the statement calls this function: raising rolls the
-- whole turn back, and the store reports why the claim was refused.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_claim_refused() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'an interrupt the turn answers is no longer pending' USING ERRCODE = 'HP412';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION holdpoint_claim_refused();
