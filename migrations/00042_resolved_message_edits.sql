-- +goose Up

-- A resume rewrites the paused model message: each answered request's
-- metadata.interrupt becomes metadata.resolvedInterrupt, the rest of the
-- message unchanged. The resumed snapshot stored the whole message again
-- (about 180 bytes of an approval cycle's 3 KB). When it resolved every
-- paused request and changed nothing else, it now stores, at that
-- position, the edit ["resolved"]: the message is its ancestors' one with
-- every part's metadata.interrupt moved to metadata.resolvedInterrupt. The
-- server writes the edit only when applying it to the message it had
-- gives, byte for byte, the message it would have stored. A position
-- holds a message (an object), an edit (an array) or null (the ancestors'
-- message, unchanged).
--
-- The column is renamed: a server of an earlier build would read an edit
-- as null, a history with the request still paused; instead its reads and
-- writes of the column fail. Stop the servers of earlier builds before
-- migrating (docs/security.md).
ALTER TABLE snapshots RENAME COLUMN messages TO turn_messages;
ALTER TABLE snapshots RENAME CONSTRAINT snapshots_messages_check TO snapshots_turn_messages_check;
ALTER TABLE snapshots RENAME CONSTRAINT snapshots_messages_pair TO snapshots_turn_messages_pair;

-- The message at a position of a snapshot's history, as jsonb: the
-- nearest message on its ancestor chain, with the edits of the snapshots
-- between applied, oldest first. NULL when no ancestor holds the position.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_history_message(p_tenant text, p_snapshot text, p_position integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = public, pg_temp AS $$
DECLARE
    cur text := p_snapshot;
    nxt text;
    el json;
    edits json[] := '{}';
    edit json;
    body jsonb;
    path text[];
    meta jsonb;
    k integer;
BEGIN
    LOOP
        SELECT s.parent_id, CASE WHEN p_position >= s.messages_from THEN s.turn_messages -> (p_position - s.messages_from) END
        INTO nxt, el
        FROM snapshots s WHERE s.tenant_id = p_tenant AND s.id = cur;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        IF json_typeof(el) = 'object' THEN
            body := el::jsonb;
            EXIT;
        ELSIF json_typeof(el) = 'array' THEN
            edits := array_prepend(el, edits);
        END IF;
        IF nxt IS NULL THEN
            RETURN NULL;
        END IF;
        cur := nxt;
    END LOOP;
    FOREACH edit IN ARRAY edits LOOP
        IF edit::jsonb <> '["resolved"]'::jsonb THEN
            RAISE EXCEPTION 'snapshot %: unknown message edit %', p_snapshot, edit;
        END IF;
        IF jsonb_typeof(body -> 'content') = 'array' THEN
            FOR k IN 0 .. jsonb_array_length(body -> 'content') - 1 LOOP
                path := ARRAY['content', k::text, 'metadata'];
                meta := body #> path;
                IF meta ? 'interrupt' THEN
                    body := jsonb_set(body, path, (meta - 'interrupt') || jsonb_build_object('resolvedInterrupt', meta -> 'interrupt'));
                END IF;
            END LOOP;
        END IF;
    END LOOP;
    RETURN body;
END;
$$;
-- +goose StatementEnd
GRANT EXECUTE ON FUNCTION holdpoint_history_message(text, text, integer) TO holdpoint_app;

-- The view lists each snapshot's messages as before, an edited one whole.
CREATE OR REPLACE VIEW messages WITH (security_invoker = true) AS
SELECT s.tenant_id, s.id AS snapshot_id, s.messages_from + (e.n - 1)::integer AS position,
       (m.body ->> 'role')::text AS role, m.body, s.created_at
FROM snapshots s
CROSS JOIN LATERAL json_array_elements(s.turn_messages) WITH ORDINALITY AS e (body, n)
CROSS JOIN LATERAL (
    SELECT CASE json_typeof(e.body)
        WHEN 'object' THEN e.body::jsonb
        ELSE holdpoint_history_message(s.tenant_id, s.id, s.messages_from + (e.n - 1)::integer)
    END AS body
) m
WHERE s.turn_messages IS NOT NULL AND json_typeof(e.body) IN ('object', 'array');

-- +goose Down
-- Every edit becomes the message it stands for (jsonb's text of it).
UPDATE snapshots s SET turn_messages = (
    SELECT json_agg(CASE json_typeof(e.body)
                        WHEN 'array' THEN holdpoint_history_message(s.tenant_id, s.id, s.messages_from + (e.n - 1)::integer)::json
                        ELSE e.body END ORDER BY e.n)
    FROM json_array_elements(s.turn_messages) WITH ORDINALITY AS e (body, n))
WHERE s.turn_messages IS NOT NULL
  AND EXISTS (SELECT 1 FROM json_array_elements(s.turn_messages) AS x WHERE json_typeof(x) = 'array');
DROP VIEW messages;
DROP FUNCTION holdpoint_history_message(text, text, integer);
ALTER TABLE snapshots RENAME CONSTRAINT snapshots_turn_messages_check TO snapshots_messages_check;
ALTER TABLE snapshots RENAME CONSTRAINT snapshots_turn_messages_pair TO snapshots_messages_pair;
ALTER TABLE snapshots RENAME COLUMN turn_messages TO messages;
CREATE VIEW messages WITH (security_invoker = true) AS
SELECT s.tenant_id, s.id AS snapshot_id, s.messages_from + (e.n - 1)::integer AS position,
       (e.body ->> 'role')::text AS role, e.body::jsonb AS body, s.created_at
FROM snapshots s
CROSS JOIN LATERAL json_array_elements(s.messages) WITH ORDINALITY AS e (body, n)
WHERE s.messages IS NOT NULL AND json_typeof(e.body) = 'object';
GRANT SELECT ON messages TO holdpoint_app;
