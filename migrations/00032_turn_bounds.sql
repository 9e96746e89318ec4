-- +goose NO TRANSACTION
-- +goose Up

-- A model's answer is attacker input, so what one session may hold pending
-- is bounded (TurnLimits.PendingPerSession): the write that adds a turn's
-- interrupts counts those already pending in the session and calls this
-- function to refuse it whole when they would pass the bound. The count
-- reads this partial index, which holds only pending interrupts, so it
-- does not grow with the session's history.
CREATE INDEX CONCURRENTLY interrupts_pending_session_idx ON interrupts (tenant_id, session_id) WHERE status = 'pending';

-- +goose StatementBegin
CREATE FUNCTION holdpoint_too_many_pending() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'the session would have more interrupts pending than allowed' USING ERRCODE = 'HP429';
END;
$$;
-- +goose StatementEnd

-- A detached turn's job is inserted only while its tenant and its
-- credential (the actor) have fewer jobs queued or running than their
-- bounds (DetachLimits; 0: none); past one, this raises and the detach
-- writes nothing. The tenant's advisory lock makes the count and the
-- insert one step, so a burst of concurrent detaches cannot all pass it.
-- The counts see only the transaction's tenant (row-level security).
-- +goose StatementBegin
CREATE FUNCTION holdpoint_turn_jobs_below(p_tenant text, p_actor text, p_tenant_cap integer, p_actor_cap integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_tenant_cap <= 0 AND p_actor_cap <= 0 THEN
        RETURN true;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('holdpoint_turn_jobs:' || p_tenant, 0));
    IF (p_tenant_cap > 0 AND (SELECT count(*) FROM turn_jobs WHERE tenant_id = p_tenant) >= p_tenant_cap)
       OR (p_actor_cap > 0 AND (SELECT count(*) FROM turn_jobs WHERE tenant_id = p_tenant AND actor = p_actor) >= p_actor_cap) THEN
        RAISE EXCEPTION 'too many detached turns queued or running' USING ERRCODE = 'HP430';
    END IF;
    RETURN true;
END;
$$;
-- +goose StatementEnd

-- A job nobody runs yet (of a kind this instance runs, as 00031 made it)
-- is taken by the tenant that has the fewest jobs running, then the
-- oldest: detached turns queue fairly across tenants,
-- so one tenant's burst waits behind the others rather than before them.
-- A running job is one owned with a fresh heartbeat; the count reads the
-- tenant's jobs, which DetachLimits.PerTenant bounds.
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

-- +goose Down
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
DROP FUNCTION holdpoint_turn_jobs_below(text, text, integer, integer);
DROP FUNCTION holdpoint_too_many_pending();
DROP INDEX CONCURRENTLY interrupts_pending_session_idx;
