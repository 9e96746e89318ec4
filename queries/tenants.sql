-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: InsertTenant :one
INSERT INTO tenants (id, name) VALUES (@id, @name) RETURNING *;
