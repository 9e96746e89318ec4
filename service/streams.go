package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/holdpoint/holdpoint/internal/wait"
)

// Durable streams: the frames of a streaming turn are kept in the store
// (batched), so a client that lost the connection can rejoin the stream on
// any instance, from the start or after the last frame it read, and the
// turn goes on without it. Readers on other instances are woken by the
// store's notifications (LISTEN), and poll while those are down.

// Stream settings.
const (
	// DefaultStreamRetention is how long a stream is kept after its turn
	// ended.
	DefaultStreamRetention = 10 * time.Minute
	// streamFlushEvery is how long frames wait to be written together.
	streamFlushEvery = 50 * time.Millisecond
	// streamPoll is how often a reader looks for frames when no wake-up
	// comes (the LISTEN connection is down, or a wake-up was lost).
	streamPoll = time.Second
	// streamIdle is how long a reader waits for a frame of a stream that
	// never ends (its instance died) before it gives up.
	streamIdle = 10 * time.Minute
	// streamOpenMax is the age after which a stream that never ended is
	// pruned.
	streamOpenMax    = 24 * time.Hour
	streamReadBatch  = 500
	streamPruneBatch = 1000
)

// StreamHub opens durable streams and follows them.
type StreamHub struct {
	store     StreamStore
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

// NewStreamHub returns a hub over store; retention is how long an ended
// stream stays joinable (DefaultStreamRetention when not positive).
func NewStreamHub(store StreamStore, log *slog.Logger, retention time.Duration) *StreamHub {
	if retention <= 0 {
		retention = DefaultStreamRetention
	}
	if log == nil {
		log = slog.Default()
	}
	return &StreamHub{store: store, log: log, retention: retention, waiters: map[uuid.UUID]map[chan struct{}]struct{}{},
		stopped: make(chan struct{})}
}

// Run hears the wake-ups of other instances and prunes the streams past
// their retention, until ctx ends.
func (h *StreamHub) Run(ctx context.Context) {
	defer h.stopOnce.Do(func() { close(h.stopped) })
	go wait.KeepListening(ctx, h.log, "stream listener", func(ctx context.Context) error {
		return h.store.ListenStreams(ctx, func() {}, h.wake)
	}, func() {})
	wait.Every(ctx, min(h.retention/2, time.Minute), func() bool {
		for {
			n, err := h.store.PruneStreams(ctx, h.retention, streamOpenMax, streamPruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("pruning streams failed", "err", err)
				}
				return false
			}
			if n < streamPruneBatch {
				return false
			}
		}
	})
}

// wake tells the readers of stream id that it has new frames.
func (h *StreamHub) wake(id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *StreamHub) subscribe(id uuid.UUID) (chan struct{}, func()) {
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
func (h *StreamHub) Lookup(ctx context.Context, c Caller, agent string, id uuid.UUID) (bool, error) {
	info, ok, err := h.store.GetStream(ctx, c.TenantID, id)
	if err != nil || !ok {
		return false, err
	}
	return info.EndUser == c.EndUser && info.Agent == agent, nil
}

// Follow calls fn with each frame of stream id after seq after, as they
// are written, until the terminal frame (delivered too), fn's error or
// ctx's end. A stream that gets no frame for streamIdle ends with
// ErrStreamStalled; once the hub stopped, Follow returns nil before the
// end. Call Lookup first.
func (h *StreamHub) Follow(ctx context.Context, c Caller, id uuid.UUID, after int, fn func(StreamFrame) error) error {
	wake, unsubscribe := h.subscribe(id)
	defer unsubscribe()
	t := time.NewTicker(streamPoll)
	defer t.Stop()
	last := time.Now()
	for {
		frames, err := h.store.StreamFramesAfter(ctx, c.TenantID, id, after, streamReadBatch)
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
		if len(frames) == streamReadBatch {
			continue
		}
		if time.Since(last) > streamIdle {
			return ErrStreamStalled
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

// DetachedStream carries a durable stream on past a detach: a streaming
// turn that detaches and runs on in this process calls Detached, then
// Chunk with each later chunk, then Done with its outcome. A detach whose
// work is queued for any instance calls none of them.
type DetachedStream interface {
	Detached()
	Chunk(StreamChunk)
	Done(*AgentOutput)
}

type detachedStreamKey struct{}

// WithDetachedStream makes ds the DetachedStream of the turns ctx starts.
func WithDetachedStream(ctx context.Context, ds DetachedStream) context.Context {
	return context.WithValue(ctx, detachedStreamKey{}, ds)
}

func detachedStreamFrom(ctx context.Context) DetachedStream {
	ds, _ := ctx.Value(detachedStreamKey{}).(DetachedStream)
	return ds
}

// Outliving returns a context with ctx's values that does not end with
// ctx (a streamed turn's request, whose client may go) but with the
// runtime's shutdown, as a detached turn's does.
func (r *Runtime) Outliving(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(r.bg, cancel)
	return c, func() {
		stop()
		cancel()
	}
}
