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

-- name: LockAgentName :exec
-- Serializes the PUTs of one agent name in any case, of every tenant
-- (PutTenantAgentVersion picks the next number; AgentNameTaken checks the
-- name is free), and the recording of compiled agents of that name
-- (holdpoint_record_compiled_agents takes the same lock), until the end
-- of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('holdpoint agent name/' || lower(@name::text), 0));

-- name: AgentNameTaken :one
-- What already has the name in another case or as a compiled agent: the
-- compiled agent of the name in any case, and the tenant's agent whose
-- name differs from it only in case (empty when none).
SELECT coalesce((SELECT c.name FROM compiled_agents c WHERE lower(c.name) = lower(@name::text) ORDER BY c.name LIMIT 1), '')::text AS compiled,
       coalesce((SELECT a.name FROM tenant_agents a WHERE a.tenant_id = @tenant_id AND lower(a.name) = lower(@name::text) AND a.name <> @name::text LIMIT 1), '')::text AS tenant_agent;

-- name: RecordCompiledAgents :many
-- Records an instance's compiled agents; returns the tenants' agents of
-- their names in any case.
SELECT agent_tenant::text AS tenant_id, agent_name::text AS name
FROM holdpoint_record_compiled_agents(@instance::text, @names::text[]);
