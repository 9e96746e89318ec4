package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestRunMeasures runs a small benchmark with the commit ceiling
// calibrated and the waits sampled, and checks that every figure is measured and printed (the
// figures' values are the machine's; only their presence and the
// relations that always hold are checked).
func TestRunMeasures(t *testing.T) {
	calibrationTime = 200 * time.Millisecond
	calibrationClients = []int{1, 4}
	var out strings.Builder
	res, err := Run(context.Background(), Config{
		DatabaseURL: testdb.URL(t), Sessions: 2, Cycles: 5, Out: &out, Calibrate: true, Waits: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// A cycle commits at least its two turns.
	if res.Commits < 2 {
		t.Errorf("commits per cycle %.1f, want at least 2", res.Commits)
	}
	if res.CPU <= 0 || res.MachineCPU <= 0 || res.Ceiling <= 0 || res.RoundTrips <= 0 {
		t.Errorf("unmeasured figures: %+v", res)
	}
	if res.TurnP50 <= 0 || res.TurnP99 < res.TurnP50 || res.TurnP999 < res.TurnP99 {
		t.Errorf("turn percentiles p50 %s p99 %s p99.9 %s", res.TurnP50, res.TurnP99, res.TurnP999)
	}
	for _, want := range []string{"commit ceiling", "1 client", "4 clients", "turn p99.9", "commits/cycle", "CPU ms/cycle", "machine CPU ms/cycle", "of ceiling", "%",
		"waits per cycle: run queue", "GC stop-the-world pauses", "pool acquire"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunDeliversWebhooks runs small benchmarks with an endpoint
// subscribed to every event, delivering during the run and after it
// (--webhook-drain), and checks every event reached the receiver and the
// figures are printed.
func TestRunDeliversWebhooks(t *testing.T) {
	t.Parallel()
	for _, drain := range []bool{false, true} {
		var out strings.Builder
		_, err := Run(context.Background(), Config{
			DatabaseURL: testdb.URL(t), Sessions: 2, Cycles: 5, Out: &out,
			Webhooks: WebhookConfig{Subscribe: true, Drain: drain},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"webhooks: ", "per cycle), 0 undelivered; event to receiver p50"}
		if drain {
			want = []string{"webhooks drained: ", " 0 unread; per delivery: ", "µs CPU of this process", "database round trips"}
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("drain %v: output lacks %q:\n%s", drain, w, out.String())
			}
		}
	}
}

func TestOccurredAt(t *testing.T) {
	at, ok := occurredAt([]byte(`{"id":"ev_1","occurredAt":"2026-12-01T17:00:00.123456Z","data":{}}`))
	if !ok || !at.Equal(time.Date(2026, 12, 1, 17, 0, 0, 123456000, time.UTC)) {
		t.Errorf("occurredAt = %s, %v", at, ok)
	}
	if _, ok := occurredAt([]byte(`{"id":"ev_1"}`)); ok {
		t.Error("occurredAt found in a payload without it")
	}
}

// TestRunWithDatabaseRTT runs through the delaying proxy: every figure is
// measured, and a turn, which makes at least one round trip to the
// database, takes at least the round-trip time added.
func TestRunWithDatabaseRTT(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	res, err := Run(context.Background(), Config{DatabaseURL: testdb.URL(t), Sessions: 2, Cycles: 3, Out: &out, DBRTT: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.TurnP50 < 2*time.Millisecond || res.RoundTrips < 2 {
		t.Errorf("turn p50 %s, %.1f round trips per cycle through a 2 ms proxy", res.TurnP50, res.RoundTrips)
	}
	if !strings.Contains(strings.Join(res.Extras, ","), "--db-rtt 2ms") {
		t.Errorf("extras %v", res.Extras)
	}
}

// TestRunDetached runs a small benchmark of detached cycles, with more
// sessions than the instance has job slots so that some turns are queued
// and taken by the job runner, and checks every cycle ended as it should.
func TestRunDetached(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	res, err := Run(context.Background(), Config{
		DatabaseURL: testdb.URL(t), Sessions: 10, Cycles: 3, Out: &out, Detach: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.TurnP50 <= 0 {
		t.Errorf("errors %d, turn p50 %s", res.Errors, res.TurnP50)
	}
	if _, err := Run(context.Background(), Config{DatabaseURL: testdb.URL(t), Mode: "http", Sessions: 1, Cycles: 1, Detach: true}); err == nil {
		t.Error("--detach with --mode http ran, want an error")
	}
}
