package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// MaxInboxPage bounds one page of the approvals inbox.
const MaxInboxPage = 200

// InterruptStatuses are the stored statuses of an interrupt.
var InterruptStatuses = []string{store.InterruptPending, store.InterruptResolved, store.InterruptExpired, store.InterruptCancelled}

// ListInterrupts returns a page of the tenant's interrupts, newest first.
func (ib *Inbox) ListInterrupts(ctx context.Context, c auth.Caller, f store.InterruptFilter) ([]store.Interrupt, error) {
	if f.Status == "" {
		f.Status = store.InterruptPending
	}
	if !contains(InterruptStatuses, f.Status) {
		return nil, store.Errorf(store.CodeInvalidArgument, "status must be one of %s", strings.Join(InterruptStatuses, ", "))
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Limit > MaxInboxPage {
		return nil, store.Errorf(store.CodeInvalidArgument, "limit must be at most %d", MaxInboxPage)
	}
	f.Scopes, f.AllScopes = c.Scopes, c.HasScope("*")
	return ib.store.ListInterrupts(ctx, c.TenantID, f)
}

// InterruptDetail is an interrupt with the end of its session's history.
// Its JSON is the interrupt's wire form (protocol.InboxInterrupt) with the
// fields below.
type InterruptDetail struct {
	store.Interrupt `json:"-"`
	// Messages are the last messages of the paused snapshot, for context.
	Messages []protocol.Message `json:"messages"`
	// Execution is "unknown" when a tool call of the turn that resumed the
	// interrupt may have run without its outcome being recorded: the
	// decision's effect is not known, and a human must confirm, cancel or
	// retry those calls (UnknownToolCalls).
	Execution        string                 `json:"execution,omitempty"`
	UnknownToolCalls []store.ToolCallRecord `json:"unknownToolCalls,omitempty"`
	// Votes are the votes on a gated call, oldest first.
	Votes []store.Vote `json:"votes,omitempty"`
}

// detailJSON is InterruptDetail's JSON: the interrupt's wire form and the
// detail's own fields.
type detailJSON struct {
	protocol.InboxInterrupt
	detailFields
}

// detailFields is InterruptDetail without its methods.
type detailFields InterruptDetail

// MarshalJSON writes the interrupt's wire form and the detail's fields.
func (d InterruptDetail) MarshalJSON() ([]byte, error) {
	return json.Marshal(detailJSON{d.Interrupt.Wire(), detailFields(d)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *InterruptDetail) UnmarshalJSON(b []byte) error {
	var v detailJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	it, err := store.InterruptOfWire(v.InboxInterrupt)
	if err != nil {
		return err
	}
	*d = InterruptDetail(v.detailFields)
	d.Interrupt = it
	return nil
}

// visibleInterrupt reads an interrupt the caller may see: one needing a
// scope the caller lacks is refused (403).
func (ib *Inbox) visibleInterrupt(ctx context.Context, c auth.Caller, id uuid.UUID) (*store.Interrupt, error) {
	it, err := ib.store.GetInterrupt(ctx, c.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Errorf(store.CodeNotFound, "interrupt %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if !c.HasScope(it.Scope) {
		return nil, store.Errorf(store.CodePermissionDenied, "interrupt %s needs the scope %s, which this key does not hold", id, it.Scope)
	}
	return it, nil
}

// ExecutionUnknown is InterruptDetail.Execution when a call of the
// resuming turn may have run.
const ExecutionUnknown = "unknown"

// GetInterrupt returns an interrupt with the last few messages of the
// snapshot that paused on it.
func (ib *Inbox) GetInterrupt(ctx context.Context, c auth.Caller, id uuid.UUID, lastMessages int) (*InterruptDetail, error) {
	it, err := ib.visibleInterrupt(ctx, c, id)
	if err != nil {
		return nil, err
	}
	out := &InterruptDetail{Interrupt: *it, Messages: []protocol.Message{}}
	if it.Policy != nil {
		if out.Votes, err = ib.store.ListVotes(ctx, c.TenantID, id); err != nil {
			return nil, err
		}
	}
	snap, err := ib.store.LoadSnapshot(ctx, store.LoadSnapshotParams{Scope: store.OperatorScope(c.TenantID), Agent: it.Agent, ID: it.SnapshotID, WithState: true})
	if err != nil {
		return nil, err
	}
	msgs := snap.State.Messages
	if lastMessages > 0 && len(msgs) > lastMessages {
		msgs = msgs[len(msgs)-lastMessages:]
	}
	out.Messages = msgs
	if it.ResumedSnapshotID != "" {
		calls, err := ib.store.ListTurnToolCalls(ctx, c.TenantID, []string{it.ResumedSnapshotID})
		if err != nil {
			return nil, err
		}
		for _, call := range calls {
			if call.Status == store.ToolCallUnknown {
				out.Execution = ExecutionUnknown
				out.UnknownToolCalls = append(out.UnknownToolCalls, call)
			}
		}
	}
	return out, nil
}

// InterruptEvents returns an interrupt's audit trail.
func (ib *Inbox) InterruptEvents(ctx context.Context, c auth.Caller, id uuid.UUID) ([]store.InterruptEvent, error) {
	if _, err := ib.visibleInterrupt(ctx, c, id); err != nil {
		return nil, err
	}
	events, err := ib.store.ListInterruptEvents(ctx, c.TenantID, id)
	if err != nil {
		return nil, err
	}
	for i := range events {
		if events[i].ID, err = ib.rt.EventID(ctx, c.TenantID, events[i].Pos); err != nil {
			return nil, err
		}
	}
	return events, nil
}
