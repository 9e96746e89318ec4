-- name: InsertUISession :exec
INSERT INTO ui_sessions (token_hash, tenant_id, key_id, actor, csrf, expires_at)
VALUES (@token_hash, @tenant_id, @key_id, @actor, @csrf, @expires_at);

-- name: GetUISessionByHash :one
-- A system function: the cookie decides the tenant.
SELECT * FROM holdpoint_ui_session_by_hash(@token_hash);

-- name: GetUISessionKey :one
-- The name and scopes of a session's key, read when the session is
-- resolved (ui_sessions keeps neither). A query of its own, scoped to the
-- session's tenant: row-level security hides api_keys from the system
-- lookup above, so it cannot be a join there.
SELECT name, scopes FROM api_keys
WHERE tenant_id = @tenant_id AND id = @id AND revoked_at IS NULL;

-- name: RevokeUISession :exec
UPDATE ui_sessions SET revoked_at = now()
WHERE tenant_id = @tenant_id AND token_hash = @token_hash AND revoked_at IS NULL;
