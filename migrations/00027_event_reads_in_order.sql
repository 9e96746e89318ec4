-- +goose Up

-- The readers of the event log take a batch in the order of its key and
-- stop when the batch is full. On a table the planner has no statistics
-- for (autovacuum off, or soon after a bulk load) it guessed a few rows
-- past any position, and planned the webhook cursor's read as a bitmap
-- scan of every event after the position, sorted for the first 16: an
-- endpoint catching up on a backlog of n events read all n for each
-- batch. With sorting off, reading the key in order is the plan whatever
-- the statistics say; none of these functions needs a sort otherwise.
ALTER FUNCTION holdpoint_webhook_cursor_events(text, bigint, bigint, text[], integer) SET enable_sort = off;
ALTER FUNCTION holdpoint_tenant_events_after(text, bigint, bigint, integer) SET enable_sort = off;
ALTER FUNCTION holdpoint_events_after(bigint, bigint, integer) SET enable_sort = off;

-- +goose Down
ALTER FUNCTION holdpoint_events_after(bigint, bigint, integer) RESET enable_sort;
ALTER FUNCTION holdpoint_tenant_events_after(text, bigint, bigint, integer) RESET enable_sort;
ALTER FUNCTION holdpoint_webhook_cursor_events(text, bigint, bigint, text[], integer) RESET enable_sort;
