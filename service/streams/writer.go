package streams

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/auth"
)

// Writer records the frames of one durable stream. Frames are numbered as
// they come and written in batches (every flushEvery); Finish writes the
// terminal frame after every other.
type Writer struct {
	hub    *Hub
	tenant string
	id     uuid.UUID

	mu       sync.Mutex
	pending  []Frame
	next     int
	finished bool
	broken   bool
	kick     chan struct{}
	fin      chan struct{}
	done     chan struct{}
}

// Open records a new stream of agent for caller and returns its writer.
func (h *Hub) Open(ctx context.Context, c auth.Caller, agent string) (*Writer, error) {
	w := &Writer{hub: h, tenant: c.TenantID, id: uuid.New(), next: 1, kick: make(chan struct{}, 1), fin: make(chan struct{}), done: make(chan struct{})}
	if err := h.store.CreateStream(ctx, c.TenantID, w.id, c.EndUser, agent); err != nil {
		return nil, err
	}
	go w.loop()
	return w, nil
}

// ID is the stream's id.
func (w *Writer) ID() uuid.UUID { return w.id }

// Append numbers frame, queues it for the next batch and returns its seq.
// The frame must not change afterwards.
func (w *Writer) Append(frame []byte) int { return w.queue(frame, false) }

// Finish appends the terminal frame, writes every frame still queued and
// ends the stream; it returns the terminal frame's seq. Later Appends are
// dropped.
func (w *Writer) Finish(frame []byte) int {
	seq := w.End(frame)
	w.Wait()
	return seq
}

// End is Finish without the wait: it queues the terminal frame and
// returns its seq at once; Wait waits for the writes.
func (w *Writer) End(frame []byte) int { return w.queue(frame, true) }

// queue numbers frame and queues it, waking loop: for the next batch, or,
// when it is terminal, to write every queued frame and end. After the
// terminal frame it drops frames and returns 0.
func (w *Writer) queue(frame []byte, terminal bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return 0
	}
	seq := w.next
	w.next++
	w.pending = append(w.pending, Frame{Seq: seq, Frame: frame, Terminal: terminal})
	if terminal {
		w.finished = true
		close(w.fin)
		return seq
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return seq
}

// Wait returns once the frames queued before End are written (or given
// up on).
func (w *Writer) Wait() { <-w.done }

// loop writes the queued frames: a batch at most every flushEvery,
// and the rest at once when Finish closes fin.
func (w *Writer) loop() {
	defer close(w.done)
	for {
		select {
		case <-w.kick:
			t := time.NewTimer(flushEvery)
			select {
			case <-t.C:
			case <-w.fin:
				t.Stop()
			}
			w.flush()
		case <-w.fin:
			w.flush()
			return
		}
	}
}

// flush writes the queued frames, retrying a failed write a few times.
// A batch that could not be written breaks the stream: later frames are
// dropped, so readers never see a gap (they give up after idleMax).
func (w *Writer) flush() {
	w.mu.Lock()
	batch, broken := w.pending, w.broken
	w.pending = nil
	w.mu.Unlock()
	if len(batch) == 0 || broken {
		return
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = w.hub.store.AppendStreamFrames(ctx, w.tenant, w.id, batch)
		cancel()
		if err == nil {
			w.hub.wake(w.id)
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	w.hub.log.Error("writing stream frames failed; the stream stops here", "stream", w.id, "frames", len(batch), "err", err)
	w.mu.Lock()
	w.broken = true
	w.mu.Unlock()
}
