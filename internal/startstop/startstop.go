// Package startstop gives a server's long-lived parts one lifecycle: each
// is a Service that starts and, on Stop, ends and is waited for. A Group
// starts services in order and stops them in the reverse order, so that
// what starts last (the HTTP listener) stops first, before what it uses.
//
// A background loop written as run(ctx) that returns when ctx ends (the
// deadline sweeper, the job runner, the event hub, the pruner, the webhook
// dispatcher) becomes a Service with Func.
package startstop

import (
	"context"
	"fmt"
	"sync"
)

// Service is one part of a server with a lifecycle.
type Service interface {
	// Name names the service in errors and logs.
	Name() string
	// Start starts the service and returns once it runs (or failed to).
	// The service runs until Stop, or until ctx ends if it watches ctx.
	Start(ctx context.Context) error
	// Stop ends the service and returns once it ended. It is called once,
	// and only after a Start that succeeded.
	Stop()
}

// Func is a Service running run(ctx) in its own goroutine; Stop cancels
// its context and waits for run to return.
func Func(name string, run func(ctx context.Context)) Service {
	return &funcService{name: name, run: run}
}

type funcService struct {
	name   string
	run    func(ctx context.Context)
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *funcService) Name() string { return s.name }

func (s *funcService) Start(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
	return nil
}

func (s *funcService) Stop() {
	s.cancel()
	<-s.done
}

// Group is an ordered list of started services.
type Group struct {
	mu      sync.Mutex
	started []Service
}

// Start starts the services one after another. When one fails, those
// already started are stopped (in reverse) and its error is returned.
func (g *Group) Start(ctx context.Context, services ...Service) error {
	for _, s := range services {
		if err := s.Start(ctx); err != nil {
			g.Stop()
			return fmt.Errorf("start %s: %w", s.Name(), err)
		}
		g.mu.Lock()
		g.started = append(g.started, s)
		g.mu.Unlock()
	}
	return nil
}

// Stop stops every started service, the last started first, each waited
// for before the next. A second Stop does nothing.
func (g *Group) Stop() {
	for {
		g.mu.Lock()
		n := len(g.started)
		if n == 0 {
			g.mu.Unlock()
			return
		}
		s := g.started[n-1]
		g.started = g.started[:n-1]
		g.mu.Unlock()
		s.Stop()
	}
}
