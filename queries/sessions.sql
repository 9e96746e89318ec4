-- name: GetSession :one
SELECT * FROM sessions WHERE tenant_id = @tenant_id AND id = @id;

-- name: UpdateSessionLatestSnapshot :exec
UPDATE sessions
SET latest_snapshot_id = @snapshot_id, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id;
