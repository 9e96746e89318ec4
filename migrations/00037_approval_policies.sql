-- +goose Up

-- Approvals as the platform's policy (service.ApprovalPolicy): a tool the
-- policy gates pauses before it runs, and the interrupt it pauses on
-- carries the policy, so the inbox, the votes and the deadline sweeper do
-- not depend on the agent definitions of the instance that reads them.

-- The scopes of an API key (e.g. approve:payments). A policy that names a
-- scope is decided only by keys (and dashboard sessions of keys) that hold
-- it.
ALTER TABLE api_keys ADD COLUMN scopes text[] NOT NULL DEFAULT '{}';

-- policy: the approval policy of a gated call, as stored by the runtime
--   ({"scope", "approvals", "allowEdit", "attempts", "escalate"}); null for
--   an interrupt no policy made (a declared interrupt, a tool's own).
-- scope: the scope a decision needs now (the policy's, or its escalation's
--   once escalated); null: any operator.
-- approvals_needed: distinct approvals that carry the call out.
-- end_user: who asked (the session's end user when the turn paused):
--   never one of the approvers of a maker-checker policy.
-- escalate_at / escalated_at: when the policy hands the interrupt to
--   another scope, and when it did.
-- approvals_given: approvals of the current proposal so far;
--   proposed_input: an approver's edit, when one edited (what the next
--   approvals approve, and what runs; an edit starts the count again).
ALTER TABLE interrupts ADD COLUMN policy jsonb;
ALTER TABLE interrupts ADD COLUMN scope text;
ALTER TABLE interrupts ADD COLUMN approvals_needed integer NOT NULL DEFAULT 1 CHECK (approvals_needed BETWEEN 1 AND 10);
ALTER TABLE interrupts ADD COLUMN end_user text;
ALTER TABLE interrupts ADD COLUMN escalate_at timestamptz;
ALTER TABLE interrupts ADD COLUMN escalated_at timestamptz;
ALTER TABLE interrupts ADD COLUMN approvals_given integer NOT NULL DEFAULT 0;
ALTER TABLE interrupts ADD COLUMN proposed_input jsonb;

-- The escalation sweep reads only the interrupts still waiting for theirs.
CREATE INDEX interrupts_escalation_idx ON interrupts (escalate_at)
    WHERE status = 'pending' AND escalate_at IS NOT NULL AND escalated_at IS NULL;

-- One row per vote on a gated call: who (voter: the person, one vote per
-- interrupt; key_id and key_name: the credential they used), what
-- (approve or deny, the input they approved when they edited it), when
-- and why. Append-only, like the audit trail.
CREATE TABLE interrupt_votes (
    tenant_id    text NOT NULL,
    interrupt_id uuid NOT NULL,
    voter        text NOT NULL,
    key_id       uuid,
    key_name     text NOT NULL DEFAULT '',
    vote         text NOT NULL CHECK (vote IN ('approve', 'deny')),
    input        jsonb,
    note         text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, interrupt_id, voter),
    FOREIGN KEY (tenant_id, interrupt_id) REFERENCES interrupts (tenant_id, id) ON DELETE CASCADE
);

ALTER TABLE interrupt_votes ENABLE ROW LEVEL SECURITY;
ALTER TABLE interrupt_votes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON interrupt_votes
    USING (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on')
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on');
GRANT SELECT, INSERT ON interrupt_votes TO holdpoint_app;

-- +goose StatementBegin
CREATE FUNCTION interrupt_votes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'interrupt_votes is append-only';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER interrupt_votes_no_update BEFORE UPDATE ON interrupt_votes
    FOR EACH ROW EXECUTE FUNCTION interrupt_votes_append_only();

-- A vote and an escalation are events of the audit trail (and webhooks'
-- interrupt.voted, interrupt.escalated).
ALTER TABLE interrupt_events DROP CONSTRAINT interrupt_events_type_check;
ALTER TABLE interrupt_events ADD CONSTRAINT interrupt_events_type_check CHECK (
    (interrupt_id IS NOT NULL AND type IN ('created', 'claimed', 'released', 'resolved', 'expired', 'cancelled', 'voted', 'escalated'))
    OR (interrupt_id IS NULL AND type IN ('turn.completed', 'turn.failed', 'tool.called')));

-- How many times an approved call ran: a failed one may be retried (same
-- call id) up to its policy's attempts.
ALTER TABLE tool_calls ADD COLUMN attempt integer NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN attempt;
DELETE FROM interrupt_events WHERE type IN ('voted', 'escalated');
ALTER TABLE interrupt_events DROP CONSTRAINT interrupt_events_type_check;
ALTER TABLE interrupt_events ADD CONSTRAINT interrupt_events_type_check CHECK (
    (interrupt_id IS NOT NULL AND type IN ('created', 'claimed', 'released', 'resolved', 'expired', 'cancelled'))
    OR (interrupt_id IS NULL AND type IN ('turn.completed', 'turn.failed', 'tool.called')));
DROP TABLE interrupt_votes;
DROP FUNCTION interrupt_votes_append_only();
DROP INDEX interrupts_escalation_idx;
ALTER TABLE interrupts DROP COLUMN proposed_input;
ALTER TABLE interrupts DROP COLUMN approvals_given;
ALTER TABLE interrupts DROP COLUMN escalated_at;
ALTER TABLE interrupts DROP COLUMN escalate_at;
ALTER TABLE interrupts DROP COLUMN end_user;
ALTER TABLE interrupts DROP COLUMN approvals_needed;
ALTER TABLE interrupts DROP COLUMN scope;
ALTER TABLE interrupts DROP COLUMN policy;
ALTER TABLE api_keys DROP COLUMN scopes;
