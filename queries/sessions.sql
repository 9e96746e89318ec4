-- name: GetSession :one
SELECT * FROM sessions WHERE tenant_id = @tenant_id AND id = @id;

-- name: CreateSession :one
-- Takes a client-chosen session id for its first caller, atomically: the
-- row names its owner before any turn runs in it. A caller that finds the
-- id taken gets the existing row back (or, when the row was committed after
-- this statement's snapshot, no row: the caller reads it again).
WITH created AS (
    INSERT INTO sessions (tenant_id, id, agent, end_user)
    VALUES (@tenant_id, @id, @agent, @end_user)
    ON CONFLICT (tenant_id, id) DO NOTHING
    RETURNING agent, end_user, true AS created
)
SELECT agent, end_user, created FROM created
UNION ALL
SELECT agent, end_user, false FROM sessions
WHERE tenant_id = @tenant_id AND id = @id AND NOT EXISTS (SELECT 1 FROM created);

-- name: FindSessions :many
-- A tenant's sessions with that id, or of that end user, newest first.
SELECT id, agent, end_user, latest_snapshot_id, created_at, updated_at FROM sessions
WHERE tenant_id = @tenant_id AND (id = @q OR end_user = @q)
ORDER BY updated_at DESC, id
LIMIT @max_rows;

-- name: ListSessionSnapshots :many
-- A session's snapshots, newest first.
SELECT id, parent_id, status, finish_reason, error, agent_version, created_at, updated_at FROM snapshots
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY created_at DESC, id
LIMIT 100;

-- name: ListRecentSessions :many
-- A tenant's most recently updated sessions (of one end user, when named)
-- with their latest snapshot's status: the dashboard's sessions page,
-- paged on (updated_at DESC, id): a page starts after the position
-- (after_updated_at, after_id) of the previous page's last row. No index
-- orders a tenant's sessions by updated_at, so this reads the tenant's
-- range of the primary key and keeps the top rows.
SELECT s.id, s.agent, s.end_user, s.latest_snapshot_id, s.created_at, s.updated_at,
       sn.status AS snapshot_status, sn.finish_reason, sn.heartbeat_at
FROM sessions s
LEFT JOIN snapshots sn ON sn.tenant_id = s.tenant_id AND sn.id = s.latest_snapshot_id
WHERE s.tenant_id = @tenant_id
  AND (sqlc.narg(end_user)::text IS NULL OR s.end_user = sqlc.narg(end_user))
  AND (sqlc.narg(after_updated_at)::timestamptz IS NULL OR s.updated_at < sqlc.narg(after_updated_at)
       OR (s.updated_at = sqlc.narg(after_updated_at) AND s.id > sqlc.narg(after_id)::text))
ORDER BY s.updated_at DESC, s.id
LIMIT @max_rows;
