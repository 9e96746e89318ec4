-- name: InsertInterrupts :exec
INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, input, metadata)
SELECT @tenant_id, unnest(@ids::uuid[]), @session_id, @snapshot_id, @agent,
       unnest(@tools::text[]), unnest(@refs::text[]), unnest(@inputs::jsonb[]), unnest(@metadatas::jsonb[]);

-- name: ListInterruptsBySnapshotForUpdate :many
-- Locks every interrupt of the paused snapshot, in id order, so concurrent
-- resumes of the same snapshot serialize here and only one can claim.
SELECT * FROM interrupts
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id
ORDER BY id
FOR UPDATE;

-- name: ClaimInterrupt :execrows
-- The conditional update is the claim: only a pending interrupt moves.
UPDATE interrupts
SET status = 'resolved', resolution = @resolution, resolved_by = @resolved_by, resolved_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending';

-- name: ReleaseInterrupt :exec
-- A resume turn that failed before it changed anything gives its claim back.
UPDATE interrupts
SET status = 'pending', resolution = NULL, resolved_by = NULL, resolved_at = NULL
WHERE tenant_id = @tenant_id AND id = @id AND status = 'resolved' AND resumed_snapshot_id IS NULL;

-- name: SetInterruptResumedSnapshot :exec
UPDATE interrupts
SET resumed_snapshot_id = @resumed_snapshot_id
WHERE tenant_id = @tenant_id AND id = @id;
