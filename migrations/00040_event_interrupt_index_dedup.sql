-- +goose NO TRANSACTION
-- +goose Up

-- An interrupt's audit events (created, resolved: two a cycle, more with
-- claims, releases and votes) are read by (tenant_id, interrupt_id), a
-- handful at a time, sorted by id. The index held id as well, which made
-- every entry unique; without it the entries of one interrupt have equal
-- keys, and B-tree deduplication keeps them as one key with a list of row
-- pointers (6 bytes each instead of a 40-byte entry). Sorting an
-- interrupt's few events by id costs nothing.
CREATE INDEX CONCURRENTLY interrupt_events_interrupt_idx_new ON interrupt_events (tenant_id, interrupt_id)
    WHERE interrupt_id IS NOT NULL;
DROP INDEX CONCURRENTLY interrupt_events_interrupt_idx;
ALTER INDEX interrupt_events_interrupt_idx_new RENAME TO interrupt_events_interrupt_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY interrupt_events_interrupt_idx_old ON interrupt_events (tenant_id, interrupt_id, id)
    WHERE interrupt_id IS NOT NULL;
DROP INDEX CONCURRENTLY interrupt_events_interrupt_idx;
ALTER INDEX interrupt_events_interrupt_idx_old RENAME TO interrupt_events_interrupt_idx;
