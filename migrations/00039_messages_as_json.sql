-- +goose Up

-- A snapshot's messages as json, not jsonb. The array is written once, by
-- the turn that made the snapshot, and read whole, to rebuild a history:
-- nothing looks inside it in place. json keeps the text the server wrote
-- (compact, as encoding/json makes it), which is smaller than jsonb's
-- binary form of the same messages (a header and an offset per key and
-- value, numbers as numeric) and cheaper to write (jsonb parses and
-- rebuilds every document on insert). The messages view still hands SQL
-- each message as jsonb, so reports keep their operators.
DROP VIEW messages;
ALTER TABLE snapshots DROP CONSTRAINT snapshots_messages_check;
ALTER TABLE snapshots ALTER COLUMN messages TYPE json USING messages::json;
-- json_typeof reads the first token only, not the whole array.
ALTER TABLE snapshots ADD CONSTRAINT snapshots_messages_check CHECK (json_typeof(messages) = 'array');
CREATE VIEW messages WITH (security_invoker = true) AS
SELECT s.tenant_id, s.id AS snapshot_id, s.messages_from + (e.n - 1)::integer AS position,
       (e.body ->> 'role')::text AS role, e.body::jsonb AS body, s.created_at
FROM snapshots s
CROSS JOIN LATERAL json_array_elements(s.messages) WITH ORDINALITY AS e (body, n)
WHERE s.messages IS NOT NULL AND json_typeof(e.body) = 'object';
GRANT SELECT ON messages TO holdpoint_app;

-- +goose Down
DROP VIEW messages;
ALTER TABLE snapshots DROP CONSTRAINT snapshots_messages_check;
ALTER TABLE snapshots ALTER COLUMN messages TYPE jsonb USING messages::jsonb;
ALTER TABLE snapshots ADD CONSTRAINT snapshots_messages_check CHECK (jsonb_typeof(messages) = 'array');
CREATE VIEW messages WITH (security_invoker = true) AS
SELECT s.tenant_id, s.id AS snapshot_id, s.messages_from + (e.n - 1)::integer AS position,
       (e.body ->> 'role')::text AS role, e.body::jsonb AS body, s.created_at
FROM snapshots s
CROSS JOIN LATERAL jsonb_array_elements(s.messages) WITH ORDINALITY AS e (body, n)
WHERE s.messages IS NOT NULL AND jsonb_typeof(e.body) = 'object';
GRANT SELECT ON messages TO holdpoint_app;
