package startstop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// recorder notes starts and stops in order.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// fake is a Service whose Start fails with err.
type fake struct {
	name string
	err  error
	rec  *recorder
}

func (f *fake) Name() string { return f.name }
func (f *fake) Start(context.Context) error {
	if f.err != nil {
		return f.err
	}
	f.rec.add("start " + f.name)
	return nil
}
func (f *fake) Stop() { f.rec.add("stop " + f.name) }

func TestGroupStopsInReverse(t *testing.T) {
	rec := &recorder{}
	var g Group
	if err := g.Start(context.Background(), &fake{name: "a", rec: rec}, &fake{name: "b", rec: rec}, &fake{name: "c", rec: rec}); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	g.Stop() // a second Stop stops nothing again
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if got := rec.events(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestGroupStartFailureStopsTheStarted(t *testing.T) {
	rec := &recorder{}
	var g Group
	boom := errors.New("boom")
	err := g.Start(context.Background(), &fake{name: "a", rec: rec}, &fake{name: "b", rec: rec}, &fake{name: "c", err: boom, rec: rec}, &fake{name: "d", rec: rec})
	if !errors.Is(err, boom) || err.Error() != "start c: boom" {
		t.Fatalf("err %v", err)
	}
	want := []string{"start a", "start b", "stop b", "stop a"}
	if got := rec.events(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestFuncStopWaits: Stop returns only once run has returned, and run's
// context ends with the parent's too.
func TestFuncStopWaits(t *testing.T) {
	entered := make(chan struct{})
	var returned bool
	s := Func("loop", func(ctx context.Context) {
		close(entered)
		<-ctx.Done()
		returned = true
	})
	if s.Name() != "loop" {
		t.Fatalf("name %q", s.Name())
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	s.Stop()
	if !returned {
		t.Fatal("Stop returned before run did")
	}

	parent, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	s = Func("watcher", func(ctx context.Context) { <-ctx.Done(); close(ended) })
	if err := s.Start(parent); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-ended // ends with the parent, before any Stop
	s.Stop()
}
