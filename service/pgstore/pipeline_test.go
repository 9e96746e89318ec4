package pgstore

import (
	"context"
	"testing"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestPipelineRowCounts checks that a statement whose rows affected its
// caller reads (:execrows) answers its real count through the pipeline,
// and that the statements queued before it are sent with it, in order.
func TestPipelineRowCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storesOn(t, testdb.URL(t), 1)[0]
	counts := func() (int64, int64) {
		var first, second int64
		err := s.piped(ctx, "default", func(q *db.Queries) error {
			// Queued, not sent: the session and its pending snapshot.
			if err := q.WriteTurn(ctx, db.WriteTurnParams{TenantID: "default", SnapshotID: "p1", SessionID: "s1", Agent: "a",
				Status: "pending", Actor: "test"}); err != nil {
				return err
			}
			var err error
			if first, err = q.AbortPendingSnapshot(ctx, db.AbortPendingSnapshotParams{TenantID: "default", ID: "p1"}); err != nil {
				return err
			}
			second, err = q.AbortPendingSnapshot(ctx, db.AbortPendingSnapshotParams{TenantID: "default", ID: "p1"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return first, second
	}
	if first, second := counts(); first != 1 || second != 0 {
		t.Fatalf("rows affected through the pipeline: %d then %d, want 1 then 0", first, second)
	}
}
