-- name: InsertInterruptEvents :exec
INSERT INTO interrupt_events (tenant_id, interrupt_id, type, actor, payload)
SELECT @tenant_id, unnest(@interrupt_ids::uuid[]), unnest(@types::text[]), @actor, unnest(@payloads::jsonb[]);

-- name: ListInterruptsBySnapshotForUpdate :many
-- Locks every interrupt of the paused snapshot, in id order, so concurrent
-- resumes of the same snapshot serialize here and only one can claim.
SELECT * FROM interrupts
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id
ORDER BY id
FOR UPDATE;

-- name: ClaimInterrupt :execrows
-- The conditional update is the claim: only a pending interrupt moves, so
-- of two concurrent resumes exactly one sees a row changed.
UPDATE interrupts
SET status = 'resolved', resolution = @resolution, resolved_by = @resolved_by, resolved_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending';

-- name: ExpireInterrupt :execrows
UPDATE interrupts
SET status = 'expired', resolved_by = 'system', resolved_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending';

-- name: ReleaseInterrupt :exec
-- A resume turn that failed before it changed anything gives its claim back.
UPDATE interrupts
SET status = 'pending', resolution = NULL, resolved_by = NULL, resolved_at = NULL, resumed_snapshot_id = NULL
WHERE tenant_id = @tenant_id AND id = @id AND status = 'resolved';

-- name: SetInterruptResumedSnapshot :exec
-- A resume records the snapshot it produced; a protocol resume already set
-- it with its claim, and then this writes nothing.
UPDATE interrupts
SET resumed_snapshot_id = @resumed_snapshot_id
WHERE tenant_id = @tenant_id AND id = @id AND resumed_snapshot_id IS DISTINCT FROM @resumed_snapshot_id;

-- name: GetInterrupt :one
-- asked_by: who asked, the interrupt's end user (or, for one paused
-- before it was recorded, its session's).
SELECT sqlc.embed(interrupts), coalesce(interrupts.end_user, s.end_user, '')::text AS asked_by
FROM interrupts
LEFT JOIN sessions s ON s.tenant_id = interrupts.tenant_id AND s.id = interrupts.session_id
WHERE interrupts.tenant_id = @tenant_id AND interrupts.id = @id;

-- name: GetInterruptOfRequest :one
-- The interrupt a paused snapshot's tool request became, by the unique key
-- (tenant_id, snapshot_id, tool, ref); asked_by as in GetInterrupt.
SELECT sqlc.embed(interrupts), coalesce(interrupts.end_user, s.end_user, '')::text AS asked_by
FROM interrupts
LEFT JOIN sessions s ON s.tenant_id = interrupts.tenant_id AND s.id = interrupts.session_id
WHERE interrupts.tenant_id = @tenant_id AND interrupts.snapshot_id = @snapshot_id
  AND interrupts.tool = @tool AND interrupts.ref = @ref;

-- name: ListInterrupts :many
-- The approvals inbox, newest first, with keyset pagination on
-- (created_at, id) so every page is a scan of interrupts_inbox_idx;
-- asked_by as in GetInterrupt.
SELECT sqlc.embed(interrupts), coalesce(interrupts.end_user, s.end_user, '')::text AS asked_by
FROM interrupts
LEFT JOIN sessions s ON s.tenant_id = interrupts.tenant_id AND s.id = interrupts.session_id
WHERE interrupts.tenant_id = @tenant_id
  AND interrupts.status = @status
  AND (sqlc.narg(agent)::text IS NULL OR interrupts.agent = sqlc.narg(agent))
  AND (sqlc.narg(tool)::text IS NULL OR interrupts.tool = sqlc.narg(tool))
  AND (sqlc.narg(session_id)::text IS NULL OR interrupts.session_id = sqlc.narg(session_id))
  AND (sqlc.narg(end_user)::text IS NULL OR interrupts.session_id IN (
       SELECT s.id FROM sessions s WHERE s.tenant_id = @tenant_id AND s.end_user = sqlc.narg(end_user)))
  AND (sqlc.narg(created_before)::timestamptz IS NULL OR interrupts.created_at < sqlc.narg(created_before))
  AND (sqlc.narg(created_after)::timestamptz IS NULL OR interrupts.created_at > sqlc.narg(created_after))
  -- A gated call needing a scope is listed only to holders of it.
  AND (interrupts.scope IS NULL OR @all_scopes::boolean OR interrupts.scope = ANY (@scopes::text[]))
  AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
       OR (interrupts.created_at, interrupts.id) < (sqlc.narg(cursor_created_at), sqlc.narg(cursor_id)::uuid))
ORDER BY interrupts.created_at DESC, interrupts.id DESC
LIMIT @page_size;

-- name: ListInterruptsOldest :many
-- The inbox oldest first (what has waited longest): ListInterrupts the
-- other way round.
SELECT sqlc.embed(interrupts), coalesce(interrupts.end_user, s.end_user, '')::text AS asked_by
FROM interrupts
LEFT JOIN sessions s ON s.tenant_id = interrupts.tenant_id AND s.id = interrupts.session_id
WHERE interrupts.tenant_id = @tenant_id
  AND interrupts.status = @status
  AND (sqlc.narg(agent)::text IS NULL OR interrupts.agent = sqlc.narg(agent))
  AND (sqlc.narg(tool)::text IS NULL OR interrupts.tool = sqlc.narg(tool))
  AND (sqlc.narg(session_id)::text IS NULL OR interrupts.session_id = sqlc.narg(session_id))
  AND (sqlc.narg(end_user)::text IS NULL OR interrupts.session_id IN (
       SELECT s.id FROM sessions s WHERE s.tenant_id = @tenant_id AND s.end_user = sqlc.narg(end_user)))
  AND (sqlc.narg(created_before)::timestamptz IS NULL OR interrupts.created_at < sqlc.narg(created_before))
  AND (sqlc.narg(created_after)::timestamptz IS NULL OR interrupts.created_at > sqlc.narg(created_after))
  -- A gated call needing a scope is listed only to holders of it.
  AND (interrupts.scope IS NULL OR @all_scopes::boolean OR interrupts.scope = ANY (@scopes::text[]))
  AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
       OR (interrupts.created_at, interrupts.id) > (sqlc.narg(cursor_created_at), sqlc.narg(cursor_id)::uuid))
ORDER BY interrupts.created_at, interrupts.id
LIMIT @page_size;

-- name: ListInterruptEvents :many
SELECT * FROM interrupt_events
WHERE tenant_id = @tenant_id AND interrupt_id = @interrupt_id
ORDER BY id;

-- name: LockDueInterrupts :many
-- The sweeper's batch of due interrupts of every tenant, locked for this
-- transaction: a system function (holdpoint_system).
SELECT * FROM holdpoint_lock_due_interrupts(@batch_size::integer);

-- name: ListenInterruptEvents :exec
-- Subscribes the connection to the channel the interrupt_events trigger
-- notifies.
LISTEN holdpoint_events;

-- name: ClaimInterruptsByKey :many
-- Claims, in one statement, the pending interrupts of a paused snapshot
-- that a resume answers (keys: tool and ref), records a claimed event for
-- each, and notes them on the detached turn's job when there is one. The
-- conditional update is the claim: of two concurrent resumes exactly one
-- sees a row change (the other blocks on the row lock, then finds it no
-- longer pending). Every interrupt of the snapshot is returned with its
-- status before the statement and whether this statement claimed it.
WITH keys AS (
    -- Each key is looked up by the unique key, and claimed by its id (see
    -- WriteTurn's claim).
    SELECT x.id, k.tool, k.ref, k.resolution
    FROM (
        SELECT unnest(@tools::text[]) AS tool, unnest(@refs::text[]) AS ref,
               unnest(@resolutions::jsonb[]) AS resolution
    ) AS k
    CROSS JOIN LATERAL (
        SELECT x.id FROM interrupts x
        WHERE x.tenant_id = @tenant_id AND x.snapshot_id = @snapshot_id AND x.tool = k.tool AND x.ref = k.ref
        LIMIT 1
    ) AS x
), claimed AS (
    UPDATE interrupts i
    SET status = 'resolved', resolution = k.resolution, resolved_by = @actor::text, resolved_at = now(),
        resumed_snapshot_id = @resumed_snapshot_id::text
    FROM keys k
    WHERE i.tenant_id = @tenant_id AND i.id = k.id AND (i.status = 'pending') IS TRUE
      -- All or nothing: when a named interrupt is already decided, claim
      -- none (a race that slips past this check is undone by the caller).
      AND NOT EXISTS (
          SELECT 1 FROM interrupts x JOIN keys kx ON x.tool = kx.tool AND x.ref = kx.ref
          WHERE x.tenant_id = @tenant_id AND x.snapshot_id = @snapshot_id AND x.status <> 'pending')
    RETURNING i.id
), events AS (
    INSERT INTO interrupt_events (tenant_id, interrupt_id, type, actor)
    SELECT @tenant_id, id, 'claimed', @actor::text FROM claimed
), job AS (
    UPDATE turn_jobs SET preclaimed = preclaimed || (SELECT coalesce(array_agg(id), '{}') FROM claimed)
    WHERE tenant_id = @tenant_id AND snapshot_id = @job_snapshot_id::text
)
SELECT i.id, i.tool, i.ref, i.status, (c.id IS NOT NULL)::boolean AS claimed_now
FROM interrupts i
LEFT JOIN claimed c ON c.id = i.id
WHERE i.tenant_id = @tenant_id AND i.snapshot_id = @snapshot_id
ORDER BY i.id;

-- name: NotifyInterruptEvents :exec
-- Wakes the live-event readers of every instance; sent after (not inside)
-- the transactions that wrote events.
SELECT pg_notify('holdpoint_events', '');

-- name: CountPendingInterrupts :many
-- A tenant's pending interrupts per agent and tool (the inbox's counts):
-- the pending range of interrupts_inbox_idx, whatever their age.
-- Gated calls needing a scope the caller lacks are not counted.
SELECT agent, tool, count(*) AS pending FROM interrupts
WHERE tenant_id = @tenant_id AND status = 'pending'
  AND (scope IS NULL OR @all_scopes::boolean OR scope = ANY (@scopes::text[]))
GROUP BY agent, tool
ORDER BY agent, tool;

-- name: PendingInterruptStats :many
-- Every tenant's pending interrupts: how many, and the oldest one's
-- creation time (the metrics endpoint): a system function
-- (holdpoint_system).
SELECT tenant_id::text AS tenant_id, pending::bigint AS pending, oldest::timestamptz AS oldest
FROM holdpoint_pending_interrupt_stats();

-- name: ListInterruptsBySnapshot :many
-- The interrupts of a paused snapshot, to say why a claim was refused.
SELECT id, tool, ref, status FROM interrupts
WHERE tenant_id = @tenant_id AND snapshot_id = @snapshot_id
ORDER BY id;

-- name: ListStrandedDecisions :many
-- Paused snapshots of every tenant whose decisions no turn resumed: a
-- system function (holdpoint_system).
SELECT s.tenant_id::text AS tenant_id, s.snapshot_id::text AS snapshot_id, s.agent::text AS agent
FROM holdpoint_stranded_decisions(@older_seconds::float8, @batch_size::integer) AS s;

-- name: GuardDecidedInterrupt :execrows
-- The guard of a decided batch's turn takes each decision: it records its
-- snapshot as the one the decision resumes, once. A decision another
-- guard took already (a repair racing the decision's own instance) is not
-- changed, and the caller gives up.
UPDATE interrupts SET resumed_snapshot_id = @resumed_snapshot_id::text
WHERE tenant_id = @tenant_id AND id = @id AND status = 'resolved' AND resumed_snapshot_id IS NULL;

-- name: InsertVote :execrows
-- One vote per person and interrupt (the key): a second vote of the same
-- voter inserts nothing.
INSERT INTO interrupt_votes (tenant_id, interrupt_id, voter, key_id, key_name, vote, input, note)
VALUES (@tenant_id, @interrupt_id, @voter, sqlc.narg(key_id)::uuid, @key_name, @vote, sqlc.narg(input)::jsonb, sqlc.narg(note))
ON CONFLICT DO NOTHING;

-- name: CountApproval :one
-- Counts an approval of a pending interrupt (locked by the caller): an
-- approval of another input than the current proposal (an edit) makes it
-- the proposal, with this approval its first.
UPDATE interrupts
SET approvals_given = CASE WHEN sqlc.narg(input)::jsonb IS NOT NULL
                            AND sqlc.narg(input)::jsonb IS DISTINCT FROM coalesce(proposed_input, input)
                           THEN 1 ELSE approvals_given + 1 END,
    proposed_input = CASE WHEN sqlc.narg(input)::jsonb IS NOT NULL
                           AND sqlc.narg(input)::jsonb IS DISTINCT FROM coalesce(proposed_input, input)
                          THEN sqlc.narg(input)::jsonb ELSE proposed_input END
WHERE tenant_id = @tenant_id AND id = @id AND status = 'pending'
RETURNING approvals_given, approvals_needed, proposed_input;

-- name: ListVotes :many
SELECT * FROM interrupt_votes
WHERE tenant_id = @tenant_id AND interrupt_id = @interrupt_id
ORDER BY created_at, voter;

-- name: ReopenDecision :execrows
-- Gives a decided interrupt back to its decision for a retry of the
-- approved call that failed in the turn it resumed (from_snapshot): of
-- concurrent retries exactly one changes the row; the retry's guard then
-- takes the decision again (GuardDecidedInterrupt).
UPDATE interrupts SET resumed_snapshot_id = NULL
WHERE tenant_id = @tenant_id AND id = @id AND status = 'resolved' AND resumed_snapshot_id = @from_snapshot::text;
