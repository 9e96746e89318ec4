package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// TestHeartbeatLocksTheSnapshotBeforeItsJob: a turn's end (WriteTurn)
// locks the snapshot, then deletes its job; a heartbeat that took the
// job's row first and then waited for the snapshot deadlocked with it
// (SQLSTATE 40P01), and the turn failed after its tools ran. While the
// snapshot's row is locked, a heartbeat must wait on it holding nothing
// of the job: another transaction can still lock the job's row.
func TestHeartbeatLocksTheSnapshotBeforeItsJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, url := storeWithJob(t)

	owner := testdb.OwnerPool(t, url)
	writer, err := owner.Begin(ctx) // stands for WriteTurn, between its two locks
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback(ctx) }()
	if _, err := writer.Exec(ctx, `SELECT 1 FROM snapshots WHERE tenant_id = 'default' AND id = 'p1' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	type beat struct {
		status string
		owned  bool
		err    error
	}
	done := make(chan beat, 1)
	go func() {
		status, owned, err := s.TouchHeartbeat(ctx, "default", "p1", "w1")
		done <- beat{status, owned, err}
	}()
	waitfor.Until(t, "the heartbeat to wait for the snapshot's lock", time.Minute, func() bool {
		var waiting int
		err := owner.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%heartbeat%'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	// The job's row is free: the writer's next step would not wait.
	if _, err := writer.Exec(ctx, `SET LOCAL lock_timeout = '1ms'`); err != nil {
		t.Fatal(err)
	}
	_, err = writer.Exec(ctx, `SELECT 1 FROM turn_jobs WHERE tenant_id = 'default' AND snapshot_id = 'p1' FOR UPDATE`)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		t.Fatal("a heartbeat waiting for the snapshot holds its job's row: a turn's end would deadlock with it")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatal(err)
	}
	b := <-done
	if b.err != nil || !b.owned || b.status != protocol.StatusPending {
		t.Fatalf("heartbeat after the lock: %+v, want owned and pending", b)
	}
	// Another owner's heartbeat changes nothing.
	if _, owned, err := s.TouchHeartbeat(ctx, "default", "p1", "w2"); err != nil || owned {
		t.Fatalf("heartbeat of another owner: owned %v, %v", owned, err)
	}
}
