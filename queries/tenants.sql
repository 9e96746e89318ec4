-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: InsertTenant :one
INSERT INTO tenants (id, name) VALUES (@id, @name) RETURNING *;

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
