-- +goose Up

-- One namespace of agents (issue 25). A name means one agent to a tenant:
-- never two of its own agents whose names differ only in case, never one
-- of its own beside an agent compiled into an instance, and a paused turn
-- goes on only on the definition that paused it (which the claim of a
-- detached turn, below, and the runtime check).

-- A tenant's agents are unique by their name in lower case. Two that are
-- already stored so (only the bug this fixes let them in) stop the
-- migration with their names: which one is meant is the operator's call,
-- not a guess a migration should make. Rename or remove all but one of
-- each (tenant_agents and tenant_agent_versions in one transaction; the
-- versions' reference to their agent is checked at commit), then migrate
-- again.
-- +goose StatementBegin
DO $$
DECLARE
    dups text;
BEGIN
    SELECT string_agg(format('tenant %s: %s', d.tenant_id, d.names), '; ') INTO dups
    FROM (SELECT a.tenant_id, string_agg(a.name, ', ' ORDER BY a.name) AS names
          FROM tenant_agents a GROUP BY a.tenant_id, lower(a.name) HAVING count(*) > 1) d;
    IF dups IS NOT NULL THEN
        RAISE EXCEPTION 'tenant agents whose names differ only in case: %', dups
            USING HINT = 'rename or remove all but one of each (tenant_agents and tenant_agent_versions rows, in one transaction), then migrate again';
    END IF;
END
$$;
-- +goose StatementEnd
CREATE UNIQUE INDEX tenant_agents_lower_name_idx ON tenant_agents (tenant_id, lower(name));

-- The names of the agents compiled into the instances that served this
-- database: a tenant may not define one (whichever instance it asks),
-- since a turn of either could end up on the other. Not a tenant's: every
-- tenant sees the compiled agents' names (they are listed beside its
-- own). serve records its agents before it serves, through the function
-- below; the server's role reads the table and cannot change it
-- otherwise.
CREATE TABLE compiled_agents (
    name          text PRIMARY KEY,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    last_instance text NOT NULL
);
CREATE INDEX compiled_agents_lower_name_idx ON compiled_agents (lower(name));
GRANT SELECT ON compiled_agents TO holdpoint_app;

-- Records an instance's compiled agents and returns the tenants' agents
-- (of every tenant) that have one of their names in any case: defined
-- before a first instance with those agents started, for serve to warn
-- about. Each name is locked as a tenant's PUT of it locks it (the
-- LockAgentName query), so a PUT either sees the name recorded or is
-- among the agents returned.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_record_compiled_agents(p_instance text, p_names text[])
RETURNS TABLE (agent_tenant text, agent_name text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    k bigint;
BEGIN
    FOR k IN SELECT DISTINCT hashtextextended('holdpoint agent name/' || lower(n), 0) FROM unnest(p_names) n ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
    INSERT INTO compiled_agents AS c (name, last_instance)
    SELECT DISTINCT n, p_instance FROM unnest(p_names) n
    ON CONFLICT (name) DO UPDATE SET last_seen_at = now(), last_instance = EXCLUDED.last_instance;
    RETURN QUERY
    SELECT a.tenant_id, a.name FROM tenant_agents a
    WHERE lower(a.name) IN (SELECT lower(n) FROM unnest(p_names) n)
    ORDER BY a.tenant_id, a.name;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_record_compiled_agents(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_record_compiled_agents(text, text[]) TO holdpoint_app;

-- A detached turn's pending snapshot recorded no agent version (and
-- finishing it kept none), so a tenant agent's detached turns read as a
-- compiled agent's: the server records the version now, and this fills it
-- in for the snapshots detached turns wrote (those with a heartbeat) of a
-- name the tenant has an agent of: a session's first turn gets the
-- version current when it was written (none, a compiled agent's, when the
-- tenant's agent did not exist yet), a later one its parent's (none when
-- the parent has none: a compiled agent's).
-- +goose StatementBegin
DO $$
BEGIN
    UPDATE snapshots s SET agent_version = v.version
    FROM (SELECT s2.tenant_id, s2.id, max(tv.version) AS version
          FROM snapshots s2
          JOIN tenant_agent_versions tv ON tv.tenant_id = s2.tenant_id AND tv.name = s2.agent AND tv.created_at <= s2.created_at
          WHERE s2.agent_version IS NULL AND s2.heartbeat_at IS NOT NULL AND s2.parent_id IS NULL
          GROUP BY s2.tenant_id, s2.id) v
    WHERE s.tenant_id = v.tenant_id AND s.id = v.id;
    LOOP
        UPDATE snapshots s SET agent_version = p.agent_version
        FROM snapshots p
        WHERE s.agent_version IS NULL AND s.heartbeat_at IS NOT NULL
          AND p.tenant_id = s.tenant_id AND p.id = s.parent_id AND p.agent = s.agent AND p.agent_version IS NOT NULL;
        EXIT WHEN NOT FOUND;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- A detached turn is claimed only by an instance that can run its
-- definition: a compiled agent's (its snapshot has no agent_version) by
-- one with that agent compiled in, a tenant's agent's (agent_version set)
-- by one that serves tenants' agents. Before, a turn of a tenant's agent
-- could be claimed by an instance for the compiled agent of its name.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_claim_next_turn_job(p_owner text, p_agents text[], p_tenant_agents boolean, p_stale_seconds float8) RETURNS SETOF turn_jobs
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE turn_jobs
    SET owner = p_owner, heartbeat_at = now(), attempts = attempts + 1
    WHERE (tenant_id, snapshot_id) = (
        SELECT j.tenant_id, j.snapshot_id FROM turn_jobs j
        JOIN snapshots s ON s.tenant_id = j.tenant_id AND s.id = j.snapshot_id
        WHERE (j.owner IS NULL OR j.heartbeat_at < now() - make_interval(secs => p_stale_seconds))
          AND ((s.agent_version IS NULL AND j.agent = ANY(p_agents))
               OR (p_tenant_agents AND s.agent_version IS NOT NULL
                   AND EXISTS (SELECT 1 FROM tenant_agents a WHERE a.tenant_id = j.tenant_id AND a.name = j.agent)))
        ORDER BY j.heartbeat_at
        LIMIT 1
        FOR UPDATE OF j SKIP LOCKED
    )
    RETURNING *;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION holdpoint_claim_next_turn_job(p_owner text, p_agents text[], p_tenant_agents boolean, p_stale_seconds float8) RETURNS SETOF turn_jobs
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE turn_jobs
    SET owner = p_owner, heartbeat_at = now(), attempts = attempts + 1
    WHERE (tenant_id, snapshot_id) = (
        SELECT j.tenant_id, j.snapshot_id FROM turn_jobs j
        WHERE (j.owner IS NULL OR j.heartbeat_at < now() - make_interval(secs => p_stale_seconds))
          AND (j.agent = ANY(p_agents)
               OR (p_tenant_agents AND EXISTS (SELECT 1 FROM tenant_agents a WHERE a.tenant_id = j.tenant_id AND a.name = j.agent)))
        ORDER BY j.heartbeat_at
        LIMIT 1
        FOR UPDATE OF j SKIP LOCKED
    )
    RETURNING *;
$$;
-- +goose StatementEnd
DROP FUNCTION holdpoint_record_compiled_agents(text, text[]);
DROP TABLE compiled_agents;
DROP INDEX tenant_agents_lower_name_idx;
