-- name: ListHistoryMessages :many
-- The history of a snapshot: for each position below its message count, the
-- message written by the nearest snapshot on its ancestor chain (body), and
-- the edits of that message by the snapshots between (edits: a JSON array
-- of them, oldest first, or null; each ["resolved"]: every paused request
-- of the message resolved, migration 00042).
-- A snapshot row holds the messages its turn wrote as a JSON array of the
-- positions from messages_from on (an element is null where it left the
-- position to its ancestors), json: each body comes back as the text the
-- server wrote.
WITH RECURSIVE chain (id, parent_id, depth, messages_from, turn_messages) AS (
    SELECT s.id, s.parent_id, 0, s.messages_from, s.turn_messages
    FROM snapshots s
    WHERE s.tenant_id = @tenant_id AND s.id = @snapshot_id
    UNION ALL
    SELECT p.id, p.parent_id, c.depth + 1, p.messages_from, p.turn_messages
    FROM snapshots p
    JOIN chain c ON p.id = c.parent_id
    WHERE p.tenant_id = @tenant_id
), el AS (
    SELECT c.messages_from + (e.n - 1)::integer AS position, c.depth, e.body,
           json_typeof(e.body) = 'array' AS edit
    FROM chain c
    CROSS JOIN LATERAL json_array_elements(c.turn_messages) WITH ORDINALITY AS e (body, n)
    WHERE json_typeof(e.body) IN ('object', 'array')
      AND c.messages_from + (e.n - 1)::integer < @message_count::integer
), found AS (
    SELECT el.*, min(el.depth) FILTER (WHERE NOT el.edit) OVER (PARTITION BY el.position) AS body_depth
    FROM el
)
SELECT f.position::integer AS position,
       (array_agg(f.body ORDER BY f.depth) FILTER (WHERE f.depth = f.body_depth))[1]::json AS body,
       json_agg(f.body ORDER BY f.depth DESC) FILTER (WHERE f.edit AND f.depth < f.body_depth) AS edits
FROM found f
WHERE f.depth <= f.body_depth
GROUP BY f.position
ORDER BY f.position;
