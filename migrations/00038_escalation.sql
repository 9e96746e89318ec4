-- +goose Up

-- The escalation sweep of every tenant (issue 26): a pending interrupt
-- whose approval policy escalates, once its escalate_at has passed, is
-- handed to the escalation's scope (interrupts.scope is the scope a
-- decision needs, so the inbox and the decisions follow), once
-- (escalated_at), with an escalated event (payload: the scope it left and
-- the one it went to) that webhooks deliver as interrupt.escalated. Its
-- deadline, if any, is untouched: the deadline sweep applies it at its
-- own time. SKIP LOCKED: instances sweep at once without escalating an
-- interrupt twice, and a decision holding the row is not waited for (the
-- next sweep finds the row again if it is still pending). The self-join
-- reads each row as it was before the update (the scope it left). Reads
-- interrupts_escalation_idx.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_escalate_due_interrupts(p_batch integer)
RETURNS TABLE (tenant_id text, id uuid, agent text, tool text, from_scope text, to_scope text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH due AS (
        SELECT i.tenant_id, i.id, i.scope FROM interrupts i
        WHERE i.status = 'pending' AND i.escalate_at IS NOT NULL AND i.escalate_at <= now()
          AND i.escalated_at IS NULL
        ORDER BY i.escalate_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    ), escalated AS (
        UPDATE interrupts i
        SET scope = i.policy -> 'escalate' ->> 'scope', escalated_at = now()
        FROM due d
        WHERE i.tenant_id = d.tenant_id AND i.id = d.id
          AND i.status = 'pending' AND i.escalated_at IS NULL
          AND (i.policy -> 'escalate' ->> 'scope') IS NOT NULL
        RETURNING i.tenant_id, i.id, i.agent, i.tool, d.scope AS from_scope, i.scope AS to_scope
    ), events AS (
        INSERT INTO interrupt_events (tenant_id, interrupt_id, type, actor, payload)
        SELECT e.tenant_id, e.id, 'escalated', 'system', jsonb_build_object('from', e.from_scope, 'to', e.to_scope)
        FROM escalated e
    )
    SELECT e.tenant_id, e.id, e.agent, e.tool, e.from_scope, e.to_scope FROM escalated e;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_escalate_due_interrupts(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_escalate_due_interrupts(integer) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_escalate_due_interrupts(integer);
