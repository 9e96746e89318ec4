-- +goose Up

-- The metrics endpoint's pending interrupts: per tenant, how many wait and
-- since when the oldest does. Counts and a timestamp only, no row content,
-- across tenants: a system function like the others (see 00013), called
-- at most once per metrics cache period, never per request.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_pending_interrupt_stats()
RETURNS TABLE (tenant_id text, pending bigint, oldest timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT i.tenant_id, count(*), min(i.created_at)
    FROM interrupts i
    WHERE i.status = 'pending'
    GROUP BY i.tenant_id
    ORDER BY i.tenant_id;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_pending_interrupt_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_pending_interrupt_stats() TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_pending_interrupt_stats();
