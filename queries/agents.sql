-- name: PutTenantAgentVersion :one
-- Adds the next version of a tenant's agent and makes it current (and
-- enabled), in one statement.
WITH next AS (
    SELECT 1 + coalesce((SELECT max(v.version) FROM tenant_agent_versions v
                         WHERE v.tenant_id = @tenant_id AND v.name = @name), 0) AS version
), ver AS (
    INSERT INTO tenant_agent_versions (tenant_id, name, version, source, definition, created_by)
    SELECT @tenant_id, @name, next.version, @source, @definition, @created_by FROM next
    RETURNING version, created_at
), agent AS (
    INSERT INTO tenant_agents (tenant_id, name, current_version)
    SELECT @tenant_id, @name, version FROM ver
    ON CONFLICT (tenant_id, name) DO UPDATE
    SET current_version = EXCLUDED.current_version, disabled_at = NULL, disabled_by = NULL, updated_at = now()
    RETURNING 1
)
SELECT ver.version, ver.created_at FROM ver, agent;

-- name: GetTenantAgent :one
-- A tenant's agent with the definition of a version (its current one when
-- version is 0).
SELECT a.name, a.current_version, a.disabled_at, a.disabled_by, a.created_at, a.updated_at,
       v.version, v.definition, v.source, v.created_by, v.created_at AS version_created_at
FROM tenant_agents a
JOIN tenant_agent_versions v ON v.tenant_id = a.tenant_id AND v.name = a.name
    AND v.version = CASE WHEN @version::integer > 0 THEN @version::integer ELSE a.current_version END
WHERE a.tenant_id = @tenant_id AND a.name = @name;

-- name: ListTenantAgents :many
SELECT a.name, a.current_version, a.disabled_at, a.created_at, a.updated_at, v.definition
FROM tenant_agents a
JOIN tenant_agent_versions v ON v.tenant_id = a.tenant_id AND v.name = a.name AND v.version = a.current_version
WHERE a.tenant_id = @tenant_id
ORDER BY a.name;

-- name: ListTenantAgentVersions :many
SELECT version, created_by, created_at FROM tenant_agent_versions
WHERE tenant_id = @tenant_id AND name = @name
ORDER BY version DESC;

-- name: DisableTenantAgent :execrows
UPDATE tenant_agents SET disabled_at = now(), disabled_by = @actor, updated_at = now()
WHERE tenant_id = @tenant_id AND name = @name AND disabled_at IS NULL;

-- name: GetTenantToolHosts :one
SELECT tool_hosts FROM tenants WHERE id = @tenant_id;

-- name: SetTenantToolHosts :execrows
-- A system function would be needed for another tenant; the operator's CLI
-- runs as the schema owner.
UPDATE tenants SET tool_hosts = @hosts::text[] WHERE id = @tenant_id;

-- name: LockTenantAgentName :exec
-- Serializes the versions of one agent name (PutTenantAgentVersion picks
-- the next number), until the end of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended(@tenant_id::text || '/' || @name::text, 0));
