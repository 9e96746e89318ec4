-- name: ListHistoryMessages :many
-- The history of a snapshot: for each position below its message count, the
-- message written by the nearest snapshot on its ancestor chain.
-- A snapshot row holds the messages its turn wrote as a JSON array of the
-- positions from messages_from on (an element is null where it left the
-- position to its ancestors), json: each body comes back as the text the
-- server wrote.
WITH RECURSIVE chain (id, parent_id, depth, messages_from, messages) AS (
    SELECT s.id, s.parent_id, 0, s.messages_from, s.messages
    FROM snapshots s
    WHERE s.tenant_id = @tenant_id AND s.id = @snapshot_id
    UNION ALL
    SELECT p.id, p.parent_id, c.depth + 1, p.messages_from, p.messages
    FROM snapshots p
    JOIN chain c ON p.id = c.parent_id
    WHERE p.tenant_id = @tenant_id
)
SELECT DISTINCT ON (m.position) m.position::integer AS position, m.body::json AS body
FROM chain c
CROSS JOIN LATERAL (
    SELECT c.messages_from + (e.n - 1)::integer AS position, e.body
    FROM json_array_elements(c.messages) WITH ORDINALITY AS e (body, n)
    WHERE json_typeof(e.body) = 'object'
) AS m
WHERE m.position < @message_count::integer
ORDER BY m.position, c.depth;
