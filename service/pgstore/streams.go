package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/streams"
)

var _ streams.Store = (*PgStore)(nil)

// CreateStream implements streams.Store, committed without waiting
// for the WAL flush (see AppendStreamFrames): a stream lost in a crash of
// PostgreSQL only answers its rejoins 204.
func (s *PgStore) CreateStream(ctx context.Context, tenantID string, id uuid.UUID, endUser, agent string) error {
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		return q.CreateTurnStream(ctx, db.CreateTurnStreamParams{TenantID: tenantID, ID: id, EndUser: endUser, Agent: agent})
	})
}

// GetStream implements streams.Store.
func (s *PgStore) GetStream(ctx context.Context, tenantID string, id uuid.UUID) (streams.Info, bool, error) {
	var info streams.Info
	found := false
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		row, err := q.GetTurnStream(ctx, db.GetTurnStreamParams{TenantID: tenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		info, found = streams.Info{EndUser: row.EndUser, Agent: row.Agent, Ended: row.EndedAt != nil}, true
		return nil
	})
	return info, found, err
}

// AppendStreamFrames implements streams.Store: one round trip, the
// wake-up sent at commit, committed without waiting for the WAL flush. A
// stream is a delivery copy: the turn's outcome is in its snapshot,
// committed synchronously, so a crash of PostgreSQL can lose only the tail
// of a stream (whose rejoins then give up, see streams.ErrStalled),
// never an outcome.
func (s *PgStore) AppendStreamFrames(ctx context.Context, tenantID string, id uuid.UUID, frames []streams.Frame) error {
	p := db.AppendTurnStreamFramesParams{TenantID: tenantID, StreamID: id,
		Seqs: make([]int32, len(frames)), Frames: make([]string, len(frames)), Terminals: make([]bool, len(frames))}
	terminal := false // the batch ends the stream
	for i, f := range frames {
		p.Seqs[i], p.Frames[i], p.Terminals[i] = int32(f.Seq), string(f.Frame), f.Terminal
		terminal = terminal || f.Terminal
	}
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		if err := q.AppendTurnStreamFrames(ctx, p); err != nil {
			return err
		}
		if terminal {
			if err := q.EndTurnStream(ctx, db.EndTurnStreamParams{TenantID: tenantID, ID: id}); err != nil {
				return err
			}
		}
		return q.NotifyTurnStream(ctx, id.String())
	})
}

// StreamFramesAfter implements streams.Store.
func (s *PgStore) StreamFramesAfter(ctx context.Context, tenantID string, id uuid.UUID, after, limit int) ([]streams.Frame, error) {
	var out []streams.Frame
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		rows, err := q.TurnStreamFramesAfter(ctx, db.TurnStreamFramesAfterParams{
			TenantID: tenantID, StreamID: id, After: int32(after), MaxFrames: int32(limit)})
		if err != nil {
			return err
		}
		out = make([]streams.Frame, len(rows))
		for i, r := range rows {
			out[i] = streams.Frame{Seq: int(r.Seq), Frame: []byte(r.Frame), Terminal: r.Terminal}
		}
		return nil
	})
	return out, err
}

// ListenStreams implements streams.Store.
func (s *PgStore) ListenStreams(ctx context.Context, ready func(), wake func(uuid.UUID)) error {
	return s.listen(ctx, func(q *db.Queries) error { return q.ListenTurnStreams(ctx) }, ready, func(payload string) {
		if id, err := uuid.Parse(payload); err == nil {
			wake(id)
		}
	})
}

// PruneStreams implements streams.Store.
func (s *PgStore) PruneStreams(ctx context.Context, ended, open time.Duration, limit int) (int64, error) {
	var n int64
	err := s.piped(ctx, "", func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		var err error
		n, err = q.PruneTurnStreams(ctx, db.PruneTurnStreamsParams{
			EndedSeconds: ended.Seconds(), OpenSeconds: open.Seconds(), MaxStreams: int32(limit)})
		return err
	})
	return n, err
}
