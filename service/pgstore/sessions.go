package pgstore

import (
	"context"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/store"
)

// RecentSessions implements Store.
func (s *PgStore) RecentSessions(ctx context.Context, tenantID, endUser string, after store.SessionPosition, limit int) ([]store.SessionSummary, error) {
	p := db.ListRecentSessionsParams{TenantID: tenantID, EndUser: strPtr(endUser), MaxRows: int32(limit)}
	if !after.UpdatedAt.IsZero() {
		p.AfterUpdatedAt, p.AfterID = &after.UpdatedAt, &after.ID
	}
	var rows []db.ListRecentSessionsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListRecentSessions(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.SessionSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.SessionSummary{ID: r.ID, Agent: r.Agent, EndUser: deref(r.EndUser),
			LatestSnapshotID: deref(r.LatestSnapshotID), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
			Status: deref(r.SnapshotStatus), FinishReason: deref(r.FinishReason), HeartbeatAt: r.HeartbeatAt})
	}
	return out, nil
}
