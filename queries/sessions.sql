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
