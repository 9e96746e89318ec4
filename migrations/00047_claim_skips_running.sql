-- +goose Up

-- The job runner claims a job whose heartbeat is stale, and that can be
-- one its own instance still runs: a takeover that spent longer than the
-- stale bound loading its turn (a loaded machine) before its heartbeat
-- started. The runner then saw the job in its own running set and left it,
-- but the claim had counted an attempt, and a turn the database's outage
-- keeps failing is taken over a bounded number of attempts: a CI run's
-- turn ended after two takeovers instead of three. The runner now names
-- the jobs it runs, and the claim passes over them: only a real takeover
-- counts. The four-argument function stays for instances of the previous
-- version during an upgrade.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_claim_next_turn_job(p_owner text, p_agents text[], p_tenant_agents boolean, p_stale_seconds float8,
                                              p_running_tenants text[], p_running_snapshots text[]) RETURNS SETOF turn_jobs
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
          AND (j.tenant_id, j.snapshot_id) NOT IN (SELECT r.t, r.s FROM unnest(p_running_tenants, p_running_snapshots) AS r (t, s))
        ORDER BY (SELECT count(*) FROM turn_jobs r
                  WHERE r.tenant_id = j.tenant_id AND r.owner IS NOT NULL
                    AND r.heartbeat_at >= now() - make_interval(secs => p_stale_seconds)),
                 j.heartbeat_at
        LIMIT 1
        FOR UPDATE OF j SKIP LOCKED
    )
    RETURNING *;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_claim_next_turn_job(text, text[], boolean, float8, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_claim_next_turn_job(text, text[], boolean, float8, text[], text[]) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_claim_next_turn_job(text, text[], boolean, float8, text[], text[]);
