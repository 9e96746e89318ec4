package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/retention"
	"github.com/holdpoint/holdpoint/service/store"
)

var _ retention.Store = (*PgStore)(nil)

// pruneLockKey is the advisory lock that lets one instance prune at a
// time ("hp-prune" in ASCII).
const pruneLockKey int64 = 0x68702d7072756e65

// seconds is an age as the nullable whole seconds the SQL takes (NULL:
// keep forever). A positive age under a second counts as one.
func seconds(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	s := int64((d + time.Second - 1) / time.Second)
	return &s
}

func duration(s *int64) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s) * time.Second
}

// RetentionPolicy implements retention.Store.
func (s *PgStore) RetentionPolicy(ctx context.Context, tenantID string) (retention.Policy, error) {
	var p retention.Policy
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		if err := requireTenant(ctx, q, tenantID); err != nil {
			return err
		}
		row, err := q.GetRetentionPolicy(ctx, tenantID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		p = retention.Policy{
			Completed: duration(row.CompletedSeconds), Failed: duration(row.FailedSeconds), Events: duration(row.EventsSeconds),
		}
		return nil
	})
	return p, err
}

// SetRetentionPolicy implements retention.Store.
func (s *PgStore) SetRetentionPolicy(ctx context.Context, tenantID string, p retention.Policy) error {
	return s.inTx(ctx, tenantID, func(q *db.Queries) error {
		if err := requireTenant(ctx, q, tenantID); err != nil {
			return err
		}
		if p.IsZero() {
			return q.DeleteRetentionPolicy(ctx, tenantID)
		}
		return q.UpsertRetentionPolicy(ctx, db.UpsertRetentionPolicyParams{
			TenantID: tenantID, CompletedSeconds: seconds(p.Completed), FailedSeconds: seconds(p.Failed),
			EventsSeconds: seconds(p.Events),
		})
	})
}

// pruneResult is what the prune functions return.
type pruneResult struct {
	retention.PruneCounts
	Last string `json:"last"`
	Xid  int64  `json:"xid"`
	ID   int64  `json:"id"`
	Done bool   `json:"done"`
}

func decodePrune(raw []byte) (pruneResult, error) {
	var r pruneResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("decode the prune result: %w", err)
	}
	return r, nil
}

// PruneSessions implements retention.Store: one call of the system
// function holdpoint_prune_sessions, its own transaction, committed
// without waiting for the WAL flush: a batch lost in a crash is deleted
// again by the next prune, and its commit does not queue behind (or make
// wait) the turns' flushes.
func (s *PgStore) PruneSessions(ctx context.Context, tenantID string, p retention.Policy, after string, batch int) (retention.PruneBatch, error) {
	var raw []byte
	err := s.piped(ctx, "", func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		var err error
		raw, err = q.PruneSessions(ctx, db.PruneSessionsParams{
			TenantID: tenantID, CompletedSeconds: seconds(p.Completed), FailedSeconds: seconds(p.Failed),
			EventsSeconds: seconds(p.Events), After: after, Batch: int32(batch),
		})
		return err
	})
	if err != nil {
		return retention.PruneBatch{}, err
	}
	r, err := decodePrune(raw)
	return retention.PruneBatch{Counts: r.PruneCounts, AfterSession: r.Last, Done: r.Done}, err
}

// PruneEvents implements retention.Store, committed without
// waiting for the WAL flush (see PruneSessions).
func (s *PgStore) PruneEvents(ctx context.Context, tenantID string, cutoff time.Duration, after store.EventPos, batch int) (retention.PruneBatch, error) {
	var raw []byte
	err := s.piped(ctx, "", func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		var err error
		raw, err = q.PruneEvents(ctx, db.PruneEventsParams{
			TenantID: tenantID, CutoffSeconds: seconds(cutoff), AfterXid: after.Xid, AfterID: after.ID, Batch: int32(batch),
		})
		return err
	})
	if err != nil {
		return retention.PruneBatch{}, err
	}
	r, err := decodePrune(raw)
	return retention.PruneBatch{Counts: r.PruneCounts, AfterEvent: store.EventPos{Xid: r.Xid, ID: r.ID}, Done: r.Done}, err
}

// PrunePreview implements retention.Store.
func (s *PgStore) PrunePreview(ctx context.Context, tenantID string, p retention.Policy) (retention.PruneCounts, error) {
	var raw []byte
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		raw, err = q.PrunePreview(ctx, db.PrunePreviewParams{
			TenantID: tenantID, CompletedSeconds: seconds(p.Completed), FailedSeconds: seconds(p.Failed),
			EventsSeconds: seconds(p.Events),
		})
		return err
	})
	if err != nil {
		return retention.PruneCounts{}, err
	}
	r, err := decodePrune(raw)
	return r.PruneCounts, err
}

// TryPruneLock implements retention.Store with a transaction-level
// advisory lock: a transaction is held open (idle, it holds back no vacuum)
// until release, which rolls it back. Unlike a session-level lock, it
// works behind a transaction pooler, and it goes with the connection if
// the process dies.
func (s *PgStore) TryPruneLock(ctx context.Context) (func(), bool, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, false, translate(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		return nil, false, translate(err)
	}
	ok, err := db.New(tx).TryAdvisoryXactLock(ctx, pruneLockKey)
	if err != nil || !ok {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		conn.Release()
		return nil, false, translate(err)
	}
	release := func() {
		// A failed rollback closes the connection, which ends the
		// transaction and its lock on the server.
		_ = tx.Rollback(context.WithoutCancel(ctx))
		conn.Release()
	}
	return release, true, nil
}
