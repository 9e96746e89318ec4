-- name: GetSnapshot :one
-- The session's end user comes along: a caller acting for another user
-- must not see the snapshot.
SELECT sqlc.embed(snapshots), sessions.end_user AS session_end_user
FROM snapshots
JOIN sessions ON sessions.tenant_id = snapshots.tenant_id AND sessions.id = snapshots.session_id
WHERE snapshots.tenant_id = @tenant_id AND snapshots.id = @id;

-- name: GetSnapshotForUpdate :one
-- Locks the snapshot so a status change (abort, finalize, heartbeat) is a
-- read-modify-write that no concurrent writer can interleave with.
SELECT sqlc.embed(snapshots), sessions.end_user AS session_end_user
FROM snapshots
JOIN sessions ON sessions.tenant_id = snapshots.tenant_id AND sessions.id = snapshots.session_id
WHERE snapshots.tenant_id = @tenant_id AND snapshots.id = @id
FOR UPDATE OF snapshots;

-- name: AbortPendingSnapshot :execrows
UPDATE snapshots
SET status = 'aborted', finish_reason = 'aborted', updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending';

-- name: TouchSnapshotHeartbeat :one
-- Refreshes a pending snapshot's heartbeat and reports its status either
-- way, so the worker learns of an abort from the same round trip.
UPDATE snapshots
SET heartbeat_at = CASE WHEN status = 'pending' THEN now() ELSE heartbeat_at END
WHERE tenant_id = @tenant_id AND id = @id
RETURNING status;

-- name: TouchSnapshotHeartbeatUnlessLocked :exec
-- A takeover's refresh of a pending snapshot's heartbeat. The claim holds
-- the job's row already; a snapshot locked meanwhile is being written by
-- its turn's end (WriteTurn locks the snapshot, then the job), so waiting
-- for it would deadlock: it is skipped, and the write settles it.
UPDATE snapshots AS t SET heartbeat_at = now()
WHERE t.tenant_id = @tenant_id::text AND t.id = (
    SELECT s.id FROM snapshots s
    WHERE s.tenant_id = @tenant_id::text AND s.id = @id::text AND s.status = 'pending'
    FOR NO KEY UPDATE SKIP LOCKED
);

-- name: WriteTurn :exec
-- The end of a turn in one statement: its snapshot with the messages it
-- added or rewrote (turn_messages: a JSON array of the positions
-- messages_from, messages_from + 1, ..., null where it left a position to
-- its ancestors, the edit ["resolved"] where it resolved every paused
-- request of its ancestors' message: migration 00042),
-- the session's new latest snapshot (creating the session on
-- its first turn), the interrupts it answered (claim) and those it paused
-- on, and the events (the
-- interrupts' audit events and the turn's own). The
-- foreign keys are checked at the end of the statement, when every part is
-- written. The same statement writes a detached turn's pending snapshot
-- (status pending, no messages) and later its end (finalize_pending): the
-- pending snapshot is rewritten only while it is still pending, and its
-- job goes with it. With keep_head the session does not move: the
-- pending snapshot that guards a resume's claim (a job another instance
-- finishes if this one dies) is written aside, and its end moves the
-- session as any turn's does.
WITH snap AS (
    INSERT INTO snapshots (
        tenant_id, id, session_id, agent, parent_id, status, finish_reason, error,
        custom, artifacts, message_count, heartbeat_at, agent_version, messages_from, turn_messages
    ) VALUES (
        @tenant_id, @snapshot_id, @session_id, @agent, @parent_id, @status, @finish_reason, @error,
        @custom, @artifacts, @message_count, @heartbeat_at, nullif(@agent_version::integer, 0),
        sqlc.narg(messages_from)::integer, sqlc.narg(turn_messages)::json
    )
    ON CONFLICT (tenant_id, id) DO UPDATE
    SET status = EXCLUDED.status, finish_reason = EXCLUDED.finish_reason, error = EXCLUDED.error,
        custom = EXCLUDED.custom, artifacts = EXCLUDED.artifacts, message_count = EXCLUDED.message_count,
        messages_from = EXCLUDED.messages_from, turn_messages = EXCLUDED.turn_messages, updated_at = now()
    WHERE @finalize_pending::boolean AND snapshots.status = 'pending'
    RETURNING 1
), job AS (
    DELETE FROM turn_jobs
    WHERE @finalize_pending::boolean AND tenant_id = @tenant_id AND snapshot_id = @snapshot_id
), sess AS (
    -- Only a session of the same owner and agent moves; otherwise the
    -- final SELECT raises and nothing of this statement is written. A
    -- session's first turn (no parent) may create it; a later turn only
    -- moves it (sess_next), so a turn whose session retention removed
    -- while it ran (its parent's history with it) writes nothing.
    INSERT INTO sessions (tenant_id, id, agent, end_user, latest_snapshot_id)
    SELECT @tenant_id, @session_id, @agent, @end_user, @snapshot_id
    WHERE @parent_id::text IS NULL AND NOT @keep_head::boolean
    ON CONFLICT (tenant_id, id) DO UPDATE
    SET latest_snapshot_id = EXCLUDED.latest_snapshot_id, updated_at = now()
    WHERE sessions.end_user IS NOT DISTINCT FROM EXCLUDED.end_user AND sessions.agent = EXCLUDED.agent
    RETURNING 1
), sess_next AS (
    -- With an expected head (the runtime continued the session from the
    -- head it cached rather than read), the session moves only from that
    -- head; under READ COMMITTED the condition is checked again on the
    -- newest version of a row a concurrent writer changed.
    UPDATE sessions SET latest_snapshot_id = @snapshot_id, updated_at = now()
    WHERE @parent_id::text IS NOT NULL AND NOT @keep_head::boolean AND tenant_id = @tenant_id AND id = @session_id
      AND end_user IS NOT DISTINCT FROM @end_user AND agent = @agent
      AND (@expected_head::text = '' OR latest_snapshot_id = @expected_head::text)
    RETURNING 1
), claim AS (
    -- A synchronous resume that ran no tool claims the interrupts it
    -- answers here (the parent's, by tool and ref), recording this
    -- snapshot as the one the resume produced: the claim and the turn
    -- commit together or not at all. The conditional update is the claim,
    -- as in ClaimInterruptsByKey: of two writes answering the same
    -- interrupt, the second blocks on the row lock, then finds it no
    -- longer pending, and the final SELECT raises.
    -- Each key is looked up by the unique key (LATERAL ... LIMIT 1), and
    -- the row updated by its id, its status tested in a form no index
    -- matches ((...) IS TRUE): planned generically, the status condition
    -- made the planner walk the tenant's pending range of
    -- interrupts_inbox_idx, every pending version's entry until vacuum
    -- removes it, more with every claim.
    UPDATE interrupts i
    SET status = 'resolved', resolution = k.resolution, resolved_by = @actor::text, resolved_at = now(),
        resumed_snapshot_id = @snapshot_id
    FROM (
        SELECT x.id, k.resolution
        FROM (
            SELECT unnest(@claim_tools::text[]) AS tool, unnest(@claim_refs::text[]) AS ref,
                   unnest(@claim_resolutions::jsonb[]) AS resolution
        ) AS k
        CROSS JOIN LATERAL (
            SELECT x.id FROM interrupts x
            WHERE x.tenant_id = @tenant_id AND x.snapshot_id = @parent_id::text AND x.tool = k.tool AND x.ref = k.ref
            LIMIT 1
        ) AS x
    ) AS k
    WHERE i.tenant_id = @tenant_id AND i.id = k.id AND (i.status = 'pending') IS TRUE
    RETURNING i.id
), irq AS (
    -- A re-paused request (a restart that interrupted again) links to the
    -- interrupt of the same request in the parent snapshot.
    -- A gated call's interrupt carries its approval policy (policy), and
    -- from it the scope a decision needs, the approvals it needs and when
    -- it escalates; end_user is who asked.
    INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, input, metadata, expires_at, on_expire,
                            previous_id, policy, scope, approvals_needed, end_user, escalate_at)
    SELECT @tenant_id, i.id, @session_id, @snapshot_id, @agent, i.tool, i.ref, i.input, i.metadata,
           CASE WHEN i.expires_in_ms > 0 THEN now() + i.expires_in_ms * interval '1 millisecond' END,
           i.on_expire,
           CASE WHEN i.repause THEN (
               SELECT p.id FROM interrupts p
               WHERE p.tenant_id = @tenant_id AND p.snapshot_id = @parent_id AND p.tool = i.tool AND p.ref = i.ref
           ) END,
           i.policy, nullif(i.policy->>'scope', ''), coalesce((i.policy->>'approvals')::integer, 1), @end_user,
           CASE WHEN i.policy ? 'escalate' THEN now() + (i.policy->'escalate'->>'afterMs')::bigint * interval '1 millisecond' END
    FROM (
        SELECT unnest(@interrupt_ids::uuid[]) AS id, unnest(@tools::text[]) AS tool, unnest(@refs::text[]) AS ref,
               unnest(@inputs::jsonb[]) AS input, unnest(@metadatas::jsonb[]) AS metadata,
               unnest(@expires_in_ms::bigint[]) AS expires_in_ms, unnest(@on_expires::jsonb[]) AS on_expire,
               unnest(@repauses::boolean[]) AS repause, unnest(@policies::jsonb[]) AS policy
    ) AS i
), ev AS (
    INSERT INTO interrupt_events (tenant_id, interrupt_id, type, actor, payload)
    SELECT @tenant_id, e.interrupt_id, e.type, @actor::text, e.payload
    FROM (
        SELECT unnest(@event_interrupt_ids::uuid[]) AS interrupt_id, unnest(@event_types::text[]) AS type,
               unnest(@event_payloads::jsonb[]) AS payload
        UNION ALL
        SELECT c.id, 'resolved', jsonb_build_object('resumedSnapshotId', @snapshot_id::text) FROM claim c
        UNION ALL
        -- The turn's own event (turn.completed, turn.failed), last.
        SELECT NULL::uuid, @turn_event::text, jsonb_build_object('snapshotId', @snapshot_id::text)
        WHERE @turn_event::text <> ''
    ) AS e
)
SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM snap) THEN holdpoint_snapshot_not_pending()
    WHEN @expected_head::text <> '' AND NOT EXISTS (SELECT 1 FROM sess_next) THEN holdpoint_session_moved()
    WHEN NOT @keep_head::boolean AND NOT EXISTS (SELECT 1 FROM sess UNION ALL SELECT 1 FROM sess_next) THEN holdpoint_session_taken()
    WHEN (SELECT count(*) FROM claim) <> coalesce(cardinality(@claim_tools::text[]), 0) THEN holdpoint_claim_refused()
    -- The session's pending interrupts, counted before this statement
    -- (less those it claims, plus those it adds), stay within the bound
    -- (interrupts_pending_session_idx holds only pending ones).
    WHEN coalesce(cardinality(@interrupt_ids::uuid[]), 0) > 0 AND @max_pending::integer > 0
         AND (SELECT count(*) FROM interrupts p
              WHERE p.tenant_id = @tenant_id AND p.session_id = @session_id AND p.status = 'pending')
             - (SELECT count(*) FROM claim) + cardinality(@interrupt_ids::uuid[]) > @max_pending::integer
        THEN holdpoint_too_many_pending()
    ELSE true
END;
