-- name: ListHistoryMessages :many
-- The history of a snapshot: for each position below its message count, the
-- message written by the nearest snapshot on its ancestor chain.
WITH RECURSIVE chain (id, parent_id, depth) AS (
    SELECT s.id, s.parent_id, 0
    FROM snapshots s
    WHERE s.tenant_id = @tenant_id AND s.id = @snapshot_id
    UNION ALL
    SELECT p.id, p.parent_id, c.depth + 1
    FROM snapshots p
    JOIN chain c ON p.id = c.parent_id
    WHERE p.tenant_id = @tenant_id
)
SELECT DISTINCT ON (m.position) m.position, m.body
FROM chain c
JOIN messages m ON m.tenant_id = @tenant_id AND m.snapshot_id = c.id
WHERE m.position < @message_count::integer
ORDER BY m.position, c.depth;
