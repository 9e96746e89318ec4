-- +goose Up

-- A tool call of a detached turn is journaled before it runs (done =
-- false) and again with its result. A turn taken over after a crash reuses
-- a finished call's result and refuses to repeat one that started but never
-- finished: the call may have had its effect, and a tool call is never run
-- twice.
ALTER TABLE tool_results ADD COLUMN done boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE tool_results DROP COLUMN done;
