package eventhub_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestSubscriptionsMissNothing checks the hub's promise to a stream that
// resumes: the log replayed up to the position Subscribe returns, then the
// subscription's channel, hold every event, whenever the stream
// subscribes while events are being written and delivered. Subscriptions
// are made at many points of a run of writes; each must end up with all
// of them, the channel bringing only events past its position.
func TestSubscriptionsMissNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := testdb.URL(t)
	owner := testdb.OwnerPool(t, url)
	pool, err := pgstore.NewAppPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := pgstore.New(pool)
	defer st.Close()
	if _, err := owner.Exec(ctx, `INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 's', 'a')`); err != nil {
		t.Fatal(err)
	}
	hub := eventhub.New(st, testlog.Logger(t))
	var run sync.WaitGroup
	run.Add(1)
	go func() { defer run.Done(); hub.Run(ctx) }()
	defer run.Wait()
	defer cancel()
	<-hub.Ready()

	const events, subscribers = 48, 16
	written := make(chan int, events)
	var writes sync.WaitGroup
	writes.Add(1)
	go func() {
		defer writes.Done()
		defer close(written)
		for i := range events {
			// As a turn writes one: committed, then a wake-up for the hubs.
			if _, err := owner.Exec(ctx, `
				WITH s AS (INSERT INTO snapshots (tenant_id, id, session_id, agent, status) VALUES ('default', $1, 's', 'a', 'completed'))
				INSERT INTO interrupt_events (tenant_id, type, actor, payload)
				VALUES ('default', 'turn.completed', 'test', jsonb_build_object('snapshotId', $1::text))`, fmt.Sprint("snap-", i)); err != nil {
				t.Error(err)
				return
			}
			if _, err := owner.Exec(ctx, `SELECT pg_notify('holdpoint_events', '')`); err != nil {
				t.Error(err)
				return
			}
			written <- i + 1
		}
	}()

	// Subscriber k subscribes once the writer has written k*events/subscribers.
	results := make(chan string, subscribers)
	next := 0
	var subs sync.WaitGroup
	for n := range written {
		for next < subscribers && n >= next*events/subscribers {
			subs.Add(1)
			go func(k int) {
				defer subs.Done()
				results <- subscribe(ctx, hub, k, events)
			}(next)
			next++
		}
	}
	writes.Wait()
	subs.Wait()
	close(results)
	for r := range results {
		if r != "" {
			t.Error(r)
		}
	}
}

// subscribe subscribes as a resumed stream does (from the log's start)
// and reports what is wrong with what it gets ("" for nothing). All the
// events fit a subscription's buffer, so the hub never drops one.
func subscribe(ctx context.Context, hub *eventhub.Hub, k, want int) string {
	notes, through, cancel := hub.Subscribe("default")
	defer cancel()
	seen := map[store.EventPos]bool{}
	replayed, err := hub.ReplayThrough(ctx, "default", store.EventPos{}, through, 1000)
	if err != nil {
		return fmt.Sprintf("subscriber %d: replay: %v", k, err)
	}
	for _, n := range replayed {
		if n.EventID == "" {
			return fmt.Sprintf("subscriber %d: a replayed event has no id", k)
		}
		seen[n.Pos] = true
	}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for len(seen) < want {
		select {
		case n, ok := <-notes:
			if !ok {
				return fmt.Sprintf("subscriber %d: the hub ended the subscription", k)
			}
			if !n.Pos.After(through) {
				return fmt.Sprintf("subscriber %d: the channel brought %v, at or before the subscription's position %v", k, n.Pos, through)
			}
			seen[n.Pos] = true
		case <-deadline.C:
			return fmt.Sprintf("subscriber %d (position %v): %d of %d events a minute after subscribing: one was neither replayed nor sent", k, through, len(seen), want)
		}
	}
	return ""
}
