-- +goose Up

-- Detached turns of tenants' agents are taken over like those of compiled
-- agents: an instance that serves tenants' agents claims jobs of any agent
-- a tenant defined, as well as those of the agents it was built with.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_claim_next_turn_job(p_owner text, p_agents text[], p_tenant_agents boolean, p_stale_seconds float8) RETURNS SETOF turn_jobs
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
REVOKE ALL ON FUNCTION holdpoint_claim_next_turn_job(text, text[], boolean, float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_claim_next_turn_job(text, text[], boolean, float8) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_claim_next_turn_job(text, text[], boolean, float8);
