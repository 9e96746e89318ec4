package retention

// The retention records and the store interface the Pruner calls, which
// service/pgstore implements.

import (
	"context"
	"time"

	"github.com/holdpoint/holdpoint/service/store"
)

// Policy says how long a tenant keeps what is finished. A zero
// age keeps forever. Completed and Failed apply to sessions by the state
// of their latest turn (see the migration 00021_retention.sql for the
// exact rules); Events is how long the event log (the audit trail of
// decisions, turn and tool events) is kept, and a session stays while its
// events must.
type Policy struct {
	Completed time.Duration `json:"completed,omitempty"`
	Failed    time.Duration `json:"failed,omitempty"`
	Events    time.Duration `json:"events,omitempty"`
}

// IsZero reports whether the policy keeps everything.
func (p Policy) IsZero() bool {
	return p.Completed == 0 && p.Failed == 0 && p.Events == 0
}

// Or is p with each age it does not set taken from def.
func (p Policy) Or(def Policy) Policy {
	if p.Completed == 0 {
		p.Completed = def.Completed
	}
	if p.Failed == 0 {
		p.Failed = def.Failed
	}
	if p.Events == 0 {
		p.Events = def.Events
	}
	return p
}

// PruneCounts are the rows a prune deleted (or, in a dry run, would
// delete), per table.
type PruneCounts struct {
	Sessions   int64 `json:"sessions"`
	Snapshots  int64 `json:"snapshots"`
	Messages   int64 `json:"messages"`
	Interrupts int64 `json:"interrupts"`
	Events     int64 `json:"events"`
	ToolCalls  int64 `json:"toolCalls"`
	Deliveries int64 `json:"deliveries"`
}

// Add adds o to c.
func (c *PruneCounts) Add(o PruneCounts) {
	c.Sessions += o.Sessions
	c.Snapshots += o.Snapshots
	c.Messages += o.Messages
	c.Interrupts += o.Interrupts
	c.Events += o.Events
	c.ToolCalls += o.ToolCalls
	c.Deliveries += o.Deliveries
}

// Total is the number of rows.
func (c PruneCounts) Total() int64 {
	return c.Sessions + c.Snapshots + c.Messages + c.Interrupts + c.Events + c.ToolCalls + c.Deliveries
}

// PruneBatch is the outcome of one batch: what it deleted, where the next
// batch starts, and whether the scan reached the end.
type PruneBatch struct {
	Counts PruneCounts
	// AfterSession is the last session id looked at (PruneSessions).
	AfterSession string
	// AfterEvent is the last event position looked at (PruneEvents).
	AfterEvent store.EventPos
	Done       bool
}

// Store is the persistence of retention policies and the
// pruning they drive. Each batch is one short transaction of its own,
// scoped to one tenant in the SQL.
type Store interface {
	// Policy returns a tenant's own policy (zero when it set
	// none; NOT_FOUND for an unknown tenant).
	RetentionPolicy(ctx context.Context, tenantID string) (Policy, error)
	// SetRetentionPolicy stores a tenant's policy; a zero policy removes
	// it (NOT_FOUND for an unknown tenant).
	SetRetentionPolicy(ctx context.Context, tenantID string, p Policy) error
	// PruneSessions removes the next batch (at most batch sessions after
	// the session id after, with all their rows) of a tenant's sessions
	// that p lets go.
	PruneSessions(ctx context.Context, tenantID string, p Policy, after string, batch int) (PruneBatch, error)
	// PruneEvents removes, among the next batch events of the tenant's
	// log after the position, the turn and tool events whose snapshot is
	// gone and which are older than cutoff, with their finished
	// deliveries.
	PruneEvents(ctx context.Context, tenantID string, cutoff time.Duration, after store.EventPos, batch int) (PruneBatch, error)
	// PrunePreview counts what a prune with p would delete now.
	PrunePreview(ctx context.Context, tenantID string, p Policy) (PruneCounts, error)
	// TryPruneLock takes the lock that lets one instance prune at a time;
	// ok is false when another holds it. release gives it back.
	TryPruneLock(ctx context.Context) (release func(), ok bool, err error)
}
