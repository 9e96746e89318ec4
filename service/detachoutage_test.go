package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
)

// outageModel fails its first failures calls as agent code does when the
// database goes away under it (an error wrapping ErrUnavailable), or, when
// modelDown, as a model provider that is down; then it answers "done".
type outageModel struct {
	calls     atomic.Int32
	failures  int32
	modelDown bool
}

func (m *outageModel) Name() string { return "outage" }

func (m *outageModel) Generate(context.Context, *service.ModelRequest, func(service.ModelChunk)) (*service.ModelResponse, error) {
	if m.calls.Add(1) <= m.failures {
		if m.modelDown {
			return nil, errors.New("the provider answered 503")
		}
		return nil, fmt.Errorf("reading the session: %w", service.ErrUnavailable)
	}
	return &service.ModelResponse{Message: text(service.RoleModel, "done"), FinishReason: "stop"}, nil
}

// TestDetachedTurnOutlivesADatabaseOutage: a detached turn that fails
// because the database went away (the chaos run, tests/cluster, stopped
// PostgreSQL as a detached approval started: the client had its
// "detached", the snapshot ended failed UNAVAILABLE and the approval was
// never carried out) keeps its job and is taken over, a few times: one
// that fails so every time ends failed after its fourth run. One whose
// model is down still fails at once. Every job goes in the end.
func TestDetachedTurnOutlivesADatabaseOutage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		failures  int32
		modelDown bool
		want      string
		calls     int32
	}{
		{1, false, service.StatusCompleted, 2},
		{100, false, service.StatusFailed, 4},
		{1, true, service.StatusFailed, 1},
	} {
		url := testdb.URL(t)
		admin := testdb.OwnerPool(t, url)
		model := &outageModel{failures: c.failures, modelDown: c.modelDown}
		opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second}
		in := startInstance(t, url, opts, func(rt *service.Runtime) {
			if err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Model: model}); err != nil {
				t.Fatal(err)
			}
		})
		out, err := in.rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{},
			service.AgentInput{Message: ptr(text(service.RoleUser, "pay")), Detach: true}, nil)
		if err != nil || out.FinishReason != service.FinishDetached {
			t.Fatalf("detach: %v %+v", err, out)
		}
		// Until it ends: between a failure and its takeover the snapshot
		// may read expired for a moment (its heartbeat stopped; on a
		// loaded machine the takeover comes later), which is not the end.
		waitFor(t, "the detached turn to end", time.Minute, func() bool {
			s := snapshotStatus(t, in.rt, out.SnapshotID)
			return s == service.StatusCompleted || s == service.StatusFailed || s == service.StatusAborted
		})
		snap, err := in.rt.GetSnapshot(context.Background(), testCaller, "payer", service.SnapshotLookup{SnapshotID: out.SnapshotID})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Status != c.want || model.calls.Load() != c.calls {
			t.Errorf("%+v: the turn ended %s (%+v) after %d model calls", c, snap.Status, snap.Error, model.calls.Load())
		}
		waitFor(t, "its job to go", 10*time.Second, func() bool {
			return count(t, admin, "SELECT count(*) FROM turn_jobs WHERE snapshot_id = $1", out.SnapshotID) == 0
		})
	}
}
