-- name: EscalateDueInterrupts :many
-- The escalation sweep across tenants: a system function
-- (holdpoint_escalate_due_interrupts) that hands up to batch_size due
-- interrupts to their policy's escalation scope and records the events.
SELECT e.tenant_id::text AS tenant_id, e.id::uuid AS id, e.agent::text AS agent, e.tool::text AS tool,
       coalesce(e.from_scope, '')::text AS from_scope, e.to_scope::text AS to_scope
FROM holdpoint_escalate_due_interrupts(@batch_size::integer) AS e;
