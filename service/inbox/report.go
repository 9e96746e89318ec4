package inbox

import (
	"context"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/store"
)

// ReportGroups are the groupings the interrupt report accepts.
var ReportGroups = []string{"agent", "tool", "day"}

// PendingCounts counts the caller's tenant's pending interrupts per agent
// and tool (those the caller's scopes let it see).
func (ib *Inbox) PendingCounts(ctx context.Context, c auth.Caller) ([]store.PendingCount, error) {
	return ib.store.CountPendingInterrupts(ctx, c.TenantID, c.Scopes, c.HasScope("*"))
}

// ReportInterrupts returns the tenant's interrupt figures over [from, to).
func (ib *Inbox) ReportInterrupts(ctx context.Context, c auth.Caller, from, to time.Time, groupBy string) ([]store.ReportRow, error) {
	if groupBy == "" {
		groupBy = "day"
	}
	if !contains(ReportGroups, groupBy) {
		return nil, store.Errorf(store.CodeInvalidArgument, "groupBy must be one of %s", strings.Join(ReportGroups, ", "))
	}
	if !to.After(from) {
		return nil, store.Errorf(store.CodeInvalidArgument, "to must be after from")
	}
	return ib.store.ReportInterrupts(ctx, store.ReportInterruptsParams{TenantID: c.TenantID, From: from, To: to, GroupBy: groupBy})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
