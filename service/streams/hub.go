package streams

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/auth"
)

// Stream settings.
const (
	// DefaultRetention is how long a stream is kept after its turn ended.
	DefaultRetention = 10 * time.Minute
	// flushEvery is how long frames wait to be written together.
	flushEvery = 50 * time.Millisecond
	// pollEvery is how often a reader looks for frames when no wake-up
	// comes (the LISTEN connection is down, or a wake-up was lost).
	pollEvery = time.Second
	// idleMax is how long a reader waits for a frame of a stream that
	// never ends (its instance died) before it gives up.
	idleMax = 10 * time.Minute
	// openMax is the age after which a stream that never ended is pruned.
	openMax    = 24 * time.Hour
	readBatch  = 500
	pruneBatch = 1000
)

// Hub opens durable streams and follows them.
type Hub struct {
	store     Store
	log       *slog.Logger
	retention time.Duration

	mu      sync.Mutex
	waiters map[uuid.UUID]map[chan struct{}]struct{}
	// stopped is closed when Run returns: rejoins then end (without the
	// terminal frame: their clients reconnect to another instance), so
	// they do not hold up a graceful shutdown.
	stopped  chan struct{}
	stopOnce sync.Once
}

// New returns a hub over store; retention is how long an ended stream
// stays joinable (DefaultRetention when not positive).
func New(store Store, log *slog.Logger, retention time.Duration) *Hub {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if log == nil {
		log = slog.Default()
	}
	return &Hub{store: store, log: log, retention: retention, waiters: map[uuid.UUID]map[chan struct{}]struct{}{},
		stopped: make(chan struct{})}
}

// Run hears the wake-ups of other instances and prunes the streams past
// their retention, until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	defer h.stopOnce.Do(func() { close(h.stopped) })
	go wait.KeepListening(ctx, h.log, "stream listener", func(ctx context.Context) error {
		return h.store.ListenStreams(ctx, func() {}, h.wake)
	}, func() {})
	wait.Every(ctx, min(h.retention/2, time.Minute), func() bool {
		for {
			n, err := h.store.PruneStreams(ctx, h.retention, openMax, pruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("pruning streams failed", "err", err)
				}
				return false
			}
			if n < pruneBatch {
				return false
			}
		}
	})
}

// wake tells the readers of stream id that it has new frames.
func (h *Hub) wake(id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *Hub) subscribe(id uuid.UUID) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters[id] == nil {
		h.waiters[id] = map[chan struct{}]struct{}{}
	}
	h.waiters[id][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.waiters[id], ch)
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
	}
}

// Lookup answers whether caller may join stream id of agent: a stream of
// the caller's tenant and end user, of that agent. Any other stream, of
// another tenant included, is not found (ok false).
func (h *Hub) Lookup(ctx context.Context, c auth.Caller, agent string, id uuid.UUID) (bool, error) {
	info, ok, err := h.store.GetStream(ctx, c.TenantID, id)
	if err != nil || !ok {
		return false, err
	}
	return info.EndUser == c.EndUser && info.Agent == agent, nil
}

// Follow calls fn with each frame of stream id after seq after, as they
// are written, until the terminal frame (delivered too), fn's error or
// ctx's end. A stream that gets no frame for idleMax ends with
// ErrStalled; once the hub stopped, Follow returns nil before the
// end. Call Lookup first.
func (h *Hub) Follow(ctx context.Context, c auth.Caller, id uuid.UUID, after int, fn func(Frame) error) error {
	wake, unsubscribe := h.subscribe(id)
	defer unsubscribe()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	last := time.Now()
	for {
		frames, err := h.store.StreamFramesAfter(ctx, c.TenantID, id, after, readBatch)
		if err != nil {
			return err
		}
		for _, f := range frames {
			if err := fn(f); err != nil {
				return err
			}
			if f.Terminal {
				return nil
			}
			after, last = f.Seq, time.Now()
		}
		if len(frames) == readBatch {
			continue
		}
		if time.Since(last) > idleMax {
			return ErrStalled
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stopped:
			return nil
		case <-wake:
		case <-t.C:
		}
	}
}
