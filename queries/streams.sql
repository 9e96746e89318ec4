-- name: CreateTurnStream :exec
-- Records a durable stream before its first frame.
INSERT INTO turn_streams (tenant_id, id, end_user, agent) VALUES ($1, $2, $3, $4);

-- name: GetTurnStream :one
-- A stream of the tenant, for a rejoin.
SELECT end_user, agent, ended_at FROM turn_streams WHERE tenant_id = $1 AND id = $2;

-- name: AppendTurnStreamFrames :exec
-- Writes a batch of frames.
INSERT INTO turn_stream_frames (tenant_id, stream_id, seq, frame, terminal)
SELECT @tenant_id::text, @stream_id::uuid, unnest(@seqs::integer[]), unnest(@frames::text[]), unnest(@terminals::boolean[]);

-- name: EndTurnStream :exec
-- Marks a stream ended, which starts its retention.
UPDATE turn_streams SET ended_at = now() WHERE tenant_id = $1 AND id = $2 AND ended_at IS NULL;

-- name: TurnStreamFramesAfter :many
-- The frames of a stream after seq @after, in order, at most @max_frames.
SELECT seq, frame, terminal FROM turn_stream_frames
WHERE tenant_id = @tenant_id AND stream_id = @stream_id AND seq > @after
ORDER BY seq LIMIT @max_frames;

-- name: PruneTurnStreams :one
-- Deletes streams past their retention (a system function).
SELECT holdpoint_prune_streams(@ended_seconds::float8, @open_seconds::float8, @max_streams::integer)::bigint AS pruned;

-- name: ListenTurnStreams :exec
-- Subscribes the connection to the wake-ups of durable streams.
LISTEN holdpoint_streams;

-- name: NotifyTurnStream :exec
-- Wakes the readers of a stream on every instance; the payload is the
-- stream id.
SELECT pg_notify('holdpoint_streams', @stream_id::text);
