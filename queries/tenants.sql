-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: ListTenants :many
SELECT * FROM tenants ORDER BY created_at, id;

-- name: InsertTenant :one
INSERT INTO tenants (id, name) VALUES (@id, @name) RETURNING *;

-- name: InsertAPIKey :exec
INSERT INTO api_keys (tenant_id, id, name, role, key_hash, key_prefix)
VALUES (@tenant_id, @id, @name, @role, @key_hash, @key_prefix);

-- name: GetAPIKeyByHash :one
-- Authentication: the tenant is not known yet (a system lookup).
SELECT * FROM api_keys WHERE key_hash = @key_hash;

-- name: ListAPIKeys :many
SELECT * FROM api_keys WHERE tenant_id = @tenant_id ORDER BY created_at, id;

-- name: RevokeAPIKey :execrows
UPDATE api_keys SET revoked_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND revoked_at IS NULL;

-- name: TouchAPIKey :exec
-- Best-effort usage stamp, at most once a minute per key.
UPDATE api_keys SET last_used_at = now()
WHERE tenant_id = @tenant_id AND id = @id
  AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: SetTenant :exec
-- Scopes the transaction to one tenant for the row-level security policies.
SELECT set_config('holdpoint.tenant_id', @tenant_id::text, true);

-- name: SetSystem :exec
-- Marks the transaction as system work that spans tenants (sweeper, key
-- lookup); only code that means it calls this.
SELECT set_config('holdpoint.system', 'on', true);

-- name: SetAppRole :exec
-- Every server connection drops to the application role, which owns no
-- table and cannot bypass row-level security.
SET ROLE holdpoint_app;
