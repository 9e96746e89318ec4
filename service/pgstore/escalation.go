package pgstore

import (
	"context"

	"github.com/holdpoint/holdpoint/service/store"
)

// EscalateDue implements Store: one statement of a system function (the
// sweep spans tenants), which changes the rows and records their events.
func (s *PgStore) EscalateDue(ctx context.Context, limit int) ([]store.EscalatedInterrupt, error) {
	rows, err := s.q.EscalateDueInterrupts(ctx, int32(limit))
	if err != nil {
		return nil, translate(err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	s.eventsWritten() // escalated
	out := make([]store.EscalatedInterrupt, len(rows))
	for i, r := range rows {
		out[i] = store.EscalatedInterrupt{
			TenantID: r.TenantID, ID: r.ID, Agent: r.Agent, Tool: r.Tool, From: r.FromScope, To: r.ToScope,
		}
	}
	return out, nil
}
