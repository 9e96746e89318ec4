-- +goose NO TRANSACTION
-- +goose Up

-- A decision (an operator's, a deadline's) is committed a moment before
-- the guard of the turn that carries it out (service/guard.go); an
-- instance that dies in between leaves the interrupts resolved with no
-- turn answering them. The guard records its snapshot as the one the
-- decision resumed (resumed_snapshot_id), so decided interrupts still
-- without one are those: this partial index holds only them, and the
-- repair's scan reads it.
CREATE INDEX CONCURRENTLY interrupts_unresumed_idx ON interrupts (resolved_at)
    WHERE status = 'resolved' AND resumed_snapshot_id IS NULL;

-- The paused snapshots, of every tenant, whose interrupts were all decided
-- (none pending, one at least resolved) longer ago than the bound with no
-- turn resuming them: a system function, like the deadline sweeper's.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_stranded_decisions(p_older_seconds float8, p_limit integer)
RETURNS TABLE (tenant_id text, snapshot_id text, agent text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT DISTINCT i.tenant_id, i.snapshot_id, i.agent FROM interrupts i
    WHERE i.status = 'resolved' AND i.resumed_snapshot_id IS NULL
      AND i.resolved_at < now() - make_interval(secs => p_older_seconds)
      AND NOT EXISTS (SELECT 1 FROM interrupts p
                      WHERE p.tenant_id = i.tenant_id AND p.snapshot_id = i.snapshot_id AND p.status = 'pending')
    LIMIT p_limit;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_stranded_decisions(float8, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_stranded_decisions(float8, integer) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_stranded_decisions(float8, integer);
DROP INDEX CONCURRENTLY interrupts_unresumed_idx;
