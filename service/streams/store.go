package streams

// The stream records and the store interface the Hub and its Writers call,
// which service/pgstore implements.

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/store"
)

// Frame is one frame of a durable stream: seq counts from 1; the terminal
// frame (the result or the error) is the last.
type Frame struct {
	Seq      int
	Frame    []byte
	Terminal bool
}

// Info is what a rejoin checks: who may read the stream, and of which
// agent it is.
type Info struct {
	EndUser string
	Agent   string
	Ended   bool
}

// Store is the persistence of durable streams.
type Store interface {
	// CreateStream records a new stream of the tenant.
	CreateStream(ctx context.Context, tenantID string, id uuid.UUID, endUser, agent string) error
	// GetStream returns a stream of the tenant; ok is false when the
	// tenant has none with that id.
	GetStream(ctx context.Context, tenantID string, id uuid.UUID) (info Info, ok bool, err error)
	// AppendStreamFrames writes frames (their seqs set) in one
	// transaction; a terminal frame also ends the stream. Readers of
	// every instance are then woken.
	AppendStreamFrames(ctx context.Context, tenantID string, id uuid.UUID, frames []Frame) error
	// StreamFramesAfter returns at most limit frames after seq after.
	StreamFramesAfter(ctx context.Context, tenantID string, id uuid.UUID, after, limit int) ([]Frame, error)
	// ListenStreams blocks on a connection that hears the wake-ups
	// (the id of a stream that got frames) until ctx ends or it fails.
	ListenStreams(ctx context.Context, ready func(), wake func(id uuid.UUID)) error
	// PruneStreams deletes at most limit streams, of every tenant, that
	// ended longer than ended ago or began, never ending, longer than
	// open ago.
	PruneStreams(ctx context.Context, ended, open time.Duration, limit int) (int64, error)
}

// ErrStalled ends a rejoin of a stream whose turn stopped writing without
// an outcome (its instance died).
var ErrStalled = store.Errorf(store.CodeUnavailable, "The stream's turn stopped without an outcome; read the session's latest snapshot.")
