package service_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
)

// TestTakeoverRunsOnlyOnClaimsItHolds: the chaos run (tests/cluster) ran
// an approved transfer twice, under two call ids, when a guard's job
// outlived its claim: A's streamed approval claimed, its turn failed with
// PostgreSQL down and gave the claim back, but the job's delete failed, so
// the job stayed, listing the claim it no longer held (or, when A died
// before its claim, listing none). The client approved again, which ran
// the tool; the job's takeover then ran it once more, trusting the list.
// The takeover must claim anew instead: whichever of it and the second
// approval comes first runs the tool, the other is refused.
func TestTakeoverRunsOnlyOnClaimsItHolds(t *testing.T) {
	t.Parallel()
	for _, emptied := range []bool{false, true} {
		url := testdb.URL(t)
		admin := testdb.OwnerPool(t, url)
		opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second}
		var paid atomic.Int32
		reached := make(chan struct{}, 1)
		a := newInstanceWithoutBackground(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paid, beforeTool, make(chan struct{}), reached) })
		paused, aDone := pauseThenDecide(t, a, streamedApproval, reached)
		// What the failed turn and the failed delete leave: the claim
		// given back, the job stale (and, emptied, listing no claim).
		jobSQL := `UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour'`
		if emptied {
			jobSQL += `, preclaimed = '{}'`
		}
		if _, err := admin.Exec(context.Background(), jobSQL); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(context.Background(), `UPDATE interrupts SET status = 'pending', resolution = NULL,
			resolved_by = NULL, resolved_at = NULL, resumed_snapshot_id = NULL WHERE snapshot_id = $1`, paused); err != nil {
			t.Fatal(err)
		}
		<-aDone
		open := make(chan struct{})
		close(open)
		b := startInstance(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paid, beforeTool, open, nil) })
		_ = streamedApproval(b.rt, paused) // the client approves again: this, or the takeover, is refused
		waitFor(t, "the job to end", time.Minute, func() bool {
			return count(t, admin, `SELECT count(*) FROM turn_jobs`)+count(t, admin, `SELECT count(*) FROM snapshots WHERE status = 'pending'`) == 0
		})
		if paid.Load() != 1 {
			t.Errorf("emptied %v: pay ran %d times; want once", emptied, paid.Load())
		}
	}
}
