package service_test

import (
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
)

// TestTakeoverReplaysTheModelsAnswers: a model that gives every tool
// request a new ref (as most providers do) asked A to pay; A paid, then
// died before its turn's write. B takes the turn over: asked again, the
// model would request the payment under a ref the journal does not know,
// and B would pay a second time. B replays the answer A recorded instead,
// finds the payment in the journal, and pays nothing.
func TestTakeoverReplaysTheModelsAnswers(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	newRef := func() string { return uuid.NewString() }
	var paidA, paidB atomic.Int32
	reached := make(chan struct{}, 1)
	a := newInstanceWithoutBackground(t, url, opts, func(rt *service.Runtime) {
		registerPayer(rt, &paidA, afterTool, make(chan struct{}), reached, newRef)
	})
	paused, aDone := pauseThenDecide(t, a, inboxApproval, reached)
	if n := count(t, admin, `SELECT count(*) FROM turn_steps`); n != 1 {
		t.Fatalf("%d model answers recorded before the payment; want the one asking for it", n)
	}
	looksDead(t, admin, aDone)
	open := make(chan struct{})
	close(open)
	startInstance(t, url, opts, func(rt *service.Runtime) { registerPayer(rt, &paidB, afterTool, open, nil, newRef) })
	wantFinished(t, admin, paused)
	if paidA.Load() != 1 || paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on A and %d on B; want 1 and 0", paidA.Load(), paidB.Load())
	}
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay'`); n != 1 {
		t.Fatalf("%d pay calls journaled; want 1", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM turn_steps`); n != 0 {
		t.Fatalf("%d recorded answers left after the turn ended; want none (they go with its job)", n)
	}
}
