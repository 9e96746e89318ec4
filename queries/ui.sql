-- name: InsertUISession :exec
INSERT INTO ui_sessions (token_hash, tenant_id, key_id, actor, csrf, expires_at)
VALUES (@token_hash, @tenant_id, @key_id, @actor, @csrf, @expires_at);

-- name: GetUISessionByHash :one
-- A system function: the cookie decides the tenant.
SELECT * FROM holdpoint_ui_session_by_hash(@token_hash);

-- name: RevokeUISession :exec
UPDATE ui_sessions SET revoked_at = now()
WHERE tenant_id = @tenant_id AND token_hash = @token_hash AND revoked_at IS NULL;
