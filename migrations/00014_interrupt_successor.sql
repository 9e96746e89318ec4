-- +goose Up

-- A restarted tool may interrupt again: the turn pauses once more, on a new
-- interrupt in the new snapshot. previous_id links it to the interrupt the
-- restart resolved, so the inbox and analysts can follow the chain.
ALTER TABLE interrupts ADD COLUMN previous_id uuid;
ALTER TABLE interrupts ADD CONSTRAINT interrupts_previous_fk
    FOREIGN KEY (tenant_id, previous_id) REFERENCES interrupts (tenant_id, id);
CREATE INDEX interrupts_previous_idx ON interrupts (tenant_id, previous_id) WHERE previous_id IS NOT NULL;

-- +goose Down
DROP INDEX interrupts_previous_idx;
ALTER TABLE interrupts DROP CONSTRAINT interrupts_previous_fk;
ALTER TABLE interrupts DROP COLUMN previous_id;
