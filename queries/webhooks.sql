-- name: CreateWebhook :one
INSERT INTO webhooks (tenant_id, url, description, event_types, enabled, created_by)
VALUES (@tenant_id, @url, @description, @event_types::text[], @enabled, @created_by)
RETURNING *;

-- name: InsertWebhookSecret :exec
-- The endpoint's next signing secret. Older secrets that never expired
-- expire after the overlap, so a receiver has that long to switch; the
-- trigger webhook_secrets_cap (migration 00033) expires at once all but
-- the three newest.
WITH expire AS (
    UPDATE webhook_secrets
    SET expires_at = now() + make_interval(secs => @overlap_seconds::double precision)
    WHERE tenant_id = @tenant_id AND webhook_id = @webhook_id AND expires_at IS NULL
)
INSERT INTO webhook_secrets (tenant_id, webhook_id, key_id, secret)
SELECT @tenant_id, @webhook_id,
       1 + coalesce((SELECT max(key_id) FROM webhook_secrets
                     WHERE tenant_id = @tenant_id AND webhook_id = @webhook_id), 0),
       @secret;

-- name: ListWebhookSecrets :many
-- The secrets that still sign, newest first.
SELECT key_id, secret, created_at, expires_at FROM webhook_secrets
WHERE tenant_id = @tenant_id AND webhook_id = @webhook_id AND (expires_at IS NULL OR expires_at > now())
ORDER BY key_id DESC;

-- name: LockWebhook :one
-- Serializes secret rotations of one endpoint.
SELECT id FROM webhooks WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: ListWebhooks :many
SELECT * FROM webhooks WHERE tenant_id = @tenant_id ORDER BY created_at, id;

-- name: GetWebhook :one
SELECT * FROM webhooks WHERE tenant_id = @tenant_id AND id = @id;

-- name: UpdateWebhook :one
-- Changes the given fields. Enabling clears the reason the platform had
-- turned the endpoint off.
UPDATE webhooks
SET url = coalesce(sqlc.narg(url)::text, url),
    description = coalesce(sqlc.narg(description)::text, description),
    event_types = coalesce(sqlc.narg(event_types)::text[], event_types),
    enabled = coalesce(sqlc.narg(enabled)::boolean, enabled),
    disabled_reason = CASE WHEN sqlc.narg(enabled)::boolean THEN NULL ELSE disabled_reason END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: DeleteWebhook :execrows
-- The endpoint, its secrets (by cascade) and its deliveries.
WITH deliveries AS (
    DELETE FROM webhook_deliveries d WHERE d.tenant_id = @tenant_id AND d.webhook_id = @id
)
DELETE FROM webhooks w WHERE w.tenant_id = @tenant_id AND w.id = @id;

-- name: DisableWebhook :exec
-- The receiver answered 410 Gone: the platform stops delivering to it.
UPDATE webhooks SET enabled = false, disabled_reason = @reason, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND enabled;

-- name: ClaimWebhookDeliveries :many
-- A system function (see the migration): due deliveries of every tenant.
SELECT * FROM holdpoint_claim_webhook_deliveries(@owner, @lease_seconds::double precision, @batch::integer,
                                                 @per_endpoint::integer, @busy::uuid[]);

-- name: FinishDeliveryAttempts :many
-- Records the outcomes of attempts (of one tenant), each only by the
-- attempt that holds the lease: an instance whose lease ran out (and whose
-- delivery another instance took) records nothing. Returns the ids
-- recorded.
UPDATE webhook_deliveries d
SET status = f.status,
    next_attempt_at = CASE WHEN f.status = 'pending' THEN f.next_attempt_at END,
    last_status = nullif(f.last_status, 0), last_error = nullif(f.last_error, ''),
    delivered_at = CASE WHEN f.status = 'delivered' THEN now() END,
    lease_owner = NULL
FROM (
    SELECT unnest(@webhook_ids::uuid[]) AS webhook_id, unnest(@ids::uuid[]) AS id, unnest(@attempts::integer[]) AS attempts,
           unnest(@statuses::text[]) AS status, unnest(@next_attempt_ats::timestamptz[]) AS next_attempt_at,
           unnest(@last_statuses::integer[]) AS last_status, unnest(@last_errors::text[]) AS last_error
) AS f
WHERE d.tenant_id = @tenant_id AND d.webhook_id = f.webhook_id AND d.id = f.id AND d.status = 'pending'
  AND d.lease_owner = @owner::text AND d.attempts = f.attempts
RETURNING d.id;

-- name: ListWebhookDeliveries :many
-- An endpoint's deliveries, newest first, before a cursor.
SELECT d.*, e.type AS event_type, e.interrupt_id
FROM webhook_deliveries d
JOIN interrupt_events e ON e.tenant_id = d.tenant_id AND e.xid = d.event_xid AND e.id = d.event_id
WHERE d.tenant_id = @tenant_id AND d.webhook_id = @webhook_id
  AND (sqlc.narg(status)::text IS NULL OR d.status = sqlc.narg(status))
  AND (sqlc.narg(before_id)::uuid IS NULL OR d.id < sqlc.narg(before_id)::uuid)
ORDER BY d.id DESC
LIMIT @page_size;

-- name: RedeliverWebhookDelivery :one
-- Queues a finished delivery again, due now, with a fresh retry schedule;
-- it keeps its event, so its webhook-id is the same. Returns it as queued.
WITH r AS (
    UPDATE webhook_deliveries d
    SET status = 'pending', next_attempt_at = now(), attempts = 0, lease_owner = NULL, delivered_at = NULL
    WHERE d.tenant_id = @tenant_id AND d.webhook_id = @webhook_id AND d.id = @id AND d.status <> 'pending'
    RETURNING d.*
)
SELECT r.*, e.type AS event_type, e.interrupt_id
FROM r
JOIN interrupt_events e ON e.tenant_id = r.tenant_id AND e.xid = r.event_xid AND e.id = r.event_id;

-- name: GetWebhookDelivery :one
SELECT d.*, e.type AS event_type, e.interrupt_id
FROM webhook_deliveries d
JOIN interrupt_events e ON e.tenant_id = d.tenant_id AND e.xid = d.event_xid AND e.id = d.event_id
WHERE d.tenant_id = @tenant_id AND d.webhook_id = @webhook_id AND d.id = @id;

-- name: ListWebhookHealth :many
-- Times as epoch seconds and unknown figures as -1 (the view's columns
-- are NULL when an endpoint has no such delivery).
SELECT webhook_id, pending, delivered, dead, retrying,
       coalesce(EXTRACT(EPOCH FROM oldest_pending_at), -1)::float8 AS oldest_pending_epoch,
       coalesce(EXTRACT(EPOCH FROM last_delivered_at), -1)::float8 AS last_delivered_epoch,
       coalesce(EXTRACT(EPOCH FROM last_failure_at), -1)::float8 AS last_failure_epoch,
       coalesce(delivery_p50_seconds, -1)::float8 AS delivery_p50_seconds,
       coalesce(delivery_p90_seconds, -1)::float8 AS delivery_p90_seconds
FROM webhook_health WHERE tenant_id = @tenant_id ORDER BY url;

-- name: ListEventsAfter :many
-- The live reader's batch: events of every tenant after a position, up to
-- the horizon (a system function).
SELECT * FROM holdpoint_events_after(@after_xid::bigint, @after_id::bigint, @batch::integer);

-- name: ListTenantEventsThrough :many
-- One tenant's events after a position, up to a later one every event at
-- or before which is final (the live reader's) or the horizon, whichever
-- is further: what a reconnecting event stream missed (see the function).
SELECT * FROM holdpoint_tenant_events_through(@tenant_id, @after_xid::bigint, @after_id::bigint,
    @through_xid::bigint, @through_id::bigint, @batch::integer);

-- name: EventHorizon :one
-- Positions before (horizon, 0) are final: a stream starting now starts
-- there.
SELECT holdpoint_event_horizon()::bigint AS horizon;

-- name: HeldEvents :one
-- The events written but held back by an older transaction still open
-- (the metrics endpoint): how many, and the oldest one's creation time
-- (now() when none is held). A system function (holdpoint_system).
SELECT held::bigint AS held, coalesce(oldest, now())::timestamptz AS oldest FROM holdpoint_held_events();

-- name: CommitAsynchronously :exec
-- Writes whose loss in a crash only means doing them again do not wait
-- for the WAL flush: the dispatcher's leases, positions and attempt
-- outcomes (delivery is at least once anyway) and prune batches (deleted
-- again next time). Events, and so what is to be delivered, are written
-- with the turns, durably.
SELECT set_config('synchronous_commit', 'off', true);

-- name: LeaseWebhookCursors :many
-- A system function (see the migration): endpoints of every tenant with
-- events to read.
SELECT * FROM holdpoint_lease_webhook_cursors(@owner, @lease_seconds::double precision, @batch::integer, @held::uuid[]);

-- name: WebhookCursorEvents :many
-- The events of one tenant after an endpoint's position, up to the
-- horizon, of its types, with what each attempt sends, then where it has
-- read up to (see the function).
SELECT * FROM holdpoint_webhook_cursor_events(@tenant_id, @after_xid::bigint, @after_id::bigint, @event_types::text[],
                                              @batch::integer);

-- name: AdvanceWebhookCursor :one
-- Moves an endpoint's position from (from_xid, from_id) to (to_xid, to_id)
-- and records the attempts made of the events in between, only while
-- owner holds the endpoint's lease and the position is still where the
-- attempts started: an instance whose lease ran out (and whose endpoint
-- another instance took over) records nothing. Renews the lease.
WITH moved AS (
    UPDATE webhook_cursors c
    SET xid = holdpoint_xid(@to_xid::bigint), id = @to_id::bigint,
        lease_until = now() + make_interval(secs => @lease_seconds::double precision)
    WHERE c.tenant_id = @tenant_id AND c.webhook_id = @webhook_id AND c.lease_owner = @owner::text
      AND c.xid = holdpoint_xid(@from_xid::bigint) AND c.id = @from_id::bigint
    RETURNING 1
), recorded AS (
    INSERT INTO webhook_deliveries (tenant_id, webhook_id, event_xid, event_id, status, attempts, next_attempt_at,
                                    last_attempt_at, last_status, last_error, delivered_at, created_at)
    SELECT @tenant_id, @webhook_id, holdpoint_xid(a.xid), a.id, a.status, 1,
           CASE WHEN a.status = 'pending' THEN a.next_attempt_at END,
           a.attempted_at, nullif(a.last_status, 0), nullif(a.last_error, ''),
           CASE WHEN a.status = 'delivered' THEN a.answered_at END, a.occurred_at
    FROM (
        SELECT unnest(@xids::bigint[]) AS xid, unnest(@ids::bigint[]) AS id, unnest(@statuses::text[]) AS status,
               unnest(@next_attempt_ats::timestamptz[]) AS next_attempt_at,
               unnest(@attempted_ats::timestamptz[]) AS attempted_at, unnest(@answered_ats::timestamptz[]) AS answered_at,
               unnest(@last_statuses::integer[]) AS last_status, unnest(@last_errors::text[]) AS last_error,
               unnest(@occurred_ats::timestamptz[]) AS occurred_at
    ) AS a
    WHERE EXISTS (SELECT 1 FROM moved)
)
SELECT EXISTS (SELECT 1 FROM moved) AS moved;
