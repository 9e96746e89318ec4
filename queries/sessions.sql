-- name: GetSession :one
SELECT * FROM sessions WHERE tenant_id = @tenant_id AND id = @id;

-- name: InsertSession :exec
-- The first turn of a session creates it; a concurrent first turn under the
-- same id is harmless (ON CONFLICT keeps the first row).
INSERT INTO sessions (tenant_id, id, agent, end_user)
VALUES (@tenant_id, @id, @agent, @end_user)
ON CONFLICT (tenant_id, id) DO NOTHING;

-- name: UpdateSessionLatestSnapshot :exec
UPDATE sessions
SET latest_snapshot_id = @snapshot_id, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id;
